#include "driver/zygote.h"

#include <ATen/Parallel.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <linux/prctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/process_tree.h"
#include "driver/launcher.h"

namespace pkb {

namespace {

Zygote* g_zygote = nullptr;

// One request: NUL-terminated strings, in order: the log, the cgroup.procs
// path, the process group, the argv count, the argv, then KEY=VALUE
// environment entries to the end. Kept in a static buffer, not the heap: the
// rank's environment points into it (putenv), and a contestant forked from
// the rank erases those strings there (NOTE [contestant start]), so that no
// copy of the store's address is left behind in memory it inherits.
constexpr size_t kRequestBytes = 128 * 1024;
char g_request[kRequestBytes];

struct Request {
  const char* log = nullptr;
  const char* cgroup = nullptr;
  pid_t pgid = 0;
  std::vector<const char*> argv;
  std::vector<char*> env;
};

bool parse_request(size_t n, Request* r) {
  if (n == 0 || n >= kRequestBytes || g_request[n - 1] != '\0') return false;
  std::vector<char*> s;
  for (size_t i = 0; i < n; i += std::strlen(g_request + i) + 1) s.push_back(g_request + i);
  if (s.size() < 4) return false;
  r->log = s[0];
  r->cgroup = s[1];
  r->pgid = static_cast<pid_t>(std::atol(s[2]));
  const size_t argc = static_cast<size_t>(std::atol(s[3]));
  if (argc == 0 || 4 + argc > s.size()) return false;
  for (size_t i = 0; i < argc; ++i) r->argv.push_back(s[4 + i]);
  for (size_t i = 4 + argc; i < s.size(); ++i) r->env.push_back(s[i]);
  return true;
}

// What /proc/<pid>/cmdline shows (ps, mem_peak.py, and what a candidate
// reads of its referee): an exec'd rank's command line, not the driver's,
// which a fork would otherwise keep. PR_SET_MM_MAP takes the process's
// current layout (/proc/self/stat) with only the arguments moved; where the
// kernel refuses (no CONFIG_CHECKPOINT_RESTORE), the driver's line stays.
// The kernel reads the line only from anonymous memory (not .bss, which
// shares its mapping with the binary's data): a page of its own.
constexpr size_t kCommandLineBytes = 4096;

void show_command_line(const std::vector<std::string>& argv) {
  static char* line_page = nullptr;
  if (!line_page) {
    void* p = mmap(nullptr, kCommandLineBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    line_page = static_cast<char*>(p);
  }
  size_t n = 0;
  for (const auto& a : argv) {
    if (n + a.size() + 1 > kCommandLineBytes) break;
    std::memcpy(line_page + n, a.c_str(), a.size() + 1);
    n += a.size() + 1;
  }
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (n == 0 || !std::getline(f, line) || line.rfind(')') == std::string::npos) return;
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::vector<std::string> field(2);  // proc(5)'s field k at k - 1; fields 1-2 (pid, comm) precede ')'
  for (std::string w; rest >> w;) field.push_back(w);
  if (field.size() < 51) return;
  auto at = [&field](int k) { return static_cast<__u64>(std::strtoull(field[k - 1].c_str(), nullptr, 10)); };
  prctl_mm_map m{};
  m.start_code = at(26);
  m.end_code = at(27);
  m.start_stack = at(28);
  m.start_data = at(45);
  m.end_data = at(46);
  m.start_brk = at(47);
  m.brk = reinterpret_cast<__u64>(sbrk(0));
  m.arg_start = reinterpret_cast<__u64>(line_page);
  m.arg_end = m.arg_start + n;
  m.env_start = at(50);
  m.env_end = at(51);
  m.exe_fd = static_cast<__u32>(-1);
  prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof m, 0);
}

void send_line(int fd, const std::string& m) {
  while (send(fd, m.data(), m.size(), MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

// The rank: set up as an exec'd one (enter_rank_process, the environment, as
// after an exec), then the entry. Never returns.
[[noreturn]] void run_rank(const Request& r, pid_t zygote, const sigset_t& mask, const Zygote::Entry& entry) {
  enter_rank_process(r.pgid, r.log, r.cgroup);
  if (getppid() != zygote) _exit(127);  // the zygote died before the parent-death signal was set
  for (char* kv : r.env) putenv(kv);
  prctl(PR_SET_DUMPABLE, 1);  // as after an exec
  prctl(PR_SET_NAME, "pkb");
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  // OpenMP read OMP_NUM_THREADS when libtorch loaded, in the driver: apply
  // this rank's value as an exec'd rank would have read it.
  if (const char* t = std::getenv("OMP_NUM_THREADS"))
    if (int n = std::atoi(t); n > 0) at::set_num_threads(n);
  std::vector<std::string> argv(r.argv.begin(), r.argv.end());
  show_command_line(argv);
  int code = 127;
  try {
    code = entry(argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "pkb: %s\n", e.what());
  }
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

// The zygote: spawns on request, reports exits; ends with the driver (its
// socket closes, or the parent-death signal).
[[noreturn]] void zygote_main(int fd, pid_t driver, const Zygote::Entry& entry) {
  setpgid(0, 0);  // not in the terminal's foreground group: the driver handles ^C
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != driver) _exit(0);
  prctl(PR_SET_NAME, "pkb-zygote");
  show_command_line({"pkb", "zygote"});
  prctl(PR_SET_DUMPABLE, 0);  // nothing of another user's may trace what starts the ranks
  sigset_t mask, chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &mask);
  const int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) _exit(0);
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      _exit(0);
    }
    if (p[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      }
      int st = 0;
      for (pid_t c; (c = waitpid(-1, &st, WNOHANG)) > 0;)
        send_line(fd, "exit " + std::to_string(c) + " " + std::to_string(st));
    }
    if (p[0].revents & POLLIN) {
      const ssize_t n = recv(fd, g_request, kRequestBytes, 0);
      if (n <= 0) _exit(0);
      Request r;
      if (!parse_request(static_cast<size_t>(n), &r)) {
        send_line(fd, "error malformed request");
      } else {
        const pid_t self = getpid();
        const pid_t pid = fork();
        if (pid == 0) {
          close(fd);
          close(sfd);
          run_rank(r, self, mask, entry);
        }
        if (pid > 0) setpgid(pid, r.pgid ? r.pgid : pid);  // before the driver may kill the group
        send_line(fd, pid > 0 ? "pid " + std::to_string(pid) : std::string("error fork: ") + strerror(errno));
      }
      std::memset(g_request, 0, static_cast<size_t>(n));
    } else if (p[0].revents & (POLLHUP | POLLERR)) {
      _exit(0);
    }
  }
}

}  // namespace

