// The published reference all-reduces a copy, so the input keeps its value and
// the output is a fresh tensor. Inputs are small integers (r + 1) so the bf16
// sum is exact for W <= 22 whatever order the adds happen in.
#include "../blocks/collective_inputs.h"
#include "pkb/problem.h"

namespace {

using namespace pkb::blocks;

class AllReduce : public RankConstantCollective {
 public:
  AllReduce() : RankConstantCollective(kSummed) {}

  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{1, "allreduce", "Sum all-reduce of a constant matrix",
                                    "Collective Primitive", "plain torch.distributed collective", "any"};
    return s;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm,
                         const pkb::Inputs& in) const override {
    at::Tensor out = in.tensor(0).clone(at::MemoryFormat::Contiguous);
    comm.all_reduce(out, pkb::ReduceOp::kSum);
    return {out};
  }

  // Bandwidth-optimal all-reduce (reduce-scatter + all-gather): 2(W-1)/W of
  // the tensor each way; (W-1)/W of the elements summed per rank.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    const double numel = static_cast<double>(t.numel());
    const double bytes = numel * t.element_size();
    const double w = world;
    pkb::Cost c;
    c.nvlink_bytes_per_rank = 2.0 * (w - 1.0) / w * bytes;
    c.hbm_bytes_per_rank = 2.0 * bytes;  // read input, write output
    c.flops_per_rank = (w - 1.0) / w * numel;
    return c;
  }
};

}  // namespace

PKB_PROBLEM(AllReduce)
