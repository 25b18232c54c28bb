#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "common/results.h"
#include "pkb/check.h"
#include "scores/problem_index.h"
#include "scores/scoring.h"

namespace pkb {
namespace {

Json record(const std::string& model, int id, int sample, const std::string& outcome,
            std::optional<double> speedup = std::nullopt) {
  Json r = {{"schema_version", kResultSchemaVersion},
            {"kind", "evaluation"},
            {"run_name", model},
            {"solutions", "dir_" + model},
            {"problem_id", id},
            {"slug", find_problem(id)->slug},
            {"category", find_problem(id)->category},
            {"sample", sample},
            {"outcome", outcome},
            {"reason", ""},
            {"world_size", 2},
            {"device", "cuda"}};
  if (speedup) r["speedup"] = *speedup;
  return r;
}

Json score(const std::vector<Json>& records, ScoreSettings settings = {}, std::vector<std::string>* warnings = nullptr) {
  return score_models(records, settings, warnings);
}

// Probability that a uniformly random k-subset of n samples holds a correct
// one, by enumerating the subsets.
double brute_force(int n, int c, int k) {
  int hits = 0, subsets = 0;
  for (unsigned mask = 0; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    ++subsets;
    hits += (mask & ((1u << c) - 1)) != 0;  // samples 0..c-1 are the correct ones
  }
  return static_cast<double>(hits) / subsets;
}

TEST(Scoring, EstimatorMatchesSubsetEnumeration) {
  for (int n = 1; n <= 10; ++n) {
    for (int c = 0; c <= n; ++c) {
      for (int k = 1; k <= n; ++k) {
        EXPECT_NEAR(unbiased_pass_at_k(n, c, k), brute_force(n, c, k), 1e-12) << n << " " << c << " " << k;
      }
    }
  }
}

TEST(Scoring, EstimatorStaysFiniteForLargeN) {
  // C(1000, 500) overflows a double; the product form does not.
  const double v = unbiased_pass_at_k(1000, 3, 500);
  EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(v, 1.0 - (500.0 / 1000) * (499.0 / 999) * (498.0 / 998), 1e-12);
  EXPECT_DOUBLE_EQ(unbiased_pass_at_k(1000, 0, 500), 0.0);
  EXPECT_THROW(unbiased_pass_at_k(3, 4, 1), Error);
  EXPECT_THROW(unbiased_pass_at_k(3, 1, 4), Error);
}

TEST(Scoring, MissingProblemsCountAsFailures) {
  const Json m = score({record("a", 1, 0, "correct", 2.0)}, {{1}, {1}})["a"];
  EXPECT_NEAR(m["overall"]["pass@1"].get<double>(), 1.0 / kProblemCount, 1e-12);
  EXPECT_NEAR(m["overall"]["counts"]["pass@1"].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(m["overall"]["missing_problems"], kProblemCount - 1);
  EXPECT_EQ(m["overall"]["problems"], kProblemCount);
  const Json& cp = m["categories"]["Collective Primitive"];
  EXPECT_EQ(cp["problems"], 8);
  EXPECT_NEAR(cp["pass@1"].get<double>(), 1.0 / 8, 1e-12);
  EXPECT_NEAR(m["categories"]["Tensor Parallel"]["pass@1"].get<double>(), 0.0, 1e-12);
  EXPECT_EQ(m["categories"]["Tensor Parallel"]["problems"], 17);
}

TEST(Scoring, CategoriesCoverTheCatalog) {
  const Json m = score({record("a", 25, 0, "correct")})["a"];
  int total = 0;
  for (const auto& cat : category_order()) total += m["categories"][cat]["problems"].get<int>();
  EXPECT_EQ(total, kProblemCount);
  EXPECT_EQ(m["categories"]["Tensor Parallel"]["correct_samples"], 1);  // 25 is Tensor Parallel
  EXPECT_EQ(m["categories"].size(), 12u);
}

TEST(Scoring, HarnessErrorsAreExcludedAndListedApart) {
  const Json m = score({record("a", 1, 0, "harness_error"), record("a", 1, 1, "correct"),
                        record("a", 2, 0, "harness_error"), record("a", 3, 0, "output_mismatch")},
                       {{1}, {1}})["a"];
  const Json& o = m["overall"];
  // Problem 1: n = 1 (the harness error is not a sample), all correct.
  EXPECT_NEAR(o["counts"]["pass@1"].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(m["harness_errors"], 2);
  EXPECT_FALSE(m["outcomes"].contains("harness_error"));
  EXPECT_EQ(m["outcomes"]["correct"], 1);
  EXPECT_EQ(m["outcomes"]["output_mismatch"], 1);
  EXPECT_EQ(m["outcomes"]["timeout"], 0);
  EXPECT_EQ(o["samples"], 2);
  // Problem 2 had only a harness error: as good as missing.
  EXPECT_EQ(o["missing_problems"], kProblemCount - 2);
}

TEST(Scoring, KIsClampedToTheSamplesWithAWarning) {
  std::vector<std::string> warnings;
  const Json m = score({record("a", 1, 0, "correct"), record("a", 2, 0, "runtime_error")}, {{1, 3}, {1}}, &warnings)["a"];
  EXPECT_NEAR(m["overall"]["counts"]["pass@3"].get<double>(), 1.0, 1e-12);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("k=3"), std::string::npos);
  EXPECT_NE(warnings[0].find("clamped"), std::string::npos);

  warnings.clear();
  score({record("a", 1, 0, "correct"), record("a", 1, 1, "correct"), record("a", 1, 2, "correct")}, {{1, 3}, {1}},
        &warnings);
  EXPECT_TRUE(warnings.empty());
}

TEST(Scoring, PassAtKWithSeveralSamples) {
  // n = 3, c = 1: pass@1 = 1/3, pass@3 = 1.
  const Json m = score({record("a", 1, 0, "correct"), record("a", 1, 1, "timeout"), record("a", 1, 2, "load_error")})["a"];
  EXPECT_NEAR(m["overall"]["counts"]["pass@1"].get<double>(), 1.0 / 3, 1e-12);
  EXPECT_NEAR(m["overall"]["counts"]["pass@3"].get<double>(), 1.0, 1e-12);
}

TEST(Scoring, FastPIsStrictAndNeedsACorrectTimedSample) {
  ScoreSettings s{{1}, {0, 1}};
  const Json m = score({record("a", 1, 0, "correct", 1.0), record("a", 2, 0, "correct", 1.0001),
                        record("a", 3, 0, "correct"), record("a", 4, 0, "timing_anomaly", 5.0),
                        record("a", 5, 0, "output_mismatch", 5.0)},
                       s)["a"];
  const Json& c = m["overall"]["counts"];
  EXPECT_NEAR(c["fast_1@1"].get<double>(), 1.0, 1e-12);  // only problem 2: 1.0 is not > 1
  EXPECT_NEAR(c["fast_0@1"].get<double>(), 2.0, 1e-12);  // problems 1 and 2; 3 was not timed
  EXPECT_NEAR(c["pass@1"].get<double>(), 3.0, 1e-12);
  ASSERT_EQ(m["fast_p_curve"].size(), 2u);
  EXPECT_EQ(m["fast_p_curve"][0][0], 0.0);
  EXPECT_NEAR(m["fast_p_curve"][1][1].get<double>(), 1.0 / kProblemCount, 1e-12);
  EXPECT_EQ(m["fast_p_curve_k"], 1);
}

TEST(Scoring, GeomeanOverCorrectTimedSamplesOnly) {
  const Json m = score({record("a", 1, 0, "correct", 2.0), record("a", 2, 0, "correct", 8.0),
                        record("a", 3, 0, "timing_anomaly", 100.0), record("a", 4, 0, "correct")})["a"];
  EXPECT_NEAR(m["geomean_speedup"].get<double>(), 4.0, 1e-12);
  EXPECT_NEAR(m["categories"]["Collective Primitive"]["geomean_speedup"].get<double>(), 4.0, 1e-12);
  EXPECT_TRUE(m["categories"]["Other"]["geomean_speedup"].is_null());
}

TEST(Scoring, SpeedupsNotMeasuredOnOneGpuPerRankStayOutOfSpeedMetricsUnlessAsked) {
  Json cpu = record("a", 1, 0, "correct", 3.0);
  cpu["device"] = "cpu";
  Json shared = record("a", 2, 0, "correct", 5.0);
  shared["shared_gpu"] = true;
  const std::vector<Json> rs = {cpu, shared, record("a", 3, 0, "correct", 2.0)};
  ScoreSettings s{{1}, {1}};
  std::vector<std::string> warnings;
  const Json m = score(rs, s, &warnings)["a"];
  EXPECT_NEAR(m["overall"]["counts"]["pass@1"].get<double>(), 3.0, 1e-12);    // all three are correct
  EXPECT_NEAR(m["overall"]["counts"]["fast_1@1"].get<double>(), 1.0, 1e-12);  // only problem 3 is fast
  EXPECT_NEAR(m["geomean_speedup"].get<double>(), 2.0, 1e-12);
  EXPECT_EQ(m["overall"]["unmeasured_speed_samples"], 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("2 correct sample(s)"), std::string::npos);
  s.mixed_speed = true;
  const Json mixed = score(rs, s)["a"];
  EXPECT_NEAR(mixed["overall"]["counts"]["fast_1@1"].get<double>(), 3.0, 1e-12);
  EXPECT_NEAR(mixed["geomean_speedup"].get<double>(), std::cbrt(30.0), 1e-12);
}

TEST(Scoring, ModelsByRunNameAndGoldenIgnored) {
  Json golden = {{"schema_version", 1}, {"kind", "golden"}, {"problem_id", 1}, {"match", true}};
  const Json models = score({record("b", 1, 0, "correct"), golden, record("a", 1, 0, "compile_error")});
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models.begin().key(), "b");  // order of first appearance
  EXPECT_EQ(models["a"]["outcomes"]["compile_error"], 1);
}

TEST(Scoring, RejectsDuplicatesUnknownOutcomesAndBadSettings) {
  EXPECT_THROW(score({record("a", 1, 0, "correct"), record("a", 1, 0, "timeout")}), Error);
  EXPECT_THROW(score({record("a", 1, 0, "great")}), Error);
  EXPECT_THROW(score({record("a", 1, 0, "correct")}, {{0}, {1}}), Error);
  EXPECT_THROW(score({record("a", 1, 0, "correct")}, {{1}, {-1}}), Error);
  Json old = record("a", 1, 0, "correct");
  old["schema_version"] = 99;
  EXPECT_THROW(score({old}), Error);
}

TEST(Scoring, ScoresFileIsVersioned) {
  const Json s = make_scores({record("a", 1, 0, "correct")}, {"x.jsonl"}, {}, nullptr);
  EXPECT_EQ(s["schema_version"], kScoresSchemaVersion);
  EXPECT_EQ(s["kind"], "scores");
  EXPECT_TRUE(s.contains("git_sha"));
  EXPECT_TRUE(s.contains("created_at"));
  EXPECT_EQ(s["inputs"][0], "x.jsonl");
  EXPECT_EQ(s["k"], Json::array({1, 3}));
  EXPECT_EQ(s["p"].size(), 6u);
  EXPECT_EQ(fast_key(0.5, 3), "fast_0.5@3");
  EXPECT_EQ(fast_key(1, 1), "fast_1@1");
}

}  // namespace
}  // namespace pkb
