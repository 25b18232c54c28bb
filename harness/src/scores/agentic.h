// Scores of `pkb agent` runs: records that carry `step` belong to a
// trajectory (one run, problem and sample; NOTE [agent loop]).
//
// NOTE [step budgets]
// A trajectory is one sample. With a budget of s steps it is correct when one
// of its steps 1..s is correct, and fast_p when one of those is correct with
// a speedup > p (timed on one GPU per rank, unless --mixed-speed). pass@k and
// fast_p@k by step budget are the unbiased estimator over a problem's
// trajectories at that budget, averaged over all 87 problems, as for one-shot
// samples (NOTE [scoring]); a trajectory whose steps are all harness_error is
// dropped. The ordinary scores of an agent run are those at the full budget:
// each trajectory counts once, as its best step (correct and fastest, else
// its last step that is not a harness error).
#pragma once

#include <vector>

#include "common/results.h"
#include "scores/scoring.h"

namespace pkb {

// Records with `step` replaced by one record per trajectory: its best step
// among steps <= max_step (0: all). Other records pass through unchanged.
std::vector<Json> collapse_trajectories(const std::vector<Json>& records, const ScoreSettings& settings,
                                        int max_step = 0);

// The "agentic" object of one model's scores, or null when the model has no
// step records: budgets 1..N (N: the loop's --steps), pass@k and fast_p@k
// (and counts) per budget, the per-step curve at the smallest k, and how many
// trajectories were first correct at each step.
Json score_step_budgets(const std::vector<Json>& records, const std::string& model, const ScoreSettings& settings);

}  // namespace pkb
