// Starts one worker process per rank and watches them (DESIGN.md §3).
//
// NOTE [process lifetime]
// All ranks of one evaluation share one process group, so that whatever a
// candidate spawns dies with them. Each rank dies with the driver
// (PR_SET_PDEATHSIG). The driver waits for every rank; when one ends
// abnormally it gives the others a short grace period (peers blocked on a dead
// rank never finish) and then kills the group; at the deadline it sends TERM,
// then KILL. After the ranks are reaped the group is killed once more, so no
// process outlives its evaluation. Ranks the zygote forked (NOTE [zygote])
// are its children, not the driver's: it reports their exits, and the group
// and the parent-death signal hold as for exec'd ones.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/exit_codes.h"  // kWorkerExit*: how a rank ended

namespace pkb {

struct LaunchSpec {
  std::vector<std::string> argv;  // the same worker command for every rank
  int world = 1;
  std::map<std::string, std::string> env;  // added to this process's environment
  std::string log_dir;                     // rank_<r>.log (stdout and stderr)
  double deadline_s = 300;
  double grace_after_failure_s = 5;
  double term_to_kill_s = 2;
  // Where each rank writes its result (optional): a rank that exits, with any
  // status, while its file is missing has failed, and its peers get only
  // grace_after_missing_result_s (they would wait for it forever).
  std::vector<std::string> result_paths;
  double grace_after_missing_result_s = 0.5;
  // Called every watchdog_period_s; a non-empty answer ends the launch as a
  // deadline does, with that reason (the per-phase deadlines, NOTE [phase
  // deadlines] in driver/phase_watch.h).
  std::function<std::string()> watchdog;
  double watchdog_period_s = 0.1;
  // A cgroup's cgroup.procs each rank joins before exec (NOTE [OOM kills]).
  std::string cgroup_procs;
  // argv is `pkb worker JOB`: forked from the zygote when there is one
  // (NOTE [zygote]), exec'd otherwise.
  bool zygote = false;
};

struct RankExit {
  int rank = 0;
  int pid = 0;
  bool exited = false;   // exited normally (exit_code valid)
  bool missing_result = false;  // ended (any status) without its result file
  int exit_code = -1;
  int signal = 0;        // killed by this signal
  bool killed_by_harness = false;  // the signal was ours (deadline or peer failure)
  double seconds = 0;    // when it ended, from launch
};

struct LaunchResult {
  std::vector<RankExit> ranks;
  bool deadline_hit = false;
  std::string deadline_reason;     // from the watchdog; empty for the overall deadline
  bool peer_failure_kill = false;  // killed after another rank failed
  int first_failed_rank = -1;      // first rank to end abnormally, by time
  double wall_s = 0;
};

// A listening TCP socket on 127.0.0.1 with a free port, for the driver's
// TCPStore (no race between choosing a port and binding it).
struct StoreSocket {
  int fd = -1;
  int port = 0;
};
StoreSocket open_store_socket();

LaunchResult launch_and_wait(const LaunchSpec& spec);

// In a new rank's process, before it runs anything (exec'd, or forked from
// the zygote): its process group (0: one of its own), death with its parent,
// stdout and stderr to `log`, the evaluation's cgroup (empty: none), stdin
// /dev/null. Async-signal-safe: the exec path calls it in a fork of the
// threaded driver.
void enter_rank_process(pid_t pgid, const char* log, const char* cgroup_procs);

std::string signal_name(int sig);
// The last `max_bytes` of a file, for reasons quoted from a rank's log.
std::string tail_of_file(const std::string& path, size_t max_bytes = 2000);

}  // namespace pkb
