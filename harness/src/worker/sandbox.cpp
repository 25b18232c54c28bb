#include "worker/sandbox.h"

#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pkb {

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
