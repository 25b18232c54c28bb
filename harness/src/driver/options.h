// What the user asked for, as parsed by the command line (cli.cpp).
#pragma once

#include <string>
#include <vector>

namespace pkb {

// The default --timeout of run and try. On CPU a reference call can take
// seconds (76 at W = 2: 6.1 s a call on a 2-core AVX-512 VM without AMX, 384 s
// for its evaluation, defaults), which 300 s would cut short as a `timeout`;
// a hung phase is still ended by its own deadline (NOTE [phase deadlines]).
inline constexpr double kTimeoutCudaS = 300, kTimeoutCpuS = 900;

struct RunOptions {
  std::string device = "auto";   // auto | cpu | cuda (auto: cuda when GPUs are visible)
  int nproc = 0;                 // 0: every visible GPU (cuda) or 2 (cpu)
  int ranks_per_gpu = 0;         // cuda: 0 automatic; K: ceil(nproc/K) GPUs (NOTE [ranks sharing a GPU])
  std::string problems = "all";
  std::string solutions = "reference";  // a folder, or "reference"
  std::string name;              // the model/run name in records (default: folder name)
  int trials = 5;
  int integrity_trials = 2;      // NOTE [integrity trials] (pkb/integrity.h)
  bool published_only = false;   // the published checks alone
  std::string base_shape;        // "MxN"; default 1024x1024 (cuda), 128x128 (cpu)
  bool no_perf = false;
  // NOTE [fresh inputs] (worker/timing_fresh.h): "fresh" (default) or
  // "published" (NOTE [timing protocol]: --warmup, --iters, --rounds).
  std::string timing = "fresh";
  double max_noise_pct = 1.0;    // fresh: the median's 95% CI half-width, percent
  int min_samples = 16;          // fresh: per side, at least
  int min_rounds = 8;            // fresh: rounds at least (NOTE [paired rounds])
  double max_time_s = 0.5;       // fresh: per side, warm-up included
  int warmup = -1;               // -1: 500 (cuda), 10 (cpu)
  int iters = -1;                // -1: 100 (cuda), 20 (cpu)
  int rounds = 10;
  bool keep_samples = false;     // per-iteration times in the per-rank timing records
  // Per evaluation, launch to last rank; <= 0: kTimeoutCudaS or kTimeoutCpuS.
  double timeout_s = 0;
  double phase_floor_s = 30;     // NOTE [phase deadlines]
  double memory_limit_gib = 0;   // > 0: each evaluation's ranks together, a cgroup limit (NOTE [OOM kills])
  double memory_wait_s = 600;    // NOTE [memory admission]
  std::string worker_user = "auto";  // when root: workers drop to it (resolve_worker_user; NOTE [untrusted candidates])
  double compile_timeout_s = 600;
  std::string out;               // results JSONL
  bool resume = false;
  int jobs = 0;                  // parallel compiles; 0: number of cores
  std::string work_dir;          // per-evaluation logs; default /tmp/pkb-<pid>
  std::string topology;          // a topology/*.json name or path; default: detected
  std::string calibrated;        // a calibrated topology; "" the detected machine's, "none" off
  bool keep_work_dir = false;
  std::string shard;             // "i/N": only the plan items with index % N == i
};

struct AuditOptions {
  std::string device = "cpu";
  std::string problems = "all";
  int nproc = 0;  // 0: 2
  int ranks_per_gpu = 0;  // as for run
  std::string base_shape;
  int trials = 2;
  int integrity_trials = 2;
  bool published_only = false;  // shows what the published checks alone let through
  double timeout_s = 120;
  double phase_floor_s = 30;
  std::string work_dir;
  std::string worker_user = "auto";  // as for run
};

struct GoldenOptions {
  std::string dir;
  std::string device = "cpu";
  int ranks_per_gpu = 0;         // as for run; each fixture runs at its recorded world size
  std::string problems = "all";
  std::string out;
  double timeout_s = 120;
  std::string work_dir;
  std::string recorded_on = "cuda";  // the device the fixtures were recorded on (NOTE [recording device])
};

struct ScoreOptions {
  std::vector<std::string> inputs;  // results JSONL files
  std::string out;                  // scores JSON; empty: stdout
  std::vector<int> k = {1, 3};
  std::vector<double> p = {0, 0.5, 1, 1.5, 2, 3};
  bool mixed_speed = false;  // see ScoreSettings::mixed_speed
};

struct LeaderboardOptions {
  std::vector<std::string> inputs;  // scores JSON files
  std::string format = "md";        // md | csv | tex | html
  std::string out;                  // empty: stdout
  bool mixed_speed = false;         // accept scores made with --mixed-speed
};

struct MergeOptions {
  std::vector<std::string> inputs;  // shard results JSONL files
  std::string out;
};

struct CalibrateOptions {
  std::string out;               // default: <source>/topology/<name>.calibrated.json
  int gpus = 0;                  // 0: every visible GPU
  bool force = false;            // replace an existing file
  double timeout_s = 90;         // the whole calibration, launch to last rank
  std::string work_dir;          // rank logs; default /tmp/pkb-calibrate-<pid>
  int warmup = 3;                // untimed runs before each measurement
  int reps = 10;                 // timed runs per measurement (the median is kept)
};

struct PromptOptions {
  std::string problem;
  std::string topology = "h100_sxm_8";  // the published benchmark's machine
};

// `pkb try PROBLEM FILE`: one candidate, one verdict. `run` holds the
// evaluation flags shared with `pkb run` (device, nproc, trials, out, ...).
struct TryOptions {
  RunOptions run;
  std::string problem, file;
  bool json = false;  // the verdict as one JSON object
};

// `pkb agent PROBLEMS --agent CMD`: a command that writes candidates, run in a
// loop of at most `steps` attempts per problem and sample (driver/agent_command.cpp).
struct AgentOptions {
  RunOptions run;  // run.problems, run.out (required), run.name, evaluation flags
  std::string agent;
  int steps = 5;
  int samples = 1;
  bool until_fast = false;
  double agent_timeout_s = 600;
  std::string dir;  // attempt folders; default: the --out file's name with .attempts for .jsonl
  bool resume = false;  // continue --out (NOTE [agent resume])
};

// `pkb generate`: one chat-completions request per problem and sample, the
// replies written where `pkb run --solutions DIR` finds them
// (driver/generate_command.cpp).
struct GenerateOptions {
  std::string problems;
  std::string model;
  std::string endpoint;          // base URL (.../v1) or the full .../chat/completions
  int samples = 1;
  double temperature = -1;       // < 0: not sent (the endpoint's default)
  int max_tokens = 0;            // 0: not sent
  int concurrency = 4;           // requests in flight
  std::string out;               // DIR
  bool resume = false;           // request only the samples DIR lacks (NOTE [generate resume])
  std::string api_key_env = "OPENAI_API_KEY";
  double request_timeout_s = 600;
  int retries = 5;               // NOTE [generate retries]
  std::string device = "cuda";   // cuda: sample_K.cu; cpu: sample_K.cpp and a CPU-mode note in the prompt
  std::string topology = "h100_sxm_8";  // the machine the prompt describes, as for pkb prompt
};

}  // namespace pkb
