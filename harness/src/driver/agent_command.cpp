// `pkb agent PROBLEMS --agent CMD --steps N --out F.jsonl`: the evaluator of
// an agentic loop, and the loop itself for any agent that is a command.
//
// NOTE [agent loop]
// For each problem and sample (a trajectory), pkb writes the task (`pkb
// prompt`'s text plus how this loop works) into the trajectory's folder, then
// for step 1..N: makes the step's folder, runs CMD there under /bin/sh with
// the PKB_* variables naming the files (README "Agentic loops"), with its own
// deadline, in its own process group (driver/launcher.h: nothing it starts
// outlives the step), then evaluates the candidate it wrote through `pkb
// run`'s pipeline and writes the verdict and the history the next step reads.
// One record per step, carrying `step`, is appended to --out as it finishes.
// A CMD that exits non-zero, is killed, times out, or writes no candidate
// gets an `agent_error` record with the reason, and the loop goes on. The
// trajectory stops at the first correct candidate (--until-fast: the first
// correct one faster than the reference on one GPU per rank) or after N
// steps. Scores read trajectories per step budget (scores/agentic.h).
//
// NOTE [agent resume]
// --resume continues --out. A trajectory (problem, sample) is read back from
// its step records, in step order (steps 1..m, each once, or pkb refuses). It
// is finished when its last step stopped it (correct; with --until-fast, fast)
// or m >= --steps, and nothing of it runs again. Otherwise it goes on at step
// m+1, as if never stopped: its history.md, history.jsonl and every step's
// verdict files are rewritten from the records (the files the loop writes
// after a step are a function of its record: record_step below), so the
// agent reads what it would have read. A step_<m+1> folder left by the stopped
// run has no record (its step was in flight, or its record never reached the
// file): it is moved aside to step_<m+1>.interrupted (then .2, ...) so none of
// its files is taken for the new step's candidate, and the step runs again
// from its agent command. A file of another run (its records name another
// --name, device or world size) is refused, as is a change of --until-fast.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "common/build_info.h"
#include "common/files.h"
#include "common/outcome.h"
#include "driver/commands.h"
#include "driver/launcher.h"
#include "driver/mechanisms.h"
#include "driver/prompt.h"
#include "driver/run_pipeline.h"
#include "driver/verdict.h"
#include "pkb/check.h"

namespace pkb {

namespace {

void write_text(const std::string& path, const std::string& text) { write_file_atomic(path, text, true); }

void append_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::app);
  f << text;
}

// "python3 my_agent.py --model x" -> "my_agent": the default run name.
std::string agent_name(const std::string& cmd) {
  std::istringstream in(cmd);
  std::string word;
  while (in >> word) {
    std::string base = word.substr(word.find_last_of('/') + 1);
    if (base == "bash" || base == "sh" || base == "python" || base == "python3" || base == "env" ||
        base.find('=') != std::string::npos || (!base.empty() && base[0] == '-'))
      continue;
    size_t dot = base.rfind('.');
    return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
  }
  return "agent";
}

bool is_fast(const Json& r) {
  return r.value("outcome", std::string()) == "correct" && r.contains("speedup") && r["speedup"].is_number() &&
         r["speedup"].get<double>() > 1.0 && speed_is_measured(r);
}

struct AgentRun {
  int exit_code = -1;
  std::string signal;
  bool timed_out = false;
  double seconds = 0;
  std::string log;
};

AgentRun run_agent(const std::string& cmd, const std::string& step_dir, const std::map<std::string, std::string>& env,
                   double timeout_s) {
  LaunchSpec spec;
  // The command is a shell fragment run in the step's folder.
  spec.argv = {"/bin/sh", "-c", "cd \"$PKB_ATTEMPT_DIR\" || exit 97\n" + cmd};
  spec.world = 1;
  spec.env = env;
  spec.log_dir = step_dir;
  spec.deadline_s = timeout_s;
  LaunchResult lr = launch_and_wait(spec);
  AgentRun a;
  a.log = step_dir + "/agent.log";
  rename((step_dir + "/rank_0.log").c_str(), a.log.c_str());
  const RankExit& e = lr.ranks.at(0);
  a.seconds = e.seconds;
  a.timed_out = lr.deadline_hit;
  if (e.exited) a.exit_code = e.exit_code;
  if (e.signal) a.signal = signal_name(e.signal);
  return a;
}

