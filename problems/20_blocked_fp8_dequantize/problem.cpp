// Block-scaled dequantisation (one scale per 128 consecutive elements of the
// flattened tensor, DeepSeek-V3 style) to fp32, then an equal-split
// all-to-all along dim 0. The published "quantised" values are plain bf16
// randn, not fp8; the bf16 x bf16 product is exact in fp32.
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{20, "blocked_fp8_dequantize", "Block-scaled dequantisation to fp32, then equal all-to-all",
                             "Tensor Parallel", "DeepSeek-V3-style block-128 scale dequantisation + all-to-all", "any"};

class BlockedFp8Dequantize : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: values (W, M, N), then scales (W, M*N/128).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    constexpr int64_t kBlock = 128;
    PKB_CHECK(req.m * req.n % kBlock == 0, "M*N must be a multiple of ", kBlock);
    auto opts = req.options();
    return {{"local_y", at::randn({req.world, req.m, req.n}, opts)},
            {"local_s", at::randn({req.world, req.m * req.n / kBlock}, opts)}, {"block_size", kBlock}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [y, s] = in.tensors<2>();
    const int64_t block = in.integer(2);
    // The scale index runs over the whole flattened tensor, so blocks never
    // straddle two destination slices when M*N is a multiple of the block.
    at::Tensor x = (y.reshape({-1, block}).to(at::kFloat) * s.reshape({-1, 1}).to(at::kFloat)).view(y.sizes());
    at::Tensor out = at::empty_like(x);
    comm.all_to_all_single(out, x);
    return {out};
  }

  // Each rank keeps one of its W fp32 slices and exchanges the other W-1
  // (M*N*4 bytes each way per peer); HBM: values and scales read, fp32 written.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const auto [y, s] = in.tensors<2>();
    const double w = world, total = static_cast<double>(y.numel());
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * total * 4.0,
            /*hbm_bytes_per_rank=*/total * y.element_size() + static_cast<double>(s.numel()) * s.element_size() +
                total * 4.0,
            /*flops_per_rank=*/total};
  }
};

}  // namespace

PKB_PROBLEM(BlockedFp8Dequantize)
