// The 8-expert, top-2 routing of the MoE token-dispatcher problems (26, 28,
// 29; 31 and 32 through fused_moe.h): the expert count check and the
// synthetic routing and split sizes of the dispatch and combine steps.
#pragma once

#include <string>
#include <vector>

#include "pkb/problem.h"

namespace pkb::blocks {

constexpr int64_t kNumExperts = 8;
constexpr int64_t kTopK = 2;

// The experts are split evenly over the ranks (a (W, 8/W) reshape).
inline std::string moe_experts_check(int world) {
  if (world < 1 || kNumExperts % world != 0) return "the world size must divide the 8 experts";
  return "";
}

// How the per-token routing is drawn. kPublished: the published RNG order,
// one randperm(8) per token (and in 29 one randn(2)), which trial 0 and the
// golden fixtures reproduce. kBatched: the same distributions in one draw for
// all tokens, for the integrity trials and the fresh timing's draws (NOTE
// [fresh inputs] in harness/src/worker/timing_fresh.h), which owe no RNG
// order: M = 1024 randperm calls took ~68 ms a draw on the H200, and the
// timing's draws count in a side's --max-time, so 28 and 29 got 20 timed
// calls a side (28 read 1.47x against itself at W = 1, 34% noise).
enum class RoutingDraw { kPublished, kBatched };

// The token's two distinct experts, the first two of a uniform permutation
// of the 8: (M, 2) int64.
inline at::Tensor distinct_expert_picks(const InputRequest& req, RoutingDraw how) {
  if (how == RoutingDraw::kBatched)  // the order of i.i.d. uniforms is a uniform permutation
    return at::rand({req.m, kNumExperts}, req.options(at::kFloat))
        .argsort(/*dim=*/1, /*descending=*/false)
        .narrow(1, 0, kTopK)
        .contiguous();
  auto opts = req.options(at::kLong);
  std::vector<at::Tensor> picks;
  picks.reserve(req.m);
  for (int64_t t = 0; t < req.m; ++t) picks.push_back(at::randperm(kNumExperts, opts).narrow(0, 0, kTopK));
  return at::stack(picks);
}

// As published, the split sizes are synthetic and uniform, unrelated to the
// routing: the W input splits, then the W output splits, of `routed` rows
// (the remainder to the last peer), then num_global_tokens_per_local_expert
// (`routed` rows spread evenly over the 8 experts, as (W, 8/W)).
inline void add_uniform_dispatch_sizes(Inputs& in, const InputRequest& req, int64_t routed) {
  for (const char* list : {"input_splits", "output_splits"}) {
    for (int d = 0; d < req.world; ++d) {
      int64_t split = routed / req.world + (d == req.world - 1 ? routed % req.world : 0);
      in.add(std::string(list) + "." + std::to_string(d), split);
    }
  }
  at::Tensor per_slot = at::full({kNumExperts}, routed / kNumExperts, req.options(at::kLong));
  per_slot.narrow(0, 0, routed % kNumExperts).add_(1);
  in.add("num_global_tokens_per_local_expert", per_slot.view({req.world, kNumExperts / req.world}));
}

// A remainder of the 2M routed rows over W would go to the last entry of
// both split lists, which only the last rank can honour (as in 27): 28 and
// 29 refuse it instead of failing inside the exchange.
inline void check_even_splits(const InputRequest& req, int problem) {
  PKB_CHECK(2 * req.m % req.world == 0, "problem ", problem, " needs W to divide 2M (M = ", req.m, ", W = ",
            req.world, ")");
}

// The input then output split lists from argument `first` on (27's; 28's
// and 29's as add_uniform_dispatch_sizes wrote them), and the rows each side
// adds up to.
struct SplitArgs {
  std::vector<int64_t> in, out;
  int64_t in_rows = 0, out_rows = 0;
};

inline SplitArgs splits_at(const Inputs& in, size_t first, int world) {
  SplitArgs s;
  for (int d = 0; d < world; ++d) {
    s.in.push_back(in.integer(first + d));
    s.out.push_back(in.integer(first + world + d));
    s.in_rows += s.in.back();
    s.out_rows += s.out.back();
  }
  return s;
}

// The dispatch (28) and combine (29) problems: the published per-token
// routing for trial 0 (and the golden fixtures), the batched one for the
// integrity trials and the fresh timing's draws (RoutingDraw).
class RoutedTokensDraw : public Problem {
 public:
  std::string check_world(int world) const override { return moe_experts_check(world); }
  Inputs make_inputs(const InputRequest& req) const override { return draw(req, RoutingDraw::kPublished); }
  Inputs make_integrity_inputs(const InputRequest& req) const override { return draw(req, RoutingDraw::kBatched); }

 protected:
  virtual Inputs draw(const InputRequest& req, RoutingDraw how) const = 0;
};

}  // namespace pkb::blocks
