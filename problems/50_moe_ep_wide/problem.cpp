// Expert-parallel MoE forward with two experts per rank (E = 2W, top-2, "wide
// EP"): the regrouping of received rows by local expert really reorders here
// (received order is (source rank, local expert), the experts run
// local-expert-major), and a token may send both of its rows to one rank.
// The MoE forward (router, permutation, all-to-all-v dispatch and combine,
// expert SiLU-GLU MLP, weighted unpermute) is blocks/moe_ep.h's.
#include "../blocks/moe_ep.h"

#include <variant>

namespace {

using namespace pkb::blocks;

class MoeEpWide : public ExpertParallelMoe {
 public:
  const pkb::ProblemSpec& spec() const override {
    static const pkb::ProblemSpec s{
        50, "moe_ep_wide", "Same MoE EP forward as 49 with two experts per rank (E = 2W)",
        "Expert Parallel", "VeOmni / Megatron-LM MoE all-to-all token dispatcher (variant of PKB problem 31)",
        "any (E = 2W)"};
    return s;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    PKB_CHECK(std::holds_alternative<pkb::None>(in.at(11).value) ||
                  (std::holds_alternative<pkb::GroupRanks>(in.at(11).value) &&
                   static_cast<int>(in.group(11).ranks.size()) == comm.world_size()),
              "group must be None (the world)");
    return {moe_forward(comm, pkb::kWorld, in)};
  }

 protected:
  int64_t num_experts(int64_t world) const override { return 2 * world; }
};

}  // namespace

PKB_PROBLEM(MoeEpWide)