void Zygote::start(Entry entry) {
  const char* off = std::getenv("PKB_ZYGOTE");
  if ((off && std::string(off) == "0") || g_zygote || thread_count() != 1) return;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return;
  const pid_t driver = getpid();
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return;
  }
  if (pid == 0) {
    close(sv[0]);
    zygote_main(sv[1], driver, entry);
  }
  close(sv[1]);
  g_zygote = new Zygote(pid, sv[0]);
}

Zygote* Zygote::get() { return g_zygote; }

pid_t Zygote::spawn(const SpawnRequest& req) {
  std::string m;
  auto add = [&m](const std::string& s) {
    m += s;
    m.push_back('\0');
  };
  add(req.log);
  add(req.cgroup_procs);
  add(std::to_string(req.pgid));
  add(std::to_string(req.argv.size()));
  for (const auto& a : req.argv) add(a);
  for (const auto& [k, v] : req.env) add(k + "=" + v);
  if (m.size() >= kRequestBytes) return -1;
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return -1;
  if (send(fd_, m.data(), m.size(), MSG_NOSIGNAL) < 0) {
    lost_locked();
    return -1;
  }
  std::string reply;
  drain_locked(true, &reply);
  if (reply.rfind("pid ", 0) != 0) return -1;
  return static_cast<pid_t>(std::atol(reply.c_str() + 4));
}

bool Zygote::exited(pid_t pid, int* status) {
  std::lock_guard<std::mutex> lock(mu_);
  drain_locked(false, nullptr);
  auto it = exits_.find(pid);
  if (it == exits_.end()) {
    // A zygote that died took its ranks with it (parent-death signal).
    if (fd_ < 0) {
      *status = SIGKILL;  // as WIFSIGNALED with SIGKILL
      return true;
    }
    return false;
  }
  *status = it->second;
  exits_.erase(it);
  return true;
}

// Reads what the zygote sent: exits into exits_, and (when asked) blocks
// until the reply to a spawn.
void Zygote::drain_locked(bool block_for_reply, std::string* reply) {
  char buf[256];
  while (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, block_for_reply ? 10000 : 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (block_for_reply) lost_locked();  // a zygote that does not answer is no use
      return;
    }
    if (r < 0 || !(p.revents & POLLIN)) {
      lost_locked();
      return;
    }
    const ssize_t n = recv(fd_, buf, sizeof buf - 1, 0);
    if (n <= 0) {
      lost_locked();
      return;
    }
    buf[n] = '\0';
    int pid = 0, st = 0;
    if (std::sscanf(buf, "exit %d %d", &pid, &st) == 2) {
      exits_[pid] = st;
      continue;
    }
    if (block_for_reply) {
      *reply = buf;
      return;
    }
  }
}

void Zygote::lost_locked() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, WNOHANG);
}

}  // namespace pkb
