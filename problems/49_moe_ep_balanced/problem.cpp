// Expert-parallel MoE forward with one expert per rank (E = W, top-2). The
// MoE forward (router, permutation, all-to-all-v dispatch and combine, expert
// SiLU-GLU MLP, weighted unpermute) is blocks/moe_ep.h's, over the world.
#include "../blocks/moe_ep.h"

namespace {

const pkb::ProblemSpec kSpec{49, "moe_ep_balanced",
                             "Expert-parallel MoE forward (router, permute, all-to-all dispatch, expert SiLU-GLU MLP, "
                             "all-to-all combine, weighted unpermute) with one expert per rank",
                             "Expert Parallel",
                             "VeOmni / Megatron-LM MoE all-to-all token dispatcher (variant of PKB problem 31)",
                             "W >= 2 (E = W)"};

using namespace pkb::blocks;

class MoeEpBalanced : public pkb::ProblemWithSpec<kSpec, ExpertParallelMoe> {
 public:
  std::string check_world(int world) const override {
    return world >= 2 ? "" : "E = W experts with top-2 routing needs W >= 2";
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    return {moe_forward_on_world(comm, in)};
  }

 protected:
  int64_t num_experts(int64_t world) const override { return world; }
};

}  // namespace

PKB_PROBLEM(MoeEpBalanced)
