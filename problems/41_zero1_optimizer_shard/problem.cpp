// ZeRO-1 training step of a 2-layer ReLU MLP with MSE loss (DeepSpeed ZeRO
// stage 1, catalog §41): the ZeRO step of blocks/zero_mlp_step.h (the
// MLP of blocks/mlp_step.h, Adam of blocks/adam.h on this rank's slice of the
// flat parameter index, the parameter all-gather) with stage 1's gradient
// reduction. Rounding order as published (NOTE [python numbers],
// blocks/python_scalars.h).
#include "../blocks/zero_mlp_step.h"

namespace {

const pkb::ProblemSpec kSpec{41, "zero1_optimizer_shard",
                             "ZeRO-1 step: gradient all-reduce, Adam on a flat-index shard, parameter all-gather",
                             "FSDP/ZeRO", "DeepSpeed ZeRO stage 1 (not stated)", "W not divisible by 3 or 19"};

using namespace pkb::blocks;

class Zero1OptimizerShard : public pkb::ProblemWithSpec<kSpec, ZeroMlpStep> {
 public:
  // zero_step_cost: the gradient all-reduced, then the parameters gathered.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    return zero_step_cost(world, in, /*all_reduce=*/true);
  }

 protected:
  // ZeRO-1: the full flat gradient is all-reduced (bf16 SUM) and averaged;
  // this rank's slice of it is the shard.
  at::Tensor grad_shard(pkb::Collectives& comm, at::Tensor flat_g, int64_t offset, int64_t part) const override {
    comm.all_reduce(flat_g, pkb::ReduceOp::kSum);
    flat_g.mul_(cuda_reciprocal(static_cast<double>(comm.world_size())));  // `div_(world_size)` as CUDA computes it
    return flat_g.narrow(0, offset, part);
  }
};

}  // namespace

PKB_PROBLEM(Zero1OptimizerShard)
