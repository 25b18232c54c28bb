// Ulysses post-attention all-to-all (VeOmni / verl gather_heads_scatter_seq):
// each rank holds the whole sequence for some heads; afterwards it holds a
// slice of the sequence with all the heads of all ranks.
#include "../blocks/exchange_cost.h"
#include "../blocks/ulysses.h"
#include "pkb/problem.h"

#include <algorithm>

namespace {

const pkb::ProblemSpec kSpec{37, "ulysses_gather_heads_scatter_seq",
                             "Ulysses post-attention all-to-all: gather heads, scatter the sequence",
                             "Context Parallel", "VeOmni / verl gather_heads_scatter_seq", "W divides 8 (asserted)"};

using namespace pkb::blocks;

class UlyssesGatherHeadsScatterSeq : public pkb::ProblemWithSpec<kSpec> {
 public:
  std::string check_world(int world) const override { return ulysses_heads_check(world); }

  // Inputs: x (B, T, 8, 64) randn with B = max(1, M/64), T = max(1, N/64),
  // seq_dim 1, head_dim 2, group (None = WORLD).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override { return ulysses_head_inputs(req, 37); }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int64_t world = comm.world_size();
    const int64_t seq_dim = in.integer(1), head_dim = in.integer(2);
    at::Tensor x = in.tensor(0);
    // A sequence not divisible by W is zero-padded first.
    if (x.size(seq_dim) % world != 0) {
      std::vector<int64_t> shape = x.sizes().vec();
      shape[seq_dim] = world - x.size(seq_dim) % world;
      x = at::cat({x, at::zeros(shape, x.options())}, seq_dim);
    }
    return {all_to_all_tensor(comm, x, /*scatter_dim=*/seq_dim, /*gather_dim=*/head_dim)};
  }

  // (W-1)/W of x leaves and as much arrives; HBM: x read, the output written.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return all_to_all_cost(world, in.tensor(0)); }
};

}  // namespace

PKB_PROBLEM(UlyssesGatherHeadsScatterSeq)
