// Ring attention (zhuzilin's ring-flash-attention) over a process group, as
// the context-parallel problems use it (54 forward, 55 with TP, 56 with PP,
// 57 backward): the ring, its K/V shift, the fp32 block attention and the
// sigmoid / log-sigmoid out/LSE merge. All attention math is fp32.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pkb/check.h"
#include "pkb/collectives.h"
#include "pkb/problem.h"

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

// The heads of the published harnesses of 54-57.
inline constexpr int64_t kHeads = 8;
inline constexpr int64_t kHeadDim = 64;

// The published harnesses of 54 and 57 assert num_heads (8) % world_size == 0.
inline std::string ring_heads_check(int world) {
  if (world < 1 || kHeads % world != 0)
    return "the published harness asserts num_heads (8) % world_size == 0: W must divide 8";
  return "";
}

// 55 and 56 pair each CP group with a second axis (TP, PP) of min(2, W)
// ranks; their published harnesses assert that it divides W.
inline int64_t second_axis_size(int64_t world) { return std::min<int64_t>(2, world); }

inline std::string second_axis_check(int world, const std::string& axis) {
  if (world < 1) return "world size must be at least 1";
  if (world % second_axis_size(world) != 0)
    return "the published harness asserts world_size % " + axis + "_size == 0 with " + axis +
           "_size = min(2, W): W must be 1 or even";
  return "";
}

// Posts step `step`'s K/V shift (the blocks the next step uses) before the
// step's own block is computed, as RingComm overlaps them; none after the
// last step of n.
inline void shift_kv(Collectives& comm, const Ring& ring, int step, const at::Tensor& k, const at::Tensor& v,
                     at::Tensor& next_k, at::Tensor& next_v) {
  if (step + 1 == ring.size()) return;
  next_k = at::empty_like(k);
  next_v = at::empty_like(v);
  ring_shift(comm, ring, k, next_k, 0);
  ring_shift(comm, ring, v, next_v, 1);
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
    shift_kv(comm, ring, step, k, v, next_k, next_v);
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

// softmax_scale argument `i`: None (the published default) is head_dim^-0.5.
inline double softmax_scale(const Inputs& in, size_t i, int64_t head_dim) {
  return std::holds_alternative<None>(in.at(i).value) ? std::pow(static_cast<double>(head_dim), -0.5) : in.real(i);
}

// The attention-layer problems' (55, 56) first arguments, bf16 as published:
// hidden_states (B, S, 8·64) randn under seed `hidden_seed`, then w_qkv
// (3·heads·64, 8·64) and w_o (8·64, heads·64), both randn · 0.02, under
// `weight_seed`; B = max(1, M/64), S = max(1, max(1, N/64) / cp); then
// num_heads 8, softmax_scale None, causal true.
inline void add_attention_layer_inputs(Inputs& in, const InputRequest& req, int64_t cp, int64_t heads,
                                       uint64_t hidden_seed, uint64_t weight_seed) {
  constexpr int64_t kH = 8, kD = 64;
  const int64_t b = std::max<int64_t>(1, req.m / 64), t = std::max<int64_t>(1, req.n / 64);
  const int64_t s = std::max<int64_t>(1, t / cp), dm = kH * kD;
  auto opts = req.options();
  at::manual_seed(hidden_seed);
  at::Tensor hidden = at::randn({b, s, dm}, opts);
  at::manual_seed(weight_seed);
  at::Tensor w_qkv = at::randn({3 * heads * kD, dm}, opts) * 0.02;
  at::Tensor w_o = at::randn({dm, heads * kD}, opts) * 0.02;
  in.add("hidden_states", hidden);
  in.add("w_qkv", w_qkv);
  in.add("w_o", w_o);
  in.add("num_heads", kH);
  in.add("softmax_scale", None{});
  in.add("causal", true);
}

// The cost model of an attention layer around a ring of cp ranks (55, 56),
// its heads local heads of head_dim (X = B·S·heads·head_dim elements of one
// local q/k/v block, e its element size): NVLink the ring's K and V forwarded
// cp-1 times, (cp-1)·2·X·e (the caller adds its own hand-off or reduction);
// HBM hidden read, W_qkv and W_o read, qkv written and read, output written,
// and the attention as problem 54 over cp blocks; FLOPs the projections
// 2·B·S·Dm·4·heads·head_dim and cp blocks of 4·B·heads·S²·head_dim.
inline Cost ring_attention_layer_cost(const Inputs& in, double cp, double heads, double head_dim) {
  const auto [hidden, w_qkv, w_o] = in.tensors<3>();
  const double b = hidden.size(0), s = hidden.size(1), dm = hidden.size(2);
  const double hd = static_cast<double>(w_o.size(1)), h = heads, d = head_dim;
  const double x = b * s * hd, e = static_cast<double>(hidden.element_size());
  const double weights = static_cast<double>(w_qkv.numel() + w_o.numel());
  return {/*nvlink_bytes_per_rank=*/(cp - 1) * 2.0 * x * e,
          /*hbm_bytes_per_rank=*/(b * s * dm + weights + 6.0 * x + b * s * dm) * e +
              cp * (3.0 * x * e + 16.0 * b * h * s * s + 12.0 * x),
          /*flops_per_rank=*/2.0 * b * s * dm * (4.0 * hd) + cp * 4.0 * b * h * s * s * d};
}

}  // namespace pkb::blocks