std::string one_line(std::string s, size_t max = 160) {
  s = s.substr(0, s.find('\n'));
  return s.size() > max ? s.substr(0, max - 3) + "..." : s;
}

std::string session_text(const AgentOptions& o, const RunSettings& s, const std::string& cand_name) {
  std::ostringstream os;
  os << "\n## This session (pkb agent)\n\n"
     << "You have " << o.steps << " attempt(s) (steps). At each step, write the whole candidate file to the path "
     << "in $PKB_CANDIDATE (" << cand_name << " in the step's folder, your working directory), or a raw reply with "
     << "one fenced code block to $PKB_RESPONSE. pkb then builds and evaluates it ("
     << s.device << ", " << s.world << " ranks, base shape " << s.m << "x" << s.n << ") and writes its verdict: "
     << "the next step finds it in $PKB_VERDICT (text) and $PKB_VERDICT_JSON, the history of every attempt so far "
     << "in $PKB_HISTORY, and the previous candidate in $PKB_PREVIOUS_CANDIDATE. The loop stops at the first "
     << (o.until_fast ? "correct candidate faster than the reference" : "correct candidate") << ".\n";
  if (s.device == "cpu")
    os << "\nThis loop runs in CPU mode: the candidate is a C++ file (.cpp) using the same pkb::Context API, "
          "with host shared memory standing in for GPU symmetric memory.\n";
  return os.str();
}

// The files a trajectory's agent reads between steps (NOTE [agent loop]).
struct TrajectoryFiles {
  std::string dir, history_md, history_jsonl;
  std::string prev_verdict, prev_verdict_json, prev_candidate;  // empty before step 1

  TrajectoryFiles(const std::string& tdir, const std::string& folder_name, int sample)
      : dir(tdir), history_md(tdir + "/history.md"), history_jsonl(tdir + "/history.jsonl") {
    write_text(history_md, "# Attempts at " + folder_name + " (sample " + std::to_string(sample) + ")\n");
    write_text(history_jsonl, "");
  }
  std::string step_dir(int step) const { return dir + "/step_" + std::to_string(step); }
};

// After step `step` got record `r` (its candidate `cand`, "" when none): its
// verdict files and the history's line. Everything here derives from the
// record, so --resume rebuilds it (NOTE [agent resume]).
void record_step(TrajectoryFiles& t, int step, const Json& r, const std::string& cand) {
  const std::string sdir = t.step_dir(step);
  make_dirs(sdir);
  const Json v = make_verdict(r);
  t.prev_verdict = sdir + "/verdict.txt";
  t.prev_verdict_json = sdir + "/verdict.json";
  write_text(t.prev_verdict, verdict_text(v));
  write_text(t.prev_verdict_json, v.dump(2) + "\n");
  append_text(t.history_jsonl, v.dump() + "\n");
  std::ostringstream h;
  h << "\n## Step " << step << ": " << v.value("outcome", std::string()) << "\n\n"
    << "candidate: " << (cand.empty() ? std::string("(none)") : cand) << "\n";
  if (!v.value("correct", false)) h << "reason: " << one_line(v.value("reason", std::string()), 400) << "\n";
  if (v["speedup"].is_number()) h << "speedup: " << v["speedup"].get<double>() << "\n";
  h << "verdict: " << t.prev_verdict << "\n";
  append_text(t.history_md, h.str());
  if (!cand.empty()) t.prev_candidate = cand;
}

bool stops_trajectory(const Json& r, bool until_fast) {
  return until_fast ? is_fast(r) : r.value("outcome", std::string()) == "correct";
}

// The identity of a step record's trajectory: its record key without the step.
std::string trajectory_key(Json r) {
  r.erase("step");
  return record_key(r);
}

// --resume: the step records of --out by trajectory, each in step order.
std::map<std::string, std::vector<Json>> recorded_trajectories(const std::string& out) {
  std::map<std::string, std::vector<Json>> by;
  for (Json& r : read_jsonl(out))
    if (r.contains("step") && r["step"].is_number_integer()) by[trajectory_key(r)].push_back(std::move(r));
  for (auto& [key, steps] : by)
    std::stable_sort(steps.begin(), steps.end(),
                     [](const Json& a, const Json& b) { return a["step"].get<int>() < b["step"].get<int>(); });
  return by;
}

