// FP8 (e4m3) round trip of a flat gradient under delayed scaling
// (blocks/fp8_delayed_scaling.h), then a bf16 sum reduce-scatter divided by
// the world size. The scale is per rank (never synchronised). `div_(W)` on
// CUDA is a multiplication by the fp32 reciprocal, reproduced here so CPU
// replay matches.
#include "../blocks/fp8_delayed_scaling.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{52, "fp8_reduce_scatter_grads",
                             "FP8 (E4M3) quantize/dequantize of a flat gradient with delayed-scaling amax history, "
                             "then bf16 reduce-scatter mean",
                             "FSDP/ZeRO", "unknown (Transformer Engine-style delayed fp8 scaling, FSDP grads)", "any"};

using namespace pkb::blocks;

class Fp8ReduceScatterGrads : public pkb::ProblemWithSpec<kSpec> {
 public:
  // seed(52, rank, trial): the gradient's randn; the history is a constant.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return {{"flat_grads", at::randn({fp8_shard_elems(req.m) * req.world}, req.options())},
            {"amax_history", initial_amax_history(req)}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& grads = in.tensor(0);
    const int world = comm.world_size();
    PKB_CHECK(grads.numel() % world == 0, "flat_grads has ", grads.numel(), " elements, not a multiple of W = ", world);
    auto [recon, hist] = fp8_round_trip(grads, in.tensor(1));
    at::Tensor out = at::empty({grads.numel() / world}, grads.options());
    comm.reduce_scatter_tensor(out, recon.contiguous(), pkb::ReduceOp::kSum);
    out.mul_(static_cast<double>(1.0f / static_cast<float>(world)));  // div_(W) as CUDA computes it
    return {out, hist};
  }

  // NVLink: a bandwidth-optimal reduce-scatter sends (W-1)/W of the P·W bf16
  // values; HBM: the gradient read twice (amax, quantisation), the bf16
  // reconstruction written and read by the reduce-scatter, the shard written;
  // FLOPs: abs+max, divide, convert, multiply per element, plus (W-1)·P adds.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& g = in.tensor(0);
    const double n = static_cast<double>(g.numel()), e = static_cast<double>(g.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) / w * n * e,
            /*hbm_bytes_per_rank=*/4.0 * n * e + n / w * e,
            /*flops_per_rank=*/5.0 * n + (w - 1) / w * n};
  }
};

}  // namespace

PKB_PROBLEM(Fp8ReduceScatterGrads)
