#!/usr/bin/env bash
# The command-line contract: exit codes, no silent overwrite, --resume.
set -u
pkb=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
fail=0
. "$(dirname "$0")/lib.sh"
expect 2 "unknown flag" -- "$pkb" run --device cpu --bogus
expect 2 "unknown subcommand" -- "$pkb" frobnicate
expect 2 "bad device" -- "$pkb" run --device tpu
expect 2 "bad selection" -- "$pkb" run --device cpu --problems 999
expect 2 "bad base shape" -- "$pkb" run --device cpu --base-shape 12by3
expect 0 "help" -- "$pkb" run --help
grep -q -- "--resume" "$dir/out.txt" || { echo "FAIL: help lacks --resume"; fail=1; }
expect 0 "list" -- "$pkb" list
grep -q "| 1 | allreduce |" "$dir/out.txt" || { echo "FAIL: list lacks allreduce"; fail=1; }
expect 0 "prompt" -- "$pkb" prompt allreduce
for part in "## The problem" "## The reference" "## The machine" "PKB_SOLUTION(solve)" "allreduce_kernel"; do
  grep -qF -- "$part" "$dir/out.txt" || { echo "FAIL: prompt lacks '$part'"; fail=1; }
done
# The blocks a reference is written with come with it (problem 1: its
# inputs' base class; 41: the ZeRO step and, through it, the Adam step).
for part in "problems/blocks/collective_inputs.h" "class RankConstantCollective"; do
  grep -qF -- "$part" "$dir/out.txt" || { echo "FAIL: prompt lacks '$part'"; fail=1; }
done
expect 0 "prompt with nested blocks" -- "$pkb" prompt 41
for part in "problems/blocks/zero_mlp_step.h" "problems/blocks/adam.h"; do
  grep -qF -- "$part" "$dir/out.txt" || { echo "FAIL: prompt of 41 lacks '$part'"; fail=1; }
done
expect 2 "prompt of two problems" -- "$pkb" prompt 1-2
expect 0 "first run" -- "$pkb" run --device cpu --problems 1,3 --no-perf --trials 1 --out "$dir/r.jsonl"
expect 2 "refuse to overwrite results" -- "$pkb" run --device cpu --problems 1 --no-perf --trials 1 --out "$dir/r.jsonl"
expect 0 "resume adds only what is missing" -- "$pkb" run --device cpu --problems 1-4 --no-perf --trials 1 --out "$dir/r.jsonl" --resume
n=$(grep -c . "$dir/r.jsonl")
[ "$n" = 4 ] || { echo "FAIL: expected 4 records after resume, found $n"; fail=1; }
grep -q "already recorded" "$dir/out.txt" || { echo "FAIL: resume did not report skipped records"; fail=1; }
# Shards partition the plan: together they hold each evaluation exactly once.
expect 0 "shard 0/3" -- "$pkb" run --device cpu --problems 1-8 --no-perf --trials 1 --shard 0/3 --out "$dir/s0.jsonl"
expect 0 "shard 1/3" -- "$pkb" run --device cpu --problems 1-8 --no-perf --trials 1 --shard 1/3 --out "$dir/s1.jsonl"
expect 0 "shard 2/3" -- "$pkb" run --device cpu --problems 1-8 --no-perf --trials 1 --shard 2/3 --out "$dir/s2.jsonl"
expect 2 "bad shard" -- "$pkb" run --device cpu --problems 1 --shard 3/3
expect 0 "merge shards" -- "$pkb" merge "$dir/s0.jsonl" "$dir/s1.jsonl" "$dir/s2.jsonl" --out "$dir/all.jsonl"
n=$(grep -c . "$dir/all.jsonl")
[ "$n" = 8 ] || { echo "FAIL: expected 8 merged records, found $n"; fail=1; }
ids=$(grep -o '"problem_id":[0-9]*' "$dir/all.jsonl" | sort -u | wc -l)
[ "$ids" = 8 ] || { echo "FAIL: shards did not cover problems 1-8 once each ($ids distinct)"; fail=1; }
# Without --out, records go to results/<name>-<UTC time>.jsonl under the
# working directory, named on stderr, never overwritten; pkb score reads them.
expect 0 "run without --out" -- bash -c "cd '$dir' && '$pkb' run --device cpu --problems 1 --no-perf --trials 1"
grep -q "results go to results/reference-[0-9]*T[0-9]*Z.jsonl" "$dir/out.txt" || { echo "FAIL: run did not name its results file"; fail=1; }
expect 0 "second run without --out" -- bash -c "cd '$dir' && '$pkb' run --device cpu --problems 1 --no-perf --trials 1"
n=$(ls "$dir"/results/reference-*.jsonl 2>/dev/null | wc -l)
[ "$n" = 2 ] || { echo "FAIL: expected 2 results files under results/, found $n"; fail=1; }
for f in "$dir"/results/reference-*.jsonl; do
  [ "$(grep -c . "$f")" = 1 ] || { echo "FAIL: $f does not hold one record"; fail=1; }
done
expect 0 "score a default results file" -- "$pkb" score "$(ls "$dir"/results/reference-*.jsonl | head -1)"
grep -q '"reference"' "$dir/out.txt" || { echo "FAIL: scores of the default results file lack the run"; fail=1; }
expect 2 "resume without --out" -- "$pkb" run --device cpu --problems 1 --no-perf --trials 1 --resume
exit $fail
