#include "cli.h"

#include <CLI/CLI.hpp>

#include "cli_agentic.h"
#include "driver/commands.h"
#include "worker/contestant.h"
#include "worker/worker.h"

namespace pkb {

namespace {

void add_run(CLI::App& app, Cli& cli, std::shared_ptr<RunOptions> o) {
  auto* run = app.add_subcommand("run", "Evaluate candidates (or the references) on this node");
  run->add_option("--device", o->device,
                  "cuda (NCCL, NVLink), cpu (Gloo, host shared memory), or auto: cuda when this build has the "
                  "GPU path and GPUs are visible, else cpu")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  run->add_option("--nproc", o->nproc, "Ranks, one process each (default: every GPU for cuda, 2 for cpu)")
      ->check(CLI::Range(1, 1024));
  run->add_option("--ranks-per-gpu", o->ranks_per_gpu,
                  "cuda: ranks per GPU, placed round-robin on ceil(nproc/K) GPUs; K > 1 shares GPUs (Gloo and CUDA "
                  "IPC buffers, correctness only, records say shared_gpu). Default 0: one per GPU, or shared "
                  "automatically (with a warning) when nproc exceeds the visible GPUs")
      ->check(CLI::Range(0, 1024));
  run->add_option("--problems", o->problems, "Selection: all, ids, ranges, slugs; comma-separated; !X excludes (1-8,12,allreduce or all,!15)")
      ->capture_default_str();
  run->add_option("--solutions", o->solutions,
                  "A folder of candidates (DIR/NN_slug/sample_K.cu or DIR/NN_slug.cu), or 'reference'")
      ->capture_default_str();
  run->add_option("--name", o->name, "Model/run name in records (default: the folder's name)");
  run->add_option("--trials", o->trials, "Correctness trials per evaluation (fresh seeded inputs each)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  run->add_option("--integrity-trials", o->integrity_trials,
                  "Extra trials after the published ones, inputs varied by element, rank and trial")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  run->add_flag("--published-only", o->published_only,
                "The published checks alone (no integrity trials, no input refresh or input-mutation checks), "
                "for comparison with published numbers");
  run->add_option("--base-shape", o->base_shape, "Base shape MxN (default 1024x1024 on cuda, 128x128 on cpu)");
  run->add_flag("--no-perf", o->no_perf, "Check correctness only; skip timing");
  add_timing_flags(run, *o);
  run->add_flag("--keep-samples", o->keep_samples, "Record every timed iteration (per rank, in order) in the results");
  run->add_option("--timeout", o->timeout_s,
                  "Seconds per evaluation before all its ranks are killed (timeout; default 300 on cuda, 900 on cpu)")
      ->check(CLI::PositiveNumber);
  run->add_option("--phase-floor", o->phase_floor_s,
                  "Seconds a phase (a candidate call, the timing...) may take at least before the evaluation is a "
                  "timeout; longer phases get 20x the reference's measured time on top")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--memory-limit", o->memory_limit_gib,
                  "GiB: each evaluation's ranks run in a memory cgroup of their own with this limit, all ranks "
                  "together (root or a delegated cgroup; refused where none can be made)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--memory-wait", o->memory_wait_s,
                  "Seconds an evaluation whose declared memory does not fit now waits for it before it is "
                  "recorded as harness_error \"not enough memory\"")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--worker-user", o->worker_user,
                  "When pkb runs as root, workers drop to this user before loading the candidate ('' keeps root; "
                  "auto: nobody)")
      ->capture_default_str();
  run->add_option("--compile-timeout", o->compile_timeout_s, "Seconds per candidate compile")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--out", o->out, "Results file (JSONL, one record per evaluation, appended as each finishes)");
  run->add_flag("--resume", o->resume, "Continue --out: skip evaluations already recorded there");
  run->add_option("--jobs", o->jobs, "Parallel candidate compiles (default: number of cores)")->check(CLI::Range(1, 256));
  run->add_option("--work-dir", o->work_dir, "Per-evaluation jobs, results and rank logs (default /tmp/pkb-PID)");
  run->add_option("--topology", o->topology, "A topology/*.json name or path (default: the one matching this machine)");
  run->add_option("--calibrated", o->calibrated,
                  "A calibrated topology (pkb calibrate) for records' second roofline, roofline.calibrated "
                  "(default: topology/*.calibrated.json matching this machine, cuda only; 'none': off)");
  run->add_option("--shard", o->shard,
                  "i/N: evaluate only this shard of the plan (items i, i+N, i+2N, ...); join shards with pkb merge");
  run->callback([&cli, o] { cli.action = [o] { return cmd_run(*o); }; });
}

