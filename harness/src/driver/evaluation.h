// One evaluation: start the ranks, watch them, merge their per-rank results
// into one outcome (the earliest in the taxonomy across ranks wins; a rank
// that left no result is judged by how its process ended).
#pragma once

#include <string>
#include <vector>

#include "common/outcome.h"
#include "common/results.h"
#include "driver/containment.h"

namespace pkb {

struct EvalRequest {
  Json job;  // the worker's job; result_dir is set here
  int world = 2;
  std::string eval_dir;  // job.json, rank logs and results go here
  double timeout_s = 300;
  double phase_floor_s = 30;  // NOTE [phase deadlines]
  WorkerUser worker_user;     // uid -1: workers keep the driver's user
  int64_t memory_limit_bytes = 0;  // > 0: the ranks' cgroup limit, all ranks together (NOTE [OOM kills])
};

struct EvalResult {
  Outcome outcome = Outcome::kHarnessError;
  std::string reason;
  int deciding_rank = -1;
  std::vector<Json> ranks;  // each rank's result (empty object when it left none)
  Json process;             // how each rank's process ended
  Json memory;              // the evaluation's cgroup: peak, limit, OOM kills (NOTE [OOM kills])
  double wall_s = 0;
};

EvalResult run_evaluation(const EvalRequest& req);

// Environment every worker gets. NVLink multicast stays off by policy on the
// lent machines (it can take shared GPUs out of service).
std::vector<std::pair<std::string, std::string>> worker_policy_env();

}  // namespace pkb
