// descendants_of (common/process_tree.h): what a referee stops and the driver
// cleans up, read from /proc.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "common/process_tree.h"

namespace {

using pkb::descendants_of;

bool has(const std::vector<pid_t>& v, pid_t p) { return std::find(v.begin(), v.end(), p) != v.end(); }

TEST(ProcessTree, FindsChildAndGrandchildWhoseNameHoldsParentheses) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      // stat's second field is "(comm)": a name with ") (" must not shift the parent pid.
      prctl(PR_SET_NAME, "x) S 1 (y");
      pause();
      _exit(0);
    }
    (void)!write(fds[1], &grandchild, sizeof grandchild);
    pause();
    _exit(0);
  }
  pid_t grandchild = -1;
  ASSERT_EQ(read(fds[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  close(fds[0]);
  close(fds[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its prctl

  const std::vector<pid_t> found = descendants_of(getpid());
  EXPECT_TRUE(has(found, child));
  EXPECT_TRUE(has(found, grandchild));
  EXPECT_FALSE(has(found, getpid()));
  // Below the child: the grandchild, not the child itself, and not us.
  const std::vector<pid_t> below = descendants_of(child);
  EXPECT_EQ(below, std::vector<pid_t>{grandchild});

  kill(grandchild, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(has(descendants_of(getpid()), child));
}

}  // namespace
