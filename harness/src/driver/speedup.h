#pragma once

#include <vector>

#include "common/results.h"

namespace pkb {

// NOTE [paired rounds]
// Under `--timing fresh` the speedup is the median, over the timing's rounds,
// of the reference's segment median over the candidate's in the same round
// (each the slowest rank's), not the ratio of the two sides' medians over
// the whole timing. A round holds one segment of each side back to back
// (NOTE [fresh inputs], step 3), so a change of the machine's speed that
// lasts seconds (H200, W = 1, problem 78 at 130 ms a call: trials of
// 130-160 ms, then 105 ms, within one evaluation) moves both sides of a
// round alike; with 4 rounds a side, as 78 takes, the ratio of medians read
// 1.23x against itself where the sides' segments fell unevenly either side
// of such a change. A median over 4 ratios is coarse, so a timing runs at
// least 8 rounds (kMinRounds, `--min-rounds`), whatever its noise: a call
// of 100 ms then takes ~3.5 s a side instead of the 0.5 s budget. H100,
// W = 1, the 85 problems against themselves, one run each: paired with the
// floor 85/85 within 3% (the ratio of medians in the same run 80/85, 84/85
// within 5%), 238.4 s of evaluations; without the floor 84/85 and 229.5 s.
// Where rounds are many and the machine steady the two estimators agree.
// `speedup_of_medians` keeps the other; `--timing published` reports the
// ratio of medians only, as published.

// Raises `rounds` to this rank's per-round segment medians of `side`
// ("reference" or "candidate") in a rank's timing record (sized by the first
// rank); false where the rank has none, or another number of rounds.
bool slowest_per_round(const Json& timing, const char* side, std::vector<double>* rounds);

// The median over rounds of ref[i] / cand[i] (rounds with a time <= 0 on
// either side left out); 0 where none is left or the lengths differ.
double paired_speedup(const std::vector<double>& ref, const std::vector<double>& cand);

}  // namespace pkb
