#include "scores/scoring.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <pkb/check.h>

#include "common/build_info.h"
#include "common/outcome.h"
#include "scores/agentic.h"
#include "scores/problem_index.h"

namespace pkb {

double unbiased_pass_at_k(int n, int c, int k) {
  PKB_CHECK(n >= 1 && c >= 0 && c <= n && k >= 1 && k <= n, "pass@k needs 0 <= c <= n and 1 <= k <= n (n=", n,
            ", c=", c, ", k=", k, ")");
  if (n - c < k) return 1.0;
  double all_fail = 1.0;
  for (int i = n - c + 1; i <= n; ++i) all_fail *= 1.0 - static_cast<double>(k) / i;
  return 1.0 - all_fail;
}

std::string format_p(double p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", p);
  return buf;
}

std::string pass_key(int k) { return "pass@" + std::to_string(k); }
std::string fast_key(double p, int k) { return "fast_" + format_p(p) + "@" + std::to_string(k); }

namespace {

// The usable samples of one model on one problem.
struct ProblemSamples {
  int n = 0;                     // samples other than harness_error
  int correct = 0;
  std::vector<double> speedups;  // of the correct samples that were timed
  int unmeasured = 0;            // correct samples whose speedups were left out (ScoreSettings::mixed_speed)
  std::map<std::string, int> outcomes;
  int harness_errors = 0;
};

struct ModelRecords {
  std::map<int, ProblemSamples> problems;  // by problem id
  std::set<std::string> keys;
};

// The estimator for one problem, with k clamped to the samples there are.
// `clamped` collects, per k, the problems where that happened.
using Clamped = std::map<int, std::set<int>>;
double problem_estimate(const ProblemSamples& s, int c, int k, Clamped* clamped, int id) {
  if (s.n == 0) return 0.0;  // missing, or only harness errors: a failure
  if (k > s.n) {
    (*clamped)[k].insert(id);
    k = s.n;
  }
  return unbiased_pass_at_k(s.n, c, k);
}

int count_faster(const ProblemSamples& s, double p) {
  // Strictly faster: a speedup of exactly p does not count as fast_p.
  return static_cast<int>(std::count_if(s.speedups.begin(), s.speedups.end(), [p](double x) { return x > p; }));
}

Json outcome_counts_zeroed() {
  Json o = Json::object();
  for (int i = static_cast<int>(Outcome::kCompileError); i <= static_cast<int>(Outcome::kCorrect); ++i) {
    o[outcome_name(static_cast<Outcome>(i))] = 0;
  }
  return o;
}

// Scores over one set of problems (a category, or all of them).
Json score_group(const ModelRecords& m, const std::vector<const ProblemEntry*>& group, const ScoreSettings& settings,
                 Clamped* clamped) {
  Json out = Json::object();
  out["problems"] = group.size();
  std::map<std::string, double> sums;
  Json outcomes = outcome_counts_zeroed();
  int samples = 0, correct = 0, harness_errors = 0, missing = 0, timed = 0, unmeasured = 0;
  double log_sum = 0;
  static const ProblemSamples kNone;
  for (const ProblemEntry* e : group) {
    auto it = m.problems.find(e->id);
    const ProblemSamples& s = it == m.problems.end() ? kNone : it->second;
    if (s.n == 0) ++missing;
    samples += s.n;
    correct += s.correct;
    harness_errors += s.harness_errors;
    // agent_error (pkb agent) is not among the zeroed ones: it appears only where it happened.
    for (const auto& [name, count] : s.outcomes) outcomes[name] = outcomes.value(name, 0) + count;
    for (double x : s.speedups) {
      log_sum += std::log(x);
      ++timed;
    }
    unmeasured += s.unmeasured;
    for (int k : settings.k) {
      sums[pass_key(k)] += problem_estimate(s, s.correct, k, clamped, e->id);
      for (double p : settings.p) sums[fast_key(p, k)] += problem_estimate(s, count_faster(s, p), k, clamped, e->id);
    }
  }
  const double n_problems = group.empty() ? 1.0 : static_cast<double>(group.size());
  Json counts = Json::object();
  for (int k : settings.k) {
    out[pass_key(k)] = sums[pass_key(k)] / n_problems;
    counts[pass_key(k)] = sums[pass_key(k)];
  }
  for (int k : settings.k) {
    for (double p : settings.p) {
      out[fast_key(p, k)] = sums[fast_key(p, k)] / n_problems;
      counts[fast_key(p, k)] = sums[fast_key(p, k)];
    }
  }
  // Counts are expected problems solved: the published table's numbers.
  out["counts"] = counts;
  out["samples"] = samples;
  out["correct_samples"] = correct;
  out["timed_correct_samples"] = timed;
  out["unmeasured_speed_samples"] = unmeasured;
  out["missing_problems"] = missing;
  out["geomean_speedup"] = timed > 0 ? Json(std::exp(log_sum / timed)) : Json(nullptr);
  out["outcomes"] = outcomes;
  out["harness_errors"] = harness_errors;
  return out;
}

void check_settings(const ScoreSettings& settings) {
  PKB_CHECK(!settings.k.empty(), "--k needs at least one value");
  PKB_CHECK(!settings.p.empty(), "--p needs at least one value");
  for (int k : settings.k) PKB_CHECK(k >= 1, "k must be at least 1, got ", k);
  for (double p : settings.p) PKB_CHECK(std::isfinite(p) && p >= 0, "p must be a finite number >= 0, got ", p);
}

}  // namespace

Json score_models(const std::vector<Json>& all_records, const ScoreSettings& settings,
                  std::vector<std::string>* warnings) {
  check_settings(settings);
  // pkb agent's step records count once per trajectory (NOTE [step budgets]).
  const std::vector<Json> records = collapse_trajectories(all_records, settings);
  std::vector<std::string> order;  // models in order of first appearance
  std::map<std::string, ModelRecords> models;
  int outside = 0, unmeasured = 0;
  for (const Json& r : records) {
    if (r.value("kind", std::string("evaluation")) != "evaluation") continue;
    PKB_CHECK(r.value("schema_version", 0) == kResultSchemaVersion, "record has schema_version ",
              r.value("schema_version", 0), ", this pkb reads ", kResultSchemaVersion, ": ", r.dump());
    PKB_CHECK(r.contains("run_name") && r["run_name"].is_string(), "record without run_name: ", r.dump());
    PKB_CHECK(r.contains("problem_id") && r["problem_id"].is_number_integer(), "record without problem_id: ",
              r.dump());
    const std::string name = r["run_name"].get<std::string>();
    const int id = r["problem_id"].get<int>();
    if (find_problem(id) == nullptr) {
      ++outside;
      continue;
    }
    const Outcome outcome = outcome_from_name(r.value("outcome", std::string("?")));
    if (!models.count(name)) order.push_back(name);
    ModelRecords& m = models[name];
    // The same evaluation twice would count twice: shards must be merged first.
    PKB_CHECK(m.keys.insert(record_key(r)).second, "model '", name, "' has the evaluation ", record_key(r),
              " more than once (pkb merge rejects such duplicates)");
    ProblemSamples& s = m.problems[id];
    if (outcome == Outcome::kHarnessError) {
      ++s.harness_errors;
      continue;
    }
    ++s.n;
    ++s.outcomes[outcome_name(outcome)];
    if (outcome == Outcome::kCorrect) {
      ++s.correct;
      if (r.contains("speedup") && r["speedup"].is_number() && r["speedup"].get<double>() > 0) {
        if (settings.mixed_speed || speed_is_measured(r)) {
          s.speedups.push_back(r["speedup"].get<double>());
        } else {
          ++s.unmeasured;
          ++unmeasured;
        }
      }
    }
  }
  if (unmeasured > 0 && warnings) {
    warnings->push_back(std::to_string(unmeasured) +
                        " correct sample(s) were timed on CPU or with ranks sharing a GPU: their speedups do not "
                        "measure NVLink and are left out of fast_p and the geomean (--mixed-speed counts them)");
  }
  if (outside > 0 && warnings) {
    warnings->push_back(std::to_string(outside) + " record(s) name a problem outside the benchmark's 87; ignored");
  }

  std::vector<const ProblemEntry*> all;
  for (const auto& e : problem_index()) all.push_back(&e);
  Json out = Json::object();
  for (const std::string& name : order) {
    const ModelRecords& m = models[name];
    Clamped clamped;
    Json model = Json::object();
    model["overall"] = score_group(m, all, settings, &clamped);
    Json categories = Json::object();
    for (const std::string& cat : category_order()) {
      std::vector<const ProblemEntry*> group;
      for (const auto* e : all) {
        if (cat == e->category) group.push_back(e);
      }
      categories[cat] = score_group(m, group, settings, &clamped);
    }
    model["categories"] = categories;
    model["outcomes"] = model["overall"]["outcomes"];
    model["harness_errors"] = model["overall"]["harness_errors"];
    model["geomean_speedup"] = model["overall"]["geomean_speedup"];
    // The curve at the smallest k: the usual fast_p plot.
    const int curve_k = *std::min_element(settings.k.begin(), settings.k.end());
    Json curve = Json::array();
    for (double p : settings.p) curve.push_back(Json::array({p, model["overall"][fast_key(p, curve_k)]}));
    model["fast_p_curve_k"] = curve_k;
    model["fast_p_curve"] = curve;
    Json agentic = score_step_budgets(all_records, name, settings);
    if (!agentic.is_null()) model["agentic"] = agentic;
    out[name] = model;
    if (warnings) {
      for (const auto& [k, ids] : clamped) {
        warnings->push_back("model '" + name + "': k=" + std::to_string(k) + " exceeds the samples of " +
                            std::to_string(ids.size()) + " problem(s) (first: " + std::to_string(*ids.begin()) +
                            "); clamped to n there");
      }
    }
  }
  return out;
}

Json make_scores(const std::vector<Json>& records, const std::vector<std::string>& inputs,
                 const ScoreSettings& settings, std::vector<std::string>* warnings) {
  Json s = Json::object();
  s["schema_version"] = kScoresSchemaVersion;
  s["kind"] = "scores";
  s["git_sha"] = git_sha();
  s["created_at"] = utc_timestamp();
  s["inputs"] = inputs;
  s["problems"] = kProblemCount;
  s["k"] = settings.k;
  s["p"] = settings.p;
  s["mixed_speed"] = settings.mixed_speed;
  s["models"] = score_models(records, settings, warnings);
  return s;
}

}  // namespace pkb
