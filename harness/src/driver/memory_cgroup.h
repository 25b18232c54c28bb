// Each evaluation's ranks in a memory cgroup of their own, and the kernel's
// OOM kills among them (issue 26 item 2).
//
// NOTE [OOM kills]
// The kernel's OOM killer ends a process with SIGKILL, which alone says
// nothing (the harness kills with SIGKILL too). The driver tells an OOM kill
// apart by the kernel's own account:
//   1. A child cgroup per evaluation (EvalCgroup), made under the driver's
//      own memory cgroup when it can (root, or a delegated subtree; cgroup v2
//      with the memory controller enabled for children, or the v1 memory
//      hierarchy). Each rank joins it before exec; its "oom_kill" counter
//      (v2 memory.events, v1 memory.oom_control) counts the kills of its
//      processes by any OOM killer, the machine's or the cgroup's limit's,
//      and its peak (v2 memory.peak, v1 memory.max_usage_in_bytes) is the
//      evaluation's whole footprint, page cache included. --memory-limit
//      sets its limit (memory.max / memory.limit_in_bytes), so an evaluation
//      is OOM-killed alone instead of taking the machine down.
//   2. The kernel log (/dev/kmsg, when readable): "Killed process <pid>"
//      lines written during the evaluation name the killed ranks exactly.
//   3. Without a cgroup of its own: the counter of the cgroup the workers are
//      in (the driver's), read before and after (another process in it may
//      have been the one killed: used only when the log is unreadable).
// A rank ended by SIGKILL that the harness did not send is OOM-killed when
// the log names its pid, or (no log) when the counter rose. Whose memory it
// was is decided by the phase the rank was in (oom_outcome): the harness's
// (set-up, input draws and clones, the reference, comparisons) makes it
// `harness_error` "out of memory", the candidate's (load, its calls, the
// timing) the candidate's `runtime_error` "out of memory". The worker clones
// the candidate's inputs before it announces the candidate's phase, so that
// the clones count as the harness's. A candidate could leave memory behind
// (a leak, a cache, a thread that goes on allocating) for a harness phase to
// be killed in, and turn its failure into a harness error that scores leave
// out: so a harness-phase kill is the candidate's too when its calls left
// more than kCandidateRetainedSlack resident (the worker's store key
// pkb/memory/<rank>, NOTE [memory record]). That key is in the store a
// candidate can reach, so a hostile one can hide what it left (the kill is
// then the harness's, as without the key); once the candidate runs in a
// process of its own, the killed pid says whose memory it was.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "common/memory_record.h"
#include "common/outcome.h"
#include "common/results.h"

namespace pkb {

// The memory cgroup this process is in, as the kernel shows it.
struct MemoryCgroup {
  bool found = false;
  int version = 0;    // 1 or 2
  std::string dir;    // its folder under the cgroup file system
  std::string why_not;
};
MemoryCgroup own_memory_cgroup();

// Reads of a memory cgroup's files (-1: unreadable).
int64_t cgroup_oom_kills(const MemoryCgroup& cg);
int64_t cgroup_peak_bytes(const MemoryCgroup& cg);
int64_t cgroup_limit_bytes(const MemoryCgroup& cg);  // none: -1
int64_t cgroup_usage_bytes(const MemoryCgroup& cg);

class EvalCgroup {
 public:
  // Makes <own cgroup>/<name> (limit_bytes > 0: with that limit); when it
  // cannot, ok() is false and why_not() says why (nothing else changes).
  EvalCgroup(const std::string& name, int64_t limit_bytes);
  ~EvalCgroup();  // removes it (its processes must be gone)
  EvalCgroup(const EvalCgroup&) = delete;
  EvalCgroup& operator=(const EvalCgroup&) = delete;

  bool ok() const { return cg_.found; }
  const std::string& why_not() const { return why_not_; }
  // The file a process writes "0" into to join (empty when !ok()).
  std::string procs_path() const { return ok() ? cg_.dir + "/cgroup.procs" : ""; }
  const MemoryCgroup& cgroup() const { return cg_; }

 private:
  MemoryCgroup cg_;
  std::string why_not_;
};

// The kernel log from now on: which pids the OOM killer killed.
class KernelLogWatch {
 public:
  KernelLogWatch();
  ~KernelLogWatch();
  KernelLogWatch(const KernelLogWatch&) = delete;
  KernelLogWatch& operator=(const KernelLogWatch&) = delete;
  bool readable() const { return fd_ >= 0; }
  // Pids named by "Killed process <pid>" (or "oom-kill:... pid=<pid>") lines
  // logged since construction; reads what is new.
  const std::set<int>& oom_killed();

 private:
  int fd_ = -1;
  std::set<int> killed_;
};

// Parses one kernel log record; the OOM-killed pid, or -1.
int oom_killed_pid(const std::string& line);

// Whether phase `phase` (NOTE [phase deadlines]) runs the candidate's code.
// `candidate_is_harness`: the candidate is the reference or one of `pkb
// audit`'s trivial candidates, so every phase is the harness's.
bool candidate_phase(const std::string& phase, bool candidate_is_harness);

// The outcome and reason of a rank the OOM killer ended in `phase`.
struct OomVerdict {
  Outcome outcome;
  std::string reason;
};
inline constexpr int64_t kCandidateRetainedSlack = int64_t{256} << 20;
// `candidate_retained_bytes`: what the candidate's calls left resident on
// that rank (-1: unknown).
OomVerdict oom_outcome(const std::string& phase, bool candidate_is_harness, int64_t candidate_retained_bytes,
                       const std::string& evidence);

}  // namespace pkb
