// `pkb run`: plan, build candidates, evaluate each (one launch of W ranks per
// evaluation), record, summarise.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <future>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "common/build_info.h"
#include "common/calibration.h"
#include "common/files.h"
#include "common/memory_record.h"
#include "common/outcome.h"
#include "common/results.h"
#include "common/selection.h"
#include "common/topology_detect.h"
#include "common/topology_io.h"
#include "driver/candidate_build.h"
#include "driver/commands.h"
#include "driver/containment.h"
#include "driver/evaluation.h"
#include "driver/gpu_placement.h"
#include "driver/mechanisms.h"
#include "driver/memory_admission.h"
#include "driver/plan.h"
#include "driver/report.h"
#include "driver/results_guard.h"
#include "driver/run_pipeline.h"
#include "driver/speedup.h"

namespace pkb {

namespace {

// The topology file matching this machine (NVML); without one, a topology
// without rates, so records carry no roofline rather than a wrong one.
Topology detected_topology(const std::string& sources) {
  DetectedMachine m = detect_machine();
  std::string name = match_topology(m, sources);
  if (!name.empty()) return load_topology(name, sources);
  std::fprintf(stderr, "pkb: no topology/*.json matches this machine (%s); no roofline. See `pkb topo`.\n",
               m.ok ? (std::to_string(m.gpus.size()) + "x " + m.gpus[0]).c_str() : m.why_not.c_str());
  Topology t;
  t.name = "unknown";
  t.gpus = static_cast<int>(m.gpus.size());
  if (m.ok) t.gpu = m.gpus[0];
  return t;
}

}  // namespace

RunSettings resolve_settings(const RunOptions& o, const std::string& sources) {
  RunSettings s;
  s.opts = o;
  s.device = o.device;
  if (s.device == "auto") s.device = have_cuda_build() && visible_gpus() > 0 ? "cuda" : "cpu";
  PKB_CHECK(s.device == "cpu" || s.device == "cuda", "--device must be auto, cpu or cuda, got '", s.device, "'");
  if (s.device == "cuda") PKB_CHECK(have_cuda_build(), "this pkb was built without the GPU path; use --device cpu");
  if (s.device == "cpu") PKB_CHECK(have_cpu_mode(), "this pkb was built without CPU mode (gloo headers missing)");
  s.world = o.nproc > 0 ? o.nproc : (s.device == "cuda" ? std::max(1, visible_gpus()) : 2);
  s.placement = placement_for(s.device, s.world, o.ranks_per_gpu);
  auto [m, n] = parse_shape(o.base_shape.empty() ? (s.device == "cuda" ? "1024x1024" : "128x128") : o.base_shape);
  s.m = m;
  s.n = n;
  s.warmup = o.warmup >= 0 ? o.warmup : (s.device == "cuda" ? 500 : 10);
  if (s.opts.timeout_s <= 0) s.opts.timeout_s = s.device == "cuda" ? kTimeoutCudaS : kTimeoutCpuS;
  s.iters = o.iters > 0 ? o.iters : (s.device == "cuda" ? 100 : 20);
  PKB_CHECK(o.trials >= 1, "--trials must be at least 1");
  PKB_CHECK(o.rounds >= 1, "--rounds must be at least 1");
  s.solutions_label = o.solutions == "reference" ? "reference" : o.solutions;
  while (s.solutions_label.size() > 1 && s.solutions_label.back() == '/') s.solutions_label.pop_back();
  s.run_name = !o.name.empty() ? o.name : s.solutions_label.substr(s.solutions_label.rfind('/') + 1);
  if (s.device == "cpu") s.topology = o.topology.empty() ? cpu_topology() : load_topology(o.topology, sources);
  else if (!o.topology.empty()) s.topology = load_topology(o.topology, sources);
  else s.topology = detected_topology(sources);
  s.calibrated = choose_calibrated(o.calibrated, s.device, sources);
  s.work_dir = o.work_dir.empty() ? "/tmp/pkb-" + std::to_string(getpid()) : o.work_dir;
  s.worker_user = worker_user(resolve_worker_user(o.worker_user, s.device));
  return s;
}

Json base_record(const RunSettings& s, const PlanItem& item) {
  const ProblemSpec& sp = item.problem->spec;
  Json r;
  r["schema_version"] = kResultSchemaVersion;
  r["kind"] = "evaluation";
  r["run_name"] = s.run_name;
  r["solutions"] = s.solutions_label;
  r["problem_id"] = sp.id;
  r["slug"] = sp.slug;
  r["category"] = sp.category;
  r["sample"] = item.sample;
  r["candidate"] = item.source.empty() ? "reference" : item.source;
  r["world_size"] = s.world;
  r["device"] = s.device;
  // Times of ranks that share a GPU do not measure NVLink (NOTE [ranks sharing a GPU]).
  r["shared_gpu"] = s.placement.shared;
  if (s.device == "cuda") r["gpu_of_rank"] = s.placement.gpu_of_rank;
  r["base_shape"] = {s.m, s.n};
  r["dtype"] = "bfloat16";
  r["args"] = {{"trials", s.opts.trials}, {"integrity_trials", s.opts.published_only ? 0 : s.opts.integrity_trials},
               {"published_only", s.opts.published_only}, {"perf", !s.opts.no_perf}, {"warmup", s.warmup},
               {"iters", s.iters},        {"rounds", s.opts.rounds}, {"timeout_s", s.opts.timeout_s}, {"phase_floor_s", s.opts.phase_floor_s},
               {"keep_samples", s.opts.keep_samples}, {"timing", s.opts.timing},
               {"max_noise_pct", s.opts.max_noise_pct}, {"min_samples", s.opts.min_samples}, {"min_rounds", s.opts.min_rounds},
               {"max_time_s", s.opts.max_time_s}};
  r["topology"] = s.topology.name;
  r["toolchain"] = toolchain_json();
  r["git_sha"] = git_sha();
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  r["host"] = host;
  r["started_at"] = utc_timestamp();
  return r;
}

// Times, speedup and roofline from the per-rank results: the slowest rank's
// median is the run's time, its mean is kept beside it (NOTE [timing
// protocol], step 4), and the speedup theirs, or under fresh timing NOTE
// [paired rounds]; see NOTE [roofline].
namespace {

void add_times(Json& r, const EvalResult& e, const Topology& topo) {
  // NOTE [referee and contestant]: each rank's contestant (pid, user,
  // isolation, how long it was stopped and what it used meanwhile).
  Json contestants = Json::array();
  for (const auto& rj : e.ranks)
    if (rj.contains("contestant")) contestants.push_back({{"rank", rj.value("rank", -1)}, {"contestant", rj["contestant"]}});
  if (!contestants.empty()) r["contestants"] = contestants;
  double ref = 0, cand = 0, ref_med = 0, cand_med = 0;
  // NOTE [paired rounds]: each round's slowest-rank segment median, per side.
  std::vector<double> ref_rounds, cand_rounds;
  bool paired = true;
  Json per_rank = Json::array();
  Cost cost;
  bool have = false;
  for (const auto& rj : e.ranks) {
    if (rj.contains("cost")) {
      const Json& c = rj["cost"];
      cost.nvlink_bytes_per_rank = std::max(cost.nvlink_bytes_per_rank, c.value("nvlink_bytes_per_rank", 0.0));
      cost.hbm_bytes_per_rank = std::max(cost.hbm_bytes_per_rank, c.value("hbm_bytes_per_rank", 0.0));
      cost.flops_per_rank = std::max(cost.flops_per_rank, c.value("flops_per_rank", 0.0));
    }
    if (!rj.contains("timing")) continue;
    const Json& t = rj["timing"];
    have = true;
    ref = std::max(ref, t["reference"].value("mean_us", 0.0));
    cand = std::max(cand, t["candidate"].value("mean_us", 0.0));
    ref_med = std::max(ref_med, t["reference"].value("median_us", 0.0));
    cand_med = std::max(cand_med, t["candidate"].value("median_us", 0.0));
    Json pr = {{"rank", rj.value("rank", -1)}, {"reference", t["reference"]}, {"candidate", t["candidate"]},
               {"groups", t.value("groups", 0)}};
    // The fresh loop's report (NOTE [fresh inputs]): where its time went.
    for (const char* k : {"rounds", "draws", "checked_calls", "segment_calls", "loop_s", "round_medians_us"})
      if (t.contains(k)) pr[k] = t[k];
    per_rank.push_back(pr);
    paired = paired && slowest_per_round(t, "reference", &ref_rounds) && slowest_per_round(t, "candidate", &cand_rounds);
  }
  r["cost"] = {{"nvlink_bytes_per_rank", cost.nvlink_bytes_per_rank},
               {"hbm_bytes_per_rank", cost.hbm_bytes_per_rank},
               {"flops_per_rank", cost.flops_per_rank}};
  if (!have) return;
  r["times"] = {{"reference_us", ref_med},
                {"candidate_us", cand_med},
                {"reference_mean_us", ref},
                {"candidate_mean_us", cand},
                {"per_rank", per_rank}};
  if (cand_med > 0) r["speedup"] = ref_med / cand_med;
  if (paired && !ref_rounds.empty() && ref_rounds.size() == cand_rounds.size()) {
    if (const double p = paired_speedup(ref_rounds, cand_rounds); p > 0) {
      r["speedup_of_medians"] = r["speedup"];
      r["speedup"] = p;
    }
  }
  if (cand > 0) r["speedup_mean"] = ref / cand;
  Roofline roof = roofline(cost, topo);
  if (roof.valid) {
    r["roofline"] = {{"t_roof_us", roof.t_roof_us},
                     {"bound", roof.bound},
                     {"reference_fraction", ref_med > 0 ? roof.t_roof_us / ref_med : 0.0},
                     {"candidate_fraction", cand_med > 0 ? roof.t_roof_us / cand_med : 0.0}};
  }
}

}  // namespace

Json evaluate_item(const RunSettings& s, const PlanItem& item, const BuildResult* build, int index) {
  Json r = base_record(s, item);
  auto finish = [&](Outcome o, const std::string& reason) {
    r["outcome"] = outcome_name(o);
    r["reason"] = reason;
    r["finished_at"] = utc_timestamp();
    return r;
  };
  // Only candidates get "mechanisms": a reference record's data moves through
  // NCCL inside libtorch, whose choice of mechanism is made at run time and is
  // not in a shared object pkb built.
  if (build) {
    r["build"] = {{"ok", build->ok}, {"cached", build->cached}, {"seconds", build->seconds}, {"key", build->key}};
    if (!build->log.empty()) r["build"]["log"] = build->log;
    // As the published harness reports it: a compile failure, "no code in the response".
    if (!build->ok && build->no_code) return finish(Outcome::kCompileError, build->log);
    if (!build->ok) return finish(Outcome::kCompileError, "compile failed:\n" + build->log);
    // Informative only: naming mechanisms never decides an outcome.
    try {
      r["mechanisms"] = mechanisms_json(detect_mechanisms(build->so_path, s.cuobjdump));
    } catch (const std::exception& e) {
      r["mechanisms"] = mechanisms_json({{"unknown", std::string("detection failed: ") + e.what()}});
    }
    ImportCheck ic = check_imports(build->so_path);
    if (!ic.ok) {
      r["forbidden_imports"] = ic.offending;
      return finish(Outcome::kForbiddenApi, ic.reason);
    }
  }
  // NOTE [memory admission]: the declared peak, against what is free now.
  MemoryNeed need;
  need.per_rank_bytes = item.problem->memory_estimate_bytes(s.world, s.m, s.n, s.device == "cuda");
  need.ranks = s.world;
  need.cuda = s.device == "cuda";
  need.gpu_of_rank = s.placement.gpu_of_rank;
  need.limit_bytes = static_cast<int64_t>(s.opts.memory_limit_gib * (1 << 30));
  AdmissionResult admission = admit_evaluation(need, s.opts.memory_wait_s);
  if (need.per_rank_bytes > 0) {
    Json a = {{"estimate_per_rank_bytes", need.per_rank_bytes}, {"waited_s", admission.waited_s},
              {"alone", admission.alone}, {"pools", Json::array()}};
    for (const auto& p : admission.pools)
      a["pools"].push_back({{"name", p.name}, {"need_bytes", p.need_bytes}, {"available_bytes", p.have_bytes},
                            {"capacity_bytes", p.capacity_bytes}, {"source", p.have_source}});
    r["admission"] = a;
  }
  if (!admission.admitted) return finish(Outcome::kHarnessError, admission.reason);
  EvalRequest req;
  req.world = s.world;
  req.memory_limit_bytes = need.limit_bytes;
  req.timeout_s = s.opts.timeout_s;
  req.phase_floor_s = s.opts.phase_floor_s;
  req.worker_user = s.worker_user;
  req.eval_dir = s.work_dir + "/" + std::to_string(index) + "_" + item.problem->folder_name() + "_s" +
                 std::to_string(item.sample);
  req.job = {{"mode", "eval"},
             {"problem_lib", item.problem->lib_path},
             {"candidate", build ? build->so_path : "reference"},
             {"device", s.device},
             {"trials", s.opts.trials},
             {"integrity_trials", s.opts.integrity_trials},
             {"published_only", s.opts.published_only},
             {"m", s.m},
             {"n", s.n},
             {"perf", !s.opts.no_perf},
             {"warmup", s.warmup},
             {"iters", s.iters},
             {"rounds", s.opts.rounds},
             {"keep_samples", s.opts.keep_samples},
             {"timing", s.opts.timing},
             {"max_noise", s.opts.max_noise_pct / 100.0},
             {"min_samples", s.opts.min_samples},
             {"min_rounds", s.opts.min_rounds},
             {"max_time_s", s.opts.max_time_s},
             {"topology", to_json(s.topology)}};
  add_placement(req.job, s.placement);
  EvalResult e = run_evaluation(req);
  r["deciding_rank"] = e.deciding_rank;
  r["logs"] = req.eval_dir;
  r["process"] = e.process;
  r["memory"] = memory_summary(e.ranks, e.memory);  // NOTE [memory record]
  Json trials = Json::array();
  for (const auto& rj : e.ranks)
    if (rj.contains("trials")) trials.push_back({{"rank", rj.value("rank", -1)}, {"trials", rj["trials"]}});
  r["errors"] = trials;
  if (e.deciding_rank >= 0 && e.deciding_rank < static_cast<int>(e.ranks.size()) &&
      e.ranks[e.deciding_rank].contains("failed_trial"))
    r["failed_trial"] = e.ranks[e.deciding_rank]["failed_trial"];
  add_times(r, e, s.topology);
  add_calibrated_roofline(r, s.calibrated);
  for (const auto& rj : e.ranks)
    if (rj.contains("recheck") && rj["recheck"].value("outcome", "") != "correct") r["recheck"] = rj["recheck"];
  return finish(e.outcome, e.reason);
}

Json evaluate_or_harness_error(const RunSettings& s, const PlanItem& item, const BuildResult* build, int index) {
  try {
    return evaluate_item(s, item, build, index);
  } catch (const std::exception& e) {
    Json r = base_record(s, item);
    r["outcome"] = outcome_name(Outcome::kHarnessError);
    r["reason"] = std::string("driver: ") + e.what();
    return r;
  }
}

std::map<std::string, BuildResult> build_all(const RunSettings& s, const std::vector<PlanItem>& plan, Progress& progress) {
  std::vector<std::string> sources;
  for (const auto& it : plan)
    if (!it.source.empty() && it.skip_reason.empty() &&
        std::find(sources.begin(), sources.end(), it.source) == sources.end())
      sources.push_back(it.source);
  std::map<std::string, BuildResult> out;
  if (sources.empty()) return out;
  CandidateToolchain tc = CandidateToolchain::load(build_dir());
  int jobs = s.opts.jobs > 0 ? s.opts.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  progress.note("building " + std::to_string(sources.size()) + " candidate(s) with " + std::to_string(jobs) + " job(s)");
  std::mutex mu;
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < sources.size(); i = next++) {
        BuildResult b;
        try {
          b = build_candidate(sources[i], s.device, tc, s.opts.compile_timeout_s);
        } catch (const std::exception& e) {
          b.ok = false;
          b.log = e.what();
        }
        std::lock_guard<std::mutex> lock(mu);
        out[sources[i]] = b;
      }
    });
  }
  for (auto& t : pool) t.join();
  return out;
}

