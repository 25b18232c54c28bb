// Values encode (source rank, destination slice) as 10·r + d, so a misrouted
// slice shows up as a wrong value; they stay exact bf16 integers for W <= 24.
#include "../blocks/collective_inputs.h"
#include "../blocks/exchange_cost.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{8, "alltoall", "Equal-split all-to-all of a stacked tensor", "Collective Primitive",
                             "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

class AllToAll : public pkb::ProblemWithSpec<kSpec> {
 public:
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    at::Tensor t = at::empty({req.world, req.m, req.n}, req.options());
    for (int d = 0; d < req.world; ++d) t[d].fill_(10 * req.rank + d);
    return {{"tensor", t}};
  }

  // NOTE [constant collective inputs] (blocks/collective_inputs.h).
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    return integers_for_moved_data(make_inputs(req));
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor t = in.tensor(0).contiguous();
    at::Tensor out = at::empty_like(t);
    comm.all_to_all_single(out, t);  // equal splits along dim 0
    return {out};
  }

  // Every rank sends W-1 slices and receives W-1 slices. Nothing is summed.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override { return all_to_all_cost(world, in.tensor(0)); }
};

}  // namespace

PKB_PROBLEM(AllToAll)
