#include <gtest/gtest.h>

#include "common/topology_io.h"

namespace pkb {
namespace {

TEST(Roofline, LargestTermBounds) {
  Topology t;
  t.nvlink_bw_per_dir = 400e9;
  t.hbm_bw = 4000e9;
  t.peak_bf16_flops = 1000e12;
  Cost c;
  c.nvlink_bytes_per_rank = 4e6;  // 10 us
  c.hbm_bytes_per_rank = 8e6;     // 2 us
  c.flops_per_rank = 1e9;         // 1 us
  Roofline r = roofline(c, t);
  ASSERT_TRUE(r.valid);
  EXPECT_NEAR(r.t_roof_us, 10.0, 1e-9);
  EXPECT_EQ(r.bound, "nvlink");
  c.flops_per_rank = 20e9;  // 20 us
  r = roofline(c, t);
  EXPECT_EQ(r.bound, "compute");
  EXPECT_NEAR(r.t_roof_us, 20.0, 1e-9);
}

TEST(Roofline, NoneWithoutRates) {
  Cost c;
  c.nvlink_bytes_per_rank = 1e6;
  EXPECT_FALSE(roofline(c, cpu_topology()).valid);
}

}  // namespace
}  // namespace pkb
