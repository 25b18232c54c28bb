// The Ulysses sequence-parallel helper that all-gathers along dim 0 into one
// tensor (VeOmni / verl comm helpers): rows [s*M, (s+1)*M) of the result are
// rank s's input.
#include "../blocks/exchange_cost.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{34, "ulysses_all_gather_into_tensor_primitive", "All-gather along dim 0 into one tensor",
                             "Context Parallel", "VeOmni / verl Ulysses sequence-parallel comm helpers", "any"};

class UlyssesAllGatherIntoTensor : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Inputs: x (M, N) randn, then the group (None = WORLD).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    return {{"x", at::randn({req.m, req.n}, req.options())}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    at::Tensor x = in.tensor(0).contiguous();
    // At W = 1 the published reference returns the input itself.
    if (world == 1) return {x};
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes[0] *= world;
    at::Tensor out = at::empty(sizes, x.options());
    comm.all_gather_into_tensor(out, x);
    return {out};
  }

  // Bandwidth-optimal all-gather: every rank receives the W-1 other inputs
  // (and sends its own as often). HBM: the input read, the (W*M, N) output
  // written. No arithmetic.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    return pkb::blocks::all_gather_cost(world, in.tensor(0));
  }
};

}  // namespace

PKB_PROBLEM(UlyssesAllGatherIntoTensor)
