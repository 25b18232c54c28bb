#include "driver/gpu_placement.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "pkb/check.h"

namespace pkb {

GpuPlacement place_ranks(int world, int visible, int ranks_per_gpu) {
  PKB_CHECK(world >= 1, "world size must be at least 1");
  PKB_CHECK(ranks_per_gpu >= 0, "--ranks-per-gpu must be at least 1 (or 0: automatic)");
  PKB_CHECK(visible >= 1, "no GPU is visible (--device cuda needs one; try --device cpu)");
  GpuPlacement p;
  int per = ranks_per_gpu;
  if (per == 0) per = (world + visible - 1) / visible;
  const int need = (world + per - 1) / per;
  PKB_CHECK(need <= visible, world, " ranks at ", per, " per GPU need ", need, " GPUs; ", visible, " visible");
  p.gpus_used = need;
  for (int r = 0; r < world; ++r) p.gpu_of_rank.push_back(r % need);
  p.shared = need < world;
  if (p.shared && ranks_per_gpu == 0) {
    std::ostringstream os;
    os << "pkb: " << world << " ranks on " << need << " GPU(s): ranks share GPUs (round-robin), Gloo and CUDA IPC "
       << "buffers stand in for NCCL and NVLink symmetric memory; correctness only, times are not comparable "
       << "(records say shared_gpu; --ranks-per-gpu sets this explicitly)";
    p.warning = os.str();
  }
  return p;
}

GpuPlacement placement_for(const std::string& device, int world, int ranks_per_gpu) {
  if (device != "cuda") {
    PKB_CHECK(ranks_per_gpu == 0, "--ranks-per-gpu applies to --device cuda only");
    return {};
  }
  GpuPlacement p = place_ranks(world, visible_gpus(), ranks_per_gpu);
  if (!p.warning.empty()) std::fprintf(stderr, "%s\n", p.warning.c_str());
  return p;
}

void add_placement(Json& job, const GpuPlacement& p) {
  if (p.gpu_of_rank.empty()) return;
  job["gpu_of_rank"] = p.gpu_of_rank;
  job["shared_gpu"] = p.shared;
}

int visible_gpus() {
  int nodes = 0;
  for (int i = 0; i < 64; ++i) {
    struct stat st;
    if (stat(("/dev/nvidia" + std::to_string(i)).c_str(), &st) == 0) ++nodes;
  }
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!cvd) return nodes;
  // The runtime stops at the first entry it cannot use; count entries up to there.
  int listed = 0;
  std::stringstream ss(cvd);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item == "-1") break;
    ++listed;
  }
  return std::min(nodes, listed);
}

}  // namespace pkb
