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
args=(run --device cpu --nproc "$np" --problems 1 --solutions "$fixtures" --trials 2 --min-samples 4 --max-time 0.05
      --phase-floor 10 --timeout 120 --work-dir "$dir/work" --out "$out")
privileged=$([ "$(id -u)" = 0 ] && echo 1 || echo 0)
if [ "$same_user" = same-user ]; then args+=(--worker-user ""); privileged=0; fi
t0=$(date +%s)
"$pkb" "${args[@]}" >"$dir/run.txt" 2>&1
rc=$?
fail=0
if [ "$privileged" = 1 ]; then
  expected_8=correct expected_9=correct expected_13=output_mismatch expected_18=correct expected_19=correct
  if [ "$rc" != 1 ]; then echo "FAIL: pkb exited $rc, expected 1 (driver alive, some not correct)"; cat "$dir/run.txt"; fail=1; fi
else
  # Not root: sample 8 kills the driver (SIGKILL: 137); what was written stays.
  # Samples 13 and 18 kill and stop their referee (NOTE [referee and contestant]).
  expected_8=runtime_error expected_9=forbidden_api expected_13=runtime_error expected_18=timeout
  # Sample 19's ptrace fails on a referee that is not dumpable (pkb not root);
  # as root with --worker-user '' the contestant is root and may trace it: it
  # stops it (timeout), never makes it correct by another way.
  expected_19=correct
  [ "$(id -u)" = 0 ] && expected_19="correct|timeout"
  if [ "$rc" != 137 ]; then echo "FAIL: pkb exited $rc, expected 137 (killed by sample 8)"; fail=1; fi
  python3 "$here/check_results.py" "$out" --count 8 || fail=1
  "$pkb" "${args[@]}" --resume >"$dir/resume.txt" 2>&1
  rc=$?
  if [ "$rc" != 1 ]; then echo "FAIL: pkb --resume exited $rc, expected 1"; cat "$dir/resume.txt"; fail=1; fi
fi
t1=$(date +%s)
echo "attacks at np=$np: $((t1 - t0)) s"
python3 "$here/check_results.py" "$out" --count 23 \
  --expect 0=output_mismatch --expect 1=output_mismatch --expect 2=output_mismatch \
  --expect 3=output_mismatch --reason "3=input 'tensor'" \
  --expect 4=forbidden_api --reason "4=dispatcher" \
  --expect 5=forbidden_api --reason "5=dl_iterate_phdr" \
  --expect 6=forbidden_api --reason "6=/proc/self/maps" \
  --expect 7=correct --expect 8=$expected_8 --expect 9=$expected_9 \
  --expect 10=runtime_error --reason "10=exited with status 0" \
  --expect 11=timeout --reason "11=deadline, the phase floor alone" \
  --expect 12=output_mismatch --expect 13=$expected_13 \
  --expect 14=runtime_error --reason "14=out of protocol" \
  --expect 15=timing_anomaly --reason "15=referee" \
  --expect 16=output_mismatch --expect 17=correct --expect 18=$expected_18 \
  --expect 19=$expected_19 --expect 20=correct --expect 21=correct --expect 22=correct \
  --no-sample 99 --no-survivors --pids-dead "$dir/pids" || fail=1
# What the attacks of issue 21 saw from inside (their notes in $dir/pids).
python3 - "$dir/pids" "$privileged" "$out" "$here" <<'PY' || fail=1
import json, sys
d, privileged, out = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
sys.path.insert(0, sys.argv[4])
from attack_notes import Notes, check_fd_writes, check_referee_attacks, check_stopped_without_cpu
n = Notes(d)
# Samples 12, 13 and 16-19.
check_referee_attacks(n, privileged)
check_fd_writes(n, "sample 14")
n.check(n.of("clock") and all(v == "patched" for v in n.of("clock")), f"sample 15 patched its clock: {n.of('clock')}")
# Sample 21 scanned the memory it inherited from its referee (NOTE [contestant
# start]): its own marker found, the store's address and port not.
scans = n.of("memscan")
n.check(len(scans) > 0 and all(v.startswith("marker ") and v.split()[1] != "0" and v.endswith("port 0 addr 0")
                               for v in scans), f"sample 21 found no store address in its memory: {scans}")
# Sample 22 found the candidate cache; as the worker user it could not write it.
caches = n.of("cache")
n.check(bool(caches) and all(v.startswith("cache ") for v in caches), f"sample 22 tried the candidate cache: {caches}")
if privileged:
    n.check(all(v.endswith("unreachable (Permission denied)") or ("create denied" in v and "object denied" in v)
                for v in caches), f"as the worker user the candidate cache is not writable: {caches}")
else:
    print(f"info: as the driver's user sample 22 saw the candidate cache as: {sorted(set(caches))}")
recs = {r["sample"]: r for r in map(json.loads, open(out))}
check_stopped_without_cpu(n, recs[20], "sample 20")
ref = lambda s: recs[s].get("times", {}).get("reference_us", 0)
print(f"info: reference median with sample 20's burners {ref(20):.0f} us, beside sample 7 {ref(7):.0f} us")
sys.exit(1 if n.bad else 0)
PY
[ -n "$(ls "$dir/pids")" ] || { echo "FAIL: sample 7 left no pid file (did it run?)"; fail=1; }
# Cheap hangs and early exits: the hang costs about the phase floor, the exit
# much less (process wall seconds in the records).
python3 - "$out" <<'PY' || fail=1
import json, sys
recs = {r["sample"]: r for r in map(json.loads, open(sys.argv[1]))}
bad = 0
for s, limit in ((10, 10), (11, 25)):
    w = recs[s].get("process", {}).get("wall_s", 1e9)
    print(f"sample {s}: {recs[s]['outcome']} after {w:.1f} s (limit {limit})")
    bad |= w > limit
sys.exit(1 if bad else 0)
PY
exit $fail