// A path that does not exist yet: `base`, else base.2, base.3, ...
std::string free_name(const std::string& base) {
  struct stat st;
  if (lstat(base.c_str(), &st) != 0) return base;
  for (int i = 2;; ++i) {
    std::string p = base + "." + std::to_string(i);
    if (lstat(p.c_str(), &st) != 0) return p;
  }
}

// A killed writer can leave a torn last line; the next record must start a line.
void end_with_newline(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f.good() || f.tellg() <= 0) return;
  f.seekg(-1, std::ios::end);
  char last = 0;
  f.get(last);
  if (last != '\n') append_text(path, "\n");
}

}  // namespace

int cmd_agent(const AgentOptions& o) {
  // Phase: resolve what the user asked for.
  const std::string bdir = build_dir(), src = source_dir();
  ProblemCatalog catalog = ProblemCatalog::discover(bdir);
  std::vector<int> ids = catalog.select(o.run.problems);
  PKB_CHECK(!o.agent.empty(), "--agent needs a command");
  PKB_CHECK(o.steps >= 1 && o.samples >= 1, "--steps and --samples must be at least 1");
  PKB_CHECK(!o.run.out.empty(), "pkb agent needs --out FILE.jsonl (one record per step)");
  PKB_CHECK(!(o.until_fast && o.run.no_perf), "--until-fast needs timing; drop --no-perf");
  RunOptions ro = o.run;
  ro.solutions = "agent";
  if (ro.name.empty()) ro.name = agent_name(o.agent);
  RunSettings s = resolve_settings(ro, src);
  s.solutions_label = "agent:" + s.run_name;
  std::string dir = o.dir;
  if (dir.empty()) {
    dir = o.run.out;
    if (dir.size() > 6 && dir.compare(dir.size() - 6, 6, ".jsonl") == 0) dir.resize(dir.size() - 6);
    dir += ".attempts";
  }
  // NOTE [agent resume]
  const bool resuming = o.resume && file_exists(o.run.out);
  std::map<std::string, std::vector<Json>> recorded;
  if (resuming) {
    recorded = recorded_trajectories(o.run.out);
    // Another run's records (another --name, --device or --nproc) would share
    // the attempt folders, not its trajectories: refuse rather than mix them.
    bool same_run = recorded.empty();
    std::string other;
    for (const auto& [key, steps] : recorded) {
      const Json& r = steps.front();
      if (r.value("solutions", std::string()) == s.solutions_label && r.value("device", std::string()) == s.device &&
          r.value("world_size", 0) == s.world)
        same_run = true;
      else if (other.empty())
        other = "'" + r.value("run_name", std::string()) + "' on " + r.value("device", std::string()) +
                ", world size " + std::to_string(r.value("world_size", 0));
    }
    PKB_CHECK(same_run, "--resume: ", o.run.out, " holds the steps of run ", other, ", not of '", s.run_name, "' on ",
              s.device, ", world size ", s.world, " (give that run's --name, --device and --nproc)");
    end_with_newline(o.run.out);
  } else {
    PKB_CHECK(!file_exists(dir) || is_empty_directory(dir), "attempt folder '", dir,
              "' exists and is not empty (--dir names another; --resume continues its run)");
  }
  JsonlWriter writer(o.run.out, /*append=*/o.resume);
  make_dirs(dir);
  // The task describes the machine the candidate runs on; CPU mode has no
  // NVLink to describe, so it shows the published machine.
  const Topology prompt_topo =
      s.device == "cuda" && s.topology.nvlink_bw_per_dir > 0 ? s.topology : load_topology("h100_sxm_8", src);
  const std::string cand_name = s.device == "cuda" ? "candidate.cu" : "candidate.cpp";
  CandidateToolchain tc = CandidateToolchain::load(bdir);
  s.cuobjdump = find_cuobjdump(tc);
  std::fprintf(stderr, "pkb agent: %zu problem(s) x %d sample(s), at most %d step(s) each, on %s, world size %d; "
               "attempts in %s; records to %s%s\n", ids.size(), o.samples, o.steps, s.device.c_str(), s.world,
               dir.c_str(), writer.path().c_str(), resuming ? " (resumed)" : "");

  // Phase: one trajectory per problem and sample.
  bool harness_error = false, all_solved = true;
  for (int id : ids) {
    const ProblemInfo& p = catalog.by_id(id);
    const PlanItem probe = plan_item(p, "", 0, s.device, s.world);
    if (!probe.skip_reason.empty()) {
      std::fprintf(stderr, "skipped %s: %s\n", p.folder_name().c_str(), probe.skip_reason.c_str());
      continue;
    }
    const std::string task = prompt_text(p, prompt_topo) + session_text(o, s, cand_name);
    for (int sample = 0; sample < o.samples; ++sample) {
      const std::string tdir = dir + "/" + p.folder_name() + "/sample_" + std::to_string(sample);
      make_dirs(tdir);
      write_text(tdir + "/task.md", task);
      TrajectoryFiles t(tdir, p.folder_name(), sample);
      bool solved = false;
      int first_step = 1;
      // NOTE [agent resume]: the steps already recorded, replayed into the files.
      auto rec = recorded.find(trajectory_key(base_record(s, plan_item(p, "", sample, s.device, s.world))));
      if (rec != recorded.end()) {
        for (const Json& r : rec->second) {
          const int step = r["step"].get<int>();
          PKB_CHECK(step == first_step, "--resume: ", o.run.out, " has ", p.folder_name(), " sample ", sample,
                    "'s step ", step, " where step ", first_step,
                    " was expected (each step once, from 1); it is not one pkb agent run's file");
          PKB_CHECK(!solved, "--resume: ", o.run.out, " has ", p.folder_name(), " sample ", sample,
                    "'s step ", step, " after the step that stopped it");
          const Json& ag = r.contains("agent") && r["agent"].is_object() ? r["agent"] : Json::object();
          PKB_CHECK(ag.value("until_fast", false) == o.until_fast, "--resume: ", o.run.out, " was written ",
                    o.until_fast ? "without" : "with", " --until-fast (trajectories stop differently); resume it ",
                    o.until_fast ? "without" : "with", " it");
          const std::string was = ag.value("attempt_dir", std::string());
          PKB_CHECK(was.empty() || was == t.step_dir(step), "--resume: ", o.run.out, "'s step ", step, " of ",
                    p.folder_name(), " sample ", sample, " ran in ", was, ", not in ", t.step_dir(step),
                    " (pass its attempt folder with --dir)");
          if (ag.value("command", o.agent) != o.agent && step == 1)
            std::fprintf(stderr, "note: %s sample %d was begun by the agent command '%s'; it goes on with '%s'\n",
                         p.folder_name().c_str(), sample, ag.value("command", std::string()).c_str(),
                         o.agent.c_str());
          const std::string cand = r.contains("candidate") && r["candidate"].is_string()
                                       ? r["candidate"].get<std::string>()
                                       : std::string();
          record_step(t, step, r, cand);
          harness_error |= r.value("outcome", std::string()) == "harness_error";
          solved = stops_trajectory(r, o.until_fast);
          ++first_step;
        }
        const int done = first_step - 1;
        if (solved || done >= o.steps) {
          std::fprintf(stderr, "%s #%d: %d step(s) already recorded, %s\n", p.folder_name().c_str(), sample, done,
                       solved ? "stopped at a solving step" : "the whole budget");
        } else {
          std::fprintf(stderr, "%s #%d: %d step(s) already recorded; going on at step %d\n",
                       p.folder_name().c_str(), sample, done, first_step);
        }
      }
      for (int step = first_step; step <= o.steps && !solved; ++step) {
        const std::string sdir = t.step_dir(step);
        struct stat st;
        if (lstat(sdir.c_str(), &st) == 0) {
          // Left by a stopped run, without a record (NOTE [agent resume]).
          const std::string aside = free_name(sdir + ".interrupted");
          PKB_CHECK(rename(sdir.c_str(), aside.c_str()) == 0, "cannot move '", sdir, "' aside: ", strerror(errno));
          std::fprintf(stderr, "%s #%d: step %d was in flight when the run stopped; its folder is now %s\n",
                       p.folder_name().c_str(), sample, step, aside.c_str());
        }
        make_dirs(sdir);
        std::map<std::string, std::string> env = {
            {"PKB_TASK", tdir + "/task.md"},
            {"PKB_VERDICT", t.prev_verdict},
            {"PKB_VERDICT_JSON", t.prev_verdict_json},
            {"PKB_HISTORY", t.history_md},
            {"PKB_HISTORY_JSON", t.history_jsonl},
            {"PKB_PREVIOUS_CANDIDATE", t.prev_candidate},
            {"PKB_CANDIDATE", sdir + "/" + cand_name},
            {"PKB_RESPONSE", sdir + "/response.md"},
            {"PKB_ATTEMPT_DIR", sdir},
            {"PKB_STEP", std::to_string(step)},
            {"PKB_STEPS", std::to_string(o.steps)},
            {"PKB_SAMPLE", std::to_string(sample)},
            {"PKB_PROBLEM", p.folder_name()},
            {"PKB_PROBLEM_ID", std::to_string(p.spec.id)},
            {"PKB_DEVICE", s.device},
            {"PKB_WORLD_SIZE", std::to_string(s.world)},
        };
        AgentRun a = run_agent(o.agent, sdir, env, o.agent_timeout_s);
        std::string cand;
        for (const std::string& c : {sdir + "/" + cand_name, sdir + "/response.md"})
          if (cand.empty() && is_regular_file(c)) cand = c;
        PlanItem item = plan_item(p, cand, sample, s.device, s.world);
        std::string agent_failure;
        if (a.timed_out)
          agent_failure = "the agent command timed out after " + std::to_string(static_cast<int>(o.agent_timeout_s)) +
                          " s and was killed with its process group";
        else if (!a.signal.empty())
          agent_failure = "the agent command was killed by " + a.signal;
        else if (a.exit_code != 0)
          agent_failure = "the agent command exited with code " + std::to_string(a.exit_code);
        else if (cand.empty())
          agent_failure = "the agent command exited 0 but wrote no candidate (expected " + env["PKB_CANDIDATE"] +
                          " or " + env["PKB_RESPONSE"] + ")";
        Json r;
        if (!agent_failure.empty()) {
          r = base_record(s, item);
          r["candidate"] = cand.empty() ? Json(nullptr) : Json(cand);
          r["outcome"] = outcome_name(Outcome::kAgentError);
          std::string tail = tail_of_file(a.log, 1200);
          r["reason"] = agent_failure + "; nothing was evaluated" +
                        (tail.empty() ? std::string(" (it printed nothing)") : ". Its output ends:\n" + tail);
          r["finished_at"] = utc_timestamp();
        } else {
          BuildResult b;
          try {
            b = build_candidate(cand, s.device, tc, s.opts.compile_timeout_s);
          } catch (const std::exception& e) {
            b.ok = false;
            b.log = e.what();
          }
          RunSettings ss = s;
          ss.work_dir = sdir;
          r = evaluate_or_harness_error(ss, item, &b, 0);
        }
        r["step"] = step;
        r["agent"] = {{"command", o.agent},  {"steps", o.steps},         {"until_fast", o.until_fast},
                      {"exit_code", a.exit_code}, {"timed_out", a.timed_out}, {"seconds", a.seconds},
                      {"log", a.log},        {"attempt_dir", sdir}};
        if (!a.signal.empty()) r["agent"]["signal"] = a.signal;
        writer.append(r);
        record_step(t, step, r, cand);

        const std::string outcome = r.value("outcome", std::string());
        harness_error |= outcome == "harness_error";
        solved = stops_trajectory(r, o.until_fast);
        std::fprintf(stderr, "%s #%d step %d/%d  %s%s\n", p.folder_name().c_str(), sample, step, o.steps,
                     outcome.c_str(),
                     outcome == "correct" ? "" : ("  (" + one_line(r.value("reason", std::string()), 120) + ")").c_str());
      }
      all_solved &= solved;
    }
  }
  std::fprintf(stderr, "results: %s\n", writer.path().c_str());
  if (harness_error) return kExitHarnessError;
  return all_solved ? kExitAllCorrect : kExitSomeNotCorrect;
}

}  // namespace pkb
