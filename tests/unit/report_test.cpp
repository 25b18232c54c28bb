#include <gtest/gtest.h>

#include <algorithm>

#include "driver/report.h"

namespace pkb {
namespace {

Json record(const std::string& candidate) {
  return {{"problem_id", 1}, {"slug", "allreduce"}, {"sample", 0}, {"outcome", "correct"}, {"candidate", candidate}};
}

TEST(Report, SummaryShowsMechanismsCompactly) {
  Json cand = record("solutions/01_allreduce.cu");
  cand["mechanisms"] = Json::array({{{"name", "copy_engine"}, {"evidence", "imports cudaMemcpyAsync"}},
                                    {{"name", "sm_load_store"}, {"evidence", "SASS LDG, STG in k"}}});
  std::string md = summary_markdown({record("reference"), cand}, {});
  EXPECT_NE(md.find("| roof cand | mechanisms | reason |"), std::string::npos) << md;
  EXPECT_NE(md.find("|  |  | ce+ldst |  |"), std::string::npos) << md;
  // The reference row has an empty mechanisms cell: 10 columns, 11 bars.
  std::string ref_row = md.substr(md.find("| 01_allreduce"));
  ref_row = ref_row.substr(0, ref_row.find('\n'));
  EXPECT_EQ(std::count(ref_row.begin(), ref_row.end(), '|'), 11) << ref_row;
  EXPECT_NE(md.find("ce copy engine"), std::string::npos) << md;
}

TEST(Report, NoLegendWithoutMechanisms) {
  std::string md = summary_markdown({record("reference")}, {"03_broadcast: needs 4 ranks"});
  EXPECT_EQ(md.find("ce copy engine"), std::string::npos) << md;
  std::string skip_row = md.substr(md.find("| 03_broadcast"));
  skip_row = skip_row.substr(0, skip_row.find('\n'));
  EXPECT_EQ(std::count(skip_row.begin(), skip_row.end(), '|'), 11) << skip_row;
}

TEST(Report, SpeedupsNotMeasuredOnOneGpuPerRankAreMarked) {
  Json gpu = record("reference");
  gpu["device"] = "cuda";
  gpu["speedup"] = 1.5;
  Json shared = gpu;
  shared["problem_id"] = 2;
  shared["slug"] = "allgather";
  shared["shared_gpu"] = true;
  std::string md = summary_markdown({gpu}, {});
  EXPECT_NE(md.find("| 1.50x |"), std::string::npos) << md;
  EXPECT_EQ(md.find("\xe2\x80\xa0"), std::string::npos) << md;  // no dagger, no footnote
  md = summary_markdown({gpu, shared}, {});
  EXPECT_NE(md.find("| 1.50x\xe2\x80\xa0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("do not measure NVLink"), std::string::npos) << md;
  Json cpu = gpu;
  cpu["device"] = "cpu";
  EXPECT_NE(summary_markdown({cpu}, {}).find("| 1.50x\xe2\x80\xa0 |"), std::string::npos);
}

}  // namespace
}  // namespace pkb
