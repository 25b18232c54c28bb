#!/usr/bin/env python3
"""Checks what tests/e2e/agent_loop.sh left in DIR: records, attempt folders, scores, leaderboard."""
import json
import os
import sys

d = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def records(name):
    return [json.loads(l) for l in open(os.path.join(d, name + ".jsonl")) if l.strip()]


def steps(name):
    return [(r["sample"], r["step"], r["outcome"]) for r in records(name)]


expected = {
    "fix_compile": [(0, 1, "compile_error"), (0, 2, "correct")],
    "fix_wrong": [(0, 1, "output_mismatch"), (0, 2, "correct"), (1, 1, "correct")],
    "never": [(0, 1, "output_mismatch"), (0, 2, "output_mismatch")],
    "hang": [(0, 1, "agent_error"), (0, 2, "agent_error")],
    "flaky": [(0, 1, "agent_error"), (0, 2, "agent_error"), (0, 3, "correct")],
}
for name, want in expected.items():
    got = steps(name)
    check(got == want, f"{name}: steps {got}, expected {want}")
    for r in records(name):
        check(r["run_name"] == name, f"{name}: run_name {r['run_name']}")
        check(r.get("agent", {}).get("attempt_dir", "").endswith(f"sample_{r['sample']}/step_{r['step']}"),
              f"{name}: attempt_dir {r.get('agent')}")
        check(os.path.exists(os.path.join(r["agent"]["attempt_dir"], "verdict.txt")), f"{name}: no verdict.txt")
        check(os.path.exists(os.path.join(r["agent"]["attempt_dir"], "verdict.json")), f"{name}: no verdict.json")
        if r["outcome"] != "correct":
            check(bool(r.get("reason")), f"{name} step {r['step']}: no reason")

hang = records("hang")
for r in hang:
    check(r["agent"]["timed_out"] and "timed out after 3 s" in r["reason"], f"hang: reason {r['reason']!r}")
    pids = open(os.path.join(r["agent"]["attempt_dir"], "pids")).read().split()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().split(")")[-1].split()[0]
            check(state == "Z", f"hang: pid {pid} survived its step (state {state})")
        except FileNotFoundError:
            pass
flaky = records("flaky")
check("exited with code 3" in flaky[0]["reason"] and "model endpoint unavailable" in flaky[0]["reason"],
      f"flaky step 1: {flaky[0]['reason']!r}")
check("wrote no candidate" in flaky[1]["reason"], f"flaky step 2: {flaky[1]['reason']!r}")

# The verdict the fixing agent read named the candidate's file and line.
fc = records("fix_compile")
v1 = open(os.path.join(fc[0]["agent"]["attempt_dir"], "verdict.txt")).read()
check("candidate.cpp:16:" in v1 and "error" in v1, f"fix_compile: verdict 1 lacks candidate.cpp:16: error:\n{v1}")
check("fixing line 16" in open(fc[1]["agent"]["log"]).read(), "fix_compile: agent 2 did not fix line 16")
traj = os.path.dirname(fc[0]["agent"]["attempt_dir"])
for f in ("task.md", "history.md", "history.jsonl"):
    check(os.path.exists(os.path.join(traj, f)), f"fix_compile: no {f}")
check("## The reference" in open(os.path.join(traj, "task.md")).read(), "task.md lacks the prompt")
check("## Step 2: correct" in open(os.path.join(traj, "history.md")).read(), "history.md lacks step 2")

s = json.load(open(os.path.join(d, "scores.json")))
P = 87.0


def curve(name):
    return [round(b["pass@1"] * P, 6) for b in s["models"][name]["agentic"]["by_steps"]]


want_curves = {"fix_compile": [0, 1, 1], "fix_wrong": [0.5, 1, 1], "never": [0, 0], "hang": [0, 0],
               "flaky": [0, 0, 1, 1]}
for name, want in want_curves.items():
    m = s["models"][name]
    check(curve(name) == want, f"{name}: pass@1 x 87 by step budget {curve(name)}, expected {want}")
    check(m["agentic"]["max_steps"] == len(want), f"{name}: max_steps {m['agentic']['max_steps']}")
    check(round(m["overall"]["pass@1"] * P, 6) == want[-1], f"{name}: overall pass@1 {m['overall']['pass@1'] * P}")
check(s["models"]["fix_wrong"]["agentic"]["trajectories"] == 2, "fix_wrong: 2 trajectories")
check(s["models"]["fix_wrong"]["agentic"]["first_correct_at_step"] == {"1": 1, "2": 1, "3": 0},
      f"fix_wrong: first correct {s['models']['fix_wrong']['agentic']['first_correct_at_step']}")
check(s["models"]["hang"]["overall"]["outcomes"].get("agent_error") == 1, "hang: one agent_error trajectory")
check(s["models"]["never"]["agentic"]["never_correct"] == 1, "never: never_correct 1")
check(s["models"]["fix_wrong"]["overall"]["samples"] == 2, "fix_wrong: 2 samples at the full budget")

board = open(os.path.join(d, "board.md")).read()
check("## By step budget (pkb agent)" in board, "leaderboard lacks the step-budget table")
z = "0→0"
for row in (f"| 1 | {z} | {z} | 0.5→1 | {z} | {z} | {z} | {z} | {z} | {z} | {z} |",
            f"| 3 | 1→1 | {z} | 1→1 | {z} | - | - | - | - | 1→1 | {z} |"):
    check(row in board, f"leaderboard lacks the row {row}:\n{board}")

for f in failures:
    print("FAIL:", f)
print(f"check_agent: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
