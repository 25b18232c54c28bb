// How a worker process (`pkb worker`, `pkb calibrate`'s ranks) tells the
// driver's launcher how it ended. Here, not in driver/launcher.h, so the
// worker need not include the driver (the layers point one way: NOTE
// [include layers] in tests/check_layers.py).
#pragma once

namespace pkb {

inline constexpr int kWorkerExitOk = 0;                // result file written
inline constexpr int kWorkerExitHarnessError = 3;      // the harness failed (no verdict on the candidate)
inline constexpr int kWorkerExitCandidateFailed = 10;  // result written; peers may be stuck
// Anything else (another code, a signal) is abnormal.

}  // namespace pkb
