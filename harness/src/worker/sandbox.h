// The worker's half of NOTE [untrusted candidates] (driver/containment.h):
// dropping root before the candidate is loaded.
#pragma once

#include <string>

namespace pkb {

// setgroups/setgid/setuid to (uid, gid), keeping the process dumpable (ranks
// of one evaluation share memory and file descriptors) and dying with the
// driver (the parent-death signal is cleared by a change of credentials).
// Returns an empty string on success, else why not.
std::string drop_privileges(int uid, int gid);

}  // namespace pkb
