// `pkb golden DIR`: replay recorded inputs through the C++ references and
// compare with the recorded outputs (DESIGN.md §8): every recorded file, each
// (world size, trial) set in one launch at the world size it was recorded at.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "common/build_info.h"
#include "common/golden_fixture.h"
#include "common/outcome.h"
#include "common/results.h"
#include "common/topology_io.h"
#include "driver/commands.h"
#include "driver/evaluation.h"
#include "driver/gpu_placement.h"
#include "driver/problem_catalog.h"
#include "driver/report.h"

namespace pkb {

namespace {

// The fixture folder of a problem: <dir>/<id>_<slug> (or <dir>/<NN>_<slug>).
std::string fixture_dir(const std::string& dir, const ProblemInfo& p) {
  for (const auto& stem : {std::to_string(p.spec.id) + "_" + p.spec.slug, p.folder_name()}) {
    struct stat st;
    std::string d = dir + "/" + stem;
    if (stat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return d;
  }
  return "";
}

}  // namespace

int cmd_golden(const GoldenOptions& o) {
  PKB_CHECK(o.device == "cpu" || o.device == "cuda", "--device must be cpu or cuda");
  ProblemCatalog catalog = ProblemCatalog::discover(build_dir());
  std::vector<int> ids = catalog.select(o.problems);
  std::unique_ptr<JsonlWriter> writer;
  if (!o.out.empty()) writer = std::make_unique<JsonlWriter>(o.out, false);
  std::string work = o.work_dir.empty() ? "/tmp/pkb-golden-" + std::to_string(getpid()) : o.work_dir;
  mkdir(work.c_str(), 0755);
  Topology topo = o.device == "cpu" ? cpu_topology() : Topology{};

  std::ostringstream table;
  table << "| problem | rank | fixture | result | max abs err | mismatches | reason |\n";
  table << "|---|---:|---|---|---:|---:|---|\n";
  auto clean = [](std::string reason) {
    for (auto& c : reason)
      if (c == '\n' || c == '|') c = ' ';
    return reason.substr(0, 200);
  };
  const int gpus = o.device == "cuda" ? visible_gpus() : 0;
  if (o.device != "cuda") PKB_CHECK(o.ranks_per_gpu == 0, "--ranks-per-gpu applies to --device cuda only");
  int replayed = 0, matched = 0, missing = 0;
  bool harness_error = false, warned_shared = false;
  for (int id : ids) {
    const ProblemInfo& p = catalog.by_id(id);
    std::string dir = fixture_dir(o.dir, p);
    std::vector<GoldenSet> sets = dir.empty() ? std::vector<GoldenSet>{} : golden_sets(dir);
    if (sets.empty()) {
      ++missing;
      table << "| " << p.folder_name() << " | | | no fixture | | | |\n";
      continue;
    }
    if (o.device == "cpu" && !p.spec.runs_on_cpu) {
      table << "| " << p.folder_name() << " | | | skipped | | | cannot run on CPU: " << p.spec.cpu_skip_reason << " |\n";
      continue;
    }
    for (const GoldenSet& set : sets) {
      const std::string stem = "w" + std::to_string(set.world) + "_t" + std::to_string(set.trial);
      if (!set.problem.empty()) {
        // An incomplete or inconsistent recording is the fixture's fault: reported, not replayed.
        harness_error = true;
        table << "| " << p.folder_name() << " | | " << stem << " | bad fixture | | | " << clean(set.problem) << " |\n";
        std::fprintf(stderr, "%s %s: bad fixture: %s\n", p.folder_name().c_str(), stem.c_str(), set.problem.c_str());
        continue;
      }
      EvalRequest req;
      req.world = set.world;
      req.timeout_s = o.timeout_s;
      req.eval_dir = work + "/" + p.folder_name() + "_" + stem;
      req.job = {{"mode", "golden"},       {"problem_lib", p.lib_path}, {"device", o.device},
                 {"golden_files", set.files}, {"topology", to_json(topo)},
                 {"recorded_on", o.recorded_on}};
      bool shared = false;
      if (o.device == "cuda") {
        GpuPlacement pl = place_ranks(set.world, gpus, o.ranks_per_gpu);
        if (!pl.warning.empty() && !warned_shared) std::fprintf(stderr, "%s\n", pl.warning.c_str());
        warned_shared |= !pl.warning.empty();
        add_placement(req.job, pl);
        shared = pl.shared;
      }
      EvalResult e = run_evaluation(req);
      for (int r = 0; r < set.world; ++r) {
        const Json& rj = e.ranks[r];
        std::string outcome = rj.value("outcome", outcome_name(e.outcome));
        std::string reason = rj.contains("outcome") ? rj.value("reason", "") : e.reason;
        double max_abs = 0;
        int64_t mism = 0;
        if (rj.contains("compare"))
          for (const auto& d : rj["compare"]["outputs"]) {
            max_abs = std::max(max_abs, d.value("max_abs_err", 0.0));
            mism += d.value("mismatches", int64_t{0});
          }
        bool ok = outcome == "correct";
        ++replayed;
        matched += ok;
        harness_error |= outcome == "harness_error";
        std::string file = golden_file_name(set.world, r, set.trial);
        char err[32];
        std::snprintf(err, sizeof(err), "%.3g", max_abs);
        table << "| " << p.folder_name() << " | " << r << " | " << file << " | " << (ok ? "match" : outcome)
              << " | " << err << " | " << mism << " | " << clean(reason) << " |\n";
        std::fprintf(stderr, "%s %s rank %d: %s\n", p.folder_name().c_str(), stem.c_str(), r,
                     ok ? "match" : (outcome + ": " + reason).c_str());
        if (writer) {
          Json rec = {{"schema_version", kResultSchemaVersion},
                      {"kind", "golden"},
                      {"problem_id", p.spec.id},
                      {"slug", p.spec.slug},
                      {"world_size", set.world},
                      {"trial", set.trial},
                      {"rank", r},
                      {"device", o.device},
                      {"recorded_on", o.recorded_on},
                      {"shared_gpu", shared},
                      {"fixture", set.files[r]},
                      {"outcome", ok ? "match" : outcome},
                      {"reason", reason},
                      {"compare", rj.value("compare", Json::object())},
                      {"git_sha", git_sha()},
                      {"toolchain", toolchain_json()},
                      {"finished_at", utc_timestamp()}};
          writer->append(rec);
        }
      }
    }
  }
  std::printf("%s\n%d of %d replayed fixture files match", table.str().c_str(), matched, replayed);
  if (missing) std::printf("; %d selected problem(s) have no fixture", missing);
  std::printf("\n");
  if (harness_error) return kExitHarnessError;
  return replayed > 0 && matched == replayed ? kExitAllCorrect : kExitSomeNotCorrect;
}

}  // namespace pkb
