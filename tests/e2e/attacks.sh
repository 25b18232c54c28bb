#!/usr/bin/env bash
# usage: attacks.sh PKB OUT_DIR NP FIXTURES [same-user]
# The attack candidates (tests/fixtures/attacks, README there) at world size
# NP: each gets its expected outcome, no process outlives its evaluation, the
# results file holds exactly the records of the evaluations that ran (no
# forged one), and the driver survives; when pkb does not run as root the
# driver-killing candidate (sample 8) ends the run, and --resume records it and
# finishes the rest (NOTE [untrusted candidates]). `same-user` runs the workers
# as the driver's user even as root (--worker-user ''), which is what a run
# not as root gets: the defences that then apply are checked.
set -u
pkb=$1 dir=$2 np=$3 fixtures=$4 same_user=${5:-}
here=$(dirname "$0")
rm -rf "$dir"
mkdir -p "$dir/pids"
chmod 1777 "$dir/pids"
chmod 755 "$dir"
export PKB_ATTACK_DIR="$dir/pids"
out="$dir/results.jsonl"
args=(run --device cpu --nproc "$np" --problems 1 --solutions "$fixtures" --trials 2 --warmup 2 --iters 4
      --phase-floor 10 --timeout 120 --work-dir "$dir/work" --out "$out")
privileged=$([ "$(id -u)" = 0 ] && echo 1 || echo 0)
if [ "$same_user" = same-user ]; then args+=(--worker-user ""); privileged=0; fi
t0=$(date +%s)
"$pkb" "${args[@]}" >"$dir/run.txt" 2>&1
rc=$?
fail=0
if [ "$privileged" = 1 ]; then
  expected_8=correct expected_9=correct
  if [ "$rc" != 1 ]; then echo "FAIL: pkb exited $rc, expected 1 (driver alive, some not correct)"; cat "$dir/run.txt"; fail=1; fi
else
  # Not root: sample 8 kills the driver (SIGKILL: 137); what was written stays.
  expected_8=runtime_error expected_9=forbidden_api
  if [ "$rc" != 137 ]; then echo "FAIL: pkb exited $rc, expected 137 (killed by sample 8)"; fail=1; fi
  python3 "$here/check_results.py" "$out" --count 8 || fail=1
  "$pkb" "${args[@]}" --resume >"$dir/resume.txt" 2>&1
  rc=$?
  if [ "$rc" != 1 ]; then echo "FAIL: pkb --resume exited $rc, expected 1"; cat "$dir/resume.txt"; fail=1; fi
fi
t1=$(date +%s)
echo "attacks at np=$np: $((t1 - t0)) s"
python3 "$here/check_results.py" "$out" --count 12 \
  --expect 0=output_mismatch --expect 1=output_mismatch --expect 2=output_mismatch \
  --expect 3=output_mismatch --reason "3=input 'tensor'" \
  --expect 4=forbidden_api --reason "4=dispatcher" \
  --expect 5=forbidden_api --reason "5=dl_iterate_phdr" \
  --expect 6=forbidden_api --reason "6=/proc/self/maps" \
  --expect 7=correct --expect 8=$expected_8 --expect 9=$expected_9 \
  --expect 10=runtime_error --reason "10=rank 1: exited with status 0" \
  --expect 11=timeout --reason "11=deadline" \
  --no-sample 99 --no-survivors --pids-dead "$dir/pids" || fail=1
[ -n "$(ls "$dir/pids")" ] || { echo "FAIL: sample 7 left no pid file (did it run?)"; fail=1; }
# Cheap hangs and early exits: the hang costs about the phase floor, the exit
# much less (process wall seconds in the records).
python3 - "$out" <<'PY' || fail=1
import json, sys
recs = {r["sample"]: r for r in map(json.loads, open(sys.argv[1]))}
bad = 0
for s, limit in ((10, 8), (11, 25)):
    w = recs[s].get("process", {}).get("wall_s", 1e9)
    print(f"sample {s}: {recs[s]['outcome']} after {w:.1f} s (limit {limit})")
    bad |= w > limit
sys.exit(1 if bad else 0)
PY
exit $fail
