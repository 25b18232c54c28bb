#!/usr/bin/env bash
# Memory (issue 26): real OOM kills, confined to each evaluation's own cgroup
# (--memory-limit), are classified by whose phase they hit (NOTE [OOM
# kills]); an evaluation whose declared peak cannot fit is refused before it
# starts (NOTE [memory admission]); records carry "memory" (NOTE [memory
# record]). Needs a memory cgroup of its own (root, or a delegated
# subtree): elsewhere it exits 77 (skipped), never runs without the limit.
set -u
pkb=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir"
fail=0
. "$here/lib.sh"
field() {  # field FILE PYTHON-EXPR-ON-r: the expression on the file's one record
  python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]; print($2)" "$1"
}
check() {  # check WHAT FILE PYTHON-CONDITION-ON-r
  if [ "$(field "$2" "bool($3)")" = True ]; then echo "ok: $1"
  else echo "FAIL: $1 ($3)"; field "$2" "json.dumps({k: r.get(k) for k in ('outcome','reason','memory','process')}, indent=1)"; fail=1; fi
}
common=(--device cpu --nproc 2 --trials 1 --no-perf --timeout 120)

# 1. The candidate allocates until killed (2 GiB per rank at most, under a
# 1.5 GiB limit for both ranks): its runtime_error, "out of memory".
"$pkb" try 1 "$here/../fixtures/memory/01_allreduce/hog.cpp" "${common[@]}" --memory-limit 1.5 \
  --out "$dir/hog.jsonl" >"$dir/hog.txt" 2>&1
if grep -q "needs a memory cgroup" "$dir/hog.jsonl" 2>/dev/null; then
  echo "SKIPPED: no memory cgroup of our own here: $(field "$dir/hog.jsonl" "r['reason']")"
  exit 77
fi
check "hog: runtime_error" "$dir/hog.jsonl" "r['outcome'] == 'runtime_error'"
check "hog: out of memory while the candidate ran" "$dir/hog.jsonl" \
  "'out of memory' in r['reason'] and 'while the candidate ran' in r['reason']"
# The hog runs in its rank's contestant (NOTE [referee and contestant]): the
# kill lands there and its referee reports it; a referee killed is the rank's.
check "hog: a rank or its candidate's process recorded as OOM-killed" "$dir/hog.jsonl" \
  "any(p.get('oom_killed') for p in r['process']['ranks']) or 'OOM killer killed the candidate' in r['reason']"
check "hog: the cgroup counted the kill" "$dir/hog.jsonl" "r['memory']['oom_kills'] >= 1"
check "hog: limit recorded" "$dir/hog.jsonl" "r['memory']['cgroup_limit_bytes'] == int(1.5 * 2**30)"

# 2. The harness's own memory: the reference's inputs and clones of problem 1
# at 16384x16384 (512 MiB a tensor) under a 1 GiB limit: harness_error, "out
# of memory" naming the phase; the run goes on to problem 2 (at that shape OOM-killed too).
"$pkb" run --problems 1,2 --solutions reference "${common[@]}" --integrity-trials 0 --base-shape 16384x16384 \
  --memory-limit 1 --out "$dir/ref.jsonl" >"$dir/ref.txt" 2>&1
python3 - "$dir/ref.jsonl" <<'PY' || fail=1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {r["problem_id"]: r for r in recs}
ok = True
def want(what, cond):
    global ok
    print(("ok: " if cond else "FAIL: ") + what)
    ok &= bool(cond)
r1 = by.get(1, {})
want("reference OOM: harness_error", r1.get("outcome") == "harness_error")
want("reference OOM: 'out of memory' in the harness's phase", "out of memory" in r1.get("reason", "")
     and "harness's phase" in r1.get("reason", ""))
want("the run went on: problem 2 recorded", 2 in by)
if not ok:
    print(json.dumps({k: r1.get(k) for k in ("reason", "memory", "process")}, indent=1))
sys.exit(0 if ok else 1)
PY

# 3. Admission: 60's declared peak at W=4 (4 ranks x ~4 GiB) against a 4 GiB
# limit: refused before launch, naming the numbers.
"$pkb" run --problems 60 --solutions reference --device cpu --nproc 4 --trials 1 --no-perf --memory-limit 4 \
  --out "$dir/admit.jsonl" >"$dir/admit.txt" 2>&1
check "admission: harness_error" "$dir/admit.jsonl" "r['outcome'] == 'harness_error'"
check "admission: the numbers" "$dir/admit.jsonl" \
  "r['reason'].startswith('not enough memory: needs ') and 'per rank x 4 ranks' in r['reason'] and '4.00 GiB in all' in r['reason']"
check "admission: never launched" "$dir/admit.jsonl" "'process' not in r and r['admission']['estimate_per_rank_bytes'] > 0"

# 4. A correct record's memory: each side's peak per rank, the cgroup's peak.
"$pkb" try 1 "$here/../fixtures/candidates/01_allreduce/sample_0.cpp" "${common[@]}" --out "$dir/ok.jsonl" \
  >"$dir/ok.txt" 2>&1
check "correct: memory per side" "$dir/ok.jsonl" \
  "r['outcome'] == 'correct' and all(r['memory']['sides'][s]['host_peak_bytes'] > 10**7 for s in ('harness','candidate','reference')) and len(r['memory']['ranks']) == 2"
check "correct: no OOM kill" "$dir/ok.jsonl" "r['memory'].get('oom_kills', 0) == 0"
exit $fail
