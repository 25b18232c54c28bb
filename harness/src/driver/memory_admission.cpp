// See NOTE [memory admission] in memory_admission.h.
#include "driver/memory_admission.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/memory_record.h"
#include "common/topology_detect.h"
#include "driver/memory_cgroup.h"

namespace pkb {

namespace {

std::string need_text(const MemoryPool& p) {
  return format_bytes(p.need_bytes) + " (" + format_bytes(p.per_rank_bytes) + " per rank x " +
         std::to_string(p.ranks) + " rank" + (p.ranks == 1 ? "" : "s") + ")";
}

int64_t meminfo_bytes(const std::string& key) {
  std::ifstream f("/proc/meminfo");
  std::string k;
  long long v;
  std::string unit;
  while (f >> k >> v >> unit)
    if (k == key + ":") return static_cast<int64_t>(v) * 1024;
  return -1;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

AdmissionDecision decide_admission(const std::vector<MemoryPool>& pools, double waited_s) {
  AdmissionDecision d;
  for (const auto& p : pools) {
    if (p.need_bytes <= 0) continue;
    if (p.capacity_bytes > 0 && p.need_bytes > kMemoryHeadroom * static_cast<double>(p.capacity_bytes)) {
      d.action = Admission::kRefuse;
      d.reason = "not enough memory: needs " + need_text(p) + " of " + p.name + ", which has " +
                 format_bytes(p.capacity_bytes) + " in all (NOTE [memory admission])";
      return d;
    }
    if (p.have_bytes >= 0 && p.need_bytes > kMemoryHeadroom * static_cast<double>(p.have_bytes) &&
        d.action == Admission::kRun) {
      d.action = Admission::kWait;
      char waited[64];
      std::snprintf(waited, sizeof(waited), "%.0f s", waited_s);
      d.reason = "not enough memory: needs " + need_text(p) + " of " + p.name + ", " + format_bytes(p.have_bytes) +
                 " available (" + p.have_source + ", of " + format_bytes(p.capacity_bytes) + "; waited " + waited +
                 "; NOTE [memory admission])";
    }
  }
  return d;
}

std::vector<MemoryPool> read_pools(const MemoryNeed& need) {
  std::vector<MemoryPool> pools;
  if (need.per_rank_bytes <= 0) return pools;
  if (!need.cuda) {
    MemoryPool h;
    h.name = "host memory";
    h.per_rank_bytes = need.per_rank_bytes;
    h.ranks = need.ranks;
    h.need_bytes = need.per_rank_bytes * need.ranks;
    h.have_bytes = meminfo_bytes("MemAvailable");
    h.capacity_bytes = meminfo_bytes("MemTotal");
    h.have_source = "MemAvailable";
    MemoryCgroup own = own_memory_cgroup();
    int64_t lim = cgroup_limit_bytes(own);
    if (lim > 0) {
      int64_t room = std::max<int64_t>(0, lim - std::max<int64_t>(0, cgroup_usage_bytes(own)));
      if (h.have_bytes < 0 || room < h.have_bytes) {
        h.have_bytes = room;
        h.have_source = "the driver's cgroup limit less its usage";
      }
      if (h.capacity_bytes < 0 || lim < h.capacity_bytes) h.capacity_bytes = lim;
    }
    if (need.limit_bytes > 0) {
      if (h.capacity_bytes < 0 || need.limit_bytes < h.capacity_bytes) h.capacity_bytes = need.limit_bytes;
      if (h.have_bytes < 0 || need.limit_bytes < h.have_bytes) {
        h.have_bytes = need.limit_bytes;
        h.have_source = "--memory-limit";
      }
    }
    pools.push_back(h);
    return pools;
  }
  // NVML counts GPUs its own way; CUDA_VISIBLE_DEVICES renumbers them.
  std::vector<int> nvml_of_cuda;
  if (const char* vis = std::getenv("CUDA_VISIBLE_DEVICES"); vis && *vis) {
    std::stringstream ss(vis);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      char* end = nullptr;
      long v = std::strtol(tok.c_str(), &end, 10);
      if (tok.empty() || *end) return pools;  // UUIDs: not mapped, no device check
      nvml_of_cuda.push_back(static_cast<int>(v));
    }
  }
  std::map<int, int> ranks_on;
  for (int g : need.gpu_of_rank) ranks_on[g]++;
  std::vector<GpuMemory> mem = gpu_memory_info();
  for (const auto& [g, k] : ranks_on) {
    int nv = nvml_of_cuda.empty() ? g : (g < static_cast<int>(nvml_of_cuda.size()) ? nvml_of_cuda[g] : -1);
    MemoryPool p;
    p.name = "GPU " + std::to_string(g);
    p.per_rank_bytes = need.per_rank_bytes;
    p.ranks = k;
    p.need_bytes = need.per_rank_bytes * k;
    if (nv >= 0 && nv < static_cast<int>(mem.size()) && mem[nv].total_bytes > 0) {
      p.have_bytes = mem[nv].free_bytes;
      p.capacity_bytes = mem[nv].total_bytes;
      p.have_source = "NVML free";
    }
    pools.push_back(p);
  }
  return pools;
}

AdmissionTicket::~AdmissionTicket() {
  if (fd_ >= 0) close(fd_);  // releases the lock
}

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

AdmissionResult admit_evaluation(const MemoryNeed& need, double wait_s, const std::string& lock_path) {
  AdmissionResult res;
  const std::string path = lock_path.empty() ? "/tmp/pkb-memory.lock" : lock_path;
  // O_CLOEXEC: the ranks (and whatever a candidate starts) never hold them.
  // The gate keeps new evaluations out while one waits to run alone (else a
  // stream of light ones, each holding the run lock shared, starves it).
  auto open_lock = [](const std::string& p) {
    int fd = open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) fchmod(fd, 0666);  // drivers of other users share them
    return fd;
  };
  int run = open_lock(path), gate = open_lock(path + ".gate");
  bool gate_held = false;
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    res.pools = read_pools(need);
    res.waited_s = seconds_since(t0);
    AdmissionDecision d = decide_admission(res.pools, res.waited_s);
    if (d.action == Admission::kRefuse) {
      res.admitted = false;
      res.reason = d.reason;
      break;
    }
    if (run < 0 || gate < 0) {  // no lock files: the memory check alone
      if (d.action == Admission::kRun) break;
    } else if (d.action == Admission::kRun) {
      // Beside others, unless one runs alone or waits to.
      if (gate_held || flock(gate, LOCK_EX | LOCK_NB) == 0) {
        gate_held = true;
        if (flock(run, LOCK_SH | LOCK_NB) == 0) {
          res.ticket = AdmissionTicket(run);
          run = -1;
          break;
        }
        if (need.per_rank_bytes <= 0) {  // nothing to wait for: let the others by
          flock(gate, LOCK_UN);
          gate_held = false;
        }
      }
    } else if (gate_held || flock(gate, LOCK_EX | LOCK_NB) == 0) {
      gate_held = true;
      if (flock(run, LOCK_EX | LOCK_NB) == 0) {
        // No other pkb evaluation runs: is there room for this one alone?
        res.pools = read_pools(need);
        if (decide_admission(res.pools, res.waited_s).action == Admission::kRun) {
          res.alone = true;
          res.ticket = AdmissionTicket(run);
          run = -1;
          break;
        }
        flock(run, LOCK_UN);
      }
    }
    // Only a lack of memory ends the wait; another's evaluation ends by its --timeout.
    if (d.action == Admission::kWait && res.waited_s >= wait_s) {
      res.admitted = false;
      res.reason = d.reason;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (run >= 0) close(run);
  if (gate >= 0) close(gate);  // releases the gate
  return res;
}

}  // namespace pkb
