#!/usr/bin/env bash
# usage: gpu_try_agent.sh PKB DIR SOURCE_DIR
# pkb try and a scripted pkb agent on CUDA, with 2 ranks sharing one GPU (so
# it runs on any machine with a GPU; correctness only, timed briefly so the
# shared-GPU timing path runs): the shipped all-reduce is correct under try
# --json; fix_compile.sh breaks its line 30, reads the nvcc diagnostics of
# the verdict and fixes it (compile_error, then correct, within 3 steps); pkb
# score counts it correct within a budget of 2 steps, not 1.
set -u
pkb=$1 dir=$2 src=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir"
fail=0
. "$here/lib.sh"
common=(--device cuda --nproc 2 --ranks-per-gpu 2 --trials 2 --warmup 4 --iters 8 --rounds 2 --timeout 120)

"$pkb" try 1 "$src/solutions/01_allreduce.cu" "${common[@]}" --json --work-dir "$dir/try" \
  >"$dir/try.json" 2>"$dir/try.stderr"
rc=$?
[ "$rc" = 0 ] || { echo "FAIL: pkb try: exit $rc, expected 0"; cat "$dir/try.stderr"; fail=1; }
python3 - "$dir/try.json" <<'PY' || fail=1
import json, sys
v = json.load(open(sys.argv[1]))
bad = [f"{k}={v.get(k)!r}" for k, want in (("kind", "verdict"), ("problem_id", 1), ("outcome", "correct"),
                                           ("correct", True)) if v.get(k) != want]
s = v.get("setup", {})
if s.get("device") != "cuda" or s.get("world_size") != 2 or s.get("shared_gpu") is not True:
    bad.append(f"setup={s}")
if v.get("speed_measured") is not False:  # ranks sharing a GPU time nothing that counts
    bad.append(f"speed_measured={v.get('speed_measured')!r}")
if not (v.get("times") or {}).get("candidate_us"):
    bad.append(f"times={v.get('times')}")
print("FAIL: try verdict: " + ", ".join(bad) if bad else "ok: try verdict correct on cuda, 2 ranks sharing a GPU")
sys.exit(1 if bad else 0)
PY

expect 0 "agent fix_compile on cuda: compile_error, then correct" -- \
  "$pkb" agent 1 --agent "bash $here/../fixtures/agents/fix_compile.sh $src/solutions/01_allreduce.cu 30" \
  --steps 3 --out "$dir/agent.jsonl" "${common[@]}"
expect 0 "score the trajectory" -- "$pkb" score "$dir/agent.jsonl" --out "$dir/scores.json"
python3 - "$dir" <<'PY' || fail=1
import json, os, sys
d = sys.argv[1]
recs = [json.loads(l) for l in open(os.path.join(d, "agent.jsonl")) if l.strip()]
failures = []
got = [(r["step"], r["outcome"]) for r in recs]
if got != [(1, "compile_error"), (2, "correct")]:
    failures.append(f"steps {got}, expected [(1, 'compile_error'), (2, 'correct')]")
for r in recs:
    if r.get("device") != "cuda" or r.get("world_size") != 2 or r.get("shared_gpu") is not True:
        failures.append(f"step {r['step']}: device {r.get('device')} world {r.get('world_size')} "
                        f"shared_gpu {r.get('shared_gpu')}")
v1 = open(os.path.join(recs[0]["agent"]["attempt_dir"], "verdict.txt")).read() if recs else ""
if "candidate.cu(" not in v1 and "candidate.cu:" not in v1:
    failures.append("the step 1 verdict names no candidate.cu line:\n" + v1)
m = json.load(open(os.path.join(d, "scores.json")))["models"].get("fix_compile", {})
curve = [round(b["pass@1"] * 87, 6) for b in m.get("agentic", {}).get("by_steps", [])]
if curve != [0, 1, 1]:
    failures.append(f"pass@1 x 87 by step budget {curve}, expected [0, 1, 1]")
for f in failures:
    print("FAIL:", f)
if not failures:
    print("ok: agent records and step-budget scores (correct within 2 steps, not 1)")
sys.exit(1 if failures else 0)
PY
exit $fail
