// `pkb list` and `pkb show ID`.
#include <cstdio>

#include <map>
#include <tuple>

#include "common/build_info.h"
#include "common/files.h"
#include "common/memory_record.h"
#include "common/outcome.h"
#include "driver/commands.h"
#include "driver/problem_catalog.h"

namespace pkb {

int cmd_list() {
  ProblemCatalog catalog = ProblemCatalog::discover(build_dir());
  std::printf("| id | problem | category | world size | cpu |\n|---:|---|---|---|---|\n");
  for (const auto& p : catalog.all())
    std::printf("| %d | %s | %s | %s | %s |\n", p.spec.id, p.spec.slug.c_str(), p.spec.category.c_str(),
                p.spec.world_rule.c_str(), p.spec.runs_on_cpu ? "yes" : "no");
  std::printf("\n%zu problems\n", catalog.all().size());
  return kExitAllCorrect;
}

int cmd_list_memory(const std::vector<std::string>& results) {
  ProblemCatalog catalog = ProblemCatalog::discover(build_dir());
  // Measured: (device, world, shape) -> problem id -> the largest rank peak.
  using Setup = std::tuple<std::string, int, std::string>;
  std::map<Setup, std::map<int, int64_t>> measured;
  for (const auto& path : results)
    for (const auto& r : read_jsonl(path)) {
      const bool cuda = r.value("device", std::string()) == "cuda";
      int64_t peak = cuda ? record_device_peak_bytes(r) : record_host_peak_bytes(r);
      if (peak <= 0) continue;
      Json shape = r.value("base_shape", Json::array());
      std::string sh = shape.size() == 2 ? shape[0].dump() + "x" + shape[1].dump() : "?";
      int64_t& v = measured[{r.value("device", std::string()), r.value("world_size", 0), sh}][r.value("problem_id", 0)];
      v = std::max(v, peak);
    }
  auto cell = [](int64_t b) { return b > 0 ? format_bytes(b) : std::string(); };
  std::printf("| id | problem | declared cpu W=2 | declared cpu W=4 | declared cuda W=1 |");
  for (const auto& [setup, _] : measured)
    std::printf(" measured %s W=%d %s |", std::get<0>(setup).c_str(), std::get<1>(setup), std::get<2>(setup).c_str());
  std::printf("\n|---:|---|---:|---:|---:|");
  for (size_t i = 0; i < measured.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const auto& p : catalog.all()) {
    auto declared = [&](int w, int64_t m, int64_t n, bool cuda) {
      return p.problem->check_world(w).empty() ? cell(p.memory_estimate_bytes(w, m, n, cuda)) : std::string("n/a");
    };
    std::printf("| %d | %s | %s | %s | %s |", p.spec.id, p.spec.slug.c_str(), declared(2, 128, 128, false).c_str(),
                declared(4, 128, 128, false).c_str(), declared(1, 1024, 1024, true).c_str());
    for (const auto& [setup, by_id] : measured) {
      auto it = by_id.find(p.spec.id);
      std::printf(" %s |", it == by_id.end() ? "" : format_bytes(it->second).c_str());
    }
    std::printf("\n");
  }
  std::printf("\nper rank: resident set on cpu, the caching allocator's reserved peak on cuda (README: Memory)\n");
  return kExitAllCorrect;
}

int cmd_show(const std::string& which) {
  ProblemCatalog catalog = ProblemCatalog::discover(build_dir());
  std::vector<int> ids = catalog.select(which);
  for (int id : ids) {
    const ProblemInfo& p = catalog.by_id(id);
    const ProblemSpec& s = p.spec;
    std::printf("%s: %s\n  category: %s\n  origin: %s\n  world size: %s\n  tolerance: atol %g, rtol %g\n"
                "  cpu: %s\n  plugin: %s\n",
                p.folder_name().c_str(), s.title.c_str(), s.category.c_str(), s.origin.c_str(),
                s.world_rule.c_str(), s.tolerance.atol, s.tolerance.rtol,
                s.runs_on_cpu ? "yes" : ("no (" + s.cpu_skip_reason + ")").c_str(), p.lib_path.c_str());
    if (std::optional<std::string> readme = read_if_present(p.source_dir + "/README.md")) {
      std::printf("\n%s\n", readme->c_str());
    }
  }
  return kExitAllCorrect;
}

}  // namespace pkb
