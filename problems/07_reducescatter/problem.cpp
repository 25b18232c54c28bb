// Each rank contributes W·M rows and keeps M of the summed rows (rank r gets
// rows [rM, (r+1)M)). Inputs are small integers so the bf16 sum is exact for
// W <= 22 whatever order the adds happen in.
#include "../blocks/collective_inputs.h"
#include "../blocks/exchange_cost.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{7, "reducescatter", "Sum reduce-scatter along rows", "Collective Primitive",
                             "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

class ReduceScatter : public pkb::ProblemWithSpec<kSpec, RankConstantCollective> {
 public:
  ReduceScatter() : ProblemWithSpec(kSummed, true) {}

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor t = in.tensor(0).contiguous();
    at::Tensor out = at::empty({t.size(0) / comm.world_size(), t.size(1)}, t.options());
    comm.reduce_scatter_tensor(out, t, pkb::ReduceOp::kSum);
    return {out};
  }

  // Bandwidth-optimal reduce-scatter: (W-1)/W of the input each way, i.e.
  // W-1 output-sized chunks; (W-1) adds per output element.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);  // (W·M, N)
    const double in_bytes = tensor_bytes(t);
    const double out_numel = static_cast<double>(t.numel()) / world;
    const double out_bytes = out_numel * t.element_size();
    return {/*nvlink_bytes_per_rank=*/(world - 1) * out_bytes,
            /*hbm_bytes_per_rank=*/in_bytes + out_bytes,  // read input, write output
            /*flops_per_rank=*/(world - 1) * out_numel};
  }
};

}  // namespace

PKB_PROBLEM(ReduceScatter)
