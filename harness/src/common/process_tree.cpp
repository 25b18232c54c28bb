#include "common/process_tree.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace pkb {

namespace {


// pid -> parent pid, for every process /proc lists.
std::map<pid_t, pid_t> parents() {
  std::map<pid_t, pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end || pid <= 0) continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
    std::string s;
    if (!std::getline(f, s)) continue;
    size_t rp = s.rfind(')');  // the command may hold spaces and parentheses
    if (rp == std::string::npos) continue;
    std::istringstream rest(s.substr(rp + 1));
    char state;
    long ppid;
    if (rest >> state >> ppid) out[static_cast<pid_t>(pid)] = static_cast<pid_t>(ppid);
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

}  // namespace pkb
