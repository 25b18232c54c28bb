#!/usr/bin/env bash
# pkb agent --resume (NOTE [agent resume]) on problem 1 at the CPU shape, with
# fix_compile.sh (compile_error, then correct) for 2 samples of 3 steps: once
# uninterrupted; once killed (SIGKILL) while sample 1's step 2 is in flight,
# its history and last verdict then deleted, and resumed. The resumed file
# must hold each (problem, sample, step) once, the same steps and outcomes and
# the same scores as the uninterrupted run, the step's agent must have read
# the rebuilt verdict, and the in-flight step's folder must be moved aside. A
# second --resume runs nothing; a trajectory that used its budget runs again
# only with a larger --steps; --resume refuses a change of --until-fast and
# another run's file.
set -u
pkb=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
agents=$here/../fixtures/agents
cands=$here/../fixtures/candidates/01_allreduce
rm -rf "$dir" && mkdir -p "$dir"
fail=0
. "$here/lib.sh"
common=(--device cpu --nproc 2 --trials 1 --no-perf --timeout 60 --name fix_compile)
agent="bash $agents/fix_compile.sh $cands/sample_0.cpp 16"
expect 0 "uninterrupted: 2 samples, compile_error then correct" -- \
  "$pkb" agent 1 --agent "$agent" --steps 3 --samples 2 --out "$dir/whole.jsonl" "${common[@]}"

# Stopped while sample 1's step 2 runs its agent.
"$pkb" agent 1 --agent "bash $agents/stall_once.sh $dir/stalled 1 2 $agent" --steps 3 --samples 2 \
  --out "$dir/resumed.jsonl" "${common[@]}" >"$dir/stopped.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -s "$dir/stalled" ] && break; sleep 0.2; done
if [ -s "$dir/stalled" ]; then
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  kill -KILL "$(cat "$dir/stalled")" 2>/dev/null
  echo "ok: stopped pkb agent at sample 1 step 2"
else
  echo "FAIL: the stalling agent never ran"; cat "$dir/stopped.log"; kill -KILL "$pid" 2>/dev/null; exit 1
fi
n=$(grep -c . "$dir/resumed.jsonl")
[ "$n" = 3 ] || { echo "FAIL: $n records before --resume, expected 3"; fail=1; }
traj=$dir/resumed.attempts/01_allreduce/sample_1
rm -f "$traj"/history.md "$traj"/history.jsonl "$traj"/step_1/verdict.txt "$traj"/step_1/verdict.json
expect 0 "--resume: sample 1 goes on at step 2" -- \
  "$pkb" agent 1 --agent "bash $agents/stall_once.sh $dir/stalled 1 2 $agent" --steps 3 --samples 2 \
  --out "$dir/resumed.jsonl" --resume "${common[@]}"
cp "$dir/out.txt" "$dir/resume.log"
grep -q "01_allreduce #0: 2 step(s) already recorded, stopped at a solving step" "$dir/resume.log" ||
  { echo "FAIL: resume did not skip sample 0"; cat "$dir/resume.log"; fail=1; }
grep -q "01_allreduce #1: 1 step(s) already recorded; going on at step 2" "$dir/resume.log" ||
  { echo "FAIL: resume did not go on with sample 1 at step 2"; cat "$dir/resume.log"; fail=1; }
expect 0 "--resume again: nothing left to run" -- \
  "$pkb" agent 1 --agent "$agent" --steps 3 --samples 2 --out "$dir/resumed.jsonl" --resume "${common[@]}"
for f in whole resumed; do
  expect 0 "score $f" -- "$pkb" score "$dir/$f.jsonl" --out "$dir/$f.scores.json"
done

# A trajectory that used its whole budget (an agent that always fails: no evaluation).
cheap=(--device cpu --nproc 2 --trials 1 --timeout 60 --name failing)
expect 1 "failing agent, 2 steps" -- "$pkb" agent 1 --agent "exit 3" --steps 2 --out "$dir/budget.jsonl" "${cheap[@]}"
expect 1 "--resume with the same budget runs nothing" -- \
  "$pkb" agent 1 --agent "exit 3" --steps 2 --out "$dir/budget.jsonl" --resume "${cheap[@]}"
expect 1 "--resume with --steps 3 runs step 3" -- \
  "$pkb" agent 1 --agent "exit 3" --steps 3 --out "$dir/budget.jsonl" --resume "${cheap[@]}"
