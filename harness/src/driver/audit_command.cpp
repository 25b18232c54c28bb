// `pkb audit`: the trivial candidates of worker/audit_candidates.h against
// every selected problem; prints the problems whose checks any of them passes.
// Exit 0 only when none does (1 when some does, 3 on a harness error).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>

#include "common/build_info.h"
#include "common/outcome.h"
#include "common/topology_io.h"
#include "driver/commands.h"
#include "driver/containment.h"
#include "driver/evaluation.h"
#include "driver/gpu_placement.h"
#include "driver/problem_catalog.h"
#include "worker/audit_candidates.h"
#include "common/selection.h"

namespace pkb {

namespace {

const std::vector<std::string>& kKinds = audit_kinds();

}  // namespace

int cmd_audit(const AuditOptions& o) {
  harden_driver();
  PKB_CHECK(o.device == "cpu" || o.device == "cuda", "--device must be cpu or cuda");
  ProblemCatalog catalog = ProblemCatalog::discover(build_dir());
  std::vector<int> ids = catalog.select(o.problems);
  const int world = o.nproc > 0 ? o.nproc : 2;
  auto [m, n] = parse_shape(o.base_shape.empty() ? (o.device == "cuda" ? "1024x1024" : "128x128") : o.base_shape);
  std::string work = o.work_dir.empty() ? "/tmp/pkb-audit-" + std::to_string(getpid()) : o.work_dir;
  mkdir(work.c_str(), 0711);
  const WorkerUser wu = worker_user(resolve_worker_user(o.worker_user, o.device));
  Topology topo = o.device == "cpu" ? cpu_topology() : Topology{};
  const GpuPlacement placement = placement_for(o.device, world, o.ranks_per_gpu);
  std::vector<std::string> passed, errors;
  int k = 0;
  size_t audited = 0;
  std::printf("| problem | %s |\n|---|", [&] {
    std::string h;
    for (size_t i = 0; i < kKinds.size(); ++i) h += (i ? " | " : "") + kKinds[i];
    return h;
  }().c_str());
  for (size_t i = 0; i < kKinds.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (int id : ids) {
    const ProblemInfo& p = catalog.by_id(id);
    if (o.device == "cpu" && !p.spec.runs_on_cpu) {
      std::fprintf(stderr, "audit: skipped %s (cannot run on CPU)\n", p.folder_name().c_str());
      continue;
    }
    if (!p.problem->check_world(world).empty()) {
      std::fprintf(stderr, "audit: skipped %s (world size %d not allowed)\n", p.folder_name().c_str(), world);
      continue;
    }
    ++audited;
    std::string row = "| " + p.folder_name() + " |";
    std::vector<std::string> passing;
    EvalRequest req;
    req.world = world;
    req.timeout_s = o.timeout_s;
    req.phase_floor_s = o.phase_floor_s;
    req.worker_user = wu;
    req.eval_dir = work + "/" + std::to_string(k++) + "_" + p.folder_name();
    req.job = {{"mode", "audit"},      {"problem_lib", p.lib_path},
               {"candidate", "audit"}, {"device", o.device},
               {"trials", o.trials},   {"integrity_trials", o.integrity_trials},
               {"published_only", o.published_only},
               {"m", m},               {"n", n},
               {"perf", false},        {"topology", to_json(topo)}};
    add_placement(req.job, placement);
    EvalResult e = run_evaluation(req);
    for (const auto& kind : kKinds) {
      // The launch's own failure decides every kind; else the worst rank.
      Outcome worst = e.outcome;
      std::string why = e.reason;
      if (e.outcome == Outcome::kCorrect) {
        for (const auto& rj : e.ranks) {
          if (!rj.contains("audit") || !rj["audit"].contains(kind)) {
            worst = Outcome::kHarnessError;
            why = "no audit result for " + kind;
            break;
          }
          Outcome oo = outcome_from_name(rj["audit"][kind].value("outcome", "harness_error"));
          if (oo != worst && first_of(oo, worst) == oo) {
            worst = oo;
            why = rj["audit"][kind].value("reason", "");
          }
        }
      }
      row += std::string(" ") + outcome_name(worst) + " |";
      if (worst == Outcome::kCorrect) passing.push_back(kind);
      if (worst == Outcome::kHarnessError) errors.push_back(p.folder_name() + " " + kind + ": " + why);
    }
    std::printf("%s\n", row.c_str());
    std::fflush(stdout);
    if (!passing.empty()) {
      std::string s = p.folder_name() + ":";
      for (const auto& x : passing) s += " " + x;
      passed.push_back(s);
    }
  }
  std::printf("\n");
  for (const auto& e : errors) std::printf("harness error: %s\n", e.c_str());
  if (!errors.empty()) {
    // An evaluation that did not run proves nothing: never report a clean audit over it.
    std::printf("audit: incomplete: %zu evaluation(s) ended in a harness error (above)\n", errors.size());
  }
  if (passed.empty()) {
    if (errors.empty()) std::printf("audit: no trivial candidate passes any of the %zu problem(s) audited (%zu skipped)\n",
                                     audited, ids.size() - audited);
  } else {
    std::printf("audit: trivial candidates pass %zu problem(s):\n", passed.size());
    for (const auto& s : passed) std::printf("  %s\n", s.c_str());
  }
  if (!errors.empty()) return kExitHarnessError;
  return passed.empty() ? kExitAllCorrect : kExitSomeNotCorrect;
}

}  // namespace pkb
