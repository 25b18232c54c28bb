// What the user asked for, as parsed by the command line (cli.cpp).
#pragma once

#include <string>
#include <vector>

namespace pkb {

struct RunOptions {
  std::string device = "auto";   // auto | cpu | cuda (auto: cuda when GPUs are visible)
  int nproc = 0;                 // 0: every visible GPU (cuda) or 2 (cpu)
  std::string problems = "all";
  std::string solutions = "reference";  // a folder, or "reference"
  std::string name;              // the model/run name in records (default: folder name)
  int trials = 5;
  int integrity_trials = 2;      // NOTE [integrity trials] (pkb/integrity.h)
  bool published_only = false;   // the published checks alone
  std::string base_shape;        // "MxN"; default 1024x1024 (cuda), 128x128 (cpu)
  bool no_perf = false;
  int warmup = -1;               // -1: 500 (cuda), 10 (cpu)
  int iters = -1;                // -1: 100 (cuda), 20 (cpu)
  int rounds = 10;
  bool keep_samples = false;     // per-iteration times in the per-rank timing records
  double timeout_s = 300;        // per evaluation, launch to last rank
  double phase_floor_s = 30;     // NOTE [phase deadlines]
  std::string worker_user = "nobody";  // when root: workers drop to it (NOTE [untrusted candidates])
  double compile_timeout_s = 600;
  std::string out;               // results JSONL
  bool resume = false;
  int jobs = 0;                  // parallel compiles; 0: number of cores
  std::string work_dir;          // per-evaluation logs; default /tmp/pkb-<pid>
  std::string topology;          // a topology/*.json name or path; default: detected
  bool keep_work_dir = false;
  std::string shard;             // "i/N": only the plan items with index % N == i
};

struct AuditOptions {
  std::string device = "cpu";
  std::string problems = "all";
  int nproc = 0;  // 0: 2
  std::string base_shape;
  int trials = 2;
  int integrity_trials = 2;
  bool published_only = false;  // shows what the published checks alone let through
  double timeout_s = 120;
  double phase_floor_s = 30;
  std::string work_dir;
  std::string worker_user = "nobody";
};

struct GoldenOptions {
  std::string dir;
  std::string device = "cpu";
  std::string problems = "all";
  std::string out;
  double timeout_s = 120;
  std::string work_dir;
};

struct ScoreOptions {
  std::vector<std::string> inputs;  // results JSONL files
  std::string out;                  // scores JSON; empty: stdout
  std::vector<int> k = {1, 3};
  std::vector<double> p = {0, 0.5, 1, 1.5, 2, 3};
};

struct LeaderboardOptions {
  std::vector<std::string> inputs;  // scores JSON files
  std::string format = "md";        // md | csv | tex | html
  std::string out;                  // empty: stdout
};

struct MergeOptions {
  std::vector<std::string> inputs;  // shard results JSONL files
  std::string out;
};

struct PromptOptions {
  std::string problem;
  std::string topology = "h100_sxm_8";  // the published benchmark's machine
};

}  // namespace pkb
