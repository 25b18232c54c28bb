#include "worker/sandbox.h"

#include <dirent.h>
#include <dlfcn.h>
#include <grp.h>
#include <link.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

namespace pkb {

namespace {

int collect_dirs(struct dl_phdr_info* info, size_t, void* out) {
  auto* dirs = static_cast<std::set<std::string>*>(out);
  std::string name = info->dlpi_name ? info->dlpi_name : "";
  size_t slash = name.rfind('/');
  if (slash != std::string::npos &&
      (name.find("torch") != std::string::npos || name.find("nvidia") != std::string::npos ||
       name.find("cuda") != std::string::npos))
    dirs->insert(name.substr(0, slash));
  return 0;
}

bool lazy_family(const std::string& n) {
  for (const char* p : {"libcudnn", "libcufft", "libcusolver", "libcusparse", "libcurand", "libnvrtc",
                        "libnvJitLink", "libtorch_cuda_linalg"})
    if (n.rfind(p, 0) == 0) return n.find(".so") != std::string::npos;
  return false;
}

}  // namespace

int preload_lazy_libraries() {
  std::set<std::string> dirs;
  dl_iterate_phdr(collect_dirs, &dirs);
  // Sibling packages of a loaded nvidia/<pkg>/lib (cuDNN beside cuBLAS).
  std::set<std::string> more;
  for (const auto& d : dirs) {
    size_t k = d.find("/nvidia/");
    if (k == std::string::npos) continue;
    std::string root = d.substr(0, k + 8);
    if (DIR* dd = opendir(root.c_str())) {
      while (dirent* e = readdir(dd))
        if (e->d_name[0] != '.') more.insert(root + e->d_name + "/lib");
      closedir(dd);
    }
  }
  dirs.insert(more.begin(), more.end());
  int n = 0;
  for (const auto& d : dirs) {
    DIR* dd = opendir(d.c_str());
    if (!dd) continue;
    while (dirent* e = readdir(dd)) {
      std::string name = e->d_name;
      if (!lazy_family(name)) continue;
      if (dlopen((d + "/" + name).c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) continue;  // already loaded
      if (dlopen((d + "/" + name).c_str(), RTLD_LAZY | RTLD_GLOBAL)) ++n;
    }
    closedir(dd);
  }
  return n;
}

std::string drop_privileges(int uid, int gid) {
  if (setgroups(0, nullptr) != 0) return std::string("setgroups: ") + strerror(errno);
  if (setresgid(gid, gid, gid) != 0) return std::string("setresgid: ") + strerror(errno);
  if (setresuid(uid, uid, uid) != 0) return std::string("setresuid: ") + strerror(errno);
  if (setuid(0) == 0) return "still able to become root after dropping";
  prctl(PR_SET_DUMPABLE, 1);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return "the driver is gone";
  return "";
}

}  // namespace pkb
