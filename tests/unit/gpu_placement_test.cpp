#include <gtest/gtest.h>

#include <cstdlib>

#include "driver/gpu_placement.h"
#include "pkb/check.h"

namespace pkb {
namespace {

TEST(GpuPlacement, OneRankPerGpuWhenThereAreEnough) {
  GpuPlacement p = place_ranks(4, 8, 0);
  EXPECT_EQ(p.gpu_of_rank, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(p.shared);
  EXPECT_TRUE(p.warning.empty());
  EXPECT_EQ(p.gpus_used, 4);
}

TEST(GpuPlacement, FewerGpusThanRanksShareRoundRobinWithAWarning) {
  GpuPlacement p = place_ranks(4, 1, 0);
  EXPECT_EQ(p.gpu_of_rank, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_TRUE(p.shared);
  EXPECT_NE(p.warning.find("share"), std::string::npos);
  GpuPlacement q = place_ranks(5, 2, 0);  // 3 per GPU over 2 GPUs
  EXPECT_EQ(q.gpu_of_rank, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(q.gpus_used, 2);
}

TEST(GpuPlacement, ExplicitRanksPerGpuUsesThatManyGpusSilently) {
  GpuPlacement p = place_ranks(4, 8, 2);  // sharing on purpose on a big node
  EXPECT_EQ(p.gpu_of_rank, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_TRUE(p.shared);
  EXPECT_TRUE(p.warning.empty());
  GpuPlacement one = place_ranks(2, 2, 1);
  EXPECT_FALSE(one.shared);
  EXPECT_THROW(place_ranks(4, 1, 2), Error);  // needs 2 GPUs, 1 visible
  EXPECT_THROW(place_ranks(2, 0, 0), Error);  // no GPU at all
}

TEST(GpuPlacement, VisibleGpusHonoursCudaVisibleDevices) {
  const char* old = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string saved = old ? old : "";
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(visible_gpus(), 0);
  setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
  EXPECT_EQ(visible_gpus(), 0);
  if (old) setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
  else unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace pkb
