// Expert-parallel MoE forward with fewer experts than ranks ("narrow EP"): E =
// the largest divisor of W in [2, W/2] (else 1), top_k = min(2, E), and the
// MoE runs independently inside EP subgroups of E contiguous ranks (data-
// parallel replicas of the expert set), one expert per rank. The subgroups are
// built inside the reference on its first call and cached per (W, E), as
// published (every rank creates every block, in order).
// The MoE forward (router, permutation, all-to-all-v dispatch and combine,
// expert SiLU-GLU MLP, weighted unpermute) is blocks/moe_ep.h's.
#include "../blocks/moe_ep.h"

#include <map>
#include <tuple>
#include <variant>

namespace {

const pkb::ProblemSpec kSpec{51, "moe_ep_narrow",
                             "MoE EP forward where the expert count is smaller than the world (EP subgroups, "
                             "data-parallel replicas of the expert set)",
                             "Expert Parallel",
                             "VeOmni / Megatron-LM MoE all-to-all token dispatcher (variant of PKB problem 31)",
                             "E = largest divisor of W in [2, W/2], else 1"};

using namespace pkb::blocks;

class MoeEpNarrow : public pkb::ProblemWithSpec<kSpec, ExpertParallelMoe> {
 public:
  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    PKB_CHECK(std::holds_alternative<pkb::None>(in.at(11).value),
              "group must be None (the reference picks the EP subgroup)");
    return {moe_forward(comm, ep_group(comm, in.integer(9)), in)};
  }

 protected:
  // As published: the largest E in [2, W/2] dividing W, else 1.
  int64_t num_experts(int64_t world) const override {
    for (int64_t e = world / 2; e > 1; --e)
      if (world % e == 0) return e;
    return 1;
  }
  int64_t top_k(int64_t experts) const override { return std::min<int64_t>(2, experts); }

  // The EP subgroup {g·E, …, g·E + E − 1} holding this rank, created (every
  // block, by every rank, in order) on the first call per (facade, W, E);
  // the world when E >= W.
  pkb::Group ep_group(pkb::Collectives& comm, int64_t experts) const {
    const int64_t world = comm.world_size(), rank = comm.rank();
    if (experts >= world) return pkb::kWorld;
    PKB_CHECK(world % experts == 0, "narrow EP requires world_size (", world, ") % num_experts (", experts, ") == 0");
    auto key = std::make_tuple(&comm, world, experts);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      std::vector<pkb::Group> blocks;
      for (int64_t g = 0; g < world / experts; ++g) {
        std::vector<int64_t> ranks(experts);
        for (int64_t i = 0; i < experts; ++i) ranks[i] = g * experts + i;
        blocks.push_back(comm.new_group(ranks));
      }
      it = cache_.emplace(key, std::move(blocks)).first;
    }
    return it->second[rank / experts];
  }

  mutable std::map<std::tuple<const pkb::Collectives*, int64_t, int64_t>, std::vector<pkb::Group>> cache_;
};

}  // namespace

PKB_PROBLEM(MoeEpNarrow)
