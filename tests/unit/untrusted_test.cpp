// Issue 11: the pieces of NOTE [untrusted candidates] that need no ranks.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "driver/candidate_build.h"
#include "driver/containment.h"
#include "driver/launcher.h"
#include "pkb/integrity.h"
#include "pkb/problem.h"
#include "worker/integrity.h"
#include "worker/nccl_guard.h"
#include "worker/route_guard.h"
#ifdef PKB_HAVE_CUDA
#include <nccl.h>
#endif

namespace pkb {
namespace {

TEST(IntegrityTrials, PublishedFirstThenIntegrity) {
  auto t = plan_trials(2, 3);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_FALSE(t[1].integrity);
  EXPECT_TRUE(t[2].integrity);
  EXPECT_EQ(t[2].index, 2);
  EXPECT_EQ(t[4].integrity_index, 2);
  EXPECT_STREQ(t[0].kind(), "published");
  EXPECT_STREQ(t[3].kind(), "integrity");
}

TEST(IntegrityTrials, SeedsNeverPublishedOnes) {
  for (int k = 0; k < 10; ++k)
    for (int t = 0; t < 100; ++t) EXPECT_NE(integrity_seed_for(1, 0, k), seed_for(1, 0, t));
  EXPECT_NE(integrity_seed_for(1, 0, 0), integrity_seed_for(1, 1, 0));
}

TEST(IntegrityTrials, SharedSeedIsRankZerosAndNewPerDraw) {
  InputRequest req;
  for (int k : {0, 1, 1000})
    for (int r = 0; r < 8; ++r) {
      req.rank = r;
      req.seed = integrity_seed_for(40, r, k);
      EXPECT_EQ(integrity_shared_seed(req), integrity_seed_for(40, 0, k));
    }
  req.rank = 3;
  req.seed = integrity_seed_for(40, 3, 1000);
  const uint64_t refresh = integrity_shared_seed(req);
  req.seed = integrity_seed_for(40, 3, 1);
  EXPECT_NE(refresh, integrity_shared_seed(req));
}

TEST(IntegrityTrials, ReplaceTensorsVariesByElement) {
  at::manual_seed(1);
  Inputs in;
  in.add("tensor", at::full({8, 8}, 1, at::kBFloat16));
  in.add("dst", int64_t{0});
  Inputs v = integrity_replace_tensors(in, -4, 4);
  EXPECT_EQ(v.tensor(0).scalar_type(), at::kBFloat16);
  EXPECT_GT(std::get<0>(at::_unique(v.tensor(0).flatten().to(at::kFloat))).numel(), 3);
  EXPECT_LE(v.tensor(0).abs().max().item<float>(), 4);
  EXPECT_EQ(v.integer(1), 0);
}

TEST(InputMutation, NamesTheInputTheCandidateChanged) {
  Inputs orig;
  orig.add("a", at::ones({4}));
  orig.add("b", at::ones({4}));
  Inputs ref = orig.clone(), cand = orig.clone();
  const_cast<at::Tensor&>(ref.tensor(1)).zero_();  // the reference mutates b by design
  const_cast<at::Tensor&>(cand.tensor(1)).fill_(7);
  EXPECT_EQ(changed_input(orig, ref, cand), "");
  const_cast<at::Tensor&>(cand.tensor(0)).fill_(2);
  EXPECT_NE(changed_input(orig, ref, cand).find("input 'a' (argument 0)"), std::string::npos);
}

TEST(Refresh, CopiesIntoTheSameStorage) {
  Inputs target;
  target.add("x", at::zeros({3}));
  target.add("k", int64_t{2});
  const void* p = target.tensor(0).data_ptr();
  Inputs fresh;
  fresh.add("x", at::ones({3}));
  fresh.add("k", int64_t{2});
  std::string why;
  ASSERT_TRUE(refresh_in_place(target, fresh, &why)) << why;
  EXPECT_EQ(target.tensor(0).data_ptr(), p);
  EXPECT_EQ(target.tensor(0).sum().item<float>(), 3);
  Inputs other;
  other.add("x", at::ones({4}));
  other.add("k", int64_t{2});
  EXPECT_FALSE(refresh_in_place(target, other, &why));
  EXPECT_NE(why.find("seed-dependent shape"), std::string::npos);
}

TEST(ForbiddenRoutes, DispatcherAndLoaderWalkers) {
  auto c = check_import_list({"c10::Dispatcher::realSingleton()"}, {});
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.reason.find("dispatcher"), std::string::npos);
  c = check_import_list({"dl_iterate_phdr"}, {});
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.reason.find("dl_iterate_phdr"), std::string::npos);
  c = check_import_list({"gloo::Context::Context(int, int, int)"}, {});
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(check_import_list({"at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)"},
                                {})
                  .ok);
}

