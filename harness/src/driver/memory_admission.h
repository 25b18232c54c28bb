// Whether an evaluation's memory fits before it is launched (issue 26 item 3).
//
// NOTE [memory admission]
// need = the problem's declared peak per rank (PKB_MEMORY_ESTIMATE,
// pkb/memory_estimate.h, at this world size and shape) x the ranks on this machine (on a GPU: the
// ranks sharing the fullest GPU, against that GPU). have = what is free now:
// host MemAvailable (less, when the driver's cgroup has a limit, that
// limit's headroom; and within --memory-limit), a GPU's free memory from
// NVML (the driver never makes a CUDA context). capacity = the most there
// could ever be (MemTotal, the cgroup limit, --memory-limit; the GPU's
// total). Then, with kHeadroom = 0.9:
//   - need unknown (not declared): run.
//   - need > kHeadroom x capacity: refuse at once.
//   - need <= kHeadroom x have: run, beside other evaluations.
//   - otherwise wait (polling every 0.5 s, at most --memory-wait seconds):
//     for the other pkb evaluations on this machine to finish, then run
//     alone (the machine-wide lock below, taken exclusively), or for have to
//     grow enough; when the wait ends without it, refuse.
// Every evaluation holds /tmp/pkb-memory.lock (flock; not inherited by the
// ranks) shared while it runs, one running alone holds it exclusively, so
// two heavy evaluations of two drivers (CTest runs tests side by side) do
// not add up past the machine. A refusal is the record's `harness_error`
// "not enough memory: needs X (E per rank x W ranks), Y available (of Z)",
// left out of scores as every harness error is; the run goes on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pkb {

inline constexpr double kMemoryHeadroom = 0.9;

// One pool of memory an evaluation draws on (the host, or one GPU).
struct MemoryPool {
  std::string name;          // "host", "GPU 0"
  int64_t need_bytes = 0;    // 0: unknown
  int64_t per_rank_bytes = 0;
  int ranks = 0;
  int64_t have_bytes = -1;   // free now; -1: unknown
  int64_t capacity_bytes = -1;
  std::string have_source;   // "MemAvailable", "NVML", ...
};

enum class Admission { kRun, kWait, kRefuse };

// The decision for pools read now (pure; see the note). `waited_s` only
// words the refusal.
struct AdmissionDecision {
  Admission action = Admission::kRun;
  std::string reason;  // for kWait and kRefuse
};
AdmissionDecision decide_admission(const std::vector<MemoryPool>& pools, double waited_s = 0);

// The pools' have and capacity, read from this machine: the host (meminfo,
// the driver's cgroup, `limit_bytes` > 0) and, for `gpus` (CUDA indices), NVML.
struct MemoryNeed {
  int64_t per_rank_bytes = 0;
  int ranks = 0;
  bool cuda = false;
  std::vector<int> gpu_of_rank;  // cuda
  int64_t limit_bytes = 0;       // --memory-limit
};
std::vector<MemoryPool> read_pools(const MemoryNeed& need);

// Held while the evaluation runs (the lock of the note).
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  explicit AdmissionTicket(int fd) : fd_(fd) {}
  ~AdmissionTicket();
  AdmissionTicket(AdmissionTicket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  AdmissionTicket& operator=(AdmissionTicket&& o) noexcept;
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;

 private:
  int fd_ = -1;
};

struct AdmissionResult {
  bool admitted = true;
  bool alone = false;     // ran with the lock held exclusively
  double waited_s = 0;
  std::string reason;     // when refused
  std::vector<MemoryPool> pools;  // as last read
  AdmissionTicket ticket;
};

// Waits as the note says (at most `wait_s`); `lock_path` empty: the default.
AdmissionResult admit_evaluation(const MemoryNeed& need, double wait_s, const std::string& lock_path = "");

}  // namespace pkb
