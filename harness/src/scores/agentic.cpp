#include "scores/agentic.h"

#include <algorithm>
#include <map>

namespace pkb {

namespace {

bool has_step(const Json& r) { return r.contains("step") && r["step"].is_number_integer(); }

// The trajectory a step record belongs to: its record key without the step.
std::string trajectory_key(const Json& r) {
  return r.value("run_name", std::string()) + "|" + r.value("solutions", std::string("?")) + "|" +
         std::to_string(r.value("problem_id", 0)) + "|" + std::to_string(r.value("sample", 0)) + "|" +
         std::to_string(r.value("world_size", 0)) + "|" + r.value("device", std::string("?"));
}

double counted_speedup(const Json& r, const ScoreSettings& settings) {
  if (!r.contains("speedup") || !r["speedup"].is_number()) return 0;
  if (!settings.mixed_speed && !speed_is_measured(r)) return 0;
  return r["speedup"].get<double>();
}

// Best of a trajectory's steps: correct and fastest; else the last step that
// is not a harness error; else the last step.
const Json* best_step(const std::vector<const Json*>& steps, const ScoreSettings& settings) {
  const Json* best = nullptr;
  for (const Json* r : steps) {
    if (r->value("outcome", std::string()) != "correct") continue;
    if (!best || counted_speedup(*r, settings) > counted_speedup(*best, settings)) best = r;
  }
  if (best) return best;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if ((*it)->value("outcome", std::string()) != "harness_error") return *it;
  return steps.empty() ? nullptr : steps.back();
}

}  // namespace

std::vector<Json> collapse_trajectories(const std::vector<Json>& records, const ScoreSettings& settings,
                                        int max_step) {
  std::vector<Json> out;
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Json*>> trajectories;
  for (const Json& r : records) {
    if (!has_step(r)) {
      out.push_back(r);
      continue;
    }
    if (max_step > 0 && r["step"].get<int>() > max_step) continue;
    std::string key = trajectory_key(r);
    if (!trajectories.count(key)) order.push_back(key);
    trajectories[key].push_back(&r);
  }
  for (const auto& key : order) {
    auto& steps = trajectories[key];
    std::stable_sort(steps.begin(), steps.end(),
                     [](const Json* a, const Json* b) { return (*a)["step"].get<int>() < (*b)["step"].get<int>(); });
    if (const Json* b = best_step(steps, settings)) out.push_back(*b);
  }
  return out;
}

Json score_step_budgets(const std::vector<Json>& records, const std::string& model, const ScoreSettings& settings) {
  std::vector<Json> mine;
  int budget = 0;
  for (const Json& r : records) {
    if (!has_step(r) || r.value("run_name", std::string()) != model) continue;
    if (r.value("kind", std::string("evaluation")) != "evaluation") continue;
    budget = std::max(budget, r["step"].get<int>());
    if (r.contains("agent") && r["agent"].contains("steps")) budget = std::max(budget, r["agent"].value("steps", 0));
    mine.push_back(r);
  }
  if (mine.empty()) return nullptr;
  Json ag = Json::object();
  ag["max_steps"] = budget;
  // First correct step of each trajectory.
  std::map<std::string, int> first_correct;
  std::map<std::string, bool> seen;
  for (const Json& r : mine) {
    const std::string key = trajectory_key(r);
    seen[key] = true;
    if (r.value("outcome", std::string()) == "correct") {
      int s = r["step"].get<int>();
      auto it = first_correct.find(key);
      if (it == first_correct.end() || s < it->second) first_correct[key] = s;
    }
  }
  ag["trajectories"] = seen.size();
  Json hist = Json::object();
  for (int s = 1; s <= budget; ++s) {
    int n = 0;
    for (const auto& [k, v] : first_correct) n += v == s;
    hist[std::to_string(s)] = n;
  }
  ag["first_correct_at_step"] = hist;
  ag["never_correct"] = seen.size() - first_correct.size();
  const int curve_k = *std::min_element(settings.k.begin(), settings.k.end());
  Json by = Json::array(), curve = Json::array();
  for (int s = 1; s <= budget; ++s) {
    std::vector<Json> at = collapse_trajectories(mine, settings, s);
    for (Json& r : at) r.erase("step");  // one sample per trajectory now
    const Json m = score_models(at, settings, nullptr);
    if (!m.contains(model)) continue;
    const Json& o = m[model]["overall"];
    Json row = Json::object();
    row["steps"] = s;
    for (int k : settings.k) row[pass_key(k)] = o[pass_key(k)];
    for (int k : settings.k)
      for (double p : settings.p) row[fast_key(p, k)] = o[fast_key(p, k)];
    row["counts"] = o["counts"];
    row["correct_samples"] = o["correct_samples"];
    row["samples"] = o["samples"];
    by.push_back(row);
    curve.push_back(Json::array({s, o[pass_key(curve_k)]}));
  }
  ag["by_steps"] = by;
  ag["step_curve_k"] = curve_k;
  ag["step_curve"] = curve;
  return ag;
}

}  // namespace pkb
