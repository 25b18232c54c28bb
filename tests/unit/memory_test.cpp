// NOTE [OOM kills], NOTE [memory admission], NOTE [memory record].
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "common/memory_record.h"
#include "driver/launcher.h"
#include "driver/memory_admission.h"
#include "driver/memory_cgroup.h"
#include "driver/report.h"

namespace pkb {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(OomKills, KernelLogLinesNameThePid) {
  EXPECT_EQ(oom_killed_pid("6,1234,327888630,-;Memory cgroup out of memory: Killed process 7706 (python3) "
                           "total-vm:211200kB, anon-rss:194816kB"),
            7706);
  EXPECT_EQ(oom_killed_pid("3,99,1,-;Out of memory: Killed process 42 (pkb) total-vm:4kB"), 42);
  EXPECT_EQ(oom_killed_pid("6,1,1,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
                           "task=pkb,pid=5150,uid=0"),
            5150);
  EXPECT_EQ(oom_killed_pid("6,1,1,-;EXT4-fs (vda): mounted filesystem, pid=12"), -1);
  EXPECT_EQ(oom_killed_pid("6,1,1,-;random: crng reseeded"), -1);
}

TEST(OomKills, WhosePhaseDecides) {
  // The candidate's code: its load (static initialisers), its calls, the timing.
  for (const char* p : {"load", "trial 0 (published): candidate", "trial 7 (refresh in place): candidate", "timing"})
    EXPECT_TRUE(candidate_phase(p, false)) << p;
  // The harness's: set-up, the input draw and clones, the reference, the recheck.
  for (const char* p : {"setup", "drop privileges", "trial 0 (published)", "trial 2 (integrity): reference",
                        "recheck", "golden"})
    EXPECT_FALSE(candidate_phase(p, false)) << p;
  // A reference or audit run: every phase is the harness's.
  EXPECT_FALSE(candidate_phase("trial 0 (published): candidate", true));
  EXPECT_FALSE(candidate_phase("timing", true));

  OomVerdict h = oom_outcome("trial 0 (published): reference", false, 0, "the kernel log names pid 9");
  EXPECT_EQ(h.outcome, Outcome::kHarnessError);
  EXPECT_NE(h.reason.find("out of memory"), std::string::npos);
  EXPECT_NE(h.reason.find("pid 9"), std::string::npos);
  OomVerdict c = oom_outcome("trial 0 (published): candidate", false, -1, "x");
  EXPECT_EQ(c.outcome, Outcome::kRuntimeError);
  EXPECT_NE(c.reason.find("out of memory"), std::string::npos);
  EXPECT_EQ(oom_outcome("trial 0 (published): candidate", true, -1, "x").outcome, Outcome::kHarnessError);
  // A harness phase after the candidate's calls left 1 GiB resident: the candidate's.
  OomVerdict left = oom_outcome("trial 1 (published): reference", false, kGiB, "x");
  EXPECT_EQ(left.outcome, Outcome::kRuntimeError);
  EXPECT_NE(left.reason.find("1.00 GiB left resident by the candidate's calls"), std::string::npos) << left.reason;
  // Within the slack, or for the reference as the candidate: the harness's.
  EXPECT_EQ(oom_outcome("trial 1 (published): reference", false, kCandidateRetainedSlack, "x").outcome,
            Outcome::kHarnessError);
  EXPECT_EQ(oom_outcome("trial 1 (published): reference", true, kGiB, "x").outcome, Outcome::kHarnessError);
}

// A real OOM kill, confined to a cgroup of the test's own with a 64 MiB
// limit; skipped where no such cgroup can be made (not root, no delegation).
TEST(OomKills, RealKillInAnEvaluationCgroupIsCounted) {
  EvalCgroup cg("pkb-unit-" + std::to_string(getpid()), 64 << 20);
  if (!cg.ok()) GTEST_SKIP() << "no cgroup of our own here: " << cg.why_not();
  KernelLogWatch log;
  LaunchSpec spec;
  // The shell holds 256 MB of output in a variable: past the limit.
  spec.argv = {"/bin/sh", "-c", "x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo survived"};
  spec.world = 1;
  spec.log_dir = testing::TempDir() + "/pkb_oom_" + std::to_string(getpid());
  spec.deadline_s = 60;
  spec.cgroup_procs = cg.procs_path();
  LaunchResult r = launch_and_wait(spec);
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].signal, SIGKILL);
  EXPECT_FALSE(r.ranks[0].killed_by_harness);
  EXPECT_GE(cgroup_oom_kills(cg.cgroup()), 1);
  EXPECT_GT(cgroup_peak_bytes(cg.cgroup()), 32 << 20);
  if (log.readable()) EXPECT_EQ(log.oom_killed().count(r.ranks[0].pid), 1u);
}

MemoryPool host(int64_t per_rank, int ranks, int64_t have, int64_t capacity) {
  MemoryPool p;
  p.name = "host memory";
  p.per_rank_bytes = per_rank;
  p.ranks = ranks;
  p.need_bytes = per_rank * ranks;
  p.have_bytes = have;
  p.capacity_bytes = capacity;
  p.have_source = "MemAvailable";
  return p;
}

