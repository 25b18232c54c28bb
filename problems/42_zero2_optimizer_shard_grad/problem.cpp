// ZeRO-2 training step of a 2-layer ReLU MLP with MSE loss (DeepSpeed ZeRO
// stage 2, catalog §42): the ZeRO step of blocks/zero_mlp_step.h (the
// MLP of blocks/mlp_step.h, Adam of blocks/adam.h on this rank's slice of the
// flat parameter index, the parameter all-gather) with stage 2's gradient
// reduction. Rounding order as published (NOTE [python numbers],
// blocks/python_scalars.h).
#include "../blocks/zero_mlp_step.h"

namespace {

const pkb::ProblemSpec kSpec{42, "zero2_optimizer_shard_grad",
                             "ZeRO-2 step: gradient reduce-scatter, Adam on a flat-index shard, parameter all-gather",
                             "FSDP/ZeRO", "DeepSpeed ZeRO stage 2 (not stated)", "W not divisible by 3 or 19"};

using namespace pkb::blocks;

class Zero2OptimizerShardGrad : public pkb::ProblemWithSpec<kSpec, ZeroMlpStep> {
 public:
  // zero_step_cost: the gradient reduce-scattered, then the parameters
  // gathered.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    return zero_step_cost(world, in, /*all_reduce=*/false);
  }

 protected:
  // ZeRO-2: the flat gradient is reduce-scattered (bf16 SUM) straight into
  // this rank's shard and averaged there; the full averaged gradient is never
  // formed.
  at::Tensor grad_shard(pkb::Collectives& comm, at::Tensor flat_g, int64_t offset, int64_t part) const override {
    flat_g = flat_g.contiguous();
    at::Tensor g_part = at::empty({part}, flat_g.options());
    comm.reduce_scatter_tensor(g_part, flat_g, pkb::ReduceOp::kSum);
    g_part.mul_(cuda_reciprocal(static_cast<double>(comm.world_size())));  // `div_(world_size)` as CUDA computes it
    return g_part;
  }
};

}  // namespace

PKB_PROBLEM(Zero2OptimizerShardGrad)
