#include "cli_agentic.h"

#include <CLI/CLI.hpp>

#include "cli.h"
#include "driver/commands.h"

namespace pkb {

namespace {

// The evaluation flags of `pkb run` that one candidate's evaluation takes.
void add_eval_flags(CLI::App* c, RunOptions& o) {
  c->add_option("--device", o.device, "cuda, cpu, or auto (as for run)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  c->add_option("--nproc", o.nproc, "Ranks, one process each (default: every GPU for cuda, 2 for cpu)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--ranks-per-gpu", o.ranks_per_gpu, "cuda: ranks per GPU (as for run; > 1 is correctness only)")
      ->check(CLI::Range(0, 1024));
  c->add_option("--trials", o.trials, "Correctness trials (fresh seeded inputs each)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  c->add_option("--base-shape", o.base_shape, "Base shape MxN (default 1024x1024 on cuda, 128x128 on cpu)");
  c->add_flag("--no-perf", o.no_perf, "Check correctness only; skip timing");
  add_timing_flags(c, o);
  c->add_option("--timeout", o.timeout_s,
                "Seconds per evaluation before all its ranks are killed (default 300 on cuda, 900 on cpu)")
      ->check(CLI::PositiveNumber);
  c->add_option("--memory-limit", o.memory_limit_gib,
                  "GiB: each evaluation's ranks run in a memory cgroup of their own with this limit, all ranks "
                  "together (root or a delegated cgroup; refused where none can be made)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--memory-wait", o.memory_wait_s,
                  "Seconds an evaluation whose declared memory does not fit now waits for it before it is "
                  "recorded as harness_error \"not enough memory\"")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  c->add_option("--compile-timeout", o.compile_timeout_s, "Seconds per candidate compile")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--topology", o.topology, "A topology/*.json name or path (default: the one matching this machine)");
  c->add_option("--name", o.name, "Run name in records");
}

}  // namespace

void add_try(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<TryOptions>();
  auto* t = app.add_subcommand("try", "Build and evaluate one candidate file; print its verdict (for a model to read)");
  t->add_option("problem", o->problem, "Id or slug")->required();
  t->add_option("file", o->file, "The candidate: .cu, .cpp, or a raw model response (.md, .txt)")->required();
  add_eval_flags(t, o->run);
  t->add_flag("--json", o->json, "Print the verdict as one JSON object (fields: README, Trying one candidate)");
  t->add_option("--out", o->run.out, "Also append the full result record to this JSONL file (must not exist)");
  t->add_option("--work-dir", o->run.work_dir, "Job, results and rank logs (default /tmp/pkb-PID)");
  t->callback([&cli, o] { cli.action = [o] { return cmd_try(*o); }; });
}

void add_agent(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<AgentOptions>();
  auto* a = app.add_subcommand(
      "agent", "Run an agent command in a loop: task, candidate, verdict, next step; one record per step");
  a->add_option("problems", o->run.problems, "Selection, as for run --problems")->required();
  a->add_option("--agent", o->agent,
                "Shell command run in each step's folder; it reads $PKB_TASK, $PKB_VERDICT, $PKB_HISTORY and writes "
                "$PKB_CANDIDATE (README, Agentic loops)")
      ->required();
  a->add_option("--steps", o->steps, "Attempts per problem and sample")->check(CLI::Range(1, 1000))->capture_default_str();
  a->add_option("--samples", o->samples, "Independent trajectories per problem")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  a->add_flag("--until-fast", o->until_fast,
              "Stop at the first correct candidate faster than the reference (one GPU per rank), not the first "
              "correct one");
  a->add_option("--agent-timeout", o->agent_timeout_s, "Seconds per agent command; then it and its children are killed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  a->add_option("--out", o->run.out, "Results file (JSONL, one record per step; must not exist unless --resume)")
      ->required();
  a->add_option("--dir", o->dir,
                "Attempt folders (default: the --out name with .attempts for .jsonl; must be empty unless --resume)");
  a->add_flag("--resume", o->resume,
              "Continue --out: skip finished trajectories, go on with unfinished ones at their next step");
  add_eval_flags(a, o->run);
  a->callback([&cli, o] { cli.action = [o] { return cmd_agent(*o); }; });
}

void add_generate(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<GenerateOptions>();
  auto* g = app.add_subcommand(
      "generate", "Ask a model (an OpenAI-compatible chat-completions endpoint) for candidates: pkb prompt's task "
                  "per problem and sample, the replies written as pkb run --solutions DIR reads them");
  g->add_option("--problems", o->problems, "Selection, as for run --problems")->required();
  g->add_option("--model", o->model, "The model name the endpoint serves")->required();
  g->add_option("--endpoint", o->endpoint,
                "Base URL (https://api.openai.com/v1, http://127.0.0.1:8000/v1) or the full .../chat/completions")
      ->required();
  g->add_option("--samples", o->samples, "Samples per problem (sample_0 ... sample_K-1)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  g->add_option("--temperature", o->temperature, "Sampling temperature (default: not sent, the endpoint's default)")
      ->check(CLI::Range(0.0, 10.0));
  g->add_option("--max-tokens", o->max_tokens, "max_tokens per reply (default: not sent)")->check(CLI::Range(1, 10000000));
  g->add_option("--concurrency", o->concurrency, "Requests in flight")->check(CLI::Range(1, 256))->capture_default_str();
  g->add_option("--out", o->out, "The folder (new or empty, or one to continue with --resume)")->required();
  g->add_flag("--resume", o->resume, "Continue --out: request only the samples it lacks (README, Evaluating a new model)");
  g->add_option("--api-key-env", o->api_key_env,
                "The environment variable holding the API key (never a flag or a file); unset: no Authorization")
      ->capture_default_str();
  g->add_option("--request-timeout", o->request_timeout_s, "Seconds per request before it is abandoned and retried")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  g->add_option("--retries", o->retries, "Retries per request after 429, 5xx, timeouts and transport errors")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  g->add_option("--device", o->device,
                "cuda: sample_K.cu; cpu: sample_K.cpp for pkb run --device cpu, with a CPU-mode note in the prompt")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  g->add_option("--topology", o->topology, "The machine the prompt describes (as for pkb prompt)")->capture_default_str();
  g->callback([&cli, o] { cli.action = [o] { return cmd_generate(*o); }; });
}

}  // namespace pkb
