// Ring-attention backward (dQ, dK, dV) over a context-parallel group, then
// data-parallel gradient averaging (CP × DP, Megatron order "cp-dp": rank =
// dp_idx·cp + cp_idx). K/V blocks travel around the CP ring in bf16 while a
// second ring carries the fp32 dK/dV accumulators of each block back to its
// owner, as in zhuzilin's ring-flash-attention backward.
#include "../blocks/group_layout.h"
#include "../blocks/ring_attention.h"
#include "../blocks/shared_seed_draw.h"
#include "pkb/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace {

const pkb::ProblemSpec kSpec{57, "ring_attention_backward_dp",
                             "Ring-attention backward (dQ/dK/dV) over a CP group, followed by data-parallel gradient "
                             "averaging",
                             "Data Parallel",
                             "zhuzilin ring-flash-attention backward; Megatron-style CP x DP layout (order cp-dp)",
                             "W divides 8 (dp = 2, cp = W/2)"};

using namespace pkb::blocks;

// The block backward for local queries against a held K/V block, fp32.
// lse is (B, H, S, 1). Returns dQ, dK, dV as (B, S, H, D) fp32.
std::tuple<at::Tensor, at::Tensor, at::Tensor> local_attn_backward(const at::Tensor& dout, const at::Tensor& q,
                                                                   const at::Tensor& k, const at::Tensor& v,
                                                                   const at::Tensor& out, const at::Tensor& lse,
                                                                   double scale, bool causal) {
  const auto [qh, kh, vh, scores] = block_scores(q, k, v, scale, causal);
  at::Tensor doh = dout.transpose(1, 2).to(at::kFloat);
  at::Tensor outh = out.transpose(1, 2).to(at::kFloat);
  at::Tensor probs = at::exp(scores - lse);
  at::Tensor dp = at::matmul(doh, vh.transpose(-2, -1));
  at::Tensor row_dot = (doh * outh).sum({-1}, /*keepdim=*/true);
  at::Tensor ds = probs * (dp - row_dot);
  at::Tensor dq = at::matmul(ds, kh) * scale;
  at::Tensor dk = at::matmul(ds.transpose(-2, -1), qh) * scale;
  at::Tensor dv = at::matmul(probs.transpose(-2, -1), doh);
  return {dq.transpose(1, 2).contiguous(), dk.transpose(1, 2).contiguous(), dv.transpose(1, 2).contiguous()};
}

// Returns bf16 dq, dk, dv. dq accumulates this rank's queries over every
// block in step order; the dK/dV accumulator of block j starts on its owner
// with the owner's contribution and collects the contributions of ranks
// j+1, j+2, ... as it travels, arriving back at j after the last step.
std::tuple<at::Tensor, at::Tensor, at::Tensor> ring_attn_backward(pkb::Collectives& comm, const Ring& ring,
                                                                  const at::Tensor& dout, const at::Tensor& q,
                                                                  at::Tensor k, at::Tensor v, const at::Tensor& out,
                                                                  const at::Tensor& softmax_lse, double scale,
                                                                  bool causal) {
  const at::Tensor lse = softmax_lse.unsqueeze(-1);
  const auto dtype = q.scalar_type();
  const int n = ring.size();
  if (n == 1) {
    auto [dq, dk, dv] = local_attn_backward(dout, q, k, v, out, lse, scale, causal);
    return {dq.to(dtype), dk.to(k.scalar_type()), dv.to(v.scalar_type())};
  }
  at::Tensor dq, dk, dv, next_dk, next_dv;
  for (int step = 0; step < n; ++step) {
    at::Tensor next_k, next_v;
    shift_kv(comm, ring, step, k, v, next_k, next_v);
    if (step <= ring.c || !causal) {
      auto [bdq, bdk, bdv] = local_attn_backward(dout, q, k, v, out, lse, scale, causal && step == 0);
      if (!dq.defined()) {
        dq = bdq.to(at::kFloat);
        dk = bdk.to(at::kFloat);
        dv = bdv.to(at::kFloat);
      } else {
        dq = dq + bdq.to(at::kFloat);
        dk = bdk.to(at::kFloat) + next_dk;
        dv = bdv.to(at::kFloat) + next_dv;
      }
    } else if (step != 0) {
      dk = next_dk;
      dv = next_dv;
    }
    if (step + 1 != n) {
      k = next_k;
      v = next_v;
    }
    // The fp32 accumulators move on every step (n sends in all).
    next_dk = at::empty_like(dk);
    next_dv = at::empty_like(dv);
    ring_shift(comm, ring, dk, next_dk, 2);
    ring_shift(comm, ring, dv, next_dv, 3);
  }
  return {dq.to(dtype), next_dk.to(k.scalar_type()), next_dv.to(v.scalar_type())};
}

class RingAttentionBackwardDp : public pkb::ProblemWithSpec<kSpec, SharedSeedDraw> {
 public:
  RingAttentionBackwardDp() : ProblemWithSpec(58) {}

  std::string check_world(int world) const override { return ring_heads_check(world); }

