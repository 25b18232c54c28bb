// The published reference all-reduces a copy, so the input keeps its value and
// the output is a fresh tensor. Inputs are small integers (r + 1) so the bf16
// sum is exact for W <= 22 whatever order the adds happen in.
#include "../blocks/collective_inputs.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{1, "allreduce", "Sum all-reduce of a constant matrix", "Collective Primitive",
                             "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

class AllReduce : public pkb::ProblemWithSpec<kSpec, RankConstantCollective> {
 public:
  AllReduce() : ProblemWithSpec(kSummed) {}

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
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
    return {/*nvlink_bytes_per_rank=*/2.0 * (w - 1.0) / w * bytes,
            /*hbm_bytes_per_rank=*/2.0 * bytes,  // read input, write output
            /*flops_per_rank=*/(w - 1.0) / w * numel};
  }
};

}  // namespace

PKB_PROBLEM(AllReduce)