TEST(MemoryAdmission, Decisions) {
  // Fits in 90% of what is free: run.
  EXPECT_EQ(decide_admission({host(4 * kGiB, 4, 21 * kGiB, 24 * kGiB)}).action, Admission::kRun);
  // Fits the machine but not what is free now: wait.
  AdmissionDecision w = decide_admission({host(4 * kGiB, 4, 10 * kGiB, 24 * kGiB)}, 12);
  EXPECT_EQ(w.action, Admission::kWait);
  EXPECT_NE(w.reason.find("needs 16.00 GiB (4.00 GiB per rank x 4 ranks)"), std::string::npos) << w.reason;
  EXPECT_NE(w.reason.find("10.00 GiB available"), std::string::npos) << w.reason;
  EXPECT_NE(w.reason.find("waited 12 s"), std::string::npos) << w.reason;
  // More than the machine has (90% of it): refuse at once, naming the numbers.
  AdmissionDecision f = decide_admission({host(4 * kGiB, 4, 15 * kGiB, 16 * kGiB)});
  EXPECT_EQ(f.action, Admission::kRefuse);
  EXPECT_NE(f.reason.find("not enough memory: needs 16.00 GiB"), std::string::npos) << f.reason;
  EXPECT_NE(f.reason.find("16.00 GiB in all"), std::string::npos) << f.reason;
  // Nothing declared, or nothing known of the machine: run.
  EXPECT_EQ(decide_admission({}).action, Admission::kRun);
  EXPECT_EQ(decide_admission({host(0, 4, kGiB, kGiB)}).action, Admission::kRun);
  EXPECT_EQ(decide_admission({host(4 * kGiB, 4, -1, -1)}).action, Admission::kRun);
  // The tightest pool decides: a GPU that cannot hold its two ranks refuses.
  MemoryPool gpu = host(60 * kGiB, 2, 100 * kGiB, 139 * kGiB);  // 120 GiB: fits the GPU, not its free memory
  gpu.name = "GPU 0";
  AdmissionDecision g = decide_admission({host(kGiB, 2, 100 * kGiB, 128 * kGiB), gpu});
  EXPECT_EQ(g.action, Admission::kWait);
  gpu.per_rank_bytes = 80 * kGiB;
  gpu.need_bytes = 160 * kGiB;
  EXPECT_EQ(decide_admission({gpu}).action, Admission::kRefuse);
}

TEST(MemoryAdmission, RefusesAfterWaitingAndRunsAloneOtherwise) {
  const std::string lock = testing::TempDir() + "/pkb_mem_lock_" + std::to_string(getpid());
  MemoryNeed need;
  need.ranks = 2;
  need.limit_bytes = 2 * kGiB;  // capacity and availability: 2 GiB
  need.per_rank_bytes = kGiB;   // 2 GiB > 0.9 x 2 GiB: refused at once
  AdmissionResult r = admit_evaluation(need, 0.2, lock);
  EXPECT_FALSE(r.admitted);
  EXPECT_NE(r.reason.find("not enough memory: needs 2.00 GiB"), std::string::npos) << r.reason;
  need.per_rank_bytes = 256 << 20;  // 512 MiB: fits
  AdmissionResult ok = admit_evaluation(need, 0.2, lock);
  EXPECT_TRUE(ok.admitted);
  EXPECT_FALSE(ok.alone);
  // While that one runs (shared), an undeclared one still starts beside it.
  MemoryNeed light;
  AdmissionResult beside = admit_evaluation(light, 0.2, lock);
  EXPECT_TRUE(beside.admitted);
}

TEST(MemoryRecord, SummaryTakesTheLargestPerSide) {
  Json r0 = {{"rank", 0},
             {"memory",
              {{"host_peak_bytes", 300},
               {"sides", {{"harness", {{"host_peak_bytes", 200}}}, {"reference", {{"host_peak_bytes", 300}}}}}}}};
  Json r1 = {{"rank", 1},
             {"memory",
              {{"host_peak_bytes", 500},
               {"sides", {{"harness", {{"host_peak_bytes", 250}}}, {"candidate", {{"host_peak_bytes", 500}}}}}}}};
  Json m = memory_summary({r0, r1, Json::object()}, {{"oom_kills", 0}, {"cgroup_peak_bytes", 900}});
  EXPECT_EQ(m["host_peak_bytes"], 500);
  EXPECT_EQ(m["sides"]["harness"]["host_peak_bytes"], 250);
  EXPECT_EQ(m["sides"]["reference"]["host_peak_bytes"], 300);
  EXPECT_EQ(m["sides"]["candidate"]["host_peak_bytes"], 500);
  EXPECT_EQ(m["cgroup_peak_bytes"], 900);
  EXPECT_EQ(m["ranks"].size(), 2u);
  Json rec = {{"memory", m}};
  EXPECT_EQ(record_host_peak_bytes(rec), 500);
  EXPECT_EQ(record_device_peak_bytes(rec), -1);
  EXPECT_EQ(format_bytes(4 * kGiB + kGiB / 50), "4.02 GiB");
  EXPECT_EQ(format_bytes(512 << 20), "512 MiB");
}

TEST(MemoryRecord, SummaryNamesTheLargestPeak) {
  auto rec = [](int id, const char* slug, int64_t peak) {
    return Json{{"problem_id", id}, {"slug", slug}, {"outcome", "correct"}, {"world_size", 4},
                {"memory", {{"host_peak_bytes", peak}}}};
  };
  std::string md = summary_markdown({rec(1, "allreduce", 300 << 20), rec(60, "physicsnemo_distributed_irfft", 4 * kGiB)}, {});
  EXPECT_NE(md.find("largest memory peak of one rank: 4.00 GiB resident (60_physicsnemo_distributed_irfft, W=4)"),
            std::string::npos)
      << md;
  EXPECT_EQ(summary_markdown({Json{{"problem_id", 1}, {"slug", "allreduce"}, {"outcome", "correct"}}}, {})
                .find("largest memory peak"),
            std::string::npos);
}

}  // namespace
}  // namespace pkb
