// Ulysses pre-attention all-to-all (VeOmni / verl gather_seq_scatter_heads):
// each rank holds a slice of the sequence with all heads; afterwards it holds
// the whole sequence for 8/W of the heads.
#include "../blocks/exchange_cost.h"
#include "../blocks/ulysses.h"
#include "pkb/problem.h"

#include <algorithm>

namespace {

const pkb::ProblemSpec kSpec{36, "ulysses_gather_seq_scatter_heads",
                             "Ulysses pre-attention all-to-all: gather the sequence, scatter heads", "Context Parallel",
                             "VeOmni / verl gather_seq_scatter_heads", "W divides 8 (asserted)"};

using namespace pkb::blocks;

class UlyssesGatherSeqScatterHeads : public pkb::ProblemWithSpec<kSpec> {
 public:
  std::string check_world(int world) const override { return ulysses_heads_check(world); }

  // Inputs: ulysses_head_inputs (x (B, T, 8, 64) randn with B = max(1, M/64),
  // T = max(1, N/64), seq_dim 1, head_dim 2, group None), unpadded_dim_size 0.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = ulysses_head_inputs(req, 36);
    in.add("unpadded_dim_size", int64_t{0});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const int64_t world = comm.world_size();
    const int64_t seq_dim = in.integer(1), head_dim = in.integer(2), unpadded = in.integer(4);
    at::Tensor x = all_to_all_tensor(comm, in.tensor(0), /*scatter_dim=*/head_dim, /*gather_dim=*/seq_dim);
    return {drop_seq_padding(x, seq_dim, unpadded, world)};
  }

  // (W-1)/W of x leaves and as much arrives; HBM: x read, the output written.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return all_to_all_cost(world, in.tensor(0)); }
};

}  // namespace

PKB_PROBLEM(UlyssesGatherSeqScatterHeads)
