#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "common/results.h"
#include "pkb/check.h"
#include "scores/leaderboard.h"
#include "scores/problem_index.h"
#include "scores/scoring.h"

namespace pkb {
namespace {

// One category of the published table for one model, as counts with n = 3
// samples per problem: pass@1 = sum(c)/3 and pass@3 = #(c >= 1); likewise for
// fast1 with f = correct samples faster than the reference.
struct CategoryCounts {
  int pass1, pass3, fast1, fast3;
};

// A split over the categories that adds up to the published model's totals:
// 28→36 correct, 22→27 faster than the reference.
const std::map<std::string, CategoryCounts> kPublished = {
    {"Collective Primitive", {6, 7, 5, 5}}, {"Tensor Parallel", {5, 7, 4, 5}}, {"Sequence Parallel", {1, 1, 1, 1}},
    {"Context Parallel", {4, 6, 3, 4}},     {"Pipeline Parallel", {0, 0, 0, 0}}, {"Data Parallel", {3, 4, 2, 3}},
    {"Expert Parallel", {2, 3, 1, 2}},      {"FSDP/ZeRO", {3, 4, 2, 3}},     {"Vocab Parallel", {1, 1, 1, 1}},
    {"Graph Parallel", {1, 1, 1, 1}},       {"Geometric/Spatial", {1, 1, 1, 1}}, {"Other", {1, 1, 1, 1}},
};
constexpr int kSamples = 3;

// `slots` values summing to `total`, each between floor[i] (at least 1) and
// kSamples: the per-problem sample counts behind one table cell.
std::vector<int> spread(int slots, int total, std::vector<int> floor) {
  floor.resize(slots, 0);
  std::vector<int> v(slots);
  int left = total;
  for (int i = 0; i < slots; ++i) left -= v[i] = std::max(floor[i], 1);
  for (int i = 0; i < slots && left > 0; ++i) {
    const int add = std::min(left, kSamples - v[i]);
    v[i] += add;
    left -= add;
  }
  EXPECT_EQ(left, 0) << "infeasible split";
  return v;
}

Json record(const std::string& model, int id, int sample, const std::string& outcome, double speedup) {
  return {{"schema_version", kResultSchemaVersion}, {"kind", "evaluation"}, {"run_name", model},
          {"solutions", model},  {"problem_id", id}, {"category", find_problem(id)->category},
          {"sample", sample},    {"outcome", outcome}, {"speedup", speedup}, {"world_size", 2},
          {"device", "cuda"}};
}

std::vector<Json> published_records() {
  std::vector<Json> records;
  for (const auto& [cat, want] : kPublished) {
    std::vector<int> ids;
    for (const auto& e : problem_index()) {
      if (cat == e.category) ids.push_back(e.id);
    }
    EXPECT_LE(want.pass3, static_cast<int>(ids.size())) << cat;
    // Faster samples are correct ones: fix f first, then c >= f.
    std::vector<int> f = spread(want.fast3, kSamples * want.fast1, {});
    std::vector<int> c = spread(want.pass3, kSamples * want.pass1, f);
    for (size_t i = 0; i < ids.size(); ++i) {
      const int correct = i < c.size() ? c[i] : 0;
      const int fast = i < f.size() ? f[i] : 0;
      for (int s = 0; s < kSamples; ++s) {
        if (s < fast) {
          records.push_back(record("modelA", ids[i], s, "correct", 1.5));
        } else if (s < correct) {
          // Exactly as fast as the reference: correct, but not fast1.
          records.push_back(record("modelA", ids[i], s, "correct", 1.0));
        } else {
          records.push_back(record("modelA", ids[i], s, s % 2 ? "output_mismatch" : "compile_error", 0.5));
        }
      }
      // A harness error in a fourth slot must change nothing.
      records.push_back(record("modelA", ids[i], kSamples, "harness_error", 9.0));
    }
  }
  // A second model, every problem correct at the reference's speed.
  for (const auto& e : problem_index()) {
    for (int s = 0; s < kSamples; ++s) records.push_back(record("reference", e.id, s, "correct", 1.0));
  }
  records.push_back({{"schema_version", 1}, {"kind", "golden"}, {"problem_id", 1}});
  return records;
}

Json published_scores() {
  std::vector<std::string> warnings;
  Json s = make_scores(published_records(), {"synthetic"}, {}, &warnings);
  EXPECT_TRUE(warnings.empty());
  return s;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  const auto ls = lines(text);
  return std::find(ls.begin(), ls.end(), line) != ls.end();
}

std::string cell(int a, int b) { return std::to_string(a) + "\u2192" + std::to_string(b); }

TEST(Leaderboard, RegeneratesThePublishedTableInMarkdown) {
  const std::string md = render_leaderboard(published_scores(), "md");
  EXPECT_TRUE(has_line(md, "| Category | Problems | modelA pass@1\u21923 | modelA fast1@1\u21923 | reference pass@1\u21923 | "
                           "reference fast1@1\u21923 |"))
      << md;
  EXPECT_TRUE(has_line(md, "| Total | 87 | 28\u219236 | 22\u219227 | 87\u219287 | 0\u21920 |")) << md;
  for (const auto& cat : category_order()) {
    const CategoryCounts& w = kPublished.at(cat);
    int n = 0;
    for (const auto& e : problem_index()) n += cat == e.category;
    const std::string row = "| " + cat + " | " + std::to_string(n) + " | " + cell(w.pass1, w.pass3) + " | " +
                            cell(w.fast1, w.fast3) + " | " + cell(n, n) + " | 0\u21920 |";
    EXPECT_TRUE(has_line(md, row)) << row << "\n" << md;
  }
}

TEST(Leaderboard, RegeneratesThePublishedTableInCsv) {
  const std::string csv = render_leaderboard(published_scores(), "csv");
  EXPECT_TRUE(has_line(csv, "Total,87,28\u219236,22\u219227,87\u219287,0\u21920")) << csv;
  for (const auto& cat : category_order()) {
    const CategoryCounts& w = kPublished.at(cat);
    int n = 0;
    for (const auto& e : problem_index()) n += cat == e.category;
    const std::string row = cat + "," + std::to_string(n) + "," + cell(w.pass1, w.pass3) + "," +
                            cell(w.fast1, w.fast3) + "," + cell(n, n) + ",0\u21920";
    EXPECT_TRUE(has_line(csv, row)) << row << "\n" << csv;
  }
}

TEST(Leaderboard, OverallTableHasRatesSpeedupAndOutcomes) {
  const std::string md = render_leaderboard(published_scores(), "md");
  EXPECT_NE(md.find("## Overall"), std::string::npos);
  EXPECT_NE(md.find("| Model | pass@1 | pass@3 | fast_0@1 |"), std::string::npos) << md;
  // modelA: 28/87 = 0.322, 36/87 = 0.414; 87 harness errors listed apart.
  EXPECT_NE(md.find("| modelA | 0.322 | 0.414 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 87 |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| reference | 1.000 | 1.000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("1.00x"), std::string::npos);
}

TEST(Leaderboard, FractionalCountsShowOneDecimal) {
  EXPECT_EQ(format_count(28.0000000001), "28");
  EXPECT_EQ(format_count(1.0 / 3), "0.3");
  EXPECT_EQ(format_count(27.6666), "27.7");
  EXPECT_EQ(format_count(0), "0");
}

TEST(Leaderboard, TexAndHtmlEscapeText) {
  Json s = published_scores();
  Json renamed = Json::object();
  renamed["<b>A&B</b> 50%_x"] = s["models"]["modelA"];
  s["models"] = renamed;
  const std::string tex = render_leaderboard(s, "tex");
  EXPECT_NE(tex.find("28$\\to$36"), std::string::npos) << tex;
  EXPECT_NE(tex.find("50\\%\\_x"), std::string::npos) << tex;
  EXPECT_NE(tex.find("FSDP/ZeRO"), std::string::npos);
  const std::string html = render_leaderboard(s, "html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("&lt;b&gt;A&amp;B&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<b>A"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<td>28\u219236</td>"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

TEST(Leaderboard, CombinesFilesAndRejectsMismatches) {
  Json a = make_scores({record("a", 1, 0, "correct", 2.0)}, {"a"}, {}, nullptr);
  Json b = make_scores({record("b", 1, 0, "correct", 2.0)}, {"b"}, {}, nullptr);
  const Json both = combine_scores({a, b});
  EXPECT_EQ(both["models"].size(), 2u);
  EXPECT_THROW(combine_scores({a, a}), Error);
  Json other_k = make_scores({record("c", 1, 0, "correct", 2.0)}, {"c"}, {{1}, {1}}, nullptr);
  EXPECT_THROW(combine_scores({a, other_k}), Error);
  EXPECT_THROW(combine_scores({Json{{"kind", "results"}}}), Error);
  ScoreSettings mixed;
  mixed.mixed_speed = true;
  Json m = make_scores({record("m", 1, 0, "correct", 2.0)}, {"m"}, mixed, nullptr);
  EXPECT_THROW(combine_scores({a, m}), Error);  // speed from CPU or shared GPUs: only when asked
  EXPECT_EQ(combine_scores({a, m}, true)["models"].size(), 2u);
  EXPECT_THROW(render_leaderboard(a, "pdf"), Error);
  Json no_fast1 = make_scores({record("c", 1, 0, "correct", 2.0)}, {"c"}, {{1, 3}, {0, 2}}, nullptr);
  EXPECT_THROW(render_leaderboard(no_fast1, "md"), Error);
  // A single k shows one number, not a range.
  EXPECT_NE(render_leaderboard(other_k, "csv").find("Total,87,1,1"), std::string::npos);
}

}  // namespace
}  // namespace pkb
