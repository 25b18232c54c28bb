// The published reference stacks the gathered tensors along a new leading dim
// (W, M, N) rather than concatenating rows, so slice s is rank s's tensor.
#include "../blocks/collective_inputs.h"
#include "pkb/problem.h"

namespace {

using namespace pkb::blocks;

class AllGather : public RankConstantCollective {
 public:
  AllGather() : RankConstantCollective(kMoved) {}

  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{2, "allgather", "All-gather of equal-size matrices into a stacked tensor",
                                    "Collective Primitive", "plain torch.distributed collective", "any"};
    return s;
  }

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
    pkb::Cost c;
    c.nvlink_bytes_per_rank = (world - 1) * bytes;
    c.hbm_bytes_per_rank = bytes + world * bytes;  // read input, write (W, M, N) output
    return c;
  }
};

}  // namespace

PKB_PROBLEM(AllGather)