void add_audit(CLI::App& app, Cli& cli, std::shared_ptr<AuditOptions> o) {
  auto* a = app.add_subcommand(
      "audit", "Run trivial candidates (zeros, ones, the inputs, rank-only and cached answers) against every problem; "
               "exit 0 only when none passes");
  a->add_option("--problems", o->problems, "Selection, as for run")->capture_default_str();
  a->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  a->add_option("--nproc", o->nproc, "Ranks (default 2)")->check(CLI::Range(1, 1024));
  a->add_option("--ranks-per-gpu", o->ranks_per_gpu, "cuda: as for run (ranks share GPUs when fewer are visible)")
      ->check(CLI::Range(0, 1024));
  a->add_option("--base-shape", o->base_shape, "Base shape MxN (default 1024x1024 on cuda, 128x128 on cpu)");
  a->add_option("--trials", o->trials, "Published trials")->check(CLI::Range(1, 1000))->capture_default_str();
  a->add_option("--integrity-trials", o->integrity_trials, "Integrity trials")->check(CLI::Range(0, 100))
      ->capture_default_str();
  a->add_flag("--published-only", o->published_only, "The published checks alone (shows what they let through)");
  a->add_option("--timeout", o->timeout_s, "Seconds per evaluation")->check(CLI::PositiveNumber)->capture_default_str();
  a->add_option("--phase-floor", o->phase_floor_s, "As for run")->check(CLI::PositiveNumber)->capture_default_str();
  a->add_option("--work-dir", o->work_dir, "Rank logs (default /tmp/pkb-audit-PID)");
  a->add_option("--worker-user", o->worker_user, "As for run")->capture_default_str();
  a->callback([&cli, o] { cli.action = [o] { return cmd_audit(*o); }; });
}

void add_golden(CLI::App& app, Cli& cli, std::shared_ptr<GoldenOptions> o) {
  auto* g = app.add_subcommand("golden", "Replay recorded fixtures through the C++ references");
  g->add_option("dir", o->dir, "Fixture folder (../shared/golden)")->required();
  g->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  g->add_option("--problems", o->problems, "Selection, as for run")->capture_default_str();
  g->add_option("--ranks-per-gpu", o->ranks_per_gpu,
                "cuda: as for run; each fixture runs at the world size it was recorded at, ranks sharing GPUs "
                "when there are fewer GPUs than that")
      ->check(CLI::Range(0, 1024));
  g->add_option("--out", o->out, "Write one JSONL record per replayed file (must not exist)");
  g->add_option("--timeout", o->timeout_s, "Seconds per problem")->check(CLI::PositiveNumber)->capture_default_str();
  g->add_option("--work-dir", o->work_dir, "Rank logs (default /tmp/pkb-golden-PID)");
  g->add_option("--recorded-on", o->recorded_on,
                "Device the fixtures were recorded on: cuda (../shared/golden) or cpu (../shared/golden-w4, -w8); "
                "problems whose published tie order is the device's replay that device's order")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  g->callback([&cli, o] { cli.action = [o] { return cmd_golden(*o); }; });
}

