#include "driver/problem_catalog.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>

#include "common/build_info.h"
#include "common/plugin_loader.h"
#include "common/results.h"

namespace pkb {

std::string ProblemInfo::folder_name() const {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%02d_", spec.id);
  return buf + spec.slug;
}

ProblemCatalog ProblemCatalog::discover(const std::string& build_dir) {
  ProblemCatalog c;
  std::string sources = source_dir();
  std::string dir = build_dir + "/problems";
  DIR* d = opendir(dir.c_str());
  PKB_CHECK(d != nullptr, "no problem plugins in '", dir, "' (build pkb first)");
  std::vector<std::string> libs;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("pkb_problem_", 0) == 0 && n.size() > 3 && n.substr(n.size() - 3) == ".so") libs.push_back(n);
  }
  closedir(d);
  std::sort(libs.begin(), libs.end());
  for (const auto& n : libs) {
    ProblemInfo p;
    p.lib_path = dir + "/" + n;
    auto loaded = load_problem_plugin(p.lib_path);
    p.problem = loaded.problem;
    p.memory_estimate = loaded.memory_estimate;
    p.spec = p.problem->spec();
    p.source_dir = sources.empty() ? "" : sources + "/problems/" + p.folder_name();
    c.problems_.push_back(std::move(p));
  }
  std::sort(c.problems_.begin(), c.problems_.end(),
            [](const ProblemInfo& a, const ProblemInfo& b) { return a.spec.id < b.spec.id; });
  return c;
}

const ProblemInfo& ProblemCatalog::by_id(int id) const {
  for (const auto& p : problems_)
    if (p.spec.id == id) return p;
  PKB_CHECK(false, "no problem with id ", id);
}

std::vector<ProblemName> ProblemCatalog::names() const {
  std::vector<ProblemName> out;
  for (const auto& p : problems_) out.push_back({p.spec.id, p.spec.slug});
  return out;
}

}  // namespace pkb
