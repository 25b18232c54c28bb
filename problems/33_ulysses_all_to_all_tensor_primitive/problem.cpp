// The Ulysses all-to-all (VeOmni / verl comm helpers, DeepSpeed-Ulysses):
// split x into W equal blocks along scatter_dim, send block d to rank d
// (torch.distributed's list all_to_all), concatenate the W received blocks
// along gather_dim in source-rank order.
#include "../blocks/exchange_cost.h"
#include "../blocks/ulysses.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{33, "ulysses_all_to_all_tensor_primitive",
                             "Ulysses all-to-all: scatter rows, gather along columns (list all-to-all)",
                             "Context Parallel", "VeOmni / verl Ulysses sequence-parallel comm helpers", "W divides M"};

using namespace pkb::blocks;

class UlyssesAllToAllTensor : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Inputs: x (M, N) randn, scatter_dim 0, gather_dim 1, group (None = WORLD).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    // tensor_split gives unequal blocks when W does not divide M, and the
    // published list all_to_all then fails (every receive buffer is shaped
    // like the first block); refuse that case here.
    PKB_CHECK(req.m % req.world == 0, "problem 33 needs W to divide M (M = ", req.m, ", W = ", req.world, ")");
    return {{"x", at::randn({req.m, req.n}, req.options())}, {"scatter_dim", int64_t{0}}, {"gather_dim", int64_t{1}},
            {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int world = comm.world_size();
    at::Tensor x = in.tensor(0).contiguous();
    const int64_t scatter_dim = in.integer(1), gather_dim = in.integer(2);
    if (world == 1) return {x};
    return {list_all_to_all(comm, x, scatter_dim, gather_dim)};
  }

  // (W-1)/W of x leaves and as much arrives; HBM: x read, the output written
  // (the packing copies are the reference's, not the problem's). No arithmetic.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return all_to_all_cost(world, in.tensor(0)); }
};

}  // namespace

PKB_PROBLEM(UlyssesAllToAllTensor)
