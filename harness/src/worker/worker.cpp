// The flow of one rank (DESIGN.md §5): set up, load, then for each trial run
// the candidate on clones, the reference on clones, compare; then time both.
// Every step that can fail on one rank ends with a store exchange, so that all
// ranks take the same branch (NOTE [verdicts through the store]).
#include "worker/worker.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/golden_fixture.h"
#include "common/outcome.h"
#include "common/plugin_loader.h"
#include "common/results.h"
#include "common/topology_io.h"
#include "driver/launcher.h"
#include "worker/calibrate.h"
#include "worker/compare.h"
#include "worker/distributed.h"
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
    DistributedOptions o;
    o.rank = rank_;
    o.world = world_;
    o.device = job_.device();
    o.shared_gpu = job_.shared_gpu();
    o.master_addr = std::getenv("MASTER_ADDR") ? std::getenv("MASTER_ADDR") : "127.0.0.1";
    o.master_port = env_int("MASTER_PORT", 29500);
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(job_.j.value("timeout_s", 300.0) * 1000));
    dist_ = std::make_unique<Distributed>(o);
    ctx_ = std::make_unique<WorkerContext>(*dist_, topology_from_json(job_.j.value("topology", Json::object())));
    problem_ = load_problem_plugin(job_.j.at("problem_lib").get<std::string>()).problem;
    tol_ = problem_->spec().tolerance;
    std::string why = problem_->check_world(world_);
    PKB_CHECK(why.empty(), "problem ", problem_->spec().id, " cannot run at world size ", world_, ": ", why);
  }

  void load_candidate() {
    phase("load");
    std::string cand = job_.j.value("candidate", "reference");
    std::string status = "ok";
    if (cand != "reference") {
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
    auto all = dist_->exchange(key, status);
    for (int r = 0; r < world_; ++r) {
      if (all[r] == "ok") continue;
      std::string reason = r == rank_ ? all[r] : "rank " + std::to_string(r) + ": " + all[r];
      if (r == rank_ || status == "ok") throw CandidateFailure{outcome, reason};
    }
  }

  Outputs run_candidate(const Inputs& in) {
    if (!solve_) return problem_->reference(*ctx_, dist_->collectives(), in);
    try {
      Outputs out = solve_(*ctx_, in);
      return out;
    } catch (const std::exception& e) {
      throw CandidateFailure{Outcome::kRuntimeError, "candidate threw: " + error_text(e)};
    } catch (...) {
      throw CandidateFailure{Outcome::kRuntimeError, "candidate threw a non-standard exception"};
    }
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

  void evaluate() {
    load_candidate();
    const int trials = job_.j.value("trials", 5);
    Inputs last_inputs;
    result_["trials"] = Json::array();
    for (int t = 0; t < trials; ++t) {
      phase("trial " + std::to_string(t));
      InputRequest req;
      req.rank = rank_;
      req.world = world_;
      req.trial = t;
      req.m = job_.j.value("m", 1024);
      req.n = job_.j.value("n", 1024);
      req.dtype = at::kBFloat16;
      req.device = job_.device();
      req.seed = seed_for(problem_->spec().id, rank_, t);
      at::manual_seed(req.seed);
      Inputs inputs = problem_->make_inputs(req);
      if (t == 0) cost(inputs);

      std::string status = "ok";
      Outputs got;
      try {
        got = run_candidate_checked(inputs.clone());
      } catch (const CandidateFailure& f) {
        status = f.reason;
        dist_->publish("t" + std::to_string(t) + "/cand", status);  // tell peers before leaving
        throw;
      }
      agree("t" + std::to_string(t) + "/cand", Outcome::kRuntimeError, status);

      Outputs want = problem_->reference(*ctx_, dist_->collectives(), inputs.clone());
      dist_->device_sync();
      CompareResult cmp = compare_outputs(want, got, tol_, checked_outputs(want.size()));
      Json tj = to_json(cmp);
      tj["trial"] = t;
      result_["trials"].push_back(tj);
      auto verdicts = dist_->exchange("t" + std::to_string(t) + "/verdict", outcome_name(cmp.outcome));
      Outcome worst = Outcome::kCorrect;
      int worst_rank = -1;
      for (int r = 0; r < world_; ++r) {
        Outcome o = outcome_from_name(verdicts[r]);
        if (o != worst && first_of(o, worst) == o) {
          worst = o;
          worst_rank = r;
        }
      }
      if (worst != Outcome::kCorrect) {
        std::string reason = cmp.outcome != Outcome::kCorrect
                                 ? "trial " + std::to_string(t) + ": " + cmp.reason
                                 : "trial " + std::to_string(t) + ": rank " + std::to_string(worst_rank) +
                                       " reported " + outcome_name(worst);
        finish(cmp.outcome != Outcome::kCorrect ? cmp.outcome : worst, reason);
        return;
      }
      last_inputs = std::move(inputs);
    }
    if (job_.j.value("perf", true)) perf(last_inputs);
    if (!result_.contains("outcome")) finish(Outcome::kCorrect, "");
  }

  void perf(const Inputs& inputs) {
    phase("timing");
    TimingOptions o;
    o.warmup = job_.j.value("warmup", 500);
    o.iters = job_.j.value("iters", 100);
    o.rounds = job_.j.value("rounds", 10);
    o.cache_bytes = cache_bytes_for(dist_->device());
    TimedFn cand = [&](const Inputs& in) { return run_candidate(in); };
    TimedFn ref = [&](const Inputs& in) { return problem_->reference(*ctx_, dist_->collectives(), in); };
    TimingResult tr = time_alternating(*dist_, inputs, cand, ref, o);
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

  void phase(const std::string& p) { result_["phase"] = p; }
  void finish(Outcome o, const std::string& reason) {
    if (result_.contains("outcome")) return;
    result_["outcome"] = outcome_name(o);
    result_["reason"] = reason;
  }

  void write_result() {
    std::string dir = job_.j.at("result_dir").get<std::string>();
    write_file_atomic(dir + "/rank_" + std::to_string(rank_) + ".json", result_.dump(2), true);
  }

  const Job& job_;
  int rank_, world_;
  Json result_;
  std::unique_ptr<Distributed> dist_;
  std::unique_ptr<WorkerContext> ctx_;
  std::shared_ptr<Problem> problem_;
  Tolerance tol_;
  SolveFn solve_ = nullptr;
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
