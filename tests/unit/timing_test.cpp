#include <gtest/gtest.h>

#include "worker/timing.h"

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

}  // namespace
}  // namespace pkb
