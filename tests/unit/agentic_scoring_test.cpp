// Scores of pkb agent trajectories by step budget (scores/agentic.h).
#include <gtest/gtest.h>

#include <optional>

#include "common/results.h"
#include "scores/agentic.h"
#include "scores/problem_index.h"
#include "scores/scoring.h"

namespace pkb {
namespace {

Json step(const std::string& model, int id, int sample, int s, const std::string& outcome,
          std::optional<double> speedup = std::nullopt, int budget = 4) {
  Json r = {{"schema_version", kResultSchemaVersion}, {"kind", "evaluation"},  {"run_name", model},
            {"solutions", "agent:" + model},         {"problem_id", id},       {"slug", find_problem(id)->slug},
            {"category", find_problem(id)->category}, {"sample", sample},       {"outcome", outcome},
            {"reason", ""},                           {"world_size", 2},        {"device", "cuda"},
            {"step", s},                              {"agent", {{"steps", budget}}}};
  if (speedup) r["speedup"] = *speedup;
  return r;
}

constexpr double kP = kProblemCount;

TEST(AgenticScoring, PassByStepBudget) {
  // Problem 1: sample 0 correct at step 3, sample 1 at step 1. Problem 2:
  // never correct (a hung agent, then a compile error).
  std::vector<Json> rs = {step("m", 1, 0, 1, "compile_error"), step("m", 1, 0, 2, "output_mismatch"),
                          step("m", 1, 0, 3, "correct", 1.5),  step("m", 1, 1, 1, "correct", 0.8),
                          step("m", 2, 0, 1, "agent_error"),   step("m", 2, 0, 2, "compile_error")};
  ScoreSettings st;
  st.k = {1, 2};
  st.p = {0, 1};
  const Json m = score_models(rs, st, nullptr)["m"];
  const Json& ag = m["agentic"];
  ASSERT_EQ(ag["max_steps"], 4);
  ASSERT_EQ(ag["by_steps"].size(), 4u);
  EXPECT_EQ(ag["trajectories"], 3);
  EXPECT_NEAR(ag["by_steps"][0]["pass@1"].get<double>() * kP, 0.5, 1e-9);
  EXPECT_NEAR(ag["by_steps"][1]["pass@1"].get<double>() * kP, 0.5, 1e-9);
  EXPECT_NEAR(ag["by_steps"][2]["pass@1"].get<double>() * kP, 1.0, 1e-9);
  EXPECT_NEAR(ag["by_steps"][3]["pass@1"].get<double>() * kP, 1.0, 1e-9);
  EXPECT_NEAR(ag["by_steps"][0]["pass@2"].get<double>() * kP, 1.0, 1e-9);
  // fast_1: only sample 0's step 3 (1.5x) is faster than the reference.
  EXPECT_NEAR(ag["by_steps"][1]["fast_1@1"].get<double>() * kP, 0.0, 1e-9);
  EXPECT_NEAR(ag["by_steps"][2]["fast_1@1"].get<double>() * kP, 0.5, 1e-9);
  EXPECT_EQ(ag["first_correct_at_step"], Json({{"1", 1}, {"2", 0}, {"3", 1}, {"4", 0}}));
  EXPECT_EQ(ag["never_correct"], 1);
  EXPECT_EQ(ag["step_curve"][2], Json::array({3, ag["by_steps"][2]["pass@1"]}));
  // The ordinary scores are those at the full budget, one sample per trajectory.
  EXPECT_EQ(m["overall"]["samples"], 3);
  EXPECT_NEAR(m["overall"]["pass@1"].get<double>() * kP, 1.0, 1e-9);
  EXPECT_EQ(m["overall"]["outcomes"]["compile_error"], 1);
  EXPECT_EQ(m["overall"]["outcomes"]["correct"], 2);
}

TEST(AgenticScoring, CollapseKeepsTheBestStep) {
  ScoreSettings st;
  std::vector<Json> rs = {step("m", 1, 0, 1, "correct", 0.9), step("m", 1, 0, 2, "correct", 2.0),
                          step("m", 1, 1, 1, "runtime_error"), step("m", 1, 1, 2, "harness_error"),
                          step("m", 3, 0, 1, "correct")};
  rs.push_back(rs.back());
  rs.back().erase("step");  // a one-shot record passes through
  std::vector<Json> c = collapse_trajectories(rs, st);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_FALSE(c[0].contains("step"));
  EXPECT_EQ(c[1]["step"], 2);  // the faster correct step
  EXPECT_EQ(c[2]["outcome"], "runtime_error");  // the last step that is not a harness error
  EXPECT_EQ(collapse_trajectories(rs, st, 1)[1]["step"], 1);  // budget 1
}

TEST(AgenticScoring, OneShotRecordsHaveNoAgenticScores) {
  Json r = step("m", 1, 0, 1, "correct");
  r.erase("step");
  EXPECT_FALSE(score_models({r}, ScoreSettings{}, nullptr)["m"].contains("agentic"));
}

}  // namespace
}  // namespace pkb
