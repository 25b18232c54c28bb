// `pkb calibrate`: this machine's achievable rates, measured by worker
// processes (one per GPU, `pkb worker` in mode "calibrate", started through
// the launcher: the driver never touches a GPU), written as a calibrated
// topology file beside the datasheet ones (NOTE [calibrated roofline] in
// common/calibration.h).
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/build_info.h"
#include "common/calibration.h"
#include "common/files.h"
#include "common/outcome.h"
#include "common/topology_detect.h"
#include "driver/commands.h"
#include "driver/evaluation.h"
#include "driver/gpu_placement.h"
#include "pkb/check.h"

namespace pkb {

namespace {

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

}  // namespace

int cmd_calibrate(const CalibrateOptions& o) {
  PKB_CHECK(have_cuda_build(), "this pkb was built without the GPU path (no CUDA toolkit at configure time): "
                               "nothing to calibrate");
  const int visible = visible_gpus();
  PKB_CHECK(visible > 0, "no GPU visible (no /dev/nvidiaN, or CUDA_VISIBLE_DEVICES hides them): nothing to calibrate");
  const int n = o.gpus > 0 ? o.gpus : visible;
  PKB_CHECK(n <= visible, "--gpus ", n, " but only ", visible, " GPU(s) are visible");
  const std::string sources = source_dir();
  DetectedMachine m = detect_machine();
  if (!m.ok) std::fprintf(stderr, "pkb calibrate: NVML: %s; the GPU name comes from the workers\n", m.why_not.c_str());
  const int machine_gpus = m.ok ? static_cast<int>(m.gpus.size()) : visible;

  // The file to write, decided (and refused) before any GPU work when it can be.
  auto path_for = [&](const std::string& gpu, const DatasheetChoice& ds) {
    return !o.out.empty() ? o.out : sources + "/topology/" + calibrated_name(gpu, machine_gpus, ds) + ".json";
  };
  if (m.ok) {
    std::string path = path_for(m.gpus[0], datasheet_for(m.gpus[0], machine_gpus, sources));
    PKB_CHECK(o.force || !file_exists(path), "refusing to overwrite existing file '", path, "' (pass --force)");
  } else {
    PKB_CHECK(o.out.empty() || o.force || !file_exists(o.out), "refusing to overwrite existing file '", o.out,
              "' (pass --force)");
  }

  EvalRequest req;
  req.world = n;
  req.timeout_s = o.timeout_s;
  req.eval_dir = o.work_dir.empty() ? "/tmp/pkb-calibrate-" + std::to_string(getpid()) : o.work_dir;
  req.job = {{"mode", "calibrate"},
             {"device", "cuda"},
             {"peer_access", n < 2 || !m.ok || m.all_pairs_p2p},
             {"warmup", o.warmup},
             {"reps", o.reps}};
  GpuPlacement placement = place_ranks(n, visible, 1);
  add_placement(req.job, placement);
  std::fprintf(stderr, "pkb calibrate: %d GPU(s), one worker each; logs in %s (deadline %.0f s)\n", n,
               req.eval_dir.c_str(), o.timeout_s);
  EvalResult res = run_evaluation(req);
  if (res.outcome != Outcome::kCorrect) {
    std::fprintf(stderr, "pkb calibrate: failed (%s): %s\nlogs: %s (rank_<r>.log, rank_<r>.json)%s\n",
                 outcome_name(res.outcome), res.reason.c_str(), req.eval_dir.c_str(),
                 n > 1 ? "\n(--gpus 1 measures what needs no peer: HBM, GEMM, launch latency)" : "");
    return kExitHarnessError;
  }

  CalibrationInput in;
  for (const auto& rj : res.ranks) in.ranks.push_back(rj.value("calibration", Json::object()));
  std::string worker_gpu = in.ranks.empty() ? "" : in.ranks[0].value("gpu", Json::object()).value("name", "");
  in.gpu = m.ok ? m.gpus[0] : worker_gpu;
  PKB_CHECK(!in.gpu.empty(), "no GPU name from NVML or the workers");
  in.gpus = machine_gpus;
  in.p2p = m.ok ? m.all_pairs_p2p : false;
  in.datasheet = datasheet_for(in.gpu, machine_gpus, sources);
  const std::string path = path_for(in.gpu, in.datasheet);
  std::string base = path.substr(path.rfind('/') + 1);
  in.name = base.size() > 5 && base.substr(base.size() - 5) == ".json" ? base.substr(0, base.size() - 5) : base;

  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  Json gpus = Json::array();
  for (const auto& r : in.ranks) gpus.push_back(r.value("gpu", Json::object()));
  Json& p = in.provenance;
  p["date"] = utc_timestamp();
  p["git_sha"] = git_sha();
  p["host"] = host;
  p["gpus_calibrated"] = n;
  p["gpus"] = gpus;
  p["machine"] = to_json(m);
  p["nvidia_driver"] = first_line("/proc/driver/nvidia/version");
  p["toolchain"] = toolchain_json();
  p["warmup"] = o.warmup;
  p["reps"] = o.reps;
  p["wall_s"] = res.wall_s;
  p["logs"] = req.eval_dir;
  if (m.ok && !worker_gpu.empty() && worker_gpu != in.gpu) p["gpu_name_note"] = "CUDA names the GPU '" + worker_gpu + "'";

  Json t = make_calibrated_topology(in);
  write_file_atomic(path, t.dump(2) + "\n", o.force);
  load_calibrated(path, sources);  // what pkb run --calibrated will read
  std::printf("pkb calibrate: %dx %s calibrated in %.1f s; datasheet: %s\n", n, in.gpu.c_str(), res.wall_s,
              in.datasheet.found ? (in.datasheet.name + (in.datasheet.exact ? "" : " (same GPU, other count)")).c_str()
                                 : "none");
  std::printf("%s", calibration_summary(t).c_str());
  std::printf("wrote %s\n", path.c_str());
  return kExitAllCorrect;
}

}  // namespace pkb
