// A process forked from the driver at its start that forks the ranks of
// every evaluation, so that no rank pays libtorch's start-up again.
//
// NOTE [zygote]
// An exec of `pkb worker` costs 0.3-0.6 s before main() (libtorch's static
// initialisation: its operator registry, on every rank of every evaluation);
// on 2 cores at W = 2 that was more than half of a short evaluation. The
// driver cannot fork its ranks without an exec itself: by then it has
// threads (the store's server, the candidate builds), and a fork from a
// threaded process may inherit a lock that no thread will release. So main()
// forks the zygote first, while the process has one thread and holds nothing
// of any evaluation (no store, no port, no candidate, no CUDA context). The
// zygote then forks each rank on request (spawn()), which sets itself up as
// an exec'd rank would (the launcher's process group, parent-death signal,
// log, cgroup, environment; default signal dispositions and mask, dumpable)
// and runs worker_main. Where the ranks' threads come from the environment
// (OMP_NUM_THREADS, read by OpenMP when libtorch loads), the rank applies it
// itself. The zygote reaps its ranks and reports each exit status; the
// driver's watch, deadlines and kills are unchanged (signals and process
// groups need no parenthood). A rank's strays still come to the driver, the
// subreaper: the zygote is not one. When the zygote is missing or fails, the
// launcher execs as before (PKB_ZYGOTE=0 forces that).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace pkb {

struct SpawnRequest {
  std::vector<std::string> argv;  // what the rank would have exec'd
  std::map<std::string, std::string> env;
  std::string log;           // its stdout and stderr
  std::string cgroup_procs;  // joined before it runs (empty: none)
  pid_t pgid = 0;            // 0: a group of its own
};

class Zygote {
 public:
  // What a spawned process runs (argv as it would have been exec'd); its
  // return value is the exit code.
  using Entry = std::function<int(const std::vector<std::string>& argv)>;

  // Forks the zygote. Call from main() while the process has one thread;
  // otherwise, or when PKB_ZYGOTE=0, there is none and spawn() is never used.
  static void start(Entry entry);
  // The running zygote, or nullptr.
  static Zygote* get();

  // A new process running the entry on `req`: its pid, or -1 (then exec).
  pid_t spawn(const SpawnRequest& req);
  // Whether `pid` (one of spawn()'s) has exited, without blocking; if so,
  // its wait status.
  bool exited(pid_t pid, int* status);
  pid_t pid() const { return pid_; }

 private:
  Zygote(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  void drain_locked(bool block_for_reply, std::string* reply);
  void lost_locked();

  pid_t pid_;
  int fd_;
  std::mutex mu_;
  std::map<pid_t, int> exits_;  // reported, not yet taken
};

}  // namespace pkb
