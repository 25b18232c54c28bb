// The evaluation pipeline of `pkb run`, shared with `pkb try` and `pkb agent`
// (driver/run_command.cpp): resolve the settings, build candidates, evaluate
// one plan item into one result record. A second command that evaluates
// candidates goes through these, so its records are `pkb run`'s records.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/calibration.h"
#include "common/results.h"
#include "common/topology_io.h"
#include "driver/candidate_build.h"
#include "driver/containment.h"
#include "driver/gpu_placement.h"
#include "driver/options.h"
#include "driver/plan.h"
#include "driver/report.h"

namespace pkb {

// What a run evaluates with, after defaults (device, world size, shape, ...).
struct RunSettings {
  RunOptions opts;
  std::string device;
  int world = 2;
  int64_t m = 1024, n = 1024;
  int warmup = 500, iters = 100;
  std::string run_name, solutions_label;
  Topology topology;
  CalibratedChoice calibrated;  // roofline.calibrated (NOTE [calibrated roofline])
  std::string work_dir;
  std::string cuobjdump;  // empty: none found (records say "unknown")
  GpuPlacement placement;  // cuda only
  WorkerUser worker_user;  // uid -1: workers keep the driver's user (NOTE [untrusted candidates])
};

// Throws pkb::Error on what the user must fix (device, shape, topology).
RunSettings resolve_settings(const RunOptions& opts, const std::string& sources);
// The fields every record of an item has, before it is evaluated.
Json base_record(const RunSettings& s, const PlanItem& item);
// Builds every distinct candidate source of `plan` (in parallel, cached).
std::map<std::string, BuildResult> build_all(const RunSettings& s, const std::vector<PlanItem>& plan,
                                             Progress& progress);
// One evaluation (W ranks, one launch); `build` is null for the reference.
// `index` names the item's log folder under s.work_dir.
Json evaluate_item(const RunSettings& s, const PlanItem& item, const BuildResult* build, int index);
// evaluate_item, with a driver exception recorded as harness_error.
Json evaluate_or_harness_error(const RunSettings& s, const PlanItem& item, const BuildResult* build, int index);

}  // namespace pkb
