// The published reference stacks the gathered tensors along a new leading dim
// (W, M, N) rather than concatenating rows, so slice s is rank s's tensor.
#include "../blocks/collective_inputs.h"
#include "../blocks/exchange_cost.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{2, "allgather", "All-gather of equal-size matrices into a stacked tensor",
                             "Collective Primitive", "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

class AllGather : public pkb::ProblemWithSpec<kSpec, RankConstantCollective> {
 public:
  AllGather() : ProblemWithSpec(kMoved) {}

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor t = in.tensor(0).contiguous();
    std::vector<int64_t> sizes{comm.world_size()};
    sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
    at::Tensor out = at::empty(sizes, t.options());
    comm.all_gather_into_tensor(out, t);
    return {out};
  }

  // Every rank must receive the W-1 other tensors; nothing is summed.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return all_gather_cost(world, in.tensor(0)); }
};

}  // namespace

PKB_PROBLEM(AllGather)
