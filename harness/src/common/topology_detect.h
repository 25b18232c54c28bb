// What machine is this? NVML, loaded lazily with dlopen (the pkb binary must
// start where there is no GPU driver), names the GPUs, their NVLink links and
// whether each pair can read the other's memory. No CUDA context is created.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/results.h"
#include "pkb/context.h"

namespace pkb {

struct DetectedMachine {
  bool ok = false;
  std::string why_not;  // when !ok: no NVML, no driver, no GPU
  std::vector<std::string> gpus;   // names, by index
  std::vector<int> nvlink_links;   // active links per GPU
  bool all_pairs_p2p = false;
};

DetectedMachine detect_machine();
Json to_json(const DetectedMachine& m);

// Each GPU's memory now, by index, from NVML (no CUDA context); empty when
// NVML cannot be read.
struct GpuMemory {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
std::vector<GpuMemory> gpu_memory_info();

// The topology/*.json whose GPU name and count match, or an empty name.
std::string match_topology(const DetectedMachine& m, const std::string& source_dir);

}  // namespace pkb
