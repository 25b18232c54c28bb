#include <gtest/gtest.h>

#include <vector>

#include "common/calibration.h"
#include "driver/speedup.h"

namespace pkb {
namespace {

// NOTE [paired rounds]: the median of the per-round ratios.
TEST(Speedup, PairedIsTheMedianOfPerRoundRatios) {
  EXPECT_DOUBLE_EQ(paired_speedup({10, 20, 30}, {5, 20, 10}), 2.0);        // ratios 2, 1, 3
  EXPECT_DOUBLE_EQ(paired_speedup({10, 20, 30, 40}, {10, 10, 10, 10}), 2.5);  // 1, 2, 3, 4
  EXPECT_DOUBLE_EQ(paired_speedup({10, 0, 30}, {5, 20, 10}), 2.5);         // a round without a time is left out
  EXPECT_DOUBLE_EQ(paired_speedup({}, {}), 0.0);
  EXPECT_DOUBLE_EQ(paired_speedup({1, 2}, {1}), 0.0);
}

// What it is for: the machine slows for the first three segments (C R R),
// then is fast for the rest (C C R R C), as 78 saw on the H200. The sides are
// the same code; the ratio of medians reads 1.2x, the paired rounds 1.0x.
TEST(Speedup, PairedRoundsCancelAChangeOfMachineSpeed) {
  const double slow = 130, fast = 105;
  // Rounds C R, R C, C R, R C: per side, in round order.
  const std::vector<double> cand = {slow, fast, fast, fast};
  const std::vector<double> ref = {slow, slow, fast, fast};
  // Two of four rounds pair slow with fast, so the per-round ratios are 1, 1.238, 1, 1.
  EXPECT_DOUBLE_EQ(paired_speedup(ref, cand), 1.0);
  EXPECT_GT(median_of(ref) / median_of(cand), 1.1);
}

TEST(Speedup, SlowestRankPerRound) {
  const Json r0 = {{"round_medians_us", {{"reference", {10.0, 30.0}}, {"candidate", {5.0, 5.0}}}}};
  const Json r1 = {{"round_medians_us", {{"reference", {20.0, 10.0}}, {"candidate", {4.0, 6.0}}}}};
  std::vector<double> ref, cand;
  for (const Json* t : {&r0, &r1}) {
    ASSERT_TRUE(slowest_per_round(*t, "reference", &ref));
    ASSERT_TRUE(slowest_per_round(*t, "candidate", &cand));
  }
  EXPECT_EQ(ref, (std::vector<double>{20.0, 30.0}));
  EXPECT_EQ(cand, (std::vector<double>{5.0, 6.0}));
  // A rank with another number of rounds, or none, gives no paired speedup.
  const Json r2 = {{"round_medians_us", {{"reference", {1.0}}, {"candidate", {1.0}}}}};
  EXPECT_FALSE(slowest_per_round(r2, "reference", &ref));
  EXPECT_FALSE(slowest_per_round(Json::object(), "reference", &ref));
}

}  // namespace
}  // namespace pkb
