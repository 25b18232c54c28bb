#include "driver/plan.h"

#include <dirent.h>

#include <algorithm>
#include <map>

#include "common/files.h"

namespace pkb {

namespace {

// In order of preference when a sample exists under several names; .md and
// .txt are raw model responses (see response_extract.h).
std::vector<std::string> extensions(const std::string& device) {
  return device == "cpu" ? std::vector<std::string>{".cpp", ".md", ".txt"}
                         : std::vector<std::string>{".cu", ".cpp", ".md", ".txt"};
}

}  // namespace

std::vector<std::pair<int, std::string>> find_candidates(const std::string& dir, const ProblemInfo& p,
                                                         const std::string& device) {
  std::map<int, std::string> found;
  std::vector<std::string> stems = {p.folder_name(), std::to_string(p.spec.id) + "_" + p.spec.slug};
  for (const auto& stem : stems) {
    for (const auto& ext : extensions(device)) {
      if (!found.count(0) && is_regular_file(dir + "/" + stem + ext)) found[0] = dir + "/" + stem + ext;
    }
    std::string sub = dir + "/" + stem;
    if (!is_directory(sub)) continue;
    DIR* d = opendir(sub.c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("sample_", 0) != 0) continue;
      size_t dot = n.rfind('.');
      if (dot == std::string::npos) continue;
      std::string ext = n.substr(dot), num = n.substr(7, dot - 7);
      auto exts = extensions(device);
      if (std::find(exts.begin(), exts.end(), ext) == exts.end()) continue;
      const std::string kResponse = ".response";  // pkb generate's raw reply (see plan.h)
      if (ext == ".md" && num.size() > kResponse.size() && num.compare(num.size() - kResponse.size(), kResponse.size(), kResponse) == 0)
        num.resize(num.size() - kResponse.size());
      if (num.empty() || !std::all_of(num.begin(), num.end(), ::isdigit)) continue;
      int k = std::stoi(num);
      // Prefer the earlier extension when a sample exists twice, and any
      // other file of a sample to its .response.md.
      auto rank_of = [&](const std::string& path) {
        const bool response = path.size() > 12 && path.compare(path.size() - 12, 12, ".response.md") == 0;
        return (std::find(exts.begin(), exts.end(), path.substr(path.rfind('.'))) - exts.begin()) +
               (response ? static_cast<long>(exts.size()) : 0);
      };
      if (!found.count(k) || rank_of(sub + "/" + n) < rank_of(found[k])) found[k] = sub + "/" + n;
    }
    closedir(d);
  }
  return {found.begin(), found.end()};
}

PlanItem plan_item(const ProblemInfo& p, const std::string& source, int sample, const std::string& device,
                   int world) {
  std::string skip;
  if (device == "cpu" && !p.spec.runs_on_cpu) skip = "cannot run on CPU: " + p.spec.cpu_skip_reason;
  std::string why = p.problem->check_world(world);
  if (skip.empty() && !why.empty()) skip = "world size " + std::to_string(world) + " not allowed: " + why;
  return {&p, source, sample, skip};
}

std::vector<PlanItem> make_plan(const ProblemCatalog& catalog, const std::vector<int>& ids,
                                const std::string& solutions, const std::string& device, int world) {
  std::vector<PlanItem> plan;
  for (int id : ids) {
    const ProblemInfo& p = catalog.by_id(id);
    if (solutions == "reference") {
      plan.push_back(plan_item(p, "", 0, device, world));
      continue;
    }
    auto cands = find_candidates(solutions, p, device);
    for (const auto& [k, path] : cands) plan.push_back(plan_item(p, path, k, device, world));
  }
  return plan;
}

}  // namespace pkb