void add_score(CLI::App& app, Cli& cli, std::shared_ptr<ScoreOptions> o) {
  auto* s = app.add_subcommand("score", "Score results: pass@k, fast_p@k, geomean speedup, outcomes, per category");
  s->add_option("results", o->inputs, "Results files (JSONL); records are grouped by their run name")->required();
  s->add_option("--out", o->out, "Scores file (JSON; must not exist). Default: standard output");
  s->add_option("--k", o->k, "Comma-separated k for pass@k and fast_p@k (clamped to the samples there are)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--p", o->p, "Comma-separated speedup thresholds for fast_p (correct and speedup > p)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_flag("--mixed-speed", o->mixed_speed,
              "Count speedups timed on CPU or with ranks sharing a GPU (they do not measure NVLink; by default "
              "such samples count for pass@k but not for fast_p or the geomean)");
  s->callback([&cli, o] { cli.action = [o] { return cmd_score(*o); }; });
}

void add_leaderboard(CLI::App& app, Cli& cli, std::shared_ptr<LeaderboardOptions> o) {
  auto* l = app.add_subcommand("leaderboard", "Tables from scores files: per category (published layout) and overall");
  l->add_option("scores", o->inputs, "Scores files (from pkb score)")->required();
  l->add_option("--format", o->format, "md, csv, tex, or html (one static page)")
      ->check(CLI::IsMember({"md", "csv", "tex", "html"}))
      ->capture_default_str();
  l->add_option("--out", o->out, "Write here (must not exist). Default: standard output");
  l->add_flag("--mixed-speed", o->mixed_speed,
              "Accept scores made with pkb score --mixed-speed (speedups not measured on one GPU per rank)");
  l->callback([&cli, o] { cli.action = [o] { return cmd_leaderboard(*o); }; });
}

void add_merge(CLI::App& app, Cli& cli, std::shared_ptr<MergeOptions> o) {
  auto* m = app.add_subcommand("merge", "Join the results files of shards; a duplicate evaluation is an error");
  m->add_option("results", o->inputs, "Results files (JSONL)")->required();
  m->add_option("--out", o->out, "Merged results file (must not exist)")->required();
  m->callback([&cli, o] { cli.action = [o] { return cmd_merge(*o); }; });
}

void add_calibrate(CLI::App& app, Cli& cli, std::shared_ptr<CalibrateOptions> o) {
  auto* c = app.add_subcommand("calibrate",
                               "Measure this machine's achievable rates (NVLink, HBM, bf16 GEMM, launch and barrier "
                               "latency) and write a calibrated topology beside the datasheet one");
  c->add_option("--out", o->out, "The file to write (default: topology/<name>.calibrated.json in the source tree)");
  c->add_option("--gpus", o->gpus, "GPUs to calibrate, one worker each (default: every visible GPU)")
      ->check(CLI::Range(1, 1024));
  c->add_flag("--force", o->force, "Replace the file if it exists (default: refuse)");
  c->add_option("--timeout", o->timeout_s, "Seconds for the whole calibration before its workers are killed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--work-dir", o->work_dir, "Worker job, results and logs (default /tmp/pkb-calibrate-PID)");
  c->add_option("--warmup", o->warmup, "Untimed runs before each measurement")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  c->add_option("--reps", o->reps, "Timed runs per measurement; the median is kept")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  c->callback([&cli, o] { cli.action = [o] { return cmd_calibrate(*o); }; });
}

}  // namespace

void add_timing_flags(CLI::App* c, RunOptions& o) {
  c->add_option("--timing", o.timing,
                  "fresh: new input contents for every timed call, outputs checked at random, adaptive stopping "
                  "(--max-noise, --min-samples, --min-rounds, --max-time); published: the published protocol (--warmup, "
                  "--iters, --rounds) on copies of one draw")
      ->check(CLI::IsMember({"fresh", "published"}))
      ->capture_default_str();
  c->add_option("--max-noise", o.max_noise_pct,
                  "fresh: stop a side once its median's 95% confidence interval is within this many percent")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  c->add_option("--min-samples", o.min_samples, "fresh: timed calls per side at least")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  c->add_option("--min-rounds", o.min_rounds,
                  "fresh: rounds (one segment of each side) at least; the speedup is their ratios' median")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  c->add_option("--max-time", o.max_time_s,
                  "fresh: seconds per side (warm-up and timed segments, by the referee's clock) before it stops "
                  "short of --max-noise")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--warmup", o.warmup, "published: warm-up iterations per side (default 500 on cuda, 10 on cpu)")
      ->check(CLI::Range(0, 1000000));
  c->add_option("--iters", o.iters, "published: timed iterations per side (default 100 on cuda, 20 on cpu)")
      ->check(CLI::Range(1, 1000000));
  c->add_option("--rounds", o.rounds, "published: alternating reference/candidate rounds the iterations are split into")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
}

