#include "common/topology_detect.h"

#include <dirent.h>
#include <dlfcn.h>

#include <algorithm>
#include <fstream>

#include "common/calibration.h"
#include "common/topology_io.h"

namespace pkb {

namespace {

// The few NVML entry points used, declared here so that no NVML header is
// needed at build time (its C ABI is stable; 0 is NVML_SUCCESS).
using NvmlDevice = void*;
struct Nvml {
  int (*init)();
  int (*shutdown)();
  int (*count)(unsigned*);
  int (*handle)(unsigned, NvmlDevice*);
  int (*name)(NvmlDevice, char*, unsigned);
  int (*link_state)(NvmlDevice, unsigned, int*);
  int (*p2p_status)(NvmlDevice, NvmlDevice, int, int*);  // index 0: read; status 0: OK
};

template <typename F>
bool bind(void* lib, const char* sym, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, sym));
  return *out != nullptr;
}

constexpr unsigned kMaxLinks = 36;

}  // namespace

DetectedMachine detect_machine() {
  DetectedMachine m;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    m.why_not = "no NVML (libnvidia-ml.so.1): no NVIDIA driver on this machine";
    return m;
  }
  Nvml n{};
  if (!bind(lib, "nvmlInit_v2", &n.init) || !bind(lib, "nvmlShutdown", &n.shutdown) ||
      !bind(lib, "nvmlDeviceGetCount_v2", &n.count) || !bind(lib, "nvmlDeviceGetHandleByIndex_v2", &n.handle) ||
      !bind(lib, "nvmlDeviceGetName", &n.name)) {
    m.why_not = "NVML lacks the expected entry points";
    return m;
  }
  bind(lib, "nvmlDeviceGetNvLinkState", &n.link_state);
  bind(lib, "nvmlDeviceGetP2PStatus", &n.p2p_status);
  if (n.init() != 0) {
    m.why_not = "nvmlInit failed (driver not loaded?)";
    return m;
  }
  unsigned count = 0;
  n.count(&count);
  std::vector<NvmlDevice> devs(count);
  for (unsigned i = 0; i < count; ++i) {
    char name[96] = {0};
    if (n.handle(i, &devs[i]) != 0) continue;
    n.name(devs[i], name, sizeof(name));
    m.gpus.push_back(name);
    int links = 0;
    for (unsigned l = 0; n.link_state && l < kMaxLinks; ++l) {
      int active = 0;
      if (n.link_state(devs[i], l, &active) != 0) break;
      links += active ? 1 : 0;
    }
    m.nvlink_links.push_back(links);
  }
  m.all_pairs_p2p = count > 1 && n.p2p_status;
  for (unsigned i = 0; m.all_pairs_p2p && i < count; ++i)
    for (unsigned j = 0; j < count; ++j) {
      int status = 1;
      if (i != j && (n.p2p_status(devs[i], devs[j], 0, &status) != 0 || status != 0)) m.all_pairs_p2p = false;
    }
  n.shutdown();
  m.ok = count > 0;
  if (!m.ok) m.why_not = "NVML sees no GPU";
  return m;
}

std::vector<GpuMemory> gpu_memory_info() {
  std::vector<GpuMemory> out;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return out;
  struct NvmlMemory {  // nvmlMemory_t
    unsigned long long total, free, used;
  };
  Nvml n{};
  int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  if (!bind(lib, "nvmlInit_v2", &n.init) || !bind(lib, "nvmlShutdown", &n.shutdown) ||
      !bind(lib, "nvmlDeviceGetCount_v2", &n.count) || !bind(lib, "nvmlDeviceGetHandleByIndex_v2", &n.handle) ||
      !bind(lib, "nvmlDeviceGetMemoryInfo", &memory) || n.init() != 0)
    return out;
  unsigned count = 0;
  n.count(&count);
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice d = nullptr;
    NvmlMemory m{};
    GpuMemory g;
    if (n.handle(i, &d) == 0 && memory(d, &m) == 0) {
      g.free_bytes = static_cast<int64_t>(m.free);
      g.total_bytes = static_cast<int64_t>(m.total);
    }
    out.push_back(g);
  }
  n.shutdown();
  return out;
}

Json to_json(const DetectedMachine& m) {
  Json j{{"ok", m.ok}, {"gpus", m.gpus}, {"nvlink_links", m.nvlink_links}, {"all_pairs_p2p", m.all_pairs_p2p}};
  if (!m.ok) j["why_not"] = m.why_not;
  return j;
}

std::string match_topology(const DetectedMachine& m, const std::string& source_dir) {
  if (!m.ok) return "";
  std::string dir = source_dir + "/topology";
  DIR* d = opendir(dir.c_str());
  if (!d) return "";
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string f = e->d_name;
    if (f.size() > 5 && f.substr(f.size() - 5) == ".json") names.push_back(f.substr(0, f.size() - 5));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (is_calibrated_name(name)) continue;  // datasheets only (NOTE [calibrated roofline])
    Topology t = load_topology(name, source_dir);
    if (t.gpus == static_cast<int>(m.gpus.size()) && !m.gpus.empty() && m.gpus[0] == t.gpu) return name;
  }
  return "";
}

}  // namespace pkb
