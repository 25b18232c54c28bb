// NOTE [fresh inputs]
// The default timing protocol (`--timing fresh`; `--timing published` is NOTE
// [timing protocol] exactly as published). What it changes, and why: a
// candidate that remembers its answers keyed on the contents of its inputs
// (a hash of all of them, or of a few sampled elements) passed every check of
// the published protocol, whose timed calls repeat copies of one draw (CPU,
// W = 2, problem 1: 5.71x for a memo, 0.88x without it).
//  1. No timed call, warm-up and priming included, reads contents an earlier
//     call of the evaluation read. Before each request the referee draws, for
//     each call it is about to make, a new set from the problem's integrity
//     draw (Problem::make_integrity_inputs: its own preconditions), seeded
//     from a nonce the ranks' referees agree on through their store (a
//     contestant never sees it), and copies it into that call's input group
//     of both sides while neither side runs: call k of a round reads the same
//     contents on either side. The draw and the copies are outside every
//     timed window; their cost is recorded (`draw_us` per call).
//  2. Each call's outputs are copied aside after its end event (the events
//     bracket the call alone: IterationTimer, split). After both sides'
//     segments of a round the referee picks calls at random (each with
//     probability 1/4, at least one a round; the ranks' referees pick alike,
//     from a seed they agree on and no contestant sees), and compares the candidate's outputs of those calls with the
//     reference's on the same contents: a candidate cannot tell a checked
//     call from another. A mismatch is the evaluation's output_mismatch.
//  3. Adaptive stopping (nvbench's --max-noise, --min-samples, --max-time):
//     warm-up batches of both sides until each side's last two agree within
//     10% per call (by the referee's clock) or either side has spent a
//     quarter of its time, both sides taking the same number of calls (with
//     each side on its own, 50 at W = 1 on the H200 read 0.66x against itself
//     after 12 warm-up calls on one side and 36 on the other); then the
//     priming segments (step 2 of NOTE [timing protocol], outside the sides'
//     time: they detect host_sync, by two gate timeouts where it holds); then
//     rounds of one segment per side, alternated C R R C as published, until
//     min_rounds rounds have run (kMinRounds unless told: the speedup is a
//     median over rounds, NOTE [paired rounds]; the floor yields once a side
//     has spent kRoundFloorTimes x max_time) and each side is satisfied:
//     it has at least min_samples samples and the 95% confidence interval of
//     its median is within max_noise of it, or its time (warm-up and
//     segments, by the referee's clock, and half of each draw it shares) has
//     reached max_time. The sides stop together: a
//     side satisfied first keeps its segment in every round, so that both
//     sides' samples cover the same stretch of time and drift hits them
//     alike (with each side stopping on its own, 52 at W = 1 on the H200
//     read 0.953x against itself: the reference's noise was met after 5
//     rounds, the candidate's ran 21 into a slower stretch). A side's time
//     can so exceed max_time, by at most the other side's. Every stop is
//     agreed across ranks (all ranks make the same calls). The record
//     carries the samples, the noise reached and whether it met the target,
//     and each round's segment median per side: the speedup is the median
//     of the rounds' ratios (NOTE [paired rounds], driver/speedup.h).
//  4. Segments: S calls, S from the reference's fastest trial call (about
//     kSegmentTargetUs of calls, 4..32), or, where that call is under
//     kSegmentTargetUs on every rank, from 8 reference calls back to back
//     (a trial call is timed with its sync: Worker::reference_call_us says
//     why); input groups: P >= S, and enough that
//     cycling them exceeds 3x the last-level cache (step 1 of the published
//     protocol), within a memory budget (both sides' groups and kept
//     outputs); segment k uses groups kS .. kS+S-1 mod P. The ranks take the
//     smallest S and P any of them found (their clocks differ).
// Steps 3-5 of NOTE [timing protocol] (gate, head start, events, wall-clock
// and referee cross-checks) hold unchanged; the referee's allowance adds the
// copies of step 2 (kKeptCopyBytesPerUs).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "worker/compare.h"
#include "worker/timing.h"

