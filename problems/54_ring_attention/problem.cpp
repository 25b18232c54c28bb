// Causal ring attention forward (context parallel). Rank r holds the
// contiguous sequence block r of q, k, v; the K/V blocks travel around the
// ring (r -> r+1) and every rank merges the blocks at or before its own with
// the sigmoid / log-sigmoid out/LSE update of zhuzilin's ring-flash-attention
// (blocks/ring_attention.h). All attention math is fp32; the output is
// rounded to q's dtype once.
#include "../blocks/ring_attention.h"
#include "pkb/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace {

const pkb::ProblemSpec kSpec{54, "ring_attention",
                             "Causal ring attention forward (context parallel, contiguous sequence shards, KV rotated "
                             "around a ring with log-sum-exp merging)",
                             "Context Parallel",
                             "zhuzilin ring-flash-attention (RingComm, sigmoid/log-sigmoid out/LSE update)",
                             "W divides 8 (heads)"};

using namespace pkb::blocks;

class RingAttention : public pkb::ProblemWithSpec<kSpec> {
 public:
  std::string check_world(int world) const override { return ring_heads_check(world); }

  // RNG order as published: q, k, v (randn), each (B, S, 8, 64).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    const int64_t b = std::max<int64_t>(1, req.m / 64), t = std::max<int64_t>(1, req.n / 64);
    const int64_t s = std::max<int64_t>(1, t / req.world);
    auto opts = req.options();
    at::Tensor q = at::randn({b, s, kHeads, kHeadDim}, opts);
    at::Tensor k = at::randn({b, s, kHeads, kHeadDim}, opts);
    at::Tensor v = at::randn({b, s, kHeads, kHeadDim}, opts);
    return {{"q", q}, {"k", k}, {"v", v}, {"softmax_scale", pkb::None{}}, {"causal", true}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& q = in.tensor(0);
    const double scale = softmax_scale(in, 3, q.size(-1));
    const bool causal = in.boolean(4);
    Ring ring;
    ring.group = pkb::kWorld;
    for (int r = 0; r < comm.world_size(); ++r) ring.ranks.push_back(r);
    ring.c = comm.rank();
    return {ring_attn_forward(comm, ring, q, in.tensor(1).contiguous(), in.tensor(2).contiguous(), scale, causal)};
  }

  // Per rank, X = B·S·H·D elements of one q/k/v block, e its element size:
  //   NVLink: the reference ring forwards K and V W-1 times: (W-1)·2·X·e
  //           (the causal minimum is r blocks for rank r);
  //   HBM (the busiest rank, W blocks, as the driver takes the largest):
  //           per block q, k, v read, the fp32 scores (B·H·S²) written and
  //           read about 4 times, the fp32 running output read and written
  //           about 3 times: W·(3·X·e + 16·B·H·S² + 12·X); plus X·e output;
  //   FLOPs:  rank r computes r+1 blocks of 4·B·H·S²·D (QKᵀ and PV); the
  //           busiest (r = W-1) W·4·B·H·S²·D.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& q = in.tensor(0);
    const double b = q.size(0), s = q.size(1), h = q.size(2), d = q.size(3);
    const double x = b * s * h * d, e = static_cast<double>(q.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * 2.0 * x * e,
            /*hbm_bytes_per_rank=*/w * (3.0 * x * e + 16.0 * b * h * s * s + 12.0 * x) + x * e,
            /*flops_per_rank=*/w * 4.0 * b * h * s * s * d};
  }
};

}  // namespace

PKB_PROBLEM(RingAttention)
