#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "worker/timing.h"
#include "worker/timing_fresh.h"

namespace pkb {
namespace {

TEST(Timing, InputGroupsExceedThreeCaches) {
  const double l2 = 50.0 * (1 << 20);
  EXPECT_EQ(input_groups_for(200.0 * (1 << 20), l2), 1);     // one set is already > 3*L2
  EXPECT_EQ(input_groups_for(2.0 * (1 << 20), l2), 76);      // floor(150/2)+1
  EXPECT_EQ(input_groups_for(1024, l2), 128);                // clamped
  EXPECT_EQ(input_groups_for(100.0 * (1 << 20), l2), 2);     // floor(1.5)+1
  for (double b : {1e3, 1e5, 1e6, 1e7, 5e7}) {
    int g = input_groups_for(b, l2);
    EXPECT_TRUE(g == 128 || g * b > 3 * l2) << b;
  }
}

// NOTE [fresh inputs], step 3: the stopping rule reads this.
TEST(Timing, MedianNoiseIsTheConfidenceIntervalOfTheMedian) {
  EXPECT_TRUE(std::isinf(median_noise({})));
  EXPECT_TRUE(std::isinf(median_noise({5.0})));
  EXPECT_DOUBLE_EQ(median_noise(std::vector<double>(50, 7.0)), 0.0);
  // n = 100: 1-based ranks 40 and 61 (floor(50 - 9.8), ceil(51 + 9.8)).
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  std::shuffle(v.begin(), v.end(), std::mt19937(1));
  EXPECT_NEAR(median_noise(v), (61.0 - 40.0) / (2 * 50.5), 1e-12);
  // More samples of the same spread: a narrower interval.
  std::mt19937 g(7);
  std::normal_distribution<double> d(100.0, 5.0);
  std::vector<double> small, large;
  for (int i = 0; i < 30; ++i) small.push_back(d(g));
  for (int i = 0; i < 3000; ++i) large.push_back(d(g));
  EXPECT_GT(median_noise(small), median_noise(large));
  EXPECT_LT(median_noise(large), 0.005);  // about 1.25 * 1.96 * 5 / sqrt(3000) / 100
}

TEST(Timing, FreshLayoutSizesSegmentsByCallTimeWithinTheBudget) {
  const double l2 = 50.0 * (1 << 20), mib = 1 << 20;
  FreshLayout tiny = fresh_layout(5, 2 * mib, 2 * mib, l2, 1e12);
  EXPECT_EQ(tiny.segment_calls, kMaxSegmentCalls);
  EXPECT_EQ(tiny.groups, 76);  // the cache rule
  FreshLayout slow = fresh_layout(91000, 200 * mib, 50 * mib, l2, 1e12);
  EXPECT_EQ(slow.segment_calls, kMinSegmentCalls);
  EXPECT_EQ(slow.groups, kMinSegmentCalls);  // a group per call of a segment
  // The budget holds both sides' groups and kept outputs: 2 x (in + out) each.
  FreshLayout tight = fresh_layout(5, 100 * mib, 0, l2, 2 * 2 * 100 * mib + 1);
  EXPECT_EQ(tight.groups, 2);
  EXPECT_EQ(tight.segment_calls, 2);
  FreshLayout none = fresh_layout(5, 100 * mib, 0, l2, 1);
  EXPECT_EQ(none.groups, 1);
  EXPECT_EQ(none.segment_calls, 1);
}

}  // namespace
}  // namespace pkb
