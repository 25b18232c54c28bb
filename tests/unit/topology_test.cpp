#include <gtest/gtest.h>

#include "common/topology_detect.h"
#include "common/topology_io.h"

namespace pkb {
namespace {

DetectedMachine machine(const std::string& gpu, int n) {
  DetectedMachine m;
  m.ok = true;
  m.gpus.assign(n, gpu);
  m.nvlink_links.assign(n, 18);
  return m;
}

TEST(Topology, MatchesByGpuNameAndCount) {
  EXPECT_EQ(match_topology(machine("NVIDIA H200", 2), PKB_SOURCE_DIR), "h200_sxm_2");
  EXPECT_EQ(match_topology(machine("NVIDIA H100 80GB HBM3", 8), PKB_SOURCE_DIR), "h100_sxm_8");
  EXPECT_EQ(match_topology(machine("NVIDIA H200", 3), PKB_SOURCE_DIR), "");
  EXPECT_EQ(match_topology(DetectedMachine{}, PKB_SOURCE_DIR), "");
}

TEST(Topology, ShippedFilesHaveRooflineRates) {
  for (const char* name : {"h200_sxm_2", "h100_sxm_8"}) {
    Topology t = load_topology(name, PKB_SOURCE_DIR);
    EXPECT_EQ(t.name, name);
    EXPECT_GT(t.nvlink_bw_per_dir, 1e11) << name;
    EXPECT_GT(t.hbm_bw, 1e12) << name;
    EXPECT_GT(t.peak_bf16_flops, 1e14) << name;
  }
  EXPECT_FALSE(load_topology("h200_sxm_2", PKB_SOURCE_DIR).multicast);  // NVLS off by policy
}

TEST(Topology, DetectionNeverThrows) {
  DetectedMachine m = detect_machine();
  if (!m.ok) EXPECT_FALSE(m.why_not.empty());
  else EXPECT_EQ(m.gpus.size(), m.nvlink_links.size());
}

}  // namespace
}  // namespace pkb
