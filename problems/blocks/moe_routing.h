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

// One randperm(8) per token whose first two entries are the token's
// (distinct) experts: (M, 2) int64.
inline at::Tensor distinct_expert_picks(const InputRequest& req) {
  auto opts = at::TensorOptions().device(req.device).dtype(at::kLong);
  std::vector<at::Tensor> picks;
  picks.reserve(req.m);
  for (int64_t t = 0; t < req.m; ++t) picks.push_back(at::randperm(kNumExperts, opts).narrow(0, 0, kTopK));
  return at::stack(picks);
}

// As published, the split sizes are synthetic and uniform, unrelated to the
// routing: the W input splits, then the W output splits, of `routed` rows
// (the remainder to the last peer).
inline void add_uniform_splits(Inputs& in, const InputRequest& req, int64_t routed) {
  for (const char* list : {"input_splits", "output_splits"}) {
    for (int d = 0; d < req.world; ++d) {
      int64_t split = routed / req.world + (d == req.world - 1 ? routed % req.world : 0);
      in.add(std::string(list) + "." + std::to_string(d), split);
    }
  }
}

// num_global_tokens_per_local_expert: `routed` rows spread evenly over the 8
// experts, as (W, 8/W).
inline at::Tensor uniform_tokens_per_local_expert(const InputRequest& req, int64_t routed) {
  at::Tensor per_slot = at::full({kNumExperts}, routed / kNumExperts, at::TensorOptions().device(req.device).dtype(at::kLong));
  per_slot.narrow(0, 0, routed % kNumExperts).add_(1);
  return per_slot.view({req.world, kNumExperts / req.world});
}

}  // namespace pkb::blocks
