// The flow of one rank (DESIGN.md §5): set up, load, then for each trial run
// the candidate on clones, the reference on clones, compare; then time both.
// Every step that can fail on one rank ends with a store exchange, so that all
// ranks take the same branch (NOTE [verdicts through the store]).
#include "worker/worker.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include <sys/prctl.h>

#ifdef PKB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "common/error_text.h"
#include "common/exit_codes.h"
#include "common/files.h"
#include "common/golden_fixture.h"
#include "common/outcome.h"
#include "common/plugin_loader.h"
#include "common/results.h"
#include "common/topology_io.h"
#include "pkb/fixed_inputs.h"
#include "pkb/published_on.h"
#include "worker/calibrate.h"
#include "worker/audit_candidates.h"
#include "worker/compare.h"
#include "worker/contestant.h"
#include "worker/contestant_client.h"
#include "worker/distributed.h"
#include "worker/integrity.h"
#include "worker/fixed_inputs.h"
#include "worker/memory_probe.h"
#include "worker/nccl_guard.h"
#include "worker/output_digest.h"
#include "worker/route_guard.h"
#include "worker/sandbox.h"
#include "worker/timing.h"
#include "worker/timing_fresh.h"
#include "worker/worker_context.h"

namespace pkb {

namespace {

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
  RankRun(const Job& job, int rank, int world, std::optional<ContestantProcess> contestant)
      : job_(job), rank_(rank), world_(world), contestant_process_(contestant) {
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
    // The contestant and whatever it started end before the result is
    // written, so none of them can replace it afterwards.
    if (contestant_) result_["contestant"] = contestant_->info();
    contestant_.reset();
    write_result();
    return code;
  }

