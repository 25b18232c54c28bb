// The outcome taxonomy (DESIGN.md §5 step 6). One outcome per evaluation; when
// several apply, the earliest in this list wins.
#pragma once

#include <string>

namespace pkb {

enum class Outcome {
  kHarnessError,   // not the candidate's fault; excluded from scores
  kAgentError,     // pkb agent: the agent command failed, hung or wrote no candidate (nothing evaluated)
  kCompileError,
  kForbiddenApi,
  kLoadError,
  kShapeMismatch,  // output count, shape or dtype differs
  kRuntimeError,   // exception, CUDA error, signal
  kTimeout,        // deadlock or hang past the deadline
  kOutputMismatch,
  kTimingAnomaly,
  kCorrect,
};

const char* outcome_name(Outcome o);
// Throws pkb::Error on an unknown name.
Outcome outcome_from_name(const std::string& name);
// The outcome that wins when both apply.
inline Outcome first_of(Outcome a, Outcome b) { return static_cast<int>(a) <= static_cast<int>(b) ? a : b; }

// The candidate (not the harness) failed, and the outcome it earns: thrown
// wherever its code runs or is served (the contestant, the referee's client
// of it, the worker) and turned into a record at the plugin boundary.
struct CandidateFailure {
  Outcome outcome;
  std::string reason;
};

// Process exit codes of `pkb` (see --help).
inline constexpr int kExitAllCorrect = 0;
inline constexpr int kExitSomeNotCorrect = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitHarnessError = 3;

}  // namespace pkb
