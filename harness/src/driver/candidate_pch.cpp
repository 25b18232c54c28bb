#include "driver/candidate_pch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>

#include "common/files.h"
#include "driver/candidate_build.h"

namespace pkb {

const char* precompiled_header_source() { return "#include <pkb/solution.h>\n"; }

namespace {

// Headers unused (mtime: their last use) for kPchKeepDays, other than `keep`.
void prune_unused(const std::string& cache, const std::string& keep) {
  DIR* d = opendir(cache.c_str());
  if (!d) return;
  const time_t cutoff = time(nullptr) - kPchKeepDays * 86400;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("pch-", 0) != 0 || name == keep) continue;
    const std::string gch = cache + "/" + name + "/candidate.h.gch";
    struct stat st;
    if (stat(gch.c_str(), &st) == 0 && st.st_mtime < cutoff) {
      unlink(gch.c_str());
      unlink((cache + "/" + name + "/candidate.h").c_str());
      unlink((cache + "/" + name + "/build.log").c_str());
      rmdir((cache + "/" + name).c_str());
    }
  }
  closedir(d);
}

// Builds dir/candidate.h.gch; true when it is there.
bool build_header(const std::string& compiler, const std::string& flags, const std::string& dir, double timeout_s,
                  std::string* log) {
  run_command("mkdir -p " + shell_quote(dir), nullptr);
  const std::string header = dir + "/candidate.h";
  const std::string gch = header + ".gch";
  // Parallel drivers (ctest -j, two runs) take turns: the second finds the first's.
  const int lock = open((dir + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return false;
  flock(lock, LOCK_EX);
  bool ok = is_regular_file(gch);
  if (!ok) {
    {
      std::ofstream h(header);
      h << precompiled_header_source();
    }
    const std::string tmp = gch + ".tmp." + std::to_string(getpid());
    int st = 0;
    const std::string cmd = shell_quote(compiler) + flags + " -x c++-header -o " + shell_quote(tmp) + " " +
                            shell_quote(header);
    const std::string out = run_command(cmd, &st, timeout_s);
    std::ofstream(dir + "/build.log") << "$ " << cmd << "\n" << out;
    ok = st == 0 && rename(tmp.c_str(), gch.c_str()) == 0;
    if (!ok) {
      unlink(tmp.c_str());
      if (log) *log = out;
    }
  }
  flock(lock, LOCK_UN);
  close(lock);
  return ok;
}

}  // namespace

std::string precompiled_header(const std::string& compiler, const std::string& compiler_version,
                               const std::string& flags, const std::string& key, double timeout_s,
                               std::string* log) {
  // GCC's .gch; clang reads precompiled headers another way.
  if (compiler_version.find("Free Software Foundation") == std::string::npos) return "";
  // Once per process and key: a failed build is not retried for every candidate.
  static std::mutex mu;
  static std::map<std::string, bool> built;
  std::lock_guard<std::mutex> lock(mu);
  const std::string name = "pch-" + key;
  const std::string dir = cache_dir() + "/" + name;
  auto it = built.find(key);
  if (it == built.end()) {
    it = built.emplace(key, build_header(compiler, flags, dir, timeout_s, log)).first;
    if (it->second) prune_unused(cache_dir(), name);
  }
  if (!it->second) return "";
  utime((dir + "/candidate.h.gch").c_str(), nullptr);  // in use: not pruned
  return dir + "/candidate.h";
}

}  // namespace pkb
