#include "common/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace pkb {

namespace {

// pid -> parent pid, for every process /proc lists. A referee walks this
// twice per stop of its contestant (NOTE [referee and contestant]), so each
// stat file is read with one read(2) into a stack buffer: on the 2-core CI
// VM a walk took 1.25 ms with ifstream and istringstream against 0.74 ms so
// (86 processes, under CI's load), 0.26 against 0.20 ms idle (66).
std::map<pid_t, pid_t> parents() {
  std::map<pid_t, pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  char path[64];
  char buf[1024];
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end || pid <= 0) continue;
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // gone meanwhile
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // The command may hold spaces and parentheses: the fields follow the
    // last ')' ("pid (comm) state ppid ...", all within the first read).
    const char* rp = std::strrchr(buf, ')');
    char state;
    long ppid;
    if (rp && std::sscanf(rp + 1, " %c %ld", &state, &ppid) == 2)
      out[static_cast<pid_t>(pid)] = static_cast<pid_t>(ppid);
  }
  closedir(d);
  return out;
}

}  // namespace

std::vector<pid_t> descendants_of(pid_t root) {
  std::map<pid_t, pid_t> pp = parents();
  std::set<pid_t> found{root};
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, ppid] : pp)
      if (found.count(ppid) && !found.count(pid)) {
        found.insert(pid);
        grew = true;
      }
  }
  found.erase(root);
  return {found.begin(), found.end()};
}

int thread_count() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

}  // namespace pkb
