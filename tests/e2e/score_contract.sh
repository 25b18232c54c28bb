#!/usr/bin/env bash
# pkb score / leaderboard / merge on a small synthetic results file: exit
# codes, duplicate shards rejected, outputs never silently overwritten.
set -u
pkb=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
fail=0
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/synthetic.sh"
{ rec modelA 1 0 correct 2.0; rec modelA 1 1 correct 0.5; rec modelA 2 0 output_mismatch; } >"$dir/shard0.jsonl"
{ rec modelA 3 0 correct 1.5; rec modelA 4 0 harness_error; } >"$dir/shard1.jsonl"
{ rec modelA 1 0 timeout; } >"$dir/dup.jsonl"

expect 0 "merge shards" -- "$pkb" merge "$dir/shard0.jsonl" "$dir/shard1.jsonl" --out "$dir/merged.jsonl"
n=$(grep -c . "$dir/merged.jsonl")
[ "$n" = 5 ] || { echo "FAIL: expected 5 merged records, found $n"; fail=1; }
expect 2 "merge refuses to overwrite" -- "$pkb" merge "$dir/shard1.jsonl" --out "$dir/merged.jsonl"
n=$(grep -c . "$dir/merged.jsonl")
[ "$n" = 5 ] || { echo "FAIL: merged file changed by a refused merge"; fail=1; }
expect 2 "merge rejects a duplicate evaluation" -- "$pkb" merge "$dir/shard0.jsonl" "$dir/dup.jsonl" --out "$dir/m2.jsonl"
grep -q "duplicate" "$dir/out.txt" || { echo "FAIL: duplicate not named"; fail=1; }
[ ! -e "$dir/m2.jsonl" ] || { echo "FAIL: a rejected merge left a file"; fail=1; }
expect 2 "merge of a missing file" -- "$pkb" merge "$dir/nope.jsonl" --out "$dir/m3.jsonl"

expect 0 "score" -- "$pkb" score "$dir/merged.jsonl" --out "$dir/scores.json" --k 1,2 --p 0,1
grep -q '"kind": "scores"' "$dir/scores.json" || { echo "FAIL: scores lacks kind"; fail=1; }
grep -q "clamped" "$dir/out.txt" || { echo "FAIL: no warning for k clamped"; fail=1; }
expect 2 "score refuses to overwrite" -- "$pkb" score "$dir/merged.jsonl" --out "$dir/scores.json"
expect 2 "score with k=0" -- "$pkb" score "$dir/merged.jsonl" --k 0
expect 0 "score to stdout" -- "$pkb" score "$dir/merged.jsonl"
grep -q '"modelA"' "$dir/out.txt" || { echo "FAIL: stdout scores lack modelA"; fail=1; }

expect 0 "leaderboard md to stdout" -- "$pkb" leaderboard "$dir/scores.json"
grep -q "| Total | 87 | 2→2 | 1.5→2 |" "$dir/out.txt" || { echo "FAIL: md Total row"; cat "$dir/out.txt"; fail=1; }
for f in md csv tex html; do
  expect 0 "leaderboard $f" -- "$pkb" leaderboard "$dir/scores.json" --format $f --out "$dir/board.$f"
  [ -s "$dir/board.$f" ] || { echo "FAIL: empty board.$f"; fail=1; }
done
expect 2 "leaderboard refuses to overwrite" -- "$pkb" leaderboard "$dir/scores.json" --format csv --out "$dir/board.csv"
expect 2 "leaderboard bad format" -- "$pkb" leaderboard "$dir/scores.json" --format pdf
expect 2 "leaderboard of a results file" -- "$pkb" leaderboard "$dir/merged.jsonl"
exit $fail
