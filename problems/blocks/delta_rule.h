// The delta rule's recurrence in fp32, one step at a time, as FLA's naive
// references run it (74 and 75): per (batch·head) row, S <- decay_t * S,
// S <- S + k_t^T (beta_t (v_t - k_t S)), o_t = q_t S.
#pragma once

#include <ATen/ATen.h>

namespace pkb::blocks {

// q, k (BH, T, K), v (BH, T, V), beta (BH, T); decay (BH, T, K), one factor
// a key (74), or (BH, T), one a head (75). Returns o (BH, T, V).
inline at::Tensor delta_rule_recurrence(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& decay, const at::Tensor& beta) {
  const int64_t bh = q.size(0), seq_len = q.size(1), key_dim = q.size(2), value_dim = v.size(2);
  at::Tensor state = at::zeros({bh, key_dim, value_dim}, q.options());
  at::Tensor output = at::empty({bh, seq_len, value_dim}, q.options());
  for (int64_t step = 0; step < seq_len; ++step) {
    at::Tensor q_t = q.select(1, step), k_t = k.select(1, step), v_t = v.select(1, step);
    const at::Tensor decay_t = decay.select(1, step);
    state = state * (decay.dim() == 3 ? decay_t.unsqueeze(-1) : decay_t.view({bh, 1, 1}));
    at::Tensor projected = at::bmm(k_t.unsqueeze(1), state).squeeze(1);
    at::Tensor update = (v_t - projected) * beta.select(1, step).unsqueeze(-1);
    state = state + k_t.unsqueeze(-1) * update.unsqueeze(1);
    output.select(1, step).copy_(at::bmm(q_t.unsqueeze(1), state).squeeze(1));
  }
  return output;
}

}  // namespace pkb::blocks
