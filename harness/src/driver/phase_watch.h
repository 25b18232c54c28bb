// Per-phase deadlines of one evaluation (issue 11 item 6).
//
// NOTE [phase deadlines]
// A worker announces each phase it enters (setup, load, "trial 2: candidate",
// timing, ...) with the seconds it may take, under the store key
// pkb/phase/<rank> as "<seq>\t<name>\t<budget_s>" (worker/phase.h). The
// driver polls those keys (every 0.1 s, launcher's watchdog) and ends the
// evaluation as `timeout` when a rank stays in one phase past its budget,
// naming the rank, the phase and the budget. Budgets come from the worker:
//   budget = floor + 20 x calls x t_ref (+ the harness's own waits)
// where floor is --phase-floor (default 30 s), calls the number of candidate
// (or reference) calls the phase makes and t_ref the wall time of the fastest
// reference call so far (one per trial; the harness's waits: the timing's
// stream-gate timeouts). Before t_ref is known (trial 0's candidate) the
// budget is the floor. Setup (store, backend, problem plugin) is the harness's and gets
// max(4 x floor, 120 s) until the worker's first announcement. A hung
// candidate thus costs about the floor, not --timeout, which stays as the cap
// on the whole evaluation. The announcements go through the store a candidate
// can also reach: a candidate can lengthen its own phase, never past --timeout.
//
// The watch also sums the seconds each rank spent per kind of phase (every
// "trial N ..." is `trials`; otherwise the name up to its first ':'), by the
// driver's clock to the 0.1 s of its polls, for the record's
// process.ranks[].phase_s: where an evaluation's time went. It is a report,
// never a verdict or a time (a candidate that reaches the store can rename
// its phases).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace pkb {

class PhaseWatch {
 public:
  // `floor_s`: --phase-floor, which a phase's deadline is alone before the
  // reference has been timed (the reason then says so).
  PhaseWatch(c10d::Store& store, int world, double setup_budget_s, double floor_s);
  // Empty while every rank is within its phase's budget; otherwise why not.
  std::string check();
  // The last phase rank `r` announced ("setup" before any).
  const std::string& phase_of(int r) const { return ranks_[r].name; }
  // Seconds rank `r` spent per kind of phase; its last phase gets what is
  // left of `rank_seconds` (how long the rank ran: it may have ended before
  // the watch's last poll).
  std::map<std::string, double> seconds_by_kind(int r, double rank_seconds) const;

 private:
  struct RankPhase {
    std::string raw;  // the last value read
    std::string name = "setup";
    double budget_s = 0;
    std::chrono::steady_clock::time_point since;
    std::map<std::string, double> spent;  // by kind, the phases it left
  };
  c10d::Store& store_;
  std::vector<RankPhase> ranks_;
  double floor_s_;
};

}  // namespace pkb
