#!/usr/bin/env bash
# usage: gpu_attacks.sh PKB OUT_DIR NP FIXTURES
# tests/fixtures/gpu_attacks on the GPU path (as attacks.sh on CPU): outcomes,
# no survivor, driver alive (pkb runs as root on the lent machines; not as
# root sample 6 kills the driver and --resume finishes), no forged record.
set -u
pkb=$1 dir=$2 np=$3 fixtures=$4
here=$(dirname "$0")
rm -rf "$dir"
mkdir -p "$dir/pids"
chmod 1777 "$dir/pids"
chmod 755 "$dir"
export PKB_ATTACK_DIR="$dir/pids"
out="$dir/results.jsonl"
args=(run --device cuda --nproc "$np" --problems 1 --solutions "$fixtures" --trials 2 --warmup 5 --iters 10
      --phase-floor 20 --timeout 200 --work-dir "$dir/work" --out "$out")
"$pkb" "${args[@]}" >"$dir/run.txt" 2>&1
rc=$?
fail=0
if [ "$(id -u)" = 0 ]; then
  e6=correct e7=correct e15=output_mismatch e18=correct
  if [ "$rc" != 1 ]; then echo "FAIL: pkb exited $rc, expected 1"; cat "$dir/run.txt"; fail=1; fi
else
  e6=runtime_error e7=forbidden_api e15=runtime_error e18=timeout
  [ "$rc" = 137 ] || { echo "FAIL: pkb exited $rc, expected 137 (killed by sample 6)"; fail=1; }
  "$pkb" "${args[@]}" --resume >"$dir/resume.txt" 2>&1
  [ $? = 1 ] || { echo "FAIL: --resume did not finish with exit 1"; cat "$dir/resume.txt"; fail=1; }
fi
python3 "$here/check_results.py" "$out" --count 20 \
  --expect 0=output_mismatch --expect 1=output_mismatch --expect 2=output_mismatch \
  --expect 3=output_mismatch --reason "3=input 'tensor'" \
  --expect 4=forbidden_api --reason "4=dispatcher" \
  --expect 5=correct --expect 6=$e6 --expect 7=$e7 \
  --expect 8=runtime_error --reason "8=exited with status 0" \
  --expect 9=timeout --reason "9=deadline, the phase floor alone" \
  --expect 10=output_mismatch --expect 11=runtime_error --reason "11=out of protocol" \
  --expect 12=timing_anomaly --expect 13=correct \
  --expect 14=timing_anomaly --reason "14=still busy" \
  --expect 15=$e15 --expect 16=output_mismatch --expect 17=correct --expect 18=$e18 --expect 19=correct \
  --no-sample 99 --no-survivors --pids-dead "$dir/pids" || fail=1
# The attacks of issue 21 from inside (notes in $dir/pids) and the account of
# sample 13's stopped contestants (NOTE [referee and contestant]).
python3 - "$dir/pids" "$out" "$(id -u)" "$here" <<'PY' || fail=1
import json, sys
d, out, privileged = sys.argv[1], sys.argv[2], sys.argv[3] == "0"
sys.path.insert(0, sys.argv[4])
from attack_notes import Notes, check_fd_writes, check_referee_attacks, check_stopped_without_cpu
n = Notes(d)
recs = {r["sample"]: r for r in map(json.loads, open(out))}
# Samples 10 and 15-19 (CPU samples 12, 13 and 16-19).
check_referee_attacks(n, privileged)
check_fd_writes(n, "sample 11")
n.check(bool(n.of("timer")) and all(v == "patched" for v in n.of("timer")), f"sample 12 patched its timer: {n.of('timer')}")
check_stopped_without_cpu(n, recs[13], "sample 13")
# Sample 14's hog ran (python3 with torch started its kernels); its record
# names the busy device, and the honest samples' settles found it quiet.
n.check(bool(n.of("hog")) and all(v == "up" for v in n.of("hog")), f"sample 14's hog ran: {n.of('hog')}")
sides = lambda s: [p["candidate"] for p in recs[s].get("times", {}).get("per_rank", [])]
n.check(any(c.get("device_left_busy") for c in sides(14)), f"sample 14 left the device busy: {sides(14)}")
settled = lambda s: [(c.get("device_settles"), c.get("device_busy_settles"), c.get("device_max_probe_us")) for c in sides(s)]
quiet = [s for s in (5, 13) if sides(s) and all(c.get("device_settles", 0) > 0 and not c.get("device_left_busy") for c in sides(s))]
n.check(quiet == [5, 13], f"samples 5 and 13 settled on a quiet device: {settled(5)} {settled(13)}")
sys.exit(1 if n.bad else 0)
PY
[ -n "$(ls "$dir/pids")" ] || { echo "FAIL: sample 5 left no pid file (did it run?)"; fail=1; }
exit $fail