TEST(ForbiddenRoutes, Strings) {
  EXPECT_TRUE(check_strings(std::string("\0ordinary\0strings", 17)).ok);
  auto c = check_strings(std::string("x\0_c10d_functional::all_reduce\0", 31));
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.reason.find("_c10d_functional"), std::string::npos);
  EXPECT_FALSE(check_strings("/proc/self/maps").ok);
}

// NOTE [NCCL calls counted]: this binary links the interposers statically, so
// its own calls reach them (the pkb executable also exports them: the
// cpu_e2e.nccl_interposed test). ncclGroupStart/End need no GPU.
TEST(NcclGuard, CallsInsideTheCandidateWindowAreViolations) {
#ifdef PKB_HAVE_CUDA
  ASSERT_TRUE(nccl_guard::active());
  EXPECT_EQ(nccl_guard::take_violation(), nullptr);
  const uint64_t before = nccl_guard::calls();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // the harness's own call: allowed
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(nccl_guard::calls(), before + 2);
  EXPECT_EQ(nccl_guard::take_violation(), nullptr);
  {
    CandidateRoutes::Hidden candidate_runs;
    {
      CandidateRoutes::Exposed harness_rendezvous;  // the harness inside a candidate call: allowed
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    }
    EXPECT_EQ(nccl_guard::take_violation(), nullptr);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // the candidate's: recorded
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  }
  EXPECT_STREQ(nccl_guard::take_violation(), "ncclGroupStart");
  EXPECT_EQ(nccl_guard::take_violation(), nullptr);  // taken once
  EXPECT_EQ(nccl_guard::calls(), before + 6);
#else
  EXPECT_FALSE(nccl_guard::active());
#endif
}

TEST(Launcher, ExitWithoutResultEndsTheLaunchAtOnce) {
  LaunchSpec spec;
  // Rank 1 exits 0 without writing its result; rank 0 would wait forever.
  spec.argv = {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 0; fi; sleep 60"};
  spec.world = 2;
  spec.log_dir = testing::TempDir() + "/pkb_early_" + std::to_string(getpid());
  spec.deadline_s = 60;
  spec.term_to_kill_s = 0.3;
  spec.result_paths = {spec.log_dir + "/r0", spec.log_dir + "/r1"};
  LaunchResult r = launch_and_wait(spec);
  EXPECT_EQ(r.first_failed_rank, 1);
  EXPECT_TRUE(r.ranks[1].missing_result);
  EXPECT_TRUE(r.ranks[0].killed_by_harness);
  EXPECT_LT(r.wall_s, 5);
}

TEST(Launcher, WatchdogEndsTheLaunchWithItsReason) {
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "sleep 60"};
  spec.world = 2;
  spec.log_dir = testing::TempDir() + "/pkb_watch_" + std::to_string(getpid());
  spec.deadline_s = 60;
  spec.term_to_kill_s = 0.3;
  int calls = 0;
  spec.watchdog = [&] { return ++calls > 3 ? std::string("phase x ran past its deadline") : std::string(); };
  LaunchResult r = launch_and_wait(spec);
  EXPECT_TRUE(r.deadline_hit);
  EXPECT_EQ(r.deadline_reason, "phase x ran past its deadline");
  EXPECT_LT(r.wall_s, 5);
}

TEST(Containment, KillsOrphansThatLeftTheirSession) {
  harden_driver();  // subreaper: the orphan below becomes our child
  std::string pidfile = testing::TempDir() + "/pkb_orphan_" + std::to_string(getpid());
  pid_t c = fork();
  if (c == 0) {
    setsid();
    if (fork() == 0) {
      std::ofstream(pidfile) << getpid();
      for (;;) pause();
    }
    _exit(0);
  }
  waitpid(c, nullptr, 0);
  pid_t orphan = 0;
  for (int i = 0; i < 200 && orphan == 0; ++i) {
    usleep(10000);
    std::ifstream f(pidfile);
    f >> orphan;
  }
  ASSERT_GT(orphan, 0);
  EXPECT_GE(kill_descendants(), 1);
  EXPECT_NE(kill(orphan, 0), 0);  // killed and reaped
  prctl(PR_SET_DUMPABLE, 1);
}

}  // namespace
}  // namespace pkb
