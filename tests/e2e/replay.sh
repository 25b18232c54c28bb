#!/usr/bin/env bash
# usage: replay.sh PKB OUT_DIR NP FIXTURES [DEVICE [PROBLEM [RUN ARGS...]]]
# The replay candidates (tests/fixtures/replay, README there; on the GPU
# tests/fixtures/gpu_replay) under both timing protocols (NOTE [fresh inputs]
# in harness/src/worker/timing_fresh.h). Sample 0 is the honest code the
# others wrap; 1-3 remember answers keyed on input contents and count their
# hits in $PKB_ATTACK_DIR/memoK.<pid>; 4 answers from the call count.
# Published: every content memo hits (on CPU it is then more than 3x faster
# than sample 0) -- the hole, shown, so that this test sees it reopen. Fresh:
# no memo ever hits (so it gains nothing: it does sample 0's work and more),
# and sample 4 fails a timed call checked after the fact (not a later check).
# On CUDA, where times are precise, a fresh memo that is correct has a speedup
# within 20% of sample 0's; on CPU two evaluations' speedups differ by 2-6x
# beside other tests (measured), so they are printed, not checked.
set -u
pkb=$1 dir=$2 np=$3 fixtures=$4 device=${5:-cpu} problem=${6:-1}
shift $(( $# < 6 ? $# : 6 ))
here=$(dirname "$0")
rm -rf "$dir"
mkdir -p "$dir"
count=$(find "$fixtures" -name 'sample_*' | wc -l)
common=(run --device "$device" --nproc "$np" --problems "$problem" --solutions "$fixtures" --trials 1
        --integrity-trials 1 --phase-floor 30 --timeout 300 "$@")
fail=0
# Published: more warm-up calls than input groups (up to 128), so that a memo
# keyed on the address sees each group again.
for mode in published fresh; do mkdir -p "$dir/notes_$mode"; chmod 1777 "$dir/notes_$mode"; done
chmod 755 "$dir"
PKB_ATTACK_DIR="$dir/notes_published" "$pkb" "${common[@]}" --timing published --warmup 300 --iters 40 --rounds 4 \
  --work-dir "$dir/published" --out "$dir/published.jsonl" >"$dir/published.txt" 2>&1
PKB_ATTACK_DIR="$dir/notes_fresh" "$pkb" "${common[@]}" --timing fresh --min-samples 16 --max-time 0.3 \
  --work-dir "$dir/fresh" --out "$dir/fresh.jsonl" >"$dir/fresh.txt" 2>&1
python3 - "$dir/published.jsonl" "$dir/fresh.jsonl" "$count" "$device" "$dir" <<'PY' || fail=1
import glob, json, os, sys
count, device, d = int(sys.argv[3]), sys.argv[4], sys.argv[5]
def memo_hits(mode):
    got = {}
    for p in glob.glob(f"{d}/notes_{mode}/memo*.*"):
        k = int(os.path.basename(p).split(".")[0][4:])
        h, m = map(int, open(p).read().split())
        hh, mm = got.get(k, (0, 0))
        got[k] = (hh + h, mm + m)
    return got
bad = 0
def check(cond, what):
    global bad
    print(("ok   " if cond else "FAIL ") + what)
    bad |= not cond
def load(path):
    try:
        return {r["sample"]: r for r in map(json.loads, open(path))}
    except FileNotFoundError:
        return {}
pub, fresh = load(sys.argv[1]), load(sys.argv[2])
# On the GPU a memo's calls wait for the device (its sampled look is a copy to
# the host) and its warm-up calls outlast its timed ones: its referee's clock
# may call it timing_anomaly (NOTE [timing protocol], step 5), a failing
# outcome, under either protocol.
memo_ok = {"correct", "timing_anomaly"} if device == "cuda" else {"correct"}
for name, recs in (("published", pub), ("fresh", fresh)):
    check(len(recs) == count, f"{name}: {len(recs)} records of {count}")
    for s, r in sorted(recs.items()):
        want = {"output_mismatch"} if s == 4 else memo_ok if s in (1, 2, 3) else {"correct"}
        check(r["outcome"] in want, f"{name}: sample {s} {r['outcome']} (expected {'|'.join(sorted(want))}) {r.get('reason', '')[:160]}")
if 4 in fresh:
    check("checked after the fact" in fresh[4].get("reason", ""), "fresh: sample 4 failed a timed call's check")
def sp(recs, s):
    return recs.get(s, {}).get("speedup")
hits_pub, hits_fresh = memo_hits("published"), memo_hits("fresh")
for s in (1, 2, 3):
    if s not in pub and s not in fresh:
        continue
    hp, hf = hits_pub.get(s), hits_fresh.get(s)
    check(hp is not None and hp[0] > 0, f"published: memo {s} hit (hits (at least), misses over the ranks: {hp})")
    check(hf is not None and hf[0] == 0 and hf[1] > 0, f"fresh: memo {s} never hit (hits, misses: {hf})")
    p, f, p0, f0 = sp(pub, s), sp(fresh, s), sp(pub, 0), sp(fresh, 0)
    if device != "cuda":
        if None in (p, f, p0, f0):
            check(False, f"sample {s}: speedups missing (published {p}, fresh {f}; sample 0: {p0}, {f0})")
            continue
        check(p > 3 * p0, f"published: memo {s} gains ({p:.2f}x against {p0:.2f}x without it)")
        print(f"info fresh: memo {s} {f:.2f}x against {f0:.2f}x without it")
    elif f is not None and f0 is not None:
        check(f <= 1.2 * f0, f"fresh: memo {s} {f:.2f}x against {f0:.2f}x without it (within 20%)")
    else:
        print(f"info fresh: memo {s} {fresh.get(s, {}).get('outcome')} (no speedup); published {pub.get(s, {}).get('outcome')} {p}")
sys.exit(bad)
PY
for f in "$dir/published.jsonl" "$dir/fresh.jsonl"; do
  python3 "$here/check_results.py" "$f" --no-survivors || fail=1
done
[ $fail = 0 ] && echo "replay: ok" || { echo "replay: FAILED (logs in $dir)"; tail -n 5 "$dir"/*.txt; }
exit $fail