expect 2 "--resume refuses --until-fast on a run without it" -- \
  "$pkb" agent 1 --agent "exit 3" --steps 4 --until-fast --out "$dir/budget.jsonl" --resume "${cheap[@]}"
grep -q -- "without --until-fast" "$dir/out.txt" || { echo "FAIL: no --until-fast reason"; cat "$dir/out.txt"; fail=1; }
expect 2 "--resume refuses another run's file (another --name)" -- \
  "$pkb" agent 1 --agent "exit 3" --steps 3 --out "$dir/budget.jsonl" --resume "${cheap[@]/failing/other}"
grep -q -- "holds the steps of run 'failing'" "$dir/out.txt" || { echo "FAIL: no other-run reason"; cat "$dir/out.txt"; fail=1; }

python3 - "$dir" <<'PY' || fail=1
import json, os, sys
d = sys.argv[1]
failures = []


def records(name):
    return [json.loads(l) for l in open(os.path.join(d, name + ".jsonl")) if l.strip()]


def steps(recs):
    return sorted((r["problem_id"], r["sample"], r["step"], r["outcome"]) for r in recs)


whole, resumed = records("whole"), records("resumed")
keys = [(r["problem_id"], r["sample"], r["step"]) for r in resumed]
if len(keys) != len(set(keys)):
    failures.append(f"duplicate (problem, sample, step) in resumed.jsonl: {keys}")
want = [(1, 0, 1, "compile_error"), (1, 0, 2, "correct"), (1, 1, 1, "compile_error"), (1, 1, 2, "correct")]
if steps(whole) != want:
    failures.append(f"uninterrupted steps {steps(whole)}, expected {want}")
if steps(resumed) != steps(whole):
    failures.append(f"resumed steps {steps(resumed)} differ from uninterrupted {steps(whole)}")

traj = os.path.join(d, "resumed.attempts", "01_allreduce", "sample_1")
aside = os.path.join(traj, "step_2.interrupted")
if not os.path.isfile(os.path.join(aside, "candidate.cpp")):
    failures.append("the in-flight step_2 was not moved aside to step_2.interrupted")
new2 = os.path.join(traj, "step_2")
if "fixing line 16" not in open(os.path.join(new2, "agent.log")).read():
    failures.append("the resumed step 2's agent did not read a compile_error verdict naming line 16")
if "half-written" in open(os.path.join(new2, "candidate.cpp")).read():
    failures.append("the resumed step 2 evaluated the stopped run's partial candidate")
history = open(os.path.join(traj, "history.md")).read()
for part in ("## Step 1: compile_error", "## Step 2: correct", "sample_1/step_1/verdict.txt"):
    if part not in history:
        failures.append(f"rebuilt history.md lacks {part!r}:\n{history}")
if not os.path.isfile(os.path.join(traj, "step_1", "verdict.json")):
    failures.append("step_1/verdict.json was not rebuilt")


def outcomes(path):
    return [json.loads(l)["outcome"] for l in open(path) if l.strip()]


hw = outcomes(os.path.join(d, "whole.attempts", "01_allreduce", "sample_1", "history.jsonl"))
hr = outcomes(os.path.join(traj, "history.jsonl"))
if hr != hw:
    failures.append(f"rebuilt history.jsonl outcomes {hr}, uninterrupted {hw}")

sw = json.load(open(os.path.join(d, "whole.scores.json")))["models"]["fix_compile"]
sr = json.load(open(os.path.join(d, "resumed.scores.json")))["models"]["fix_compile"]
for k in ("agentic", "outcomes"):
    if sw[k] != sr[k]:
        failures.append(f"scores differ in {k}: uninterrupted {sw[k]}, resumed {sr[k]}")
for k in ("pass@1", "samples", "correct_samples"):
    if sw["overall"].get(k) != sr["overall"].get(k):
        failures.append(f"overall {k}: uninterrupted {sw['overall'].get(k)}, resumed {sr['overall'].get(k)}")
if [round(b["pass@1"] * 87, 6) for b in sr["agentic"]["by_steps"]] != [0, 1, 1]:
    failures.append(f"resumed by_steps {sr['agentic']['by_steps']}")

budget = [(r["step"], r["outcome"]) for r in records("budget")]
if budget != [(1, "agent_error"), (2, "agent_error"), (3, "agent_error")]:
    failures.append(f"budget.jsonl steps {budget}, expected 3 agent_error steps")
for f in failures:
    print("FAIL:", f)
print(f"agent_resume: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
PY
exit $fail