namespace pkb {

inline constexpr double kSegmentTargetUs = 2000;
inline constexpr int kMinSegmentCalls = 4, kMaxSegmentCalls = 32;
inline constexpr int kMaxRounds = 2000, kMaxWarmBatches = 50;
// NOTE [paired rounds] (driver/speedup.h): the fewest rounds a timing stops
// at unless told (--min-rounds), until a side has spent kRoundFloorTimes
// times its --max-time: then the floor yields (step 3), and calls of seconds
// stop at --min-samples as they did before the floor. 78 on CPU at W = 2
// (1.9 s calls, 3-call segments) took 8 rounds and 192 s without the yield,
// 6 rounds and 157 s with it; 78 on the GPU (0.4 s segments) keeps its 8.
inline constexpr int kMinRounds = 8;
inline constexpr double kRoundFloorTimes = 20;

struct FreshTimingOptions {
  double max_noise = 0.01;  // relative half-width of the median's 95% confidence interval
  int min_samples = 16;
  int min_rounds = kMinRounds;  // NOTE [paired rounds]
  double max_time_s = 0.5;   // per side, warm-up included, by the referee's clock
  double call_us = 1000;     // the reference's call time (sizes the segments; step 4)
  double out_bytes = 0;      // one call's outputs (the trials'), for the memory budget and the allowance
  double memory_budget_bytes = 512.0 * (1 << 20);  // both sides' groups and kept outputs
  // NOTE [fixed inputs]: one copy per side, read by every group; the layout
  // (step 4) counts the other inputs only, and the draws keep these.
  FixedSet fixed;
  TimingOptions base;        // cache, gates, wall ratio (NOTE [timing protocol])
  // Seeds the choice of the checked calls: the same on every rank (a check
  // whose reference runs anew is a collective call), and never sent to a
  // contestant, so that no candidate can tell which calls will be checked.
  uint64_t pick_seed = 0;
  // Announces a phase of the timing that makes about `calls` calls of each side.
  std::function<void(int calls)> phase;
};

// The referee's allowance for the copies of step 2 (conservative: a
// device-to-device copy runs at several hundred GB/s, a CPU memcpy at GB/s).
inline constexpr double kKeptCopyBytesPerUs = 100e3, kKeptCopyBytesPerUsCpu = 500;

// Contents of the timing draw number `k` (0, 1, ...) for this rank.
using DrawFn = std::function<Inputs(int64_t k)>;
// The candidate's outputs against the reference's on the same contents.
using CheckFn = std::function<CompareResult(const Outputs& want, const Outputs& got)>;

// Half the width of the distribution-free 95% confidence interval of the
// median of `v` (order statistics n/2 -+ 0.98 sqrt(n)), over the median;
// infinite with fewer than two samples.
double median_noise(std::vector<double> v);

// Steps 3-4: how many calls a segment makes and how many input groups rotate.
struct FreshLayout {
  int segment_calls = kMinSegmentCalls;
  int groups = 1;
};
FreshLayout fresh_layout(double call_us, double in_bytes, double out_bytes, double cache_bytes, double budget_bytes);

struct FreshResult {
  TimingResult timing;  // stats, samples, the candidate's last input group
  FreshLayout layout;
  int rounds = 0;
  int64_t draws = 0;
  double draw_us = 0;   // per draw, with its copies into both sides' groups
  int checked = 0;      // timed calls checked against the reference
  bool check_failed = false;
  std::string check_reason;  // the first failing check's
  bool noise_met_cand = false, noise_met_ref = false;
  // Each round's segment median per side, in round order (NOTE [paired
  // rounds], driver/speedup.h).
  std::vector<double> round_medians_cand, round_medians_ref;
  // Where the loop's wall time went, by the referee's clock (a report: the
  // sides' own time_s decide the stopping): "warm-up", "priming",
  // "segments", "draws", "checks" (kept outputs and their comparisons),
  // "agreement" (stops agreed across ranks)
  // and "total".
  std::map<std::string, double> loop_s;
};

FreshResult time_fresh(RankPeers& peers, const Inputs& inputs, TimedSide& cand, LocalSide& ref, const DrawFn& draw,
                       const CheckFn& check, const FreshTimingOptions& opts);

}  // namespace pkb
