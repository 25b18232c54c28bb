// See NOTE [memory record] in memory_probe.h.
#include "worker/memory_probe.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#ifdef PKB_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace pkb {

namespace {

// A "VmRSS:   123 kB" line of /proc/self/status, in bytes; -1 when absent.
int64_t status_field_bytes(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t v = -1;
  const size_t len = std::strlen(field);
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      long long kb = 0;
      if (std::sscanf(line + len + 1, "%lld", &kb) == 1) v = static_cast<int64_t>(kb) * 1024;
      break;
    }
  }
  std::fclose(f);
  return v;
}

// VmHWM back to the current resident set (Linux >= 4.0).
bool reset_peak_rss() {
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok;
}

void raise_to(Json& j, const char* key, int64_t v) {
  if (v < 0) return;
  if (!j.contains(key) || j[key].get<int64_t>() < v) j[key] = v;
}

}  // namespace

int64_t current_rss_bytes() { return status_field_bytes("VmRSS"); }

int64_t peak_rss_bytes() {
  int64_t hwm = status_field_bytes("VmHWM");
  if (hwm >= 0) return hwm;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // kB on Linux
}

MemoryProbe::MemoryProbe(at::Device device) : device_(device) {
  record_ = Json::object();
  record_["sides"] = Json::object();
#ifdef PKB_HAVE_CUDA
  if (device_.is_cuda()) {
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(device_.index()) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      record_["device_free_at_start_bytes"] = static_cast<int64_t>(free_b);
      record_["device_total_bytes"] = static_cast<int64_t>(total_b);
    } else {
      cudaGetLastError();
    }
  }
#endif
  interval_start_rss_ = std::max<int64_t>(0, current_rss_bytes());
}

void MemoryProbe::enter(const std::string& side) {
  if (side == "candidate" && before_candidate_rss_ < 0) before_candidate_rss_ = current_rss_bytes();
  charge(side_);
  if (side_ == "candidate" && before_candidate_rss_ >= 0) {
    const int64_t retained = std::max<int64_t>(0, interval_start_rss_ - before_candidate_rss_);
    raise_to(record_, "candidate_retained_bytes", retained);
    if (publish_) {
      try {
        publish_(std::to_string(record_["candidate_retained_bytes"].get<int64_t>()));
      } catch (const std::exception&) {
        // Best effort: without it a later harness-phase OOM is the harness's.
      }
    }
  }
  side_ = side;
}

void MemoryProbe::charge(const std::string& side) {
  Json& s = record_["sides"][side];
  if (!s.is_object()) s = Json::object();
  const int64_t peak = peak_rss_bytes();
  raise_to(s, "host_peak_bytes", peak);
  raise_to(s, "host_grow_bytes", std::max<int64_t>(0, peak - interval_start_rss_));
  raise_to(record_, "host_peak_bytes", peak);
#ifdef PKB_HAVE_CUDA
  if (device_.is_cuda()) {
    try {
      auto st = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
      constexpr size_t kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
      raise_to(s, "device_allocated_peak_bytes", st.allocated_bytes[kAll].peak);
      raise_to(s, "device_reserved_peak_bytes", st.reserved_bytes[kAll].peak);
      raise_to(record_, "device_reserved_peak_bytes", st.reserved_bytes[kAll].peak);
      c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
      size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        // The device's whole use (every process on it), at the marks.
        int64_t used = static_cast<int64_t>(total_b - free_b);
        raise_to(record_, "device_used_max_bytes", used);
      } else {
        cudaGetLastError();
      }
    } catch (const std::exception&) {
      // No allocator stats (no CUDA context yet): host numbers only.
    }
  }
#endif
  reset_ok_ = reset_peak_rss() && reset_ok_;
  record_["peaks_reset"] = reset_ok_;
  interval_start_rss_ = std::max<int64_t>(0, current_rss_bytes());
}

}  // namespace pkb
