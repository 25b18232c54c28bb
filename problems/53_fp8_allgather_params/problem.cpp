// FP8 (e4m3) round trip of a local parameter shard under delayed scaling
// (blocks/fp8_delayed_scaling.h), then an all-gather of the bf16
// reconstructions in rank order (the FSDP fp8 parameter all-gather pattern).
// The scale is per rank.
#include "../blocks/fp8_delayed_scaling.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{53, "fp8_allgather_params",
                             "FP8 (E4M3) quantize/dequantize of a local parameter shard with amax history, then "
                             "all-gather",
                             "FSDP/ZeRO", "unknown (Transformer Engine-style delayed fp8 scaling, FSDP all-gather)",
                             "any"};

using namespace pkb::blocks;

class Fp8AllgatherParams : public pkb::ProblemWithSpec<kSpec> {
 public:
  // seed(53, rank, trial): the shard's randn; the history is a constant.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return {{"flat_param_shard", at::randn({fp8_shard_elems(req.m)}, req.options())},
            {"amax_history", initial_amax_history(req)}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& shard = in.tensor(0);
    auto [recon, hist] = fp8_round_trip(shard, in.tensor(1));
    at::Tensor full = at::empty({comm.world_size() * shard.numel()}, shard.options());
    comm.all_gather_into_tensor(full, recon.contiguous());
    return {full, hist};
  }

  // NVLink: receive the W-1 other ranks' P bf16 values; HBM: the shard read
  // twice (amax, quantisation), the reconstruction written and read, the W·P
  // gathered values written; FLOPs: abs+max, divide, convert, multiply.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& s = in.tensor(0);
    const double p = static_cast<double>(s.numel()), e = static_cast<double>(s.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/(w - 1) * p * e,
            /*hbm_bytes_per_rank=*/4.0 * p * e + w * p * e,
            /*flops_per_rank=*/5.0 * p};
  }
};

}  // namespace

PKB_PROBLEM(Fp8AllgatherParams)