int cmd_run(const RunOptions& opts) {
  harden_driver();  // NOTE [untrusted candidates]
  // Phase: resolve what the user asked for.
  std::string bdir = build_dir();
  ProblemCatalog catalog = ProblemCatalog::discover(bdir);
  RunSettings s = resolve_settings(opts, source_dir());
  std::vector<int> ids = catalog.select(opts.problems);
  if (opts.solutions != "reference") {
    struct stat st;
    PKB_CHECK(stat(opts.solutions.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "--solutions '", opts.solutions,
              "' is not a folder (or 'reference')");
  }
  // Phase: plan, and skip what is already recorded.
  std::vector<PlanItem> plan = make_plan(catalog, ids, opts.solutions, s.device, s.world);
  // The plan's order is deterministic (problem id, then sample), so shard i of
  // N is the same set of items on every node.
  auto [shard_i, shard_n] = opts.shard.empty() ? std::pair<int, int>{0, 1} : parse_shard(opts.shard);
  PKB_CHECK(!opts.resume || !opts.out.empty(), "--resume continues the results file named by --out");
  std::set<std::string> done;
  if (opts.resume) done = record_keys(opts.out);
  // Without --out, records still go to a file: results/<name>-<UTC time>.jsonl.
  std::unique_ptr<JsonlWriter> writer =
      opts.out.empty() ? open_new_results_file("results", s.run_name)
                       : std::make_unique<JsonlWriter>(opts.out, opts.resume);
  if (opts.out.empty())
    std::fprintf(stderr, "pkb run: results go to %s (--out names another file)\n", writer->path().c_str());
  auto guard = std::make_unique<ResultsGuard>(writer->path(), writer.get());
  if (opts.resume) {
    // An evaluation in flight when a previous driver died: recorded, not run
    // again (it may be what killed the driver; NOTE [untrusted candidates]).
    std::vector<Json> marker;
    if (file_exists(ResultsGuard::inflight_path(opts.out))) marker = read_jsonl(ResultsGuard::inflight_path(opts.out));
    if (!marker.empty() && !done.count(record_key(marker[0]))) {
      Json inflight = marker[0];
      inflight["outcome"] = outcome_name(Outcome::kRuntimeError);
      inflight["reason"] =
          "the driver died while this evaluation ran (killed, perhaps by the candidate); --resume recorded it "
          "instead of running it again";
      inflight["finished_at"] = utc_timestamp();
      writer->append(inflight);
      guard->appended(inflight);
      done.insert(record_key(inflight));
      std::fprintf(stderr, "pkb: %s\n", inflight["reason"].get<std::string>().c_str());
    }
  }
  guard->end();
  mkdir(s.work_dir.c_str(), 0755);

  std::vector<std::string> skipped;
  std::vector<PlanItem> todo;
  size_t already = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    const PlanItem& it = plan[k];
    if (static_cast<int>(k % shard_n) != shard_i) continue;
    if (!it.skip_reason.empty()) {
      skipped.push_back(it.problem->folder_name() + ": " + it.skip_reason);
      continue;
    }
    if (done.count(record_key(base_record(s, it)))) {
      ++already;
      continue;
    }
    todo.push_back(it);
  }
  Progress progress(static_cast<int>(todo.size()));
  progress.note("pkb run: " + std::to_string(todo.size()) + " evaluation(s)" +
                (shard_n > 1 ? " (shard " + opts.shard + ")" : std::string()) + " on " + s.device + ", world size " +
                std::to_string(s.world) + ", base shape " + std::to_string(s.m) + "x" + std::to_string(s.n) +
                (s.placement.shared ? " (ranks sharing " + std::to_string(s.placement.gpus_used) + " GPU(s))"
                                    : std::string()) +
                (already ? ", " + std::to_string(already) + " already recorded" : std::string()) +
                "; logs in " + s.work_dir);
  for (const auto& sk : skipped) progress.note("skipped " + sk);
  if (opts.solutions != "reference" && plan.empty()) progress.note("no candidates found in " + opts.solutions);

  // Phase: build every candidate (in parallel, cached).
  auto builds = build_all(s, todo, progress);
  if (!builds.empty()) s.cuobjdump = find_cuobjdump(CandidateToolchain::load(bdir));

  // Phase: evaluate, recording each result as soon as it exists.
  std::vector<Json> records;
  bool harness_error = false, all_correct = true;
  for (size_t i = 0; i < todo.size(); ++i) {
    const PlanItem& it = todo[i];
    const BuildResult* b = it.source.empty() ? nullptr : &builds.at(it.source);
    guard->begin(base_record(s, it));
    Json r = evaluate_or_harness_error(s, it, b, static_cast<int>(i));
    if (!guard->check_and_repair(writer)) {
      r["outcome"] = outcome_name(Outcome::kForbiddenApi);
      r["reason"] = "the results file changed while this evaluation ran (the candidate wrote it); pkb restored it";
    }
    writer->append(r);
    guard->appended(r);
    guard->end();
    progress.finished(r);
    std::string o = r.value("outcome", std::string());
    harness_error |= o == "harness_error";
    all_correct &= o == "correct";
    records.push_back(std::move(r));
  }

  // Phase: report.
  std::printf("%s", summary_markdown(records, skipped).c_str());
  progress.note("results: " + writer->path());
  if (harness_error) return kExitHarnessError;
  return all_correct ? kExitAllCorrect : kExitSomeNotCorrect;
}

}  // namespace pkb
