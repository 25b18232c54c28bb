// Ring attention (zhuzilin's ring-flash-attention) over a process group, as
// the context-parallel problems use it (54 forward, 55 with TP, 56 with PP,
// 57 backward): the ring, its K/V shift, the fp32 block attention and the
// sigmoid / log-sigmoid out/LSE merge. All attention math is fp32.
#pragma once

#include <limits>
#include <utility>
#include <vector>

#include "pkb/check.h"
#include "pkb/collectives.h"

namespace pkb::blocks {

// The ring over a process group: this rank's position c in it and the
// global ranks of the group in group order.
struct Ring {
  Group group;
  std::vector<int64_t> ranks;
  int c = 0;
  int size() const { return static_cast<int>(ranks.size()); }
  int next() const { return static_cast<int>(ranks[(c + 1) % size()]); }
  int prev() const { return static_cast<int>(ranks[(c - 1 + size()) % size()]); }
};

// The ring of the group `group` whose global ranks are `ranks`.
inline Ring ring_of(Collectives& comm, Group group, const std::vector<int64_t>& ranks) {
  Ring ring;
  ring.group = group;
  ring.ranks = ranks;
  ring.c = comm.rank(ring.group);
  PKB_CHECK(ring.c >= 0, "this rank is not in its CP group");
  return ring;
}

// Sends `out` to the next rank of the ring and receives `in` from the
// previous one. The published code posts one batch_isend_irecv per step; the
// facade's point-to-point calls are blocking, so even positions send first
// and odd positions receive first (no deadlock at any ring size).
inline void ring_shift(Collectives& comm, const Ring& ring, const at::Tensor& out, at::Tensor& in, int tag) {
  if (ring.c % 2 == 0) {
    comm.send(out, ring.next(), tag, ring.group);
    comm.recv(in, ring.prev(), tag, ring.group);
  } else {
    comm.recv(in, ring.prev(), tag, ring.group);
    comm.send(out, ring.next(), tag, ring.group);
  }
}

// The (B, S, H, D) block q, k, v as fp32 (B, H, S, D), and the fp32 scores
// q·kᵀ·scale per (b, h), the causal upper triangle at -inf.
struct BlockScores {
  at::Tensor qh, kh, vh, scores;
};

inline BlockScores block_scores(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                bool causal) {
  BlockScores b;
  b.qh = q.transpose(1, 2).to(at::kFloat);
  b.kh = k.transpose(1, 2).to(at::kFloat);
  b.vh = v.transpose(1, 2).to(at::kFloat);
  b.scores = at::matmul(b.qh, b.kh.transpose(-2, -1)) * scale;
  if (causal) {
    at::Tensor mask = at::triu(at::ones({q.size(1), k.size(1)}, q.options().dtype(at::kBool)), 1);
    b.scores.masked_fill_(mask.unsqueeze(0).unsqueeze(0), -std::numeric_limits<double>::infinity());
  }
  return b;
}

// One block: the block output (B, Sq, H, D) fp32 and its log-sum-exp
// (B, H, Sq).
inline std::pair<at::Tensor, at::Tensor> local_attn(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                    double scale, bool causal) {
  BlockScores b = block_scores(q, k, v, scale, causal);
  at::Tensor block_lse = at::logsumexp(b.scores, {-1});
  at::Tensor block_out = at::matmul(at::softmax(b.scores, -1), b.vh).transpose(1, 2).contiguous();
  return {block_out, block_lse};
}

// The out/LSE merge, op by op (the published TorchScript function as its
// first, checked call runs it). lse is kept as (B, S, H, 1).
inline void merge_out_lse(at::Tensor& out, at::Tensor& lse, const at::Tensor& block_out, const at::Tensor& block_lse) {
  at::Tensor blse = block_lse.transpose(-2, -1).unsqueeze(-1);
  if (!out.defined()) {
    out = block_out.to(at::kFloat);
    lse = blse;
    return;
  }
  at::Tensor bout = block_out.to(at::kFloat);
  out = out - at::sigmoid(blse - lse) * (out - bout);
  lse = lse - at::log_sigmoid(lse - blse);
}

// The ring forward: K/V blocks travel r -> r+1 and every rank merges the
// blocks at or before its own (all of them when not causal); the output is
// rounded to q's dtype once.
inline at::Tensor ring_attn_forward(Collectives& comm, const Ring& ring, const at::Tensor& q, at::Tensor k,
                                    at::Tensor v, double scale, bool causal) {
  at::Tensor out, lse;
  const int n = ring.size();
  for (int step = 0; step < n; ++step) {
    at::Tensor next_k, next_v;
    if (step + 1 != n) {
      next_k = at::empty_like(k);
      next_v = at::empty_like(v);
      ring_shift(comm, ring, k, next_k, 0);
      ring_shift(comm, ring, v, next_v, 1);
    }
    if (!causal || step <= ring.c) {
      auto [block_out, block_lse] = local_attn(q, k, v, scale, causal && step == 0);
      merge_out_lse(out, lse, block_out, block_lse);
    }
    if (step + 1 != n) {
      k = next_k;
      v = next_v;
    }
  }
  return out.to(q.scalar_type());
}

// An attention layer around the ring (55, 56): qkv = bf16(x · w_qkvᵀ) →
// (B, S, 3, heads, D), ring attention over `ring`, out = bf16(ctx · w_oᵀ).
inline at::Tensor ring_attention_layer(Collectives& comm, const Ring& ring, const at::Tensor& hidden,
                                       const at::Tensor& w_qkv, const at::Tensor& w_o, int64_t heads, double scale,
                                       bool causal) {
  const int64_t b = hidden.size(0), s = hidden.size(1);
  const int64_t hd = w_qkv.size(0) / 3 / heads;
  at::Tensor qkv = at::linear(hidden, w_qkv).view({b, s, 3, heads, hd});
  std::vector<at::Tensor> parts = qkv.unbind(2);
  at::Tensor ctx = ring_attn_forward(comm, ring, parts[0].contiguous(), parts[1].contiguous(),
                                     parts[2].contiguous(), scale, causal);
  return at::linear(ctx.reshape({b, s, -1}), w_o);
}

}  // namespace pkb::blocks
