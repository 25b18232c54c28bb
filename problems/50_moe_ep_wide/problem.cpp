// Expert-parallel MoE forward with two experts per rank (E = 2W, top-2, "wide
// EP"): the regrouping of received rows by local expert really reorders here
// (received order is (source rank, local expert), the experts run
// local-expert-major), and a token may send both of its rows to one rank.
// The MoE forward (router, permutation, all-to-all-v dispatch and combine,
// expert SiLU-GLU MLP, weighted unpermute) is blocks/moe_ep.h's.
#include "../blocks/moe_ep.h"

namespace {

const pkb::ProblemSpec kSpec{50, "moe_ep_wide", "Same MoE EP forward as 49 with two experts per rank (E = 2W)",
                             "Expert Parallel",
                             "VeOmni / Megatron-LM MoE all-to-all token dispatcher (variant of PKB problem 31)",
                             "any (E = 2W)"};

using namespace pkb::blocks;

class MoeEpWide : public pkb::ProblemWithSpec<kSpec, ExpertParallelMoe> {
 public:
  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    return {moe_forward_on_world(comm, in)};
  }

 protected:
  int64_t num_experts(int64_t world) const override { return 2 * world; }
};

}  // namespace

PKB_PROBLEM(MoeEpWide)
