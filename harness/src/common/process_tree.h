// The processes below one process, from /proc (every pid's parent), for the
// driver's clean-up (NOTE [untrusted candidates]) and a referee's stop of its
// contestant (NOTE [referee and contestant]); and this process's threads.
#pragma once

#include <sys/types.h>

#include <vector>

namespace pkb {

// Every living descendant of `root`, `root` itself left out.
std::vector<pid_t> descendants_of(pid_t root);

// This process's threads (-1: unknown). A fork is safe only from a process
// with one (NOTE [contestant start], NOTE [zygote]).
int thread_count();

}  // namespace pkb
