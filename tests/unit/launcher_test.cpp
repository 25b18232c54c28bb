#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "driver/launcher.h"

namespace pkb {
namespace {

LaunchResult launch_sh(const std::string& script, int world, double deadline, double grace = 0.5) {
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.world = world;
  spec.log_dir = testing::TempDir() + "/pkb_launch_" + std::to_string(getpid());
  spec.deadline_s = deadline;
  spec.grace_after_failure_s = grace;
  spec.term_to_kill_s = 0.5;
  return launch_and_wait(spec);
}

TEST(Launcher, AllRanksExitCleanly) {
  LaunchResult r = launch_sh("test \"$WORLD_SIZE\" = 3 && test -n \"$RANK\"", 3, 30);
  ASSERT_EQ(r.ranks.size(), 3u);
  for (const auto& e : r.ranks) {
    EXPECT_TRUE(e.exited);
    EXPECT_EQ(e.exit_code, 0);
  }
  EXPECT_FALSE(r.deadline_hit);
  EXPECT_EQ(r.first_failed_rank, -1);
}

TEST(Launcher, CrashIsReportedAndPeersAreKilledAfterGrace) {
  LaunchResult r = launch_sh("if [ \"$RANK\" = 1 ]; then kill -SEGV $$; fi; sleep 60", 2, 60, 0.3);
  EXPECT_EQ(r.first_failed_rank, 1);
  EXPECT_EQ(r.ranks[1].signal, SIGSEGV);
  EXPECT_FALSE(r.ranks[1].killed_by_harness);
  EXPECT_TRUE(r.ranks[0].killed_by_harness);
  EXPECT_TRUE(r.peer_failure_kill);
  EXPECT_FALSE(r.deadline_hit);
  EXPECT_LT(r.wall_s, 10);
}

TEST(Launcher, DeadlineKillsTheWholeGroupIncludingGrandchildren) {
  std::string pidfile = testing::TempDir() + "/pkb_grandchild_" + std::to_string(getpid());
  LaunchResult r = launch_sh("sleep 60 & echo $! > " + pidfile + "_$RANK; wait", 2, 0.5);
  EXPECT_TRUE(r.deadline_hit);
  for (const auto& e : r.ranks) EXPECT_TRUE(e.killed_by_harness);
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream f(pidfile + "_" + std::to_string(rank));
    pid_t child = 0;
    f >> child;
    ASSERT_GT(child, 0);
    usleep(100000);
    // Gone, or at most a zombie waiting for init to reap it.
    std::ifstream st("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    if (std::getline(st, line)) {
      EXPECT_EQ(line.substr(line.rfind(')') + 2, 1), "Z") << line;
    }
  }
}

TEST(Launcher, StoreSocketHasAPort) {
  StoreSocket s = open_store_socket();
  EXPECT_GT(s.port, 0);
  EXPECT_GE(s.fd, 0);
  close(s.fd);
}

}  // namespace
}  // namespace pkb
