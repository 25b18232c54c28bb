// The MoE all-to-all wrapper of VeOmni / Megatron-LM: token rows go out in
// explicit split sizes and come back grouped by source rank. The published
// inputs make the splits uniform (M/W rows per peer).
#include "../blocks/exchange_cost.h"
#include "../blocks/moe_routing.h"
#include "../blocks/moe_token_dispatcher.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{27, "moe_all2all_primitive",
                             "All-to-all-v of token rows with explicit split lists (here equal splits)",
                             "Expert Parallel", "VeOmni / Megatron-LM MoE all_to_all wrapper", "W divides M"};

using namespace pkb::blocks;

class MoeAll2AllPrimitive : public pkb::ProblemWithSpec<kSpec> {
 public:
  // Inputs: local_tensor, then the W input split sizes, the W output split
  // sizes (the published lists, flattened), then the group (None = WORLD).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    // The published harness adds M mod W to the last split of both lists,
    // which no rank but the last can honour (the exchange fails); refuse it.
    PKB_CHECK(req.m % req.world == 0, "problem 27 needs W to divide M (M = ", req.m, ", W = ", req.world, ")");
    at::Tensor local = at::randn({req.m, req.n}, req.options());
    pkb::Inputs in;
    in.add("local_tensor", local);
    for (int d = 0; d < req.world; ++d) in.add("input_split_sizes." + std::to_string(d), req.m / req.world);
    for (int d = 0; d < req.world; ++d) in.add("output_split_sizes." + std::to_string(d), req.m / req.world);
    in.add("group", pkb::None{});
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const SplitArgs splits = splits_at(in, 1, comm.world_size());
    return {all_to_all_rows(comm, in.tensor(0), splits.out, splits.in)};
  }

  // (W-1)/W of the rows leave and as many arrive; the input is read and the
  // output written once; no arithmetic.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return all_to_all_cost(world, in.tensor(0)); }
};

}  // namespace

PKB_PROBLEM(MoeAll2AllPrimitive)
