// See NOTE [OOM kills] in memory_cgroup.h.
#include "driver/memory_cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include "common/files.h"

namespace pkb {

namespace {

std::string read_text(const std::string& path) { return read_if_present(path).value_or(""); }

bool write_text(const std::string& path, const std::string& text, std::string* why) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    if (why) *why = path + ": " + strerror(errno);
    return false;
  }
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (!ok && why) *why = path + ": " + strerror(errno);
  close(fd);
  return ok;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// "key value" lines (memory.events, memory.oom_control): the value of `key`.
int64_t keyed_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  long long v;
  while (in >> k >> v)
    if (k == key) return v;
  return -1;
}

int64_t number_file(const std::string& path) {
  std::string t = read_text(path);
  if (t.empty()) return -1;
  if (t.rfind("max", 0) == 0) return -1;
  return std::atoll(t.c_str());
}

// Mount points of the v2 hierarchy and of the v1 memory controller.
void mounts(std::string* v2, std::string* v1_memory) {
  std::istringstream in(read_text("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    // id parent maj:min root mount_point options ... - fstype source super_options
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream pre(line.substr(0, dash)), post(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, super;
    pre >> id >> parent >> dev >> root >> point;
    post >> fstype >> source >> super;
    if (fstype == "cgroup2" && v2->empty()) *v2 = point;
    if (fstype == "cgroup" && v1_memory->empty())
      for (const auto& o : split(super, ','))
        if (o == "memory") *v1_memory = point;
  }
}

}  // namespace

MemoryCgroup own_memory_cgroup() {
  MemoryCgroup cg;
  std::string v2_mount, v1_mount;
  mounts(&v2_mount, &v1_mount);
  std::istringstream in(read_text("/proc/self/cgroup"));
  std::string line, v2_path, v1_path;
  while (std::getline(in, line)) {
    // hierarchy-id:controllers:path
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && ctrl.empty()) v2_path = path;
    for (const auto& c : split(ctrl, ','))
      if (c == "memory") v1_path = path;
  }
  if (!v1_mount.empty() && !v1_path.empty()) {
    cg.found = true;
    cg.version = 1;
    cg.dir = v1_mount + (v1_path == "/" ? "" : v1_path);
    return cg;
  }
  if (!v2_mount.empty() && !v2_path.empty()) {
    std::string dir = v2_mount + (v2_path == "/" ? "" : v2_path);
    // The memory controller must be on in this cgroup (its files exist).
    if (access((dir + "/memory.events").c_str(), R_OK) == 0 || v2_path == "/") {
      cg.found = true;
      cg.version = 2;
      cg.dir = dir;
      return cg;
    }
    cg.why_not = "cgroup v2 without the memory controller at " + dir;
    return cg;
  }
  cg.why_not = "no memory cgroup (neither v1's memory controller nor v2 is mounted)";
  return cg;
}

int64_t cgroup_oom_kills(const MemoryCgroup& cg) {
  if (!cg.found) return -1;
  if (cg.version == 2) return keyed_value(read_text(cg.dir + "/memory.events"), "oom_kill");
  return keyed_value(read_text(cg.dir + "/memory.oom_control"), "oom_kill");
}

int64_t cgroup_peak_bytes(const MemoryCgroup& cg) {
  if (!cg.found) return -1;
  return number_file(cg.dir + (cg.version == 2 ? "/memory.peak" : "/memory.max_usage_in_bytes"));
}

int64_t cgroup_limit_bytes(const MemoryCgroup& cg) {
  if (!cg.found) return -1;
  int64_t v = number_file(cg.dir + (cg.version == 2 ? "/memory.max" : "/memory.limit_in_bytes"));
  // v1 says "no limit" with a page-rounded LLONG_MAX.
  return v >= (int64_t{1} << 60) ? -1 : v;
}

int64_t cgroup_usage_bytes(const MemoryCgroup& cg) {
  if (!cg.found) return -1;
  return number_file(cg.dir + (cg.version == 2 ? "/memory.current" : "/memory.usage_in_bytes"));
}

