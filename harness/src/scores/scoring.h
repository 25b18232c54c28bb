// Scores: evaluation records -> per-model pass@k, fast_p@k, geometric-mean
// speedup and outcome counts, overall and per category (DESIGN.md §6).
//
// NOTE [scoring]
// Every score is over the full benchmark (problem_index.h), not over what a
// run happened to record: a problem with no usable sample scores 0. A
// harness_error sample is the harness's fault, not the model's, so it is
// dropped from n and reported apart. pass@k and fast_p@k use the unbiased
// estimator 1 - C(n-c,k)/C(n,k) per problem (c = correct samples, or correct
// samples timed with speedup > p), averaged over problems; the leaderboard's
// counts are the same per-problem values summed (expected problems solved).
#pragma once

#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

inline constexpr int kScoresSchemaVersion = 1;

struct ScoreSettings {
  std::vector<int> k = {1, 3};
  std::vector<double> p = {0, 0.5, 1, 1.5, 2, 3};
  // Count speedups whose times do not measure the GPU path (speed_is_measured()
  // false: CPU runs, ranks sharing a GPU). Off: such samples still count for
  // pass@k, but as not fast, and are left out of the geomean (with a warning).
  bool mixed_speed = false;
};

// 1 - C(n-c,k)/C(n,k) as a product, so no binomial overflows or cancels.
// Requires 0 <= c <= n and 1 <= k <= n.
double unbiased_pass_at_k(int n, int c, int k);

// "1", "0.5", "1.5": the shortest form of p, as used in keys ("fast_1@3").
std::string format_p(double p);
std::string pass_key(int k);
std::string fast_key(double p, int k);

// The "models" object of a scores file. Records of another kind than
// "evaluation" (golden replays) are ignored. Non-fatal findings (k clamped to
// n, records outside the benchmark) are appended to `warnings`.
Json score_models(const std::vector<Json>& records, const ScoreSettings& settings,
                  std::vector<std::string>* warnings);

// The whole scores file: schema, provenance, settings and score_models().
Json make_scores(const std::vector<Json>& records, const std::vector<std::string>& inputs,
                 const ScoreSettings& settings, std::vector<std::string>* warnings);

}  // namespace pkb
