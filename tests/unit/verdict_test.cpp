// Verdicts (driver/verdict.h): trimmed diagnostics, mismatches, text.
#include <gtest/gtest.h>

#include "driver/verdict.h"

namespace pkb {
namespace {

TEST(Verdict, TrimKeepsErrorsFirstWithFileLine) {
  std::string log;
  for (int i = 0; i < 30; ++i) log += "x.cpp:" + std::to_string(i + 1) + ":1: warning: unused variable 'a'\n    a\n";
  log +=
      "In file included from x.cpp:1:\n"
      "x.cpp: In function 'int f()':\n"
      "x.cpp:40:12: error: expected ';' before '}' token\n"
      "   40 |   return 1\n"
      "      |           ^\n"
      "      |           ;\n"
      "x.cpp:41:3: note: to match this\n";
  const std::string t = trim_diagnostics(log, 12);
  ASSERT_NE(t.find("x.cpp:40:12: error: expected ';'"), std::string::npos) << t;
  EXPECT_LT(t.find("x.cpp:40:12: error"), t.find("warning")) << t;  // the error comes before the warnings
  EXPECT_EQ(t.find("In file included from x.cpp:1:"), 0u) << t;     // with its context
  EXPECT_NE(t.find("   40 |   return 1"), std::string::npos) << t;
  EXPECT_NE(t.find("x.cpp: In function 'int f()':"), std::string::npos) << t;
  EXPECT_NE(t.find("note: to match this"), std::string::npos) << t;
  EXPECT_NE(t.find("more warning(s) not shown"), std::string::npos) << t;
  int lines = 0;
  for (char c : t) lines += c == '\n';
  EXPECT_LE(lines, 13);
}

TEST(Verdict, TrimNvccAndUnrecognised) {
  const std::string nv = "candidate.cu(12): error: identifier \"y\" is undefined\n      y = 1;\n      ^\n\n1 error detected\n";
  EXPECT_NE(trim_diagnostics(nv).find("candidate.cu(12): error"), std::string::npos);
  EXPECT_EQ(trim_diagnostics("just text\n"), "just text\n");
}

TEST(Verdict, MismatchesPerRankAndTrial) {
  Json out = {{"index", 0},  {"shape", {4}},          {"dtype", "bfloat16"}, {"numel", 4},
              {"mismatches", 3}, {"max_abs_err", 2.5}, {"max_rel_err", 0.5}, {"first_bad_index", {1}},
              {"first_bad_expected", 3.0}, {"first_bad_got", 1.0}};
  Json ok = {{"index", 0}, {"mismatches", 0}};
  Json r = {{"problem_id", 1}, {"slug", "allreduce"}, {"candidate", "/x/c.cpp"}, {"outcome", "output_mismatch"},
            {"reason", "rank 0: output 0 differs"}, {"device", "cpu"}, {"world_size", 2},
            {"base_shape", {128, 128}}, {"args", {{"trials", 2}, {"perf", true}}},
            {"errors",
             {{{"rank", 0}, {"trials", {{{"trial", 0}, {"outcome", "correct"}, {"outputs", {ok}}},
                                        {{"trial", 1}, {"outcome", "output_mismatch"}, {"outputs", {ok, out}}}}}},
              {{"rank", 1}, {"trials", {{{"trial", 0}, {"outcome", "shape_mismatch"}, {"reason", "shape [2] vs [4]"},
                                         {"outputs", Json::array()}}}}}}}};
  const Json v = make_verdict(r);
  EXPECT_EQ(v["kind"], "verdict");
  EXPECT_EQ(v["problem"], "01_allreduce");
  EXPECT_FALSE(v["correct"].get<bool>());
  ASSERT_EQ(v["mismatches"].size(), 2u);
  EXPECT_EQ(v["mismatches"][0]["trial"], 1);
  EXPECT_EQ(v["mismatches"][0]["index"], Json({1}));
  EXPECT_EQ(v["mismatches"][0]["expected"], 3.0);
  EXPECT_EQ(v["mismatches"][1]["detail"], "shape [2] vs [4]");
  EXPECT_TRUE(v["times"].is_null());
  const std::string t = verdict_text(v);
  EXPECT_NE(t.find("rank 0, trial 1: output 0 (shape [4], bfloat16): 3 of 4 elements differ; first at [1]: "
                   "expected 3, got 1; max abs err 2.5, max rel err 0.5"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("rank 1, trial 0: shape_mismatch: shape [2] vs [4]"), std::string::npos) << t;
}

}  // namespace
}  // namespace pkb
