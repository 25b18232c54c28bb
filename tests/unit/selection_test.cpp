#include <gtest/gtest.h>

#include "common/selection.h"
#include "pkb/check.h"

namespace pkb {
namespace {

const std::vector<ProblemName> kKnown = {{1, "allreduce"}, {2, "allgather"}, {3, "broadcast"}, {12, "allgather_gemm"}};

TEST(Selection, AllRangesIdsAndSlugs) {
  EXPECT_EQ(parse_selection("all", kKnown), (std::vector<int>{1, 2, 3, 12}));
  EXPECT_EQ(parse_selection("1-3", kKnown), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(parse_selection("12, broadcast,1", kKnown), (std::vector<int>{1, 3, 12}));
  EXPECT_EQ(parse_selection("01_allreduce,12_allgather_gemm", kKnown), (std::vector<int>{1, 12}));
  EXPECT_EQ(parse_selection("2-20", kKnown), (std::vector<int>{2, 3, 12}));  // ranges skip gaps
  EXPECT_EQ(parse_selection("1,1-2", kKnown), (std::vector<int>{1, 2}));     // no duplicates
}

TEST(Selection, RejectsWhatMatchesNothing) {
  EXPECT_THROW(parse_selection("99", kKnown), Error);
  EXPECT_THROW(parse_selection("4-11", kKnown), Error);
  EXPECT_THROW(parse_selection("3-1", kKnown), Error);
  EXPECT_THROW(parse_selection("allgemm", kKnown), Error);
  EXPECT_THROW(parse_selection(" , ", kKnown), Error);
}

TEST(Selection, Exclusions) {
  EXPECT_EQ(parse_selection("all,!12", kKnown), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(parse_selection("!broadcast,1-12", kKnown), (std::vector<int>{1, 2, 12}));  // order-free
  EXPECT_EQ(parse_selection("all,!2-3", kKnown), (std::vector<int>{1, 12}));
  EXPECT_THROW(parse_selection("!1", kKnown), Error);        // nothing to exclude from
  EXPECT_THROW(parse_selection("1,!1", kKnown), Error);      // excludes everything it names
  EXPECT_THROW(parse_selection("all,!99", kKnown), Error);   // an exclusion must name a problem
}

TEST(Selection, ShapesAndShards) {
  EXPECT_EQ(parse_shape("1024x512"), (std::pair<long, long>{1024, 512}));
  EXPECT_EQ(parse_shape("8X8"), (std::pair<long, long>{8, 8}));
  EXPECT_THROW(parse_shape("1024"), Error);
  EXPECT_THROW(parse_shape("0x4"), Error);
  EXPECT_THROW(parse_shape("ax4"), Error);
  EXPECT_EQ(parse_shard("2/8"), (std::pair<int, int>{2, 8}));
  EXPECT_THROW(parse_shard("8/8"), Error);
  EXPECT_THROW(parse_shard("1-8"), Error);
}

}  // namespace
}  // namespace pkb
