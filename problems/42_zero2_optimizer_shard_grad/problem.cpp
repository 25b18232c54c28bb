// ZeRO-2 training step of a 2-layer ReLU MLP with MSE loss (DeepSpeed ZeRO
// stage 2, catalog §42): the ZeRO step of blocks/zero_mlp_step.h (the
// MLP of blocks/mlp_step.h, Adam of blocks/adam.h on this rank's slice of the
// flat parameter index, the parameter all-gather) with stage 2's gradient
// reduction. Rounding order as published (NOTE [python numbers],
// blocks/python_scalars.h).
#include "../blocks/zero_mlp_step.h"

namespace {

using namespace pkb::blocks;

class Zero2OptimizerShardGrad : public ZeroMlpStep {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{42, "zero2_optimizer_shard_grad",
                                    "ZeRO-2 step: gradient reduce-scatter, Adam on a flat-index shard, parameter all-gather",
                                    "FSDP/ZeRO", "DeepSpeed ZeRO stage 2 (not stated)", "W not divisible by 3 or 19"};
    return s;
  }

  // P parameters of e bytes, a local batch of c rows: NVLink a broadcast of
  // P·e, a reduce-scatter (W-1)/W·P·e and an all-gather (W-1)/W·P·e; HBM ~
  // 10·P·e (flatten, broadcast, gradient and gather passes) + ~8·P/W·e (the
  // sharded Adam) + the batch; FLOPs 6·c·(d_in·hidden + hidden·d_out) +
  // ~15·P/W.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const MlpCostTerms t = mlp_cost_terms(in);
    const double p = t.p, e = t.e, w = world;
    pkb::Cost cst;
    cst.nvlink_bytes_per_rank = p * e + 2.0 * (w - 1) / w * p * e;
    cst.hbm_bytes_per_rank = 10.0 * p * e + 8.0 * p / w * e + t.batch_bytes;
    cst.flops_per_rank = t.gemm_flops + 15.0 * p / w;
    return cst;
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
