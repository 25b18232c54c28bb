#include "driver/evaluation.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <fstream>
#include <thread>

#include "common/build_info.h"
#include "common/files.h"
#include "common/memory_record.h"
#include "driver/launcher.h"
#include "driver/memory_cgroup.h"
#include "driver/phase_watch.h"
#include "pkb/check.h"
#include "worker/contestant.h"

namespace pkb {

std::vector<std::pair<std::string, std::string>> worker_policy_env() {
  return {{"NCCL_NVLS_ENABLE", "0"}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"}};
}

namespace {

Json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Json::object();
  Json j = Json::parse(f, nullptr, false);
  return j.is_discarded() ? Json::object() : j;
}

}  // namespace

EvalResult run_evaluation(const EvalRequest& req) {
  EvalResult res;
  mkdir(req.eval_dir.c_str(), 0755);
  Json job = req.job;
  job["result_dir"] = req.eval_dir;
  job["timeout_s"] = req.timeout_s;
  job["phase_floor_s"] = req.phase_floor_s;
  const WorkerUser& wu = req.worker_user;
  std::string cand = job.value("candidate", "reference");
  if (runs_in_contestant(job.value("mode", "eval"), cand)) {
    // NOTE [referee and contestant]: the contestant gets a folder of its own
    // (its working directory) with a copy of the candidate it can read; the
    // evaluation directory, where the referees write, is not writable to it.
    std::string cdir = req.eval_dir + "/contestant";
    mkdir(cdir.c_str(), 0755);
    std::string copy = cdir + "/candidate.so";
    std::ifstream in(cand, std::ios::binary);
    std::ofstream out(copy, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
    out.close();
    PKB_CHECK(in.good() || in.eof(), "cannot copy the candidate to ", copy);
    chmod(copy.c_str(), 0444);
    job["candidate"] = copy;
    job["contestant_dir"] = cdir;
    if (wu.uid >= 0) {
      job["contestant_uid"] = wu.uid;
      job["contestant_gid"] = wu.gid;
      if (chown(cdir.c_str(), wu.uid, wu.gid) != 0) {
        // Then the contestant cannot write its working directory; harmless.
      }
    }
  }
  std::string job_path = req.eval_dir + "/job.json";
  write_file_atomic(job_path, job.dump(2), true);
  for (int r = 0; r < req.world; ++r) unlink((req.eval_dir + "/rank_" + std::to_string(r) + ".json").c_str());

  LaunchSpec spec;
  spec.argv = {self_exe(), "worker", job_path};
  spec.zygote = true;  // NOTE [zygote]
  spec.world = req.world;
  spec.log_dir = req.eval_dir;
  spec.deadline_s = req.timeout_s;
  for (const auto& [k, v] : worker_policy_env()) spec.env[k] = v;
  spec.env["MASTER_ADDR"] = "127.0.0.1";
  if (job.value("device", "cpu") == "cpu") {
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    spec.env["OMP_NUM_THREADS"] = std::to_string(std::max(1u, cores / static_cast<unsigned>(req.world)));
  }
  // NOTE [store in the driver]
  // The driver, not rank 0, serves the evaluation's TCPStore: ranks finish and
  // exit at different times (or crash), and a store that died with rank 0
  // would turn its peers' last reads into spurious errors.
  StoreSocket sock = open_store_socket();
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(sock.port);
  so.isServer = true;
  so.waitWorkers = false;
  so.masterListenFd = sock.fd;  // the store takes the socket over
  auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  spec.env["MASTER_PORT"] = std::to_string(sock.port);
  for (int r = 0; r < req.world; ++r) spec.result_paths.push_back(req.eval_dir + "/rank_" + std::to_string(r) + ".json");
  PhaseWatch watch(*server, req.world, std::max(4 * req.phase_floor_s, 120.0), req.phase_floor_s);
  spec.watchdog = [&] { return watch.check(); };
  // NOTE [OOM kills]: the ranks' own cgroup, the kernel log, or the driver's cgroup's counter.
  static std::atomic<int> eval_seq{0};
  auto cgroup = std::make_unique<EvalCgroup>("pkb-" + std::to_string(getpid()) + "-" + std::to_string(eval_seq++),
                                             req.memory_limit_bytes);
  PKB_CHECK(cgroup->ok() || req.memory_limit_bytes <= 0, "--memory-limit needs a memory cgroup of the evaluation's own: ",
            cgroup->why_not());
  spec.cgroup_procs = cgroup->procs_path();
  const MemoryCgroup outer = cgroup->ok() ? MemoryCgroup{} : own_memory_cgroup();
  const int64_t outer_kills_before = cgroup_oom_kills(outer);
  KernelLogWatch kernel_log;
  open_eval_dir(req.eval_dir, wu);
  LaunchResult lr = launch_and_wait(spec);
  watch.check();  // the ranks' last phases, announced after the last poll
  // Whatever the ranks started, setsid() or not, is ours (subreaper): it goes.
  const int strays = kill_descendants();
  const std::set<int>& log_oom = kernel_log.oom_killed();
  const int64_t cgroup_kills = cgroup->ok() ? cgroup_oom_kills(cgroup->cgroup())
                                            : (outer_kills_before >= 0 ? cgroup_oom_kills(outer) - outer_kills_before : -1);
  const bool own_cgroup = cgroup->ok();  // only this evaluation's processes: a kill there is one of ours
  res.memory = Json::object();
  res.memory["oom_detection"] = cgroup->ok() ? "own cgroup v" + std::to_string(cgroup->cgroup().version)
                                : outer.found ? "the driver's cgroup (" + cgroup->why_not() + ")"
                                              : "none (" + cgroup->why_not() + ")";
  res.memory["kernel_log"] = kernel_log.readable();
  if (cgroup_kills >= 0) res.memory["oom_kills"] = cgroup_kills;
  if (cgroup->ok()) {
    res.memory["cgroup_peak_bytes"] = cgroup_peak_bytes(cgroup->cgroup());
    if (req.memory_limit_bytes > 0) res.memory["cgroup_limit_bytes"] = req.memory_limit_bytes;
  }
  cgroup.reset();  // removed: its processes are gone
  std::vector<int64_t> retained(req.world, -1);  // NOTE [OOM kills]: what the candidate's calls left resident
  for (int r = 0; r < req.world; ++r) {
    try {
      const std::string key = "pkb/memory/" + std::to_string(r);
      if (server->check({key})) {
        auto v = server->get(key);
        retained[r] = std::atoll(std::string(v.begin(), v.end()).c_str());
      }
    } catch (const std::exception&) {
    }
  }
  const bool candidate_is_harness = job.value("mode", "eval") != "eval" ||
                                    job.value("candidate", "reference") == "reference" ||
                                    job.value("candidate", "").rfind("audit:", 0) == 0;
  close_eval_dir(req.eval_dir, wu);
  server.reset();
  res.wall_s = lr.wall_s;

  res.process = Json::object();
  res.process["wall_s"] = lr.wall_s;
  res.process["deadline_hit"] = lr.deadline_hit;
  if (!lr.deadline_reason.empty()) res.process["deadline_reason"] = lr.deadline_reason;
  res.process["killed_after_peer_failure"] = lr.peer_failure_kill;
  res.process["strays_killed"] = strays;
  res.process["ranks"] = Json::array();

  Outcome best = Outcome::kCorrect;
  bool any = false;
  // The earliest outcome in the taxonomy wins; among equals, the lowest rank.
  struct RankOutcome {
    Outcome outcome;
    int rank;
    std::string reason;
  };
  std::vector<RankOutcome> attributable;  // the candidate's failures, earliest outcome first
  std::string oom_reason;  // the first rank the OOM killer ended in a harness phase
  int oom_rank = -1;
  auto consider = [&](Outcome o, int rank, const std::string& reason) {
    if (o != Outcome::kHarnessError && o != Outcome::kCorrect) {
      auto it = attributable.begin();
      while (it != attributable.end() && first_of(it->outcome, o) == it->outcome) ++it;
      attributable.insert(it, {o, rank, reason});
    }
    if (!any || (o != best && first_of(o, best) == o)) {
      best = o;
      res.deciding_rank = rank;
      res.reason = reason;
    }
    any = true;
  };
  for (int r = 0; r < req.world; ++r) {
    const RankExit& e = lr.ranks[r];
    std::string log = req.eval_dir + "/rank_" + std::to_string(r) + ".log";
    Json pj = {{"rank", r}, {"pid", e.pid}, {"seconds", e.seconds}, {"phase", watch.phase_of(r)}};
    Json spent = Json::object();  // NOTE [phase deadlines]: a report, no verdict
    for (const auto& [kind, s] : watch.seconds_by_kind(r, e.seconds)) spent[kind] = std::round(s * 100) / 100;
    pj["phase_s"] = spent;
    if (e.exited) pj["exit_code"] = e.exit_code;
    if (e.signal) pj["signal"] = signal_name(e.signal);
    pj["killed_by_harness"] = e.killed_by_harness;
    // NOTE [OOM kills]: the log names the pid; without a log, the counter rose.
    const bool oom = e.signal == SIGKILL && !e.killed_by_harness &&
                     (log_oom.count(e.pid) || (own_cgroup && cgroup_kills > 0) ||
                      (!kernel_log.readable() && cgroup_kills > 0));
    if (oom) pj["oom_killed"] = true;
    res.process["ranks"].push_back(pj);

    Json rj = read_json_file(req.eval_dir + "/rank_" + std::to_string(r) + ".json");
    res.ranks.push_back(rj);
    std::string prefix = "rank " + std::to_string(r) + ": ";
    // NOTE [referee and contestant]: a result counts only from a referee
    // that ended by itself with one of its own codes. One killed or stopped
    // (by its contestant, when they share a user) may have left a file its
    // contestant wrote.
    const bool referee_ended_well =
        e.exited && (e.exit_code == kWorkerExitOk || e.exit_code == kWorkerExitCandidateFailed ||
                     e.exit_code == kWorkerExitHarnessError);
    if (rj.contains("outcome") && referee_ended_well) {
      consider(outcome_from_name(rj["outcome"].get<std::string>()), r, prefix + rj.value("reason", ""));
      continue;
    }
    if (rj.contains("outcome")) res.process["ranks"].back()["result_ignored"] = "its process did not end by itself";
    // No result file: judge by how the process ended.
    if (oom) {
      std::string evidence = log_oom.count(e.pid) ? "the kernel log names pid " + std::to_string(e.pid)
                                                  : "the cgroup counted " + std::to_string(cgroup_kills) + " OOM kill(s)";
      if (res.memory.contains("cgroup_limit_bytes"))
        evidence += "; limit " + format_bytes(res.memory["cgroup_limit_bytes"].get<int64_t>()) + " for all ranks";
      if (res.memory.contains("cgroup_peak_bytes"))
        evidence += ", peak " + format_bytes(res.memory["cgroup_peak_bytes"].get<int64_t>());
      OomVerdict v = oom_outcome(watch.phase_of(r), candidate_is_harness, retained[r], evidence);
      consider(v.outcome, r, prefix + v.reason);
      if (v.outcome == Outcome::kHarnessError && oom_reason.empty()) {
        oom_reason = prefix + v.reason;
        oom_rank = r;
      }
    } else if (e.signal && !e.killed_by_harness) {
      consider(Outcome::kRuntimeError, r,
               prefix + "killed by " + signal_name(e.signal) + "\n" + tail_of_file(log, 1500));
    } else if (e.killed_by_harness && lr.deadline_hit) {
      consider(Outcome::kTimeout, r,
               !lr.deadline_reason.empty()
                   ? lr.deadline_reason
                   : prefix + "no result after " + std::to_string(static_cast<int>(req.timeout_s)) +
                         " s (deadlock or hang); killed");
    } else if (e.killed_by_harness) {
      // Killed because a peer failed first; the peer's outcome decides.
    } else if (e.exited && watch.phase_of(r) != "setup") {
      // Past set-up, only the candidate's code makes a worker leave without
      // its result (exit(), _exit(), a throw from a destructor...).
      consider(Outcome::kRuntimeError, r,
               prefix + "exited with status " + std::to_string(e.exit_code) + " before writing its result (in phase '" +
                   watch.phase_of(r) + "')\n" + tail_of_file(log, 1500));
    } else {
      consider(Outcome::kHarnessError, r,
               prefix + "exited with code " + std::to_string(e.exit_code) + " without a result\n" +
                   tail_of_file(log, 1500));
    }
  }
  // A rank whose collective broke because a peer crashed or gave up reports a
  // harness error that is only a consequence: the peer's outcome decides.
  if (any && best == Outcome::kHarnessError && !attributable.empty()) {
    best = attributable.front().outcome;
    res.deciding_rank = attributable.front().rank;
    res.reason = attributable.front().reason;
  }
  // Peers of a rank the OOM killer ended report broken collectives: the OOM kill says why.
  if (best == Outcome::kHarnessError && !oom_reason.empty()) {
    res.deciding_rank = oom_rank;
    res.reason = oom_reason;
  }
  res.outcome = any ? best : Outcome::kHarnessError;
  if (!any) res.reason = "no rank produced a result";
  return res;
}

}  // namespace pkb