Cli make_cli() {
  Cli cli;
  cli.app = std::make_unique<CLI::App>(
      "pkb: ParallelKernelBench. Scores multi-GPU kernels for correctness, speed against the PyTorch + NCCL "
      "reference, and closeness to the communication roofline.\n\n"
      "Exit codes: 0 every evaluation correct, 1 some evaluation not correct, 2 usage error, 3 harness error.");
  CLI::App& app = *cli.app;
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every subcommand");

  auto list_memory = std::make_shared<bool>(false);
  auto list_results = std::make_shared<std::vector<std::string>>();
  auto* list = app.add_subcommand("list", "List the problems this build knows");
  list->add_flag("--memory", *list_memory,
                 "Each problem's memory per rank: the declared estimate (cpu W=2, W=4 at 128x128; cuda W=1 at "
                 "1024x1024) and the peaks measured in --results");
  list->add_option("--results", *list_results, "Results files (JSONL) whose measured peaks --memory shows");
  list->callback([&cli, list_memory, list_results] {
    cli.action = [list_memory, list_results] {
      return *list_memory ? cmd_list_memory(*list_results) : cmd_list();
    };
  });
  auto show_id = std::make_shared<std::string>();
  auto* show = app.add_subcommand("show", "Show a problem's specification and README");
  show->add_option("problem", *show_id, "Id or slug")->required();
  show->callback([&cli, show_id] { cli.action = [show_id] { return cmd_show(*show_id); }; });

  app.add_subcommand("topo", "Show the detected machine and the topology the roofline uses")->callback([&cli] {
    cli.action = [] { return cmd_topo(); };
  });

  auto prompt = std::make_shared<PromptOptions>();
  auto* pr = app.add_subcommand("prompt", "Print the task a model is given for one problem");
  pr->add_option("problem", prompt->problem, "Id or slug")->required();
  pr->add_option("--topology", prompt->topology, "The machine to describe (a topology/*.json name or path)")
      ->capture_default_str();
  pr->callback([&cli, prompt] { cli.action = [prompt] { return cmd_prompt(*prompt); }; });

  add_run(app, cli, std::make_shared<RunOptions>());
  add_golden(app, cli, std::make_shared<GoldenOptions>());
  add_audit(app, cli, std::make_shared<AuditOptions>());
  add_score(app, cli, std::make_shared<ScoreOptions>());
  add_leaderboard(app, cli, std::make_shared<LeaderboardOptions>());
  add_merge(app, cli, std::make_shared<MergeOptions>());
  add_try(app, cli);
  add_agent(app, cli);
  add_generate(app, cli);
  add_calibrate(app, cli, std::make_shared<CalibrateOptions>());

  auto job = std::make_shared<std::string>();
  auto* worker = app.add_subcommand("worker", "");  // internal: one rank, started by the driver
  worker->group("");
  worker->add_option("job", *job, "Job file")->required();
  worker->callback([&cli, job] { cli.action = [job] { return worker_main(*job); }; });
  // internal: the process a candidate runs in, started by its referee (NOTE [referee and contestant])
  auto fd = std::make_shared<int>(-1);
  auto* contestant = app.add_subcommand("contestant", "");
  contestant->group("");
  contestant->add_option("--fd", *fd, "Control channel")->required();
  contestant->callback([&cli, fd] { cli.action = [fd] { return contestant_main(*fd); }; });
  return cli;
}

}  // namespace pkb
