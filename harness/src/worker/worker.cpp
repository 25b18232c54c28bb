// The flow of one rank (DESIGN.md §5): set up, load, then for each trial run
// the candidate on clones, the reference on clones, compare; then time both.
// Every step that can fail on one rank ends with a store exchange, so that all
// ranks take the same branch (NOTE [verdicts through the store]).
#include "worker/worker.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/golden_fixture.h"
#include "common/outcome.h"
#include "common/plugin_loader.h"
#include "common/results.h"
#include "common/topology_io.h"
#include "driver/launcher.h"
#include "worker/calibrate.h"
#include "worker/audit_candidates.h"
#include "worker/compare.h"
#include "worker/distributed.h"
#include "worker/integrity.h"
#include "worker/memory_probe.h"
#include "worker/nccl_guard.h"
#include "worker/route_guard.h"
#include "worker/sandbox.h"
#include "worker/timing.h"
#include "worker/worker_context.h"

namespace pkb {

namespace {

// c10::Error's what() carries a C++ backtrace that buries the message.
std::string error_text(const std::exception& e) {
  if (auto c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

// The candidate (not the harness) failed; carries the outcome it earns.
struct CandidateFailure {
  Outcome outcome;
  std::string reason;
};

struct Job {
  Json j;
  std::string mode() const { return j.value("mode", "eval"); }
  // The driver's placement (NOTE [ranks sharing a GPU]); without one, GPU LOCAL_RANK.
  at::Device device() const {
    if (j.value("device", "cpu") != "cuda") return at::kCPU;
    int rank = std::atoi(std::getenv("LOCAL_RANK") ? std::getenv("LOCAL_RANK") : "0");
    int gpu = rank;
    if (j.contains("gpu_of_rank") && rank < static_cast<int>(j["gpu_of_rank"].size())) gpu = j["gpu_of_rank"][rank];
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(gpu));
  }
  bool shared_gpu() const { return j.value("shared_gpu", false); }
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

Inputs to_device(const Inputs& in, const at::Device& device) {
  Inputs out;
  for (const auto& a : in.args()) {
    if (auto t = std::get_if<at::Tensor>(&a.value)) out.add(a.name, t->to(device));
    else out.add(a.name, a.value);
  }
  return out;
}

class RankRun {
 public:
  RankRun(const Job& job, int rank, int world) : job_(job), rank_(rank), world_(world) {
    result_["rank"] = rank;
    result_["pid"] = static_cast<int>(getpid());
  }

  // Writes the result and returns the process exit code.
  int run() {
    int code = kWorkerExitOk;
    try {
      setup();
      if (job_.mode() == "golden") golden();
      else evaluate();
    } catch (const CandidateFailure& f) {
      finish(f.outcome, f.reason);
      code = kWorkerExitCandidateFailed;
    } catch (const std::exception& e) {
      finish(Outcome::kHarnessError, "harness: " + error_text(e));
      code = kWorkerExitHarnessError;
    }
    write_result();
    return code;
  }

 private:
  void setup() {
    phase("setup");
    memory_ = std::make_unique<MemoryProbe>(job_.device());  // NOTE [memory record]
    DistributedOptions o;
    o.rank = rank_;
    o.world = world_;
    o.device = job_.device();
    o.shared_gpu = job_.shared_gpu();
    o.master_addr = std::getenv("MASTER_ADDR") ? std::getenv("MASTER_ADDR") : "127.0.0.1";
    o.master_port = env_int("MASTER_PORT", 29500);
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(job_.j.value("timeout_s", 300.0) * 1000));
    dist_ = std::make_unique<Distributed>(o);
    CandidateRoutes::set_group("pkb");  // the name Distributed registers the world group under
    ctx_ = std::make_unique<WorkerContext>(*dist_, topology_from_json(job_.j.value("topology", Json::object())));
    memory_->set_publisher([this](const std::string& v) { dist_->store().set("pkb/memory/" + std::to_string(rank_), v); });
    problem_ = load_problem_plugin(job_.j.at("problem_lib").get<std::string>()).problem;
    tol_ = problem_->spec().tolerance;
    std::string why = problem_->check_world(world_);
    PKB_CHECK(why.empty(), "problem ", problem_->spec().id, " cannot run at world size ", world_, ": ", why);
  }

  void load_candidate() {
    phase("load");
    std::string cand = job_.j.value("candidate", "reference");
    std::string status = "ok";
    if (cand.rfind("audit:", 0) == 0) {
      TrialSpec t0{0, false, 0};
      trivial_ = make_trivial_candidate(cand.substr(6), *problem_, *ctx_, dist_->collectives(), request(t0));
    } else if (cand != "reference") {
      try {
        solve_ = load_solution_plugin(cand).solve;
      } catch (const LoadError& e) {
        status = e.what();
      }
    }
    agree("load", Outcome::kLoadError, status);
  }

  // Every rank learns every rank's status; the first failing rank decides.
  void agree(const std::string& key, Outcome outcome, const std::string& status) {
    auto all = dist_->exchange(key_prefix_ + key, status);
    for (int r = 0; r < world_; ++r) {
      if (all[r] == "ok") continue;
      std::string reason = r == rank_ ? all[r] : "rank " + std::to_string(r) + ": " + all[r];
      if (r == rank_ || status == "ok") throw CandidateFailure{outcome, reason};
    }
  }

  Outputs run_candidate(const Inputs& in) {
    if (trivial_) return trivial_(in);
    if (!solve_) return problem_->reference(*ctx_, dist_->collectives(), in);
    Outputs out;
    std::optional<CandidateFailure> threw;
    try {
      CandidateRoutes::Hidden hidden;  // NOTE [forbidden routes]
      out = solve_(*ctx_, in);
    } catch (const std::exception& e) {
      threw = CandidateFailure{Outcome::kRuntimeError, "candidate threw: " + error_text(e)};
    } catch (...) {
      threw = CandidateFailure{Outcome::kRuntimeError, "candidate threw a non-standard exception"};
    }
    // An NCCL call made while it ran outranks whatever it did after
    // (NOTE [NCCL calls counted], worker/nccl_guard.h).
    if (const char* f = nccl_guard::take_violation())
      throw CandidateFailure{Outcome::kForbiddenApi,
                             std::string("the candidate called ") + f +
                                 " while it ran (NCCL reached by a route the static checks do not see; NOTE [NCCL "
                                 "calls counted])"};
    if (threw) throw *threw;
    return out;
  }

  // Runs the candidate and makes sure its device work finished cleanly.
  Outputs run_candidate_checked(const Inputs& in) {
    Outputs out = run_candidate(in);
    try {
      dist_->device_sync();
    } catch (const std::exception& e) {
      throw CandidateFailure{Outcome::kRuntimeError, "device error after candidate: " + error_text(e)};
    }
    return out;
  }

  InputRequest request(const TrialSpec& ts) const {
    InputRequest req;
    req.rank = rank_;
    req.world = world_;
    req.trial = ts.index;
    req.m = job_.j.value("m", 1024);
    req.n = job_.j.value("n", 1024);
    req.dtype = at::kBFloat16;
    req.device = job_.device();
    req.seed = ts.integrity ? integrity_seed_for(problem_->spec().id, rank_, ts.integrity_index)
                            : seed_for(problem_->spec().id, rank_, ts.index);
    return req;
  }

  Inputs draw(const TrialSpec& ts) const {
    InputRequest req = request(ts);
    at::manual_seed(req.seed);
    return ts.integrity ? problem_->make_integrity_inputs(req) : problem_->make_inputs(req);
  }

  // The slowest verdict of all ranks for `key`; ends the evaluation (and
  // returns false) when it is not correct. `label` names the trial.
  bool judge(const std::string& key, const std::string& label, CompareResult cmp, const Json& failed) {
    auto verdicts = dist_->exchange(key_prefix_ + key, outcome_name(cmp.outcome));
    Outcome worst = Outcome::kCorrect;
    int worst_rank = -1;
    for (int r = 0; r < world_; ++r) {
      Outcome o = outcome_from_name(verdicts[r]);
      if (o != worst && first_of(o, worst) == o) {
        worst = o;
        worst_rank = r;
      }
    }
    if (worst == Outcome::kCorrect) return true;
    std::string reason = cmp.outcome != Outcome::kCorrect
                             ? label + ": " + cmp.reason
                             : label + ": rank " + std::to_string(worst_rank) + " reported " + outcome_name(worst);
    result_["failed_trial"] = failed;
    finish(cmp.outcome != Outcome::kCorrect ? cmp.outcome : worst, reason);
    return false;
  }

  // The candidate on `in` (its own storage), every rank told how it went.
  Outputs candidate_call(const std::string& key, const Inputs& in) {
    std::string status = "ok";
    Outputs got;
    try {
      got = run_candidate_checked(in);
    } catch (const CandidateFailure& f) {
      status = f.reason;
      dist_->publish(key_prefix_ + key, status);  // tell peers before leaving
      throw;
    }
    agree(key, Outcome::kRuntimeError, status);
    return got;
  }

  void evaluate() {
    // NOTE [untrusted candidates]: set-up done as root, the candidate runs
    // as the unprivileged user the driver chose.
    if (job_.j.value("drop_uid", -1) >= 0) {
      phase("drop privileges");
      if (dist_->device().is_cuda()) result_["preloaded_libraries"] = preload_lazy_libraries();
      std::string why = drop_privileges(job_.j["drop_uid"].get<int>(), job_.j.value("drop_gid", -1));
      PKB_CHECK(why.empty(), "cannot drop privileges: ", why);
      result_["uid"] = static_cast<int>(getuid());
    }
    if (job_.mode() == "audit") return audit();
    load_candidate();
    checks();
  }

  // `pkb audit`: every trivial candidate in one launch, each judged as a
  // candidate would be (its own store keys); result_["audit"][kind].
  void audit() {
    result_["audit"] = Json::object();
    std::vector<std::string> kinds = job_.j.value("audit_kinds", audit_kinds());
    for (const auto& kind : kinds) {
      key_prefix_ = kind + "/";
      t_ref_s_ = -1;
      for (const char* k : {"outcome", "reason", "failed_trial", "refresh"}) result_.erase(k);
      try {
        trivial_ = make_trivial_candidate(kind, *problem_, *ctx_, dist_->collectives(), request({0, false, 0}));
        checks();
      } catch (const CandidateFailure& f) {
        finish(f.outcome, f.reason);
      }
      Json a = {{"outcome", result_.value("outcome", "correct")}, {"reason", result_.value("reason", "")}};
      if (result_.contains("failed_trial")) a["failed_trial"] = result_["failed_trial"];
      result_["audit"][kind] = a;
    }
    for (const char* k : {"outcome", "reason", "failed_trial", "refresh"}) result_.erase(k);
    finish(Outcome::kCorrect, "");
  }

  // The trials, the timing, the refresh; finish()es unless all pass.
  void checks() {
    const int published = job_.j.value("trials", 5);
    const bool hardened = !job_.j.value("published_only", false);
    const int integrity = hardened ? job_.j.value("integrity_trials", 2) : 0;
    Inputs last_inputs, last_cand_inputs;
    result_["trials"] = Json::array();
    for (const TrialSpec& ts : plan_trials(published, integrity)) {
      const int t = ts.index;
      const std::string label = "trial " + std::to_string(t) + " (" + ts.kind() + ")";
      phase(label);
      Inputs inputs = draw(ts);
      if (t == 0) cost(inputs);

      Inputs cand_in = inputs.clone();  // the harness's memory, before the candidate's phase (NOTE [OOM kills])
      phase(label + ": candidate");
      memory_->enter("candidate");
      Outputs got = candidate_call("t" + std::to_string(t) + "/cand", cand_in);

      phase(label + ": reference");
      memory_->enter("reference");
      auto r0 = std::chrono::steady_clock::now();
      Inputs ref_in = inputs.clone();
      Outputs want = problem_->reference(*ctx_, dist_->collectives(), ref_in);
      dist_->device_sync();
      memory_->enter("harness");
      // The fastest reference call so far: later trials shed first-call costs
      // (NCCL's lazy communicator set-up, allocator growth).
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      if (t_ref_s_ < 0 || dt < t_ref_s_) t_ref_s_ = dt;
      CompareResult cmp = compare_outputs(want, got, tol_, checked_outputs(want.size()));
      if (cmp.outcome == Outcome::kCorrect && hardened) {
        std::string changed = changed_input(inputs, ref_in, cand_in);
        if (!changed.empty()) {
          cmp.outcome = Outcome::kOutputMismatch;
          cmp.reason = changed;
        }
      }
      Json tj = to_json(cmp);
      tj["trial"] = t;
      tj["kind"] = ts.kind();
      result_["trials"].push_back(tj);
      if (!judge("t" + std::to_string(t) + "/verdict", label, cmp, {{"trial", t}, {"kind", ts.kind()}})) return;
      last_inputs = std::move(inputs);
      last_cand_inputs = std::move(cand_in);
    }
    if (job_.j.value("perf", true)) {
      Inputs timed = perf(last_inputs);
      if (result_.contains("outcome")) return;
      if (timed.size()) last_cand_inputs = timed;
    }
    if (hardened) refresh_check(last_cand_inputs, published + integrity);
    if (!result_.contains("outcome")) finish(Outcome::kCorrect, "");
  }

  // NOTE [integrity trials]: new values in the storage the candidate last
  // saw, then its next answer against the reference's.
  void refresh_check(Inputs& target, int index) {
    const std::string label = "trial " + std::to_string(index) + " (refresh in place)";
    phase(label);
    // The last trial's index, so that arguments derived from the trial index
    // (an optimizer's step count: 40-43, 47) stay those of the storage being
    // refreshed and the refresh is not skipped; an integrity seed no trial
    // uses, so every value is new.
    TrialSpec ts{index - 1, true, 1000};
    Inputs fresh = draw(ts);
    std::string why;
    bool ok = refresh_in_place(target, fresh, &why);
    auto all = dist_->exchange(key_prefix_ + "refresh/ok", ok ? "ok" : why);
    for (int r = 0; r < world_; ++r)
      if (all[r] != "ok") {
        result_["refresh"] = {{"skipped", "rank " + std::to_string(r) + ": " + all[r]}};
        return;
      }
    Inputs snapshot = target.clone();
    phase(label + ": candidate");
    memory_->enter("candidate");
    Outputs got = candidate_call("refresh/cand", target);
    phase(label + ": reference");
    memory_->enter("reference");
    Outputs want = problem_->reference(*ctx_, dist_->collectives(), snapshot);
    dist_->device_sync();
    memory_->enter("harness");
    CompareResult cmp = compare_outputs(want, got, tol_, checked_outputs(want.size()));
    Json tj = to_json(cmp);
    tj["trial"] = index;
    tj["kind"] = "refresh";
    result_["trials"].push_back(tj);
    judge("refresh/verdict", label, cmp, {{"trial", index}, {"kind", "refresh"}});
  }

  // Returns the candidate's last timed input group (for refresh_check).
  Inputs perf(const Inputs& inputs) {
    TimingOptions o;
    o.warmup = job_.j.value("warmup", 500);
    o.iters = job_.j.value("iters", 100);
    o.rounds = job_.j.value("rounds", 10);
    // Both sides: the warm-up, the priming segments, the re-warming and the
    // timed iterations (NOTE [timing protocol]).
    // Each segment's stream gate may wait up to its timeout (NOTE [timing
    // protocol], step 3): that is on top of the calls.
    phase("timing", 2 * (2 * o.warmup + 3 * o.iters),
          2.0 * (o.rounds + 2) * (o.segment_gate_ms + o.probe_gate_ms) / 1000.0);
    o.cache_bytes = cache_bytes_for(dist_->device());
    TimedFn cand = [&](const Inputs& in) { return run_candidate(in); };
    TimedFn ref = [&](const Inputs& in) { return problem_->reference(*ctx_, dist_->collectives(), in); };
    memory_->enter("timing");
    TimingResult tr = time_alternating(*dist_, inputs, cand, ref, o);
    memory_->enter("harness");
    Json tj;
    tj["groups"] = tr.groups;
    tj["input_bytes"] = tr.input_bytes;
    tj["cache_bytes"] = o.cache_bytes;
    tj["warmup"] = o.warmup;
    tj["iters"] = o.iters;
    tj["rounds"] = o.rounds;
    tj["candidate"] = to_json(tr.cand);
    tj["reference"] = to_json(tr.ref);
    if (job_.j.value("keep_samples", false)) {
      tj["candidate"]["samples_us"] = tr.cand_samples;
      tj["reference"]["samples_us"] = tr.ref_samples;
    }
    result_["timing"] = tj;
    phase("recheck");
    CompareResult re = compare_outputs(tr.last_ref, tr.last_cand, tol_, checked_outputs(tr.last_ref.size()));
    result_["recheck"] = to_json(re);
    if (re.outcome != Outcome::kCorrect) {
      finish(re.outcome, "after timing: " + re.reason);
    } else if (tr.cand.anomaly) {
      std::ostringstream os;
      os << "host wall clock " << tr.cand.wall_us << " us/iter vs events " << tr.cand.mean_us
         << " us/iter: work outside the timed stream?";
      finish(Outcome::kTimingAnomaly, os.str());
    }
    return tr.last_cand_inputs;
  }

  void golden() {
    phase("golden");
    // The driver names each rank's file (golden_sets(): one world size and trial).
    std::string path = job_.j.at("golden_files").at(rank_).get<std::string>();
    GoldenFixture g = load_golden(path);
    PKB_CHECK(g.world_size == world_ && g.rank == rank_, path, " was recorded for rank ", g.rank, " of ",
              g.world_size);
    result_["fixture"] = path;
    if (!g.notes.empty()) result_["notes"] = g.notes;
    Inputs in = to_device(g.inputs, dist_->device());
    Outputs got = problem_->reference(*ctx_, dist_->collectives(), in);
    dist_->device_sync();
    Outputs want;
    for (const auto& t : g.outputs) want.push_back(t.to(dist_->device()));
    CompareResult cmp = compare_outputs(want, got, tol_, checked_outputs(want.size()));
    result_["compare"] = to_json(cmp);
    finish(cmp.outcome, cmp.reason);
  }

  void cost(const Inputs& inputs) {
    Cost c = problem_->cost(world_, inputs);
    result_["cost"] = {{"nvlink_bytes_per_rank", c.nvlink_bytes_per_rank},
                       {"hbm_bytes_per_rank", c.hbm_bytes_per_rank},
                       {"flops_per_rank", c.flops_per_rank}};
  }

  std::vector<bool> checked_outputs(size_t n) const {
    std::vector<bool> c(n);
    for (size_t i = 0; i < n; ++i) c[i] = problem_->values_checked(rank_, world_, i);
    return c;
  }

  // Records the phase and announces it, with its deadline, to the driver
  // (NOTE [phase deadlines] in driver/phase_watch.h): the floor, plus 20x the
  // reference's measured time for each of the phase's `calls` calls, plus
  // `extra_s` the harness itself may wait.
  void phase(const std::string& p, int calls = 1, double extra_s = 0) {
    result_["phase"] = p;
    if (!dist_) return;
    double floor = job_.j.value("phase_floor_s", 30.0);
    double budget = floor + extra_s + (t_ref_s_ > 0 ? 20.0 * calls * t_ref_s_ : 0.0);
    char b[32];
    std::snprintf(b, sizeof(b), "%.3f", budget);
    try {
      dist_->store().set("pkb/phase/" + std::to_string(rank_),
                         std::to_string(++phase_seq_) + "\t" + p + "\t" + b);
    } catch (const std::exception&) {
      // Best effort: the overall deadline still holds.
    }
  }
  void finish(Outcome o, const std::string& reason) {
    if (result_.contains("outcome")) return;
    result_["outcome"] = outcome_name(o);
    result_["reason"] = reason;
  }

  void write_result() {
    if (memory_) result_["memory"] = memory_->finish();
    std::string dir = job_.j.at("result_dir").get<std::string>();
    write_file_atomic(dir + "/rank_" + std::to_string(rank_) + ".json", result_.dump(2), true);
  }

  const Job& job_;
  int rank_, world_;
  Json result_;
  std::unique_ptr<Distributed> dist_;
  std::unique_ptr<WorkerContext> ctx_;
  std::unique_ptr<MemoryProbe> memory_;
  std::shared_ptr<Problem> problem_;
  Tolerance tol_;
  SolveFn solve_ = nullptr;
  TrivialFn trivial_;  // `pkb audit`'s built-in candidates
  std::string key_prefix_;  // store keys of one audit candidate
  double t_ref_s_ = -1;  // the reference's first call, seconds (trial 0)
  int phase_seq_ = 0;
};

}  // namespace

int worker_main(const std::string& job_path) {
  Job job;
  {
    std::ifstream f(job_path);
    if (!f) {
      fprintf(stderr, "pkb worker: cannot read job file '%s'\n", job_path.c_str());
      return kWorkerExitHarnessError;
    }
    job.j = Json::parse(f);
  }
  int rank = env_int("RANK", 0), world = env_int("WORLD_SIZE", 1);
  if (job.mode() == "calibrate") {  // `pkb calibrate` (worker/calibrate.h)
    int code = calibrate_worker(job.j, rank, world);
    fflush(stdout);
    fflush(stderr);
    _exit(code);
  }
  RankRun run(job, rank, world);
  int code = run.run();
  fflush(stdout);
  fflush(stderr);
  // Skip static destructors: backends and CUDA state a candidate left behind
  // must not turn a finished, recorded evaluation into a crash or a hang.
  _exit(code);
}

}  // namespace pkb