EvalCgroup::EvalCgroup(const std::string& name, int64_t limit_bytes) {
  MemoryCgroup parent = own_memory_cgroup();
  if (!parent.found) {
    why_not_ = parent.why_not;
    return;
  }
  if (parent.version == 2) {
    // Children get the memory controller only when the parent hands it down.
    std::string sub = read_text(parent.dir + "/cgroup.subtree_control");
    if (sub.find("memory") == std::string::npos && !write_text(parent.dir + "/cgroup.subtree_control", "+memory", &why_not_)) {
      why_not_ = "cannot enable the memory controller for children of " + parent.dir + " (" + why_not_ + ")";
      return;
    }
  }
  MemoryCgroup cg = parent;
  cg.dir = parent.dir + "/" + name;
  if (mkdir(cg.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    why_not_ = "mkdir " + cg.dir + ": " + strerror(errno);
    return;
  }
  if (limit_bytes > 0) {
    const std::string file = cg.dir + (cg.version == 2 ? "/memory.max" : "/memory.limit_in_bytes");
    if (!write_text(file, std::to_string(limit_bytes), &why_not_)) {
      rmdir(cg.dir.c_str());
      return;
    }
    // No swap to hide in, so that the limit means resident memory.
    if (cg.version == 2) write_text(cg.dir + "/memory.swap.max", "0", nullptr);
  }
  if (cgroup_oom_kills(cg) < 0) {
    why_not_ = "no oom_kill counter in " + cg.dir;
    rmdir(cg.dir.c_str());
    return;
  }
  cg_ = cg;
}

EvalCgroup::~EvalCgroup() {
  if (!cg_.found) return;
  // The ranks are reaped; their pages move to the parent on removal.
  for (int i = 0; i < 50 && rmdir(cg_.dir.c_str()) != 0 && errno == EBUSY; ++i) usleep(20000);
}

KernelLogWatch::KernelLogWatch() {
  fd_ = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ >= 0 && lseek(fd_, 0, SEEK_END) < 0) {
    close(fd_);
    fd_ = -1;
  }
}

KernelLogWatch::~KernelLogWatch() {
  if (fd_ >= 0) close(fd_);
}

const std::set<int>& KernelLogWatch::oom_killed() {
  if (fd_ < 0) return killed_;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd_, buf, sizeof(buf) - 1);
    if (n < 0 && errno == EPIPE) continue;  // records overwritten under us: go on with the next
    if (n <= 0) break;                      // EAGAIN: nothing new
    buf[n] = 0;
    int pid = oom_killed_pid(buf);
    if (pid > 0) killed_.insert(pid);
  }
  return killed_;
}

int oom_killed_pid(const std::string& line) {
  // "Out of memory: Killed process 123 (pkb) ..." and "Memory cgroup out of
  // memory: Killed process 123 ..."; "oom-kill:constraint=...,task=pkb,pid=123,uid=0".
  for (const char* tag : {"Killed process ", ",pid="}) {
    size_t at = line.find(tag);
    if (at == std::string::npos) continue;
    if (std::strcmp(tag, ",pid=") == 0 && line.find("oom-kill:") == std::string::npos) continue;
    int pid = std::atoi(line.c_str() + at + std::strlen(tag));
    if (pid > 0) return pid;
  }
  return -1;
}

bool candidate_phase(const std::string& phase, bool candidate_is_harness) {
  if (candidate_is_harness) return false;
  auto ends_with = [&](const std::string& s) {
    return phase.size() >= s.size() && phase.compare(phase.size() - s.size(), s.size(), s) == 0;
  };
  // "load" runs the candidate's static initialisers; the timing alternates
  // both sides on inputs the trials already ran, so what it adds is the
  // candidate's growth.
  return phase == "load" || phase == "timing" || ends_with(": candidate");
}

OomVerdict oom_outcome(const std::string& phase, bool candidate_is_harness, int64_t candidate_retained_bytes,
                       const std::string& evidence) {
  if (candidate_phase(phase, candidate_is_harness))
    return {Outcome::kRuntimeError, "out of memory: killed by the kernel's OOM killer while the candidate ran (phase '" +
                                        phase + "'; " + evidence + ")"};
  if (!candidate_is_harness && candidate_retained_bytes > kCandidateRetainedSlack)
    return {Outcome::kRuntimeError, "out of memory: killed by the kernel's OOM killer in phase '" + phase +
                                        "', with " + format_bytes(candidate_retained_bytes) +
                                        " left resident by the candidate's calls (" + evidence + "; NOTE [OOM kills])"};
  return {Outcome::kHarnessError, "out of memory: killed by the kernel's OOM killer in the harness's phase '" + phase +
                                      "' (" + evidence + "; not the candidate's doing; NOTE [OOM kills])"};
}

}  // namespace pkb
