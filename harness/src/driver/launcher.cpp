#include "driver/launcher.h"

#include <algorithm>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/files.h"
#include "driver/zygote.h"
#include "pkb/check.h"

namespace pkb {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// NOTE [zygote]: the zygote's ranks take the same request.
SpawnRequest spawn_request(const LaunchSpec& spec, int rank, pid_t pgid) {
  SpawnRequest q;
  q.argv = spec.argv;
  q.env = spec.env;
  q.env["RANK"] = q.env["LOCAL_RANK"] = std::to_string(rank);
  q.env["WORLD_SIZE"] = std::to_string(spec.world);
  q.log = spec.log_dir + "/rank_" + std::to_string(rank) + ".log";
  q.cgroup_procs = spec.cgroup_procs;
  q.pgid = pgid;
  return q;
}

// A rank without the zygote: fork and exec. The driver has threads by now
// (the store's server), so the child does only async-signal-safe work: its
// argv and environment are built before the fork.
pid_t fork_exec_rank(const SpawnRequest& q) {
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq || !q.env.count(std::string(*e, eq - *e))) env_s.push_back(*e);
  }
  for (const auto& [k, v] : q.env) env_s.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const auto& a : q.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  PKB_CHECK(pid >= 0, "fork(): ", strerror(errno));
  if (pid == 0) {
    enter_rank_process(q.pgid, q.log.c_str(), q.cgroup_procs.c_str());
    execve(argv[0], argv.data(), envp.data());
    const char msg[] = "pkb: exec of the rank's command failed: ";
    if (write(2, msg, sizeof msg - 1) < 0 || write(2, argv[0], std::strlen(argv[0])) < 0 || write(2, "\n", 1) < 0) {
    }
    _exit(127);
  }
  setpgid(pid, q.pgid ? q.pgid : pid);  // also from the parent, so the group exists before we may kill it
  return pid;
}

}  // namespace

void enter_rank_process(pid_t pgid, const char* log, const char* cgroup_procs) {
  setpgid(0, pgid);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  if (cgroup_procs[0]) {
    // Before the rank runs, so that its whole footprint is charged there;
    // when it cannot join, OOM kills are told apart less surely (NOTE [OOM
    // kills]).
    int cg = open(cgroup_procs, O_WRONLY | O_CLOEXEC);
    if (cg < 0 || write(cg, "0", 1) != 1) {
      const char msg[] = "pkb: this rank could not join its cgroup: ";
      if (write(2, msg, sizeof msg - 1) < 0 || write(2, cgroup_procs, std::strlen(cgroup_procs)) < 0 ||
          write(2, "\n", 1) < 0) {
      }
    }
    if (cg >= 0) close(cg);
  }
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) dup2(devnull, 0);
}

StoreSocket open_store_socket() {
  StoreSocket s;
  s.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  PKB_CHECK(s.fd >= 0, "socket(): ", strerror(errno));
  int one = 1;
  setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  PKB_CHECK(bind(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0, "bind(): ", strerror(errno));
  PKB_CHECK(listen(s.fd, 128) == 0, "listen(): ", strerror(errno));
  socklen_t len = sizeof(addr);
  PKB_CHECK(getsockname(s.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "getsockname(): ",
            strerror(errno));
  s.port = ntohs(addr.sin_port);
  return s;
}

LaunchResult launch_and_wait(const LaunchSpec& spec) {
  PKB_CHECK(spec.world >= 1 && !spec.argv.empty(), "bad launch spec");
  mkdir(spec.log_dir.c_str(), 0755);
  LaunchResult res;
  res.ranks.resize(spec.world);
  std::vector<pid_t> pids(spec.world, -1);
  pid_t pgid = 0;
  auto t0 = Clock::now();
  Zygote* zygote = spec.zygote ? Zygote::get() : nullptr;
  std::vector<bool> zygote_child(spec.world, false);
  for (int r = 0; r < spec.world; ++r) {
    const SpawnRequest q = spawn_request(spec, r, pgid);
    pid_t pid = zygote ? zygote->spawn(q) : -1;
    zygote_child[r] = pid > 0;
    if (pid <= 0) pid = fork_exec_rank(q);
    if (r == 0) pgid = pid;
    pids[r] = pid;
    res.ranks[r].rank = r;
    res.ranks[r].pid = pid;
  }

  int alive = spec.world;
  bool term_sent = false, kill_sent = false;
  double kill_at = -1, term_at = -1, next_watch = 0;
  while (alive > 0) {
    for (int r = 0; r < spec.world; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      const bool ended = zygote_child[r] ? zygote->exited(pids[r], &status)
                                         : waitpid(pids[r], &status, WNOHANG) == pids[r];
      if (!ended) continue;
      RankExit& e = res.ranks[r];
      e.seconds = since(t0);
      if (WIFEXITED(status)) {
        e.exited = true;
        e.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        e.signal = WTERMSIG(status);
        e.killed_by_harness = term_sent;
      }
      if (static_cast<int>(spec.result_paths.size()) > r && !e.killed_by_harness && !term_sent)
        e.missing_result = access(spec.result_paths[r].c_str(), F_OK) != 0;
      bool abnormal = !(e.exited && e.exit_code == kWorkerExitOk) || e.missing_result;
      if (abnormal && !e.killed_by_harness && res.first_failed_rank < 0) {
        res.first_failed_rank = r;
        // A rank whose candidate failed has told its peers through the store;
        // a peer still running after a second is stuck on it (a contestant
        // waiting for the dead one in a barrier its referee serves).
        double grace = e.missing_result ? spec.grace_after_missing_result_s
                       : e.exited && e.exit_code == kWorkerExitCandidateFailed
                           ? std::min(1.0, spec.grace_after_failure_s)
                           : spec.grace_after_failure_s;
        if (term_at < 0 || since(t0) + grace < term_at) term_at = since(t0) + grace;
      }
      pids[r] = -1;
      --alive;
    }
    if (alive == 0) break;
    double now = since(t0);
    if (!term_sent && now >= spec.deadline_s) {
      res.deadline_hit = true;
      term_at = now;
    }
    if (!term_sent && spec.watchdog && now >= next_watch) {
      next_watch = now + spec.watchdog_period_s;
      std::string why = spec.watchdog();
      if (!why.empty()) {
        res.deadline_hit = true;
        res.deadline_reason = why;
        term_at = now;
      }
    }
    if (!term_sent && term_at >= 0 && now >= term_at) {
      if (!res.deadline_hit) res.peer_failure_kill = true;
      killpg(pgid, SIGTERM);
      term_sent = true;
      kill_at = now + spec.term_to_kill_s;
    }
    if (term_sent && !kill_sent && now >= kill_at) {
      killpg(pgid, SIGKILL);
      kill_sent = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Anything the ranks left behind in their group goes too.
  killpg(pgid, SIGKILL);
  res.wall_s = since(t0);
  return res;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(sig);
  }
}

std::string tail_of_file(const std::string& path, size_t max_bytes) {
  std::string s = read_if_present(path).value_or("");
  if (s.size() > max_bytes) s = "..." + s.substr(s.size() - max_bytes);
  return s;
}

}  // namespace pkb
