// The published reference broadcasts a copy from rank 0, so every rank's input
// keeps its value (r + 1) and every output is all 1.
#include "../blocks/collective_inputs.h"
#include "../blocks/exchange_cost.h"
#include "pkb/problem.h"

namespace {

const pkb::ProblemSpec kSpec{3, "broadcast", "Broadcast from rank 0", "Collective Primitive",
                             "plain torch.distributed collective", "any"};

using namespace pkb::blocks;

constexpr int kSrc = 0;

class Broadcast : public pkb::ProblemWithSpec<kSpec, RankConstantCollective> {
 public:
  Broadcast() : ProblemWithSpec(kMoved) {}

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    at::Tensor out = in.tensor(0).clone(at::MemoryFormat::Contiguous);
    comm.broadcast(out, kSrc);
    return {out};
  }

  // Each non-root must receive the whole tensor once; a pipelined chain (or a
  // scatter then all-gather) keeps every rank's traffic at that. No adds.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const double bytes = tensor_bytes(in.tensor(0));
    return {/*nvlink_bytes_per_rank=*/world > 1 ? bytes : 0.0,
            /*hbm_bytes_per_rank=*/2.0 * bytes};  // root: read input, write output
  }
};

}  // namespace

PKB_PROBLEM(Broadcast)
