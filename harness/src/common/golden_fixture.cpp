#include "common/golden_fixture.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "common/safetensors.h"
#include "pkb/check.h"

namespace pkb {

namespace {

using OJson = nlohmann::ordered_json;

c10::ScalarType dtype_from_name(const std::string& s) {
  static const std::map<std::string, c10::ScalarType> kNames = {
      {"bfloat16", at::kBFloat16}, {"float16", at::kHalf}, {"float32", at::kFloat}, {"float64", at::kDouble},
      {"int64", at::kLong},        {"int32", at::kInt},    {"bool", at::kBool},     {"float8_e4m3fn", at::kFloat8_e4m3fn}};
  std::string key = s.rfind("torch.", 0) == 0 ? s.substr(6) : s;
  auto it = kNames.find(key);
  PKB_CHECK(it != kNames.end(), "unknown dtype name '", s, "'");
  return it->second;
}

// Depth-first, in order: containers flatten, leaves become arguments.
void flatten(const OJson& node, const SafetensorsFile& file, const std::string& path, std::vector<Arg>* args,
             std::vector<std::string>* notes) {
  if (node.contains("tensor")) {
    std::string key = node.at("tensor").get<std::string>();
    auto it = file.tensors.find(key);
    PKB_CHECK(it != file.tensors.end(), "fixture lacks tensor '", key, "'");
    args->push_back({key, it->second});
  } else if (node.contains("int")) {
    args->push_back({path, node.at("int").get<int64_t>()});
  } else if (node.contains("float")) {
    args->push_back({path, node.at("float").get<double>()});
  } else if (node.contains("bool")) {
    args->push_back({path, node.at("bool").get<bool>()});
  } else if (node.contains("str")) {
    args->push_back({path, node.at("str").get<std::string>()});
  } else if (node.contains("none")) {
    args->push_back({path, None{}});
  } else if (node.contains("dtype")) {
    args->push_back({path, dtype_from_name(node.at("dtype").get<std::string>())});
  } else if (node.contains("group")) {
    args->push_back({path, GroupRanks{node.at("group").get<std::vector<int64_t>>()}});
  } else if (node.contains("list") || node.contains("tuple")) {
    const auto& items = node.contains("list") ? node.at("list") : node.at("tuple");
    for (size_t i = 0; i < items.size(); ++i) flatten(items[i], file, path + "." + std::to_string(i), args, notes);
  } else if (node.contains("dict")) {
    for (auto& [k, v] : node.at("dict").items()) flatten(v, file, path + "." + k, args, notes);
  } else if (node.contains("module")) {
    for (auto& [k, v] : node.at("state").items()) flatten(v, file, path + "." + k, args, notes);
  } else if (node.contains("dataclass")) {
    for (auto& [k, v] : node.at("fields").items()) flatten(v, file, path + "." + k, args, notes);
  } else {
    PKB_CHECK(false, "unknown fixture structure node at '", path, "': ", node.dump());
  }
}

}  // namespace

std::string golden_file_name(int world, int rank, int trial) {
  return "w" + std::to_string(world) + "_r" + std::to_string(rank) + "_t" + std::to_string(trial) + ".safetensors";
}

GoldenFixture load_golden(const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  auto md = file.metadata.find("pkb");
  PKB_CHECK(md != file.metadata.end(), path, ": no 'pkb' metadata entry");
  OJson meta = OJson::parse(md->second);
  GoldenFixture g;
  g.problem_id = meta.at("problem").get<int>();
  g.world_size = meta.at("world_size").get<int>();
  g.rank = meta.at("rank").get<int>();
  g.trial = meta.value("trial", 0);
  g.m = meta.value("m", 0);
  g.n = meta.value("n", 0);
  std::vector<Arg> args;
  flatten(meta.at("inputs"), file, "input", &args, &g.notes);
  g.inputs = Inputs(std::move(args));
  std::vector<Arg> outs;
  flatten(meta.at("outputs"), file, "output", &outs, &g.notes);
  for (auto& a : outs) {
    if (auto t = std::get_if<at::Tensor>(&a.value)) {
      g.outputs.push_back(*t);
      g.output_names.push_back(a.name);
    } else {
      g.notes.push_back("non-tensor output '" + a.name + "' not compared");
    }
  }
  return g;
}

std::vector<GoldenSet> golden_sets(const std::string& dir) {
  std::map<std::pair<int, int>, GoldenSet> sets;
  std::map<std::pair<int, int>, std::vector<bool>> named;  // a file of that rank exists (usable or not)
  DIR* d = opendir(dir.c_str());
  if (!d) return {};
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    int w = 0, r = 0, t = 0;
    char tail[32] = {0};
    if (std::sscanf(name.c_str(), "w%d_r%d_t%d%31s", &w, &r, &t, tail) != 4 || std::string(tail) != ".safetensors" ||
        name != golden_file_name(w, r, t) || w < 1)
      continue;
    GoldenSet& s = sets[{w, t}];
    s.world = w;
    s.trial = t;
    if (static_cast<int>(s.files.size()) < w) s.files.resize(w);
    auto& seen = named[{w, t}];
    seen.resize(w);
    if (r < w) seen[r] = true;
    std::string path = dir + "/" + name;
    std::string why;
    try {
      auto md = read_safetensors_metadata(path);
      auto it = md.find("pkb");
      PKB_CHECK(it != md.end(), "no 'pkb' metadata entry");
      OJson meta = OJson::parse(it->second);
      int mw = meta.at("world_size").get<int>(), mr = meta.at("rank").get<int>(), mt = meta.value("trial", 0);
      if (mw != w || mr != r || mt != t)
        why = name + " records world " + std::to_string(mw) + ", rank " + std::to_string(mr) + ", trial " +
              std::to_string(mt);
    } catch (const std::exception& e) {
      why = name + ": " + e.what();
    }
    if (r >= w) why = name + ": rank " + std::to_string(r) + " outside world " + std::to_string(w);
    if (!why.empty()) {
      s.problem += (s.problem.empty() ? "" : "; ") + why;
      continue;
    }
    s.files[r] = path;
  }
  std::vector<GoldenSet> out;
  for (auto& [key, s] : sets) {
    for (int r = 0; r < s.world; ++r)
      if (!named[key][r])
        s.problem += (s.problem.empty() ? "" : "; ") + ("no file for rank " + std::to_string(r));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace pkb
