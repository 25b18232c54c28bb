// `pkb list` and `pkb show ID`.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/build_info.h"
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
    std::ifstream f(p.source_dir + "/README.md");
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      std::printf("\n%s\n", ss.str().c_str());
    }
  }
  return kExitAllCorrect;
}

}  // namespace pkb
