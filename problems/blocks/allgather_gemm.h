// The all-gather + GEMM of a K-sharded A (11 on transposed shards, 12 along
// A's columns): Megatron-LM's AllGather-GEMM inputs, world check and cost;
// the problems keep their gather layout.
#pragma once

#include <string>

#include "pkb/problem.h"

namespace pkb::blocks {

constexpr int64_t kGatherGemmK = 512;  // the gathered (contraction) dimension, fixed by the published harness

class KShardedAllGatherGemm : public Problem {
 public:
  std::string check_world(int world) const override {
    if (world < 1 || kGatherGemmK % world != 0) return "W must divide K = 512";
    return "";
  }

  // RNG order as published: A_local's randn, then B's randn (B differs per rank).
  Inputs make_inputs(const InputRequest& req) const override {
    auto opts = req.options();
    at::Tensor a_local = at::randn({req.m, kGatherGemmK / req.world}, opts);
    at::Tensor b = at::randn({kGatherGemmK, req.n}, opts);
    return {{"A_local", a_local}, {"B", b}};
  }

  // The all-gather moves (W-1) foreign shards of M·K/W elements; the GEMM reads
  // the gathered A and B and writes C once; 2·M·N·K flops.
  Cost cost(int world, const Inputs& in) const override {
    const auto [a_local, b] = in.tensors<2>();
    const double m = static_cast<double>(a_local.size(0)), k_local = static_cast<double>(a_local.size(1));
    const double k = static_cast<double>(b.size(0)), n = static_cast<double>(b.size(1));
    const double e = static_cast<double>(a_local.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * m * k_local * e,
            /*hbm_bytes_per_rank=*/(m * k + k * n + m * n) * e,
            /*flops_per_rank=*/2.0 * m * n * k};
  }
};

}  // namespace pkb::blocks