  // Seed as published (seeded as problem 58): 42 + 58·1000 + 100·dp_idx +
  // cp_idx + 1 000 003·trial (unique per rank); q, k, v, dout drawn in that
  // order. out and softmax_lse come from the local q, k, v only (non-causal,
  // fp32).
  pkb::Inputs draw(const pkb::InputRequest& req, uint64_t base) const override {
    const int64_t dp = dp_size(req.world), cp = req.world / dp;
    const int64_t cp_rank = req.rank % cp, dp_rank = req.rank / cp;
    const int64_t b = std::max<int64_t>(1, req.m / 64), t = std::max<int64_t>(1, req.n / 64);
    const int64_t s = std::max<int64_t>(1, t / cp);
    auto opts = req.options();
    at::manual_seed(base + 100ull * static_cast<uint64_t>(dp_rank) + static_cast<uint64_t>(cp_rank));
    at::Tensor q = at::randn({b, s, kHeads, kHeadDim}, opts);
    at::Tensor k = at::randn({b, s, kHeads, kHeadDim}, opts);
    at::Tensor v = at::randn({b, s, kHeads, kHeadDim}, opts);
    at::Tensor dout = at::randn({b, s, kHeads, kHeadDim}, opts);
    const double scale = std::pow(static_cast<double>(kHeadDim), -0.5);
    auto [block_out, lse] = local_attn(q, k, v, scale, false);
    at::Tensor out = block_out.to(req.dtype);
    return {{"dout", dout}, {"q", q}, {"k", k}, {"v", v}, {"out", out}, {"softmax_lse", lse},
            {"softmax_scale", pkb::None{}}, {"causal", false}, {"cp_group", pkb::GroupRanks{iota(dp_rank * cp, 1, cp)}},
            {"dp_group", pkb::GroupRanks{iota(cp_rank, cp, dp)}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [dout, q] = in.tensors<2>();
    const double scale = softmax_scale(in, 6, q.size(-1));
    const bool causal = in.boolean(7);
    build_layout(comm);
    const Ring ring = ring_of(comm, layout_.resolve(comm, in.group(8)), in.group(8).ranks);

    auto [dq, dk, dv] = ring_attn_backward(comm, ring, dout, q.contiguous(), in.tensor(2).contiguous(),
                                           in.tensor(3).contiguous(), in.tensor(4), in.tensor(5), scale, causal);
    if (!std::holds_alternative<pkb::None>(in.at(9).value)) {
      const pkb::Group dp_group = layout_.resolve(comm, in.group(9));
      const int64_t dp = static_cast<int64_t>(in.group(9).ranks.size());
      if (dp > 1) {
        for (at::Tensor* g : {&dq, &dk, &dv}) {
          comm.all_reduce(*g, pkb::ReduceOp::kSum, dp_group);
          g->div_(dp);
        }
      }
    }
    return {dq, dk, dv};
  }

  // Per rank, X = B·S·H·D elements of one block, e = 2 bytes, cp ranks in
  // the ring, dp replicas:
  //   NVLink: K/V ring (cp-1)·2·X·e (bf16), dK/dV ring cp·2·X·4 (fp32: the
  //           accumulators move cp times, the last hop returning them to
  //           their owner; none when cp = 1), DP all-reduces
  //           3 · 2(dp-1)/dp · X·e;
  //   HBM:    per block q, k, v, dout, out read (5·X·e), the fp32 (B,H,S,S)
  //           scores/probs/dP/dS written and read about 8 times
  //           (32·B·H·S²), fp32 dq/dk/dv accumulators read and written
  //           (6·X·4); cp blocks;
  //   FLOPs:  per block 5 GEMMs of 2·B·H·S²·D (QKᵀ, dO·Vᵀ, dS·K, dSᵀ·Q,
  //           Pᵀ·dO) = 10·B·H·S²·D; cp blocks.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& q = in.tensor(1);
    const double b = q.size(0), s = q.size(1), h = q.size(2), d = q.size(3);
    const double x = b * s * h * d, e = static_cast<double>(q.element_size());
    const double cp = static_cast<double>(in.group(8).ranks.size());
    const double dp = std::holds_alternative<pkb::None>(in.at(9).value)
                          ? 1.0
                          : static_cast<double>(in.group(9).ranks.size());
    return {/*nvlink_bytes_per_rank=*/(cp - 1) * 2.0 * x * e + (cp > 1 ? cp * 2.0 * x * 4.0 : 0.0) +
                (dp > 1 ? 3.0 * 2.0 * (dp - 1) / dp * x * e : 0.0),
            /*hbm_bytes_per_rank=*/cp * (5.0 * x * e + 32.0 * b * h * s * s + 24.0 * x),
            /*flops_per_rank=*/cp * 10.0 * b * h * s * s * d};
  }

 private:
  static int64_t dp_size(int64_t world) { return std::min<int64_t>(2, world); }

  // As the published harness: an (unused) all-ranks group first, then every
  // DP group (strided), then every CP group (contiguous); once per facade.
  void build_layout(pkb::Collectives& comm) const {
    const int64_t world = comm.world_size(), dp = dp_size(world), cp = world / dp;
    if (all_ranks_.count(&comm) == 0) all_ranks_.emplace(&comm, comm.new_group(iota(0, 1, world)));
    layout_.build(comm, columns_then_rows(dp, cp));
  }

  mutable std::map<const pkb::Collectives*, pkb::Group> all_ranks_;
  const GroupLayout layout_{"CP x DP", false};
};

}  // namespace

PKB_PROBLEM(RingAttentionBackwardDp)
