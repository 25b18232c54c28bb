// `pkb worker JOB.json` with job mode "calibrate": one rank of `pkb calibrate`
// (driver/calibrate_command.cpp), one GPU per rank. Measures this GPU (HBM,
// bf16 GEMM, kernel launch latency) and, with peers, NVLink and the cross-GPU
// barrier through pkb's symmetric buffers; writes RESULT_DIR/rank_<r>.json
// with "outcome" and "calibration" (the format make_calibrated_topology reads,
// common/calibration.h).
#pragma once

#include "common/results.h"

namespace pkb {

// Returns the worker's exit code (common/exit_codes.h).
int calibrate_worker(const Json& job, int rank, int world);

}  // namespace pkb
