// NOTE [zygote]: ranks forked from the zygote, without an exec, set up as an
// exec'd rank is, and watched, killed and reported by the same launcher.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <ATen/Parallel.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "driver/launcher.h"
#include "driver/zygote.h"

namespace pkb {
namespace {

// What every spawned process runs (argv[1] says what to do).
int entry(const std::vector<std::string>& argv) {
  const std::string what = argv.at(1);
  if (what == "report") {
    // Into the rank's log: what an exec'd rank would see.
    std::ifstream f("/proc/self/cmdline");
    std::string cmd;
    for (std::string w; std::getline(f, w, '\0');) cmd += w + " ";
    std::printf("%srank=%s world=%s extra=%s omp=%d group_leader=%d parent=%d\n", cmd.c_str(), std::getenv("RANK"),
                std::getenv("WORLD_SIZE"), std::getenv("PKB_TEST_EXTRA"), at::get_num_threads(),
                getpgrp() == getpid() ? 1 : 0, static_cast<int>(getppid()));
    return std::atoi(std::getenv("RANK")) == 1 ? 3 : 0;
  }
  if (what == "crash" && std::string(std::getenv("RANK")) == "1") raise(SIGSEGV);
  sleep(60);
  return 0;
}

LaunchSpec spec_for(const std::string& what, int world, double deadline) {
  Zygote::start(entry);
  LaunchSpec spec;
  spec.argv = {"pkb", what};
  spec.world = world;
  spec.zygote = true;
  spec.log_dir = testing::TempDir() + "/pkb_zygote_" + std::to_string(getpid()) + "_" + what;
  spec.deadline_s = deadline;
  spec.grace_after_failure_s = 0.3;
  spec.term_to_kill_s = 0.5;
  return spec;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool gone(pid_t pid) {
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  return !std::getline(st, line) || line.substr(line.rfind(')') + 2, 1) == "Z";
}

TEST(Zygote, RanksSeeTheirEnvironmentLogAndGroup) {
  LaunchSpec spec = spec_for("report", 2, 30);
  ASSERT_NE(Zygote::get(), nullptr) << "no zygote: this test process had more than one thread";
  spec.env["PKB_TEST_EXTRA"] = "x1";
  spec.env["OMP_NUM_THREADS"] = "1";
  LaunchResult r = launch_and_wait(spec);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_TRUE(r.ranks[0].exited);
  EXPECT_EQ(r.ranks[0].exit_code, 0);
  EXPECT_TRUE(r.ranks[1].exited);
  EXPECT_EQ(r.ranks[1].exit_code, 3);  // an exit code comes through
  const std::string z = std::to_string(Zygote::get()->pid());
  EXPECT_EQ(read_all(spec.log_dir + "/rank_0.log"),
            "pkb report rank=0 world=2 extra=x1 omp=1 group_leader=1 parent=" + z + "\n");
  EXPECT_EQ(read_all(spec.log_dir + "/rank_1.log"),
            "pkb report rank=1 world=2 extra=x1 omp=1 group_leader=0 parent=" + z + "\n");
  // The zygote's own line says what it is (a candidate looking for the
  // driver by its `run` finds the driver, as before).
  std::ifstream zc("/proc/" + z + "/cmdline");
  std::string zcmd((std::istreambuf_iterator<char>(zc)), std::istreambuf_iterator<char>());
  EXPECT_EQ(zcmd, std::string("pkb\0zygote\0", 11));
  // The test process's own environment is untouched.
  EXPECT_EQ(std::getenv("PKB_TEST_EXTRA"), nullptr);
}

TEST(Zygote, CrashIsReportedAndPeersAreKilled) {
  LaunchSpec spec = spec_for("crash", 2, 60);
  ASSERT_NE(Zygote::get(), nullptr);
  LaunchResult r = launch_and_wait(spec);
  EXPECT_EQ(r.first_failed_rank, 1);
  EXPECT_EQ(r.ranks[1].signal, SIGSEGV);
  EXPECT_TRUE(r.ranks[0].killed_by_harness);
  EXPECT_LT(r.wall_s, 10);
  for (const auto& e : r.ranks) EXPECT_TRUE(gone(e.pid));
}

TEST(Zygote, DeadlineKillsItsRanksAndTheZygoteLivesOn) {
  LaunchSpec spec = spec_for("sleep", 2, 0.5);
  ASSERT_NE(Zygote::get(), nullptr);
  LaunchResult r = launch_and_wait(spec);
  EXPECT_TRUE(r.deadline_hit);
  for (const auto& e : r.ranks) {
    EXPECT_TRUE(e.killed_by_harness);
    EXPECT_TRUE(gone(e.pid));
  }
  EXPECT_FALSE(gone(Zygote::get()->pid()));
  // And it serves the next launch.
  LaunchSpec again = spec_for("report", 1, 30);
  LaunchResult r2 = launch_and_wait(again);
  EXPECT_TRUE(r2.ranks[0].exited);
  EXPECT_EQ(r2.ranks[0].exit_code, 0);
}

TEST(Zygote, WithoutOneTheRanksAreExecd) {
  LaunchSpec spec = spec_for("report", 1, 30);
  ASSERT_NE(Zygote::get(), nullptr);
  kill(Zygote::get()->pid(), SIGKILL);  // lost: the launcher falls back to the exec
  spec.argv = {"/bin/sh", "-c", "echo exec $RANK"};
  LaunchResult r = launch_and_wait(spec);
  EXPECT_TRUE(r.ranks[0].exited);
  EXPECT_EQ(r.ranks[0].exit_code, 0);
  EXPECT_EQ(read_all(spec.log_dir + "/rank_0.log"), "exec 0\n");
}

}  // namespace
}  // namespace pkb