 private:
  void setup() {
    phase("setup");
    spawn_contestant();
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
    fixed_ = fixed_inputs_of(*problem_);
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
      // NOTE [referee and contestant]: the candidate runs in a process of
      // its own; this one never loads it.
      start_contestant();
      try {
        contestant_->load(cand);
      } catch (const CandidateFailure& f) {
        status = f.reason;
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

  // NOTE [referee and contestant]: set up first, so that it makes its CUDA
  // context while this process sets itself up; it drops to the worker user,
  // this process stays as it is.
  void spawn_contestant() {
    if (!contestant_process_) return;
    PKB_CHECK(contestant_process_->error.empty(), "cannot start the contestant: ", contestant_process_->error);
    ContestantOptions o;
    o.rank = rank_;
    o.world = world_;
    o.device = job_.device();
    o.shared_gpu = job_.shared_gpu();
    o.topology = job_.j.value("topology", Json::object());
    o.uid = job_.j.value("contestant_uid", -1);
    o.gid = job_.j.value("contestant_gid", -1);
    o.isolate_net = geteuid() == 0 && job_.j.value("contestant_netns", true);
    if (geteuid() != 0) {
      // Same user as the contestant: not dumpable, so it cannot trace this
      // process or open its /proc files (memory, file descriptors).
      prctl(PR_SET_DUMPABLE, 0);
    }
    contestant_ = std::make_unique<ContestantClient>(o, *contestant_process_);
  }

  void start_contestant() {
    phase("contestant");
    PKB_CHECK(contestant_, "no contestant was started");
    contestant_->ready(*dist_);
    result_["contestant"] = contestant_->info();
  }

  // The harness's own candidates (the reference, `pkb audit`'s), run here.
  Outputs run_local_candidate(const Inputs& in) {
    if (trivial_) return trivial_(in);
    return problem_->reference(*ctx_, dist_->collectives(), in);
  }

  // The candidate on `in`: *seen is what it saw (its own storage, after the
  // call), for the input-mutation check and the refresh. `slot` names the
  // contestant's region.
  Outputs run_candidate_checked(const Inputs& in, Inputs* seen) {
    if (contestant_) {
      Placed p = contestant_->place(in, 0);
      Outputs out = contestant_->call(p);
      *seen = p.views;
      last_placed_ = p;
      return out;
    }
    *seen = clone_but_fixed(in, fixed_);  // NOTE [fixed inputs]: checked by checksum, as the reference's
    Outputs out = run_local_candidate(*seen);
    dist_->device_sync();
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

  Inputs draw_inputs(const TrialSpec& ts) const {
    InputRequest req = request(ts);
    at::manual_seed(req.seed);
    return ts.integrity ? problem_->make_integrity_inputs(req) : problem_->make_inputs(req);
  }

  // New contents for a timed call or the refresh: the integrity draw, or
  // where the problem keeps inputs (NOTE [fixed inputs]) its variation of
  // `base`, whose fixed tensors it must return as they are.
  Inputs draw_contents(const TrialSpec& ts, const Inputs& base) const {
    auto k = dynamic_cast<const FixedInputs*>(problem_.get());
    if (!k || fixed_.empty()) return draw_inputs(ts);
    InputRequest req = request(ts);
    at::manual_seed(req.seed);
    Inputs v = k->vary_inputs(req, base);
    for (size_t i : fixed_)
      PKB_CHECK(i < v.size() && v.is_tensor(i) && v.tensor(i).is_same(base.tensor(i)), "problem ",
                problem_->spec().id, "'s vary_inputs replaced fixed input ", i, " (NOTE [fixed inputs])");
    return v;
  }

  // NOTE [fixed inputs]: the referee's fixed tensors, checksummed where they
  // were drawn and again after the harness's own code (the reference, a
  // local candidate) read them; a change is the harness's error.
  void check_fixed_checksums(const Inputs& in, const std::vector<int64_t>& before) const {
    std::string why = fixed_written(in, fixed_, before, fixed_checksums(in, fixed_));
    PKB_CHECK(why.empty(), why);
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

  // The candidate on a copy of `in` (*seen: that copy), every rank told how it went.
  Outputs candidate_call(const std::string& key, const Inputs& in, Inputs* seen) {
    std::string status = "ok";
    Outputs got;
    try {
      got = run_candidate_checked(in, seen);
    } catch (const CandidateFailure& f) {
      status = f.reason;
      dist_->publish(key_prefix_ + key, status);  // tell peers before leaving
      throw;
    }
    agree(key, Outcome::kRuntimeError, status);
    return got;
  }

  void evaluate() {
    // NOTE [referee and contestant]: this process stays as it is; a
    // candidate plugin runs in the contestant, as the worker user.
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
      // Freed before the next draw: at most one set at a time (68's table;
      // a local candidate's copy holds the fixed tensors too).
      last_inputs = Inputs();
      last_cand_inputs = Inputs();
      // Where the trial's time went (a report, NOTE [phase deadlines]).
      std::map<std::string, double> spent;
      auto lap = [&spent, t0 = std::chrono::steady_clock::now()](const char* part) mutable {
        const auto now = std::chrono::steady_clock::now();
        spent[part] += std::chrono::duration<double>(now - t0).count();
        t0 = now;
      };
      Inputs inputs = draw_inputs(ts);
      const std::vector<int64_t> drawn_sums = fixed_checksums(inputs, fixed_);
      if (t == 0) cost(inputs);
      lap("draw");

      phase(label + ": candidate");
      memory_->enter("candidate");
      Inputs cand_in;
      Outputs got = candidate_call("t" + std::to_string(t) + "/cand", inputs, &cand_in);
      lap("candidate");

      Inputs ref_in;
      Outputs want;
      double dt = 0;
      if (auto memo = audit_memo_.find(t); memo != audit_memo_.end()) {
        // NOTE [audit reference memo]
        want = memo->second.outputs;
        ref_in = memo->second.inputs;
        dt = memo->second.seconds;
      } else {
        phase(label + ": reference");
        memory_->enter("reference");
        auto r0 = std::chrono::steady_clock::now();
        ref_in = clone_but_fixed(inputs, fixed_);  // NOTE [fixed inputs]
        want = problem_->reference(*ctx_, dist_->collectives(), ref_in);
        dist_->device_sync();
        check_fixed_checksums(inputs, drawn_sums);
        memory_->enter("harness");
        dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
        if (job_.mode() == "audit") remember_reference(t, want, ref_in, dt);
      }
      // The fastest reference call so far: later trials shed first-call costs
      // (NCCL's lazy communicator set-up, allocator growth).
      if (t_ref_s_ < 0 || dt < t_ref_s_) t_ref_s_ = dt;
      lap("reference");
      CompareResult cmp = compare_outputs(want, got, tol_, checked_outputs(want.size()));
      lap("compare");
      if (cmp.outcome == Outcome::kCorrect && hardened) {
        std::string changed = changed_input(inputs, ref_in, cand_in);
        if (!changed.empty()) {
          cmp.outcome = Outcome::kOutputMismatch;
          cmp.reason = changed;
        }
        lap("inputs");
      }
      Json tj = to_json(cmp);
      tj["trial"] = t;
      tj["kind"] = ts.kind();
      tj["reference_digest"] = output_digest(want);  // NOTE [reference fingerprints]
      lap("digest");
      tj["seconds"] = rounded(spent);
      result_["trials"].push_back(tj);
      if (!judge("t" + std::to_string(t) + "/verdict", label, cmp, {{"trial", t}, {"kind", ts.kind()}})) return;
      last_trial_ = ts;
      last_out_bytes_ = output_tensor_bytes(want);
      last_inputs = std::move(inputs);
      last_cand_inputs = std::move(cand_in);
    }
    if (job_.j.value("perf", true)) {
      Inputs timed = perf(last_inputs);
      if (result_.contains("outcome")) return;
      if (timed.size()) last_cand_inputs = timed;
    }
    if (hardened) refresh_check(last_cand_inputs, last_inputs, published + integrity);
    if (!result_.contains("outcome")) finish(Outcome::kCorrect, "");
  }

  // NOTE [audit reference memo]
  // `pkb audit` judges each trivial candidate on the same trials, drawn from
  // the same seeds, so the reference's outputs of trial t (and its inputs
  // after the call, for the mutation check) are the same for each: its first
  // run serves the rest (62 and 80 audited at W = 2 on an idle 2-core
  // machine: 44.3 s without, 34.2 s with; 2026-12-02). Only the harness's own candidates are audited, so
  // nothing untrusted sees the memo. All ranks keep a trial's or none (a rank
  // that calls the reference alone waits for the others in its collectives),
  // and at most kAuditMemoBytes per rank: the heavy problems run it again.
  static constexpr double kAuditMemoBytes = 256.0 * (1 << 20);
  struct AuditMemo {
    Outputs outputs;
    Inputs inputs;
    double seconds = 0;
  };
  void remember_reference(int trial, const Outputs& want, const Inputs& ref_in, double seconds) {
    const double bytes = audit_memo_bytes_ + output_tensor_bytes(want) + input_tensor_bytes(ref_in);
    const bool fits = bytes <= kAuditMemoBytes;
    auto all = dist_->exchange(key_prefix_ + "t" + std::to_string(trial) + "/memo", fits ? "1" : "0");
    for (const auto& a : all)
      if (a != "1") return;
    audit_memo_[trial] = AuditMemo{want, ref_in, seconds};
    audit_memo_bytes_ = bytes;
  }

  // NOTE [integrity trials]: new values in the storage the candidate last
  // saw, then its next answer against the reference's on the same values
  // (`fresh`, what was copied there). `base`: the last trial's inputs (the
  // fixed ones of NOTE [fixed inputs] stay).
  void refresh_check(Inputs& target, const Inputs& base, int index) {
    const std::string label = "trial " + std::to_string(index) + " (refresh in place)";
    phase(label);
    // The last trial's index, so that arguments derived from the trial index
    // (an optimizer's step count: 40-43, 47) stay those of the storage being
    // refreshed and the refresh is not skipped; an integrity seed no trial
    // uses, so every value is new.
    TrialSpec ts{index - 1, true, 1000};
    Inputs fresh = draw_contents(ts, base);
    const std::vector<int64_t> fresh_sums = fixed_checksums(fresh, fixed_);
    std::string why;
    bool ok = refresh_in_place(target, fresh, &why);
    auto all = dist_->exchange(key_prefix_ + "refresh/ok", ok ? "ok" : why);
    for (int r = 0; r < world_; ++r)
      if (all[r] != "ok") {
        result_["refresh"] = {{"skipped", "rank " + std::to_string(r) + ": " + all[r]}};
        return;
      }
    phase(label + ": candidate");
    memory_->enter("candidate");
    Outputs got = refresh_call(target);
    phase(label + ": reference");
    memory_->enter("reference");
    Outputs want = problem_->reference(*ctx_, dist_->collectives(), fresh);
    dist_->device_sync();
    check_fixed_checksums(fresh, fresh_sums);
    memory_->enter("harness");
    CompareResult cmp = compare_outputs(want, got, tol_, checked_outputs(want.size()));
    Json tj = to_json(cmp);
    tj["trial"] = index;
    tj["kind"] = "refresh";
    result_["trials"].push_back(tj);
    judge("refresh/verdict", label, cmp, {{"trial", index}, {"kind", "refresh"}});
  }

  // The candidate on `target` in place (the storage it saw last, refreshed):
  // the contestant gets the same region and offsets, so its pointers repeat.
  Outputs refresh_call(Inputs& target) {
    std::string status = "ok";
    Outputs got;
    try {
      if (contestant_) {
        PKB_CHECK(last_placed_.has_value(), "no placed inputs to refresh");
        dist_->device_sync();  // the refreshed values are in place before it reads them
        got = contestant_->call(*last_placed_);
      } else {
        got = run_local_candidate(target);
        dist_->device_sync();
      }
    } catch (const CandidateFailure& f) {
      dist_->publish(key_prefix_ + "refresh/cand", f.reason);
      throw;
    }
    agree("refresh/cand", Outcome::kRuntimeError, status);
    return got;
  }

  // Returns the candidate's last timed input group (for refresh_check).
  // NOTE [fixed inputs]: the referee's fixed tensors are read by every
  // reference call of the timing (and the probe's); checksummed around it.
  Inputs perf(const Inputs& inputs) {
    const std::vector<int64_t> sums = fixed_checksums(inputs, fixed_);
    Inputs last = job_.j.value("timing", "fresh") == "fresh" ? perf_fresh(inputs) : perf_published(inputs);
    check_fixed_checksums(inputs, sums);
    return last;
  }

  // NOTE [fixed inputs]: the contestant's one copy of the fixed inputs, after
  // the timing, bit for bit against the referee's (a candidate that wrote it
  // is output_mismatch); correct where there is none.
  CompareResult fixed_copy_verdict(const ContestantSide* remote, const Inputs& inputs) const {
    CompareResult v;
    v.outcome = Outcome::kCorrect;
    if (!remote || !remote->fixed_views()) return v;
    v.reason = changed_fixed(inputs, *remote->fixed_views(), fixed_, "while timed");
    if (!v.reason.empty()) v.outcome = Outcome::kOutputMismatch;
    return v;
  }

  std::unique_ptr<TimedSide> candidate_side(ContestantSide** remote) {
    *remote = nullptr;
    if (contestant_) {
      auto c = std::make_unique<ContestantSide>(*contestant_);
      *remote = c.get();
      return c;
    }
    return std::make_unique<LocalSide>(*dist_, [&](const Inputs& in) { return run_local_candidate(in); });
  }

  // The reference's call time that sizes the fresh timing's segments. A
  // trial's call is timed with its device sync, which for a call of a few
  // microseconds is most of it: segments of 4 calls, so a contestant request
  // (~2.2-3.4 ms by its referee's clock at W = 1 on an H200) for every 4-9
  // calls, which left the shipped solution of 13 (7.7 us a call) just over
  // its referee's allowance (684 us seen per call, 672 allowed: a false
  // timing_anomaly, measured 2026-12-02). So where the slowest rank's trial
  // call is under kProbeBelowUs (a call that could give segments of more
  // than one call), the reference makes kProbeCalls calls back to back on a
  // clone of the last trial's inputs, one sync at the end, and the shorter of
  // the two times sets the segments (not where a rank's inputs exceed
  // kProbeMaxBytes: the clone would be the memory's peak). With the probe
  // below 500 us, 13 read 157 us per call against 201 allowed; 11 and 15,
  // whose trial calls were above it, kept segments of 4 (15: 809 against
  // 816): hence the probe below kSegmentTargetUs, at most 16 ms of calls.
  static constexpr double kProbeBelowUs = kSegmentTargetUs;
  static constexpr int kProbeCalls = 8;
  static constexpr double kProbeMaxBytes = 256.0 * (1 << 20);
  double reference_call_us(const Inputs& inputs) {
    const double trial_us = t_ref_s_ > 0 ? t_ref_s_ * 1e6 : 1000;
    const double in_bytes = input_tensor_bytes(without_fixed(inputs, fixed_));
    double slowest = 0, largest = 0;
    for (const auto& v : dist_->exchange("timing/trial_call", std::to_string(trial_us) + " " + std::to_string(in_bytes))) {
      double us = 0, bytes = 0;
      PKB_CHECK(std::sscanf(v.c_str(), "%lf %lf", &us, &bytes) == 2, "a rank's trial call is unreadable: '", v, "'");
      slowest = std::max(slowest, us);
      largest = std::max(largest, bytes);
    }
    if (slowest >= kProbeBelowUs || largest > kProbeMaxBytes) return trial_us;
    Inputs probe = clone_but_fixed(inputs, fixed_);
    dist_->device_sync();
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kProbeCalls; ++k) problem_->reference(*ctx_, dist_->collectives(), probe);
    dist_->device_sync();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    return std::min(trial_us, us / kProbeCalls);
  }

  // Seconds to the millisecond, for the reports above.
  static Json rounded(const std::map<std::string, double>& spent) {
    Json j = Json::object();
    for (const auto& [part, sec] : spent) j[part] = std::round(sec * 1000) / 1000;
    return j;
  }

  // NOTE [fresh inputs] (worker/timing_fresh.h).
  Inputs perf_fresh(const Inputs& inputs) {
    FreshTimingOptions fo;
    fo.max_noise = job_.j.value("max_noise", 0.01);
    fo.min_samples = job_.j.value("min_samples", 16);
    fo.min_rounds = job_.j.value("min_rounds", kMinRounds);
    fo.max_time_s = job_.j.value("max_time_s", 0.5);
    fo.call_us = reference_call_us(inputs);
    fo.out_bytes = last_out_bytes_;
    fo.base.cache_bytes = cache_bytes_for(dist_->device());
    fo.memory_budget_bytes = timing_memory_budget();
    fo.fixed = fixed_;
    // Each round's calls get their own deadline (NOTE [phase deadlines]),
    // with the two gates they may wait for.
    fo.phase = [&](int calls) {
      phase("timing", calls, 2.0 * (fo.base.segment_gate_ms + fo.base.probe_gate_ms) / 1000.0);
    };
    // The seed's offset: rank 0's draw, agreed through the referees' store
    // (a contestant's store keys are its own: it never sees this one).
    std::random_device rd;
    const uint64_t mine = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    const uint64_t agreed = std::stoull(dist_->exchange(key_prefix_ + "timing/nonce", std::to_string(mine))[0]);
    const uint64_t nonce = agreed % kTimingDrawSpan;
    fo.pick_seed = std::stoull(dist_->exchange(key_prefix_ + "timing/pick", std::to_string((static_cast<uint64_t>(rd()) << 32) ^ rd()))[0]);
    const TrialSpec last = last_trial_;
    DrawFn draw = [&, nonce, last](int64_t k) {
      // The last trial's index, as the refresh in place keeps it (NOTE
      // [integrity trials]); an integrity index no trial and no refresh uses.
      TrialSpec ts{last.index, true, static_cast<int>(kTimingDrawBase + (nonce + k) % kTimingDrawSpan)};
      return draw_contents(ts, inputs);
    };
    CheckFn check = [&](const Outputs& want, const Outputs& got) {
      // The other comparisons run on the host (NOTE [comparison where the outputs are]).
      return compare_outputs(want, got, tol_, checked_outputs(want.size()), CompareOn::kDevice);
    };
    ContestantSide* remote = nullptr;
    std::unique_ptr<TimedSide> cand = candidate_side(&remote);
    LocalSide ref(*dist_, [&](const Inputs& in) { return problem_->reference(*ctx_, dist_->collectives(), in); });
    phase("timing set-up");
    FreshResult fr;
    memory_->enter("timing");
    try {
      fr = time_fresh(*dist_, inputs, *cand, ref, draw, check, fo);
    } catch (const CandidateFailure& f) {
      throw CandidateFailure{f.outcome, "while timed: " + f.reason};
    }
    memory_->enter("harness");
    if (remote) last_placed_ = remote->last_placed();
    const TimingResult& tr = fr.timing;
    Json tj;
    tj["protocol"] = "fresh";
    tj["groups"] = fr.layout.groups;
    tj["segment_calls"] = fr.layout.segment_calls;
    tj["rounds"] = fr.rounds;
    tj["input_bytes"] = tr.input_bytes;
    tj["output_bytes"] = last_out_bytes_;
    tj["cache_bytes"] = fo.base.cache_bytes;
    tj["memory_budget_bytes"] = fo.memory_budget_bytes;
    tj["max_noise"] = fo.max_noise;
    tj["min_samples"] = fo.min_samples;
    tj["min_rounds"] = fo.min_rounds;
    tj["max_time_s"] = fo.max_time_s;
    tj["draws"] = fr.draws;
    tj["draw_us"] = fr.draw_us;
    tj["checked_calls"] = fr.checked;
    tj["loop_s"] = rounded(fr.loop_s);
    tj["round_medians_us"] = {{"reference", fr.round_medians_ref}, {"candidate", fr.round_medians_cand}};
    record_sides(tr, &tj);
    result_["timing"] = tj;
    phase("recheck");
    CompareResult verdict;
    verdict.outcome = Outcome::kCorrect;
    if (fr.check_failed) {
      verdict.outcome = Outcome::kOutputMismatch;
      verdict.reason = fr.check_reason;
    }
    result_["recheck"] = {{"outcome", outcome_name(verdict.outcome)}, {"reason", verdict.reason},
                          {"checked_calls", fr.checked}};
    if (verdict.outcome == Outcome::kCorrect) verdict = fixed_copy_verdict(remote, inputs);
    if (verdict.outcome == Outcome::kCorrect) verdict = timing_anomaly_verdict(tr.cand);
    judge("perf/verdict", "timing", verdict, {{"kind", "timing"}});
    return tr.last_cand_inputs;
  }

  // Both sides' stats in a timing record, with every sample on --keep-samples.
  void record_sides(const TimingResult& tr, Json* tj) const {
    (*tj)["candidate"] = to_json(tr.cand);
    (*tj)["reference"] = to_json(tr.ref);
    if (job_.j.value("keep_samples", false)) {
      (*tj)["candidate"]["samples_us"] = tr.cand_samples;
      (*tj)["reference"]["samples_us"] = tr.ref_samples;
    }
  }

  // Both sides' groups and kept outputs (NOTE [fresh inputs], step 4): a
  // quarter of the device's free memory, or on CPU 512 MiB (the test
  // suite's memory rules assume no more: NOTE [test memory]).
  double timing_memory_budget() const {
#ifdef PKB_HAVE_CUDA
    if (dist_->device().is_cuda()) {
      size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return 0.25 * static_cast<double>(free_b);
    }
#endif
    return 512.0 * (1 << 20);
  }

  // The candidate's timing_anomaly, if its clocks disagree (NOTE [timing
  // protocol], step 5); correct otherwise.
  static CompareResult timing_anomaly_verdict(const TimingStats& cand) {
    CompareResult verdict;
    verdict.outcome = Outcome::kCorrect;
    if (cand.device_left_busy) {
      std::ostringstream os;
      os << "the device was still busy " << kQuietDeadlineUs / 1e3 << " ms after the candidate's process was "
         << "stopped for the reference's timed calls (a probe took up to " << cand.device_max_probe_us
         << " us): work it left running would have run beside them (NOTE [quiet device])";
      verdict.outcome = Outcome::kTimingAnomaly;
      verdict.reason = os.str();
    } else if (cand.referee_anomaly) {
      std::ostringstream os;
      os << "the referee's wall clock saw " << cand.referee_wall_us << " us per call where the candidate's events "
         << "claim " << cand.mean_us << " us (allowance " << cand.referee_allowance_us
         << " us per call; NOTE [timing protocol], step 5)";
      verdict.outcome = Outcome::kTimingAnomaly;
      verdict.reason = os.str();
    } else if (cand.anomaly) {
      std::ostringstream os;
      os << "host wall clock " << cand.wall_us << " us/iter vs events " << cand.mean_us
         << " us/iter: work outside the timed stream?";
      verdict.outcome = Outcome::kTimingAnomaly;
      verdict.reason = os.str();
    }
    return verdict;
  }

  // NOTE [timing protocol]: the published protocol, fixed counts on copies of one draw.
  Inputs perf_published(const Inputs& inputs) {
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
    LocalSide ref(*dist_, [&](const Inputs& in) { return problem_->reference(*ctx_, dist_->collectives(), in); });
    ContestantSide* remote = nullptr;
    std::unique_ptr<TimedSide> cand = candidate_side(&remote);
    TimingResult tr;
    memory_->enter("timing");
    try {
      tr = time_alternating(*dist_, inputs, *cand, ref, o, fixed_);
    } catch (const CandidateFailure& f) {
      throw CandidateFailure{f.outcome, "while timed: " + f.reason};
    }
    memory_->enter("harness");
    if (remote) last_placed_ = remote->last_placed();
    Json tj;
    tj["protocol"] = "published";
    tj["groups"] = tr.groups;
    tj["input_bytes"] = tr.input_bytes;
    tj["cache_bytes"] = o.cache_bytes;
    tj["warmup"] = o.warmup;
    tj["iters"] = o.iters;
    tj["rounds"] = o.rounds;
    record_sides(tr, &tj);
    result_["timing"] = tj;
    phase("recheck");
    CompareResult re = compare_outputs(tr.last_ref, tr.last_cand, tol_, checked_outputs(tr.last_ref.size()));
    result_["recheck"] = to_json(re);
    CompareResult verdict = re;
    if (re.outcome != Outcome::kCorrect) verdict.reason = "after timing: " + re.reason;
    if (verdict.outcome == Outcome::kCorrect) verdict = fixed_copy_verdict(remote, inputs);
    if (verdict.outcome == Outcome::kCorrect) verdict = timing_anomaly_verdict(tr.cand);
    // Every rank takes the same branch: one rank's anomaly ends the
    // evaluation on all (NOTE [verdicts through the store]).
    judge("perf/verdict", "timing", verdict, {{"kind", "timing"}});
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
    // NOTE [recording device] in pkb/published_on.h.
    const std::string recorded_on = job_.j.value("recorded_on", "cuda");
    auto published = dynamic_cast<const PublishedOn*>(problem_.get());
    Outputs got = published ? published->published_on(recorded_on, *ctx_, dist_->collectives(), in)
                            : problem_->reference(*ctx_, dist_->collectives(), in);
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
  std::optional<ContestantProcess> contestant_process_;  // started by worker_main
  std::unique_ptr<ContestantClient> contestant_;
  std::optional<Placed> last_placed_;  // the contestant's inputs of its last call
  TrivialFn trivial_;  // `pkb audit`'s built-in candidates
  std::string key_prefix_;  // store keys of one audit candidate
  double t_ref_s_ = -1;  // the reference's first call, seconds (trial 0)
  std::map<int, AuditMemo> audit_memo_;  // NOTE [audit reference memo]
  double audit_memo_bytes_ = 0;
  FixedSet fixed_;  // NOTE [fixed inputs]
  TrialSpec last_trial_{0, false, 0};  // the last trial that ran, and its outputs' bytes
  double last_out_bytes_ = 0;
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
  // NOTE [contestant start]: before this process holds anything of the
  // evaluation; a failure is the rank's harness_error, in its result.
  std::optional<ContestantProcess> contestant;
  if (runs_in_contestant(job.mode(), job.j.value("candidate", "reference"))) {
    try {
      contestant = start_contestant_process(job.j.value("contestant_dir", std::string()));
    } catch (const std::exception& e) {
      contestant = ContestantProcess{-1, -1, false, error_text(e)};
    }
  }
  RankRun run(job, rank, world, contestant);
  int code = run.run();
  fflush(stdout);
  fflush(stderr);
  // Skip static destructors: backends and CUDA state a candidate left behind
  // must not turn a finished, recorded evaluation into a crash or a hang.
  _exit(code);
}

}  // namespace pkb
