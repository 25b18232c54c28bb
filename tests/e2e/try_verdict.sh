#!/usr/bin/env bash
# pkb try on problem 1 at the CPU shape: the --json verdicts of a correct, a
# wrong-valued and a non-compiling candidate match the golden files in
# tests/e2e/golden/ once volatile fields (times, paths, evidence, compiler
# text) are normalised (normalize_verdict.py); the text verdicts carry what a
# model needs; exit codes are run's. UPDATE=1 rewrites the golden files.
set -u
pkb=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
cands=$here/../fixtures/candidates/01_allreduce
rm -rf "$dir" && mkdir -p "$dir"
fail=0
. "$here/lib.sh"
common=(--device cpu --nproc 2 --trials 2 --timeout 60)
# json_try NAME CODE -- pkb try ... --json: stdout (the verdict) must be JSON matching golden/try_NAME.json.
json_try() {
  local name=$1 code=$2; shift 3
  "$@" >"$dir/$name.stdout" 2>"$dir/$name.stderr"
  local rc=$?
  if [ "$rc" != "$code" ]; then echo "FAIL: $name: exit $rc, expected $code"; cat "$dir/$name.stderr"; fail=1
  else echo "ok: $name (exit $rc)"; fi
  python3 "$here/normalize_verdict.py" <"$dir/$name.stdout" >"$dir/$name.json" || { echo "FAIL: $name: not one JSON verdict"; fail=1; return; }
  if [ -n "${UPDATE:-}" ]; then cp "$dir/$name.json" "$here/golden/try_$name.json"; fi
  diff -u "$here/golden/try_$name.json" "$dir/$name.json" || { echo "FAIL: $name: verdict differs from golden/try_$name.json"; fail=1; }
}
json_try correct 0 -- "$pkb" try 1 "$cands/sample_0.cpp" "${common[@]}" --min-samples 2 --max-time 0.05 --json --out "$dir/correct.jsonl"
n=$(grep -c . "$dir/correct.jsonl")
[ "$n" = 1 ] || { echo "FAIL: --out holds $n records, expected 1"; fail=1; }
json_try output_mismatch 1 -- "$pkb" try 1 "$cands/sample_1.cpp" "${common[@]}" --json
json_try compile_error 1 -- "$pkb" try allreduce "$cands/sample_6.cpp" "${common[@]}" --json
grep -q 'sample_6.cpp:5:[0-9]*: error' "$dir/compile_error.stdout" || { echo "FAIL: diagnostics lack sample_6.cpp:5:COL: error"; fail=1; }
expect 1 "try a wrong-valued candidate (text)" -- "$pkb" try 1 "$cands/sample_1.cpp" "${common[@]}"
for part in "outcome: output_mismatch" "first mismatching output per rank and trial:" "rank 0, trial 0: output 0" \
            "rank 1, trial 0: output 0" "expected" "got" "max abs err"; do
  grep -qF -- "$part" "$dir/out.txt" || { echo "FAIL: text verdict lacks '$part'"; cat "$dir/out.txt"; fail=1; }
done
expect 1 "try a candidate that does not compile (text)" -- "$pkb" try 1 "$cands/sample_6.cpp" "${common[@]}"
grep -qF "compiler diagnostics (trimmed" "$dir/out.txt" || { echo "FAIL: text verdict lacks diagnostics"; fail=1; }
grep -qF "$HOME/.cache" "$dir/out.txt" && grep -q "candidate.cpp:" "$dir/out.txt" && { echo "FAIL: diagnostics name the cache copy"; fail=1; }
expect 2 "try of a missing file" -- "$pkb" try 1 "$dir/nope.cpp" --device cpu
expect 2 "try of two problems" -- "$pkb" try 1-2 "$cands/sample_0.cpp" --device cpu
expect 2 "try of an unknown extension" -- "$pkb" try 1 "$here/lib.sh" --device cpu
exit $fail
