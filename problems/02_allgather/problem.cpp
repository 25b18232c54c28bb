// The published reference stacks the gathered tensors along a new leading dim
// (W, M, N) rather than concatenating rows, so slice s is rank s's tensor.
#include "../blocks/collective_inputs.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{2, "allgather", "All-gather of equal-size matrices into a stacked tensor",
                             "Collective Primitive", "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

class AllGather : public pkb::ProblemWithSpec<kSpec, RankConstantCollective> {
 public:
  AllGather() : ProblemWithSpec(kMoved) {}

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm,
                         const pkb::Inputs& in) const override {
    const at::Tensor t = in.tensor(0).contiguous();
    std::vector<int64_t> sizes{comm.world_size()};
    sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
    at::Tensor out = at::empty(sizes, t.options());
    comm.all_gather_into_tensor(out, t);
    return {out};
  }

  // Every rank must receive the W-1 other tensors; nothing is summed.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    const double bytes = static_cast<double>(t.numel()) * t.element_size();
    return {/*nvlink_bytes_per_rank=*/(world - 1) * bytes,
            /*hbm_bytes_per_rank=*/bytes + world * bytes};  // read input, write (W, M, N) output
  }
};

}  // namespace

PKB_PROBLEM(AllGather)
