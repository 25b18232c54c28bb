#!/usr/bin/env bash
# pkb agent with scripted agents (no model, no network), on problem 1 at the
# CPU shape: one fixes a compile error from its verdict's file:line, one fixes
# a wrong output (two samples), one never succeeds, one hangs (killed with its
# child at --agent-timeout), one fails, then writes nothing, then succeeds.
# Then the records, the attempt folders, the scores by step budget and the
# leaderboard's step-budget table are checked (check_agent.py).
set -u
pkb=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
agents=$here/../fixtures/agents
cands=$here/../fixtures/candidates/01_allreduce
rm -rf "$dir" && mkdir -p "$dir"
fail=0
. "$here/lib.sh"
common=(--device cpu --nproc 2 --trials 1 --no-perf --timeout 60)
expect 0 "fix_compile: compile_error, then correct" -- \
  "$pkb" agent 1 --agent "bash $agents/fix_compile.sh $cands/sample_0.cpp 16" --steps 3 --out "$dir/fix_compile.jsonl" "${common[@]}"
expect 0 "fix_wrong: output_mismatch, then correct; sample 1 correct at once" -- \
  "$pkb" agent 1 --agent "bash $agents/fix_wrong.sh $cands" --steps 3 --samples 2 --out "$dir/fix_wrong.jsonl" "${common[@]}"
expect 1 "never: output_mismatch at every step" -- \
  "$pkb" agent 1 --agent "bash $agents/never.sh $cands" --steps 2 --out "$dir/never.jsonl" "${common[@]}"
expect 1 "hang: killed at the agent timeout, every step" -- \
  "$pkb" agent 1 --agent "bash $agents/hang.sh" --steps 2 --agent-timeout 3 --out "$dir/hang.jsonl" "${common[@]}"
expect 0 "flaky: fails, writes nothing, then correct" -- \
  "$pkb" agent 1 --agent "bash $agents/flaky.sh $cands" --steps 4 --out "$dir/flaky.jsonl" "${common[@]}"
expect 2 "agent refuses an existing --out" -- \
  "$pkb" agent 1 --agent "true" --steps 1 --out "$dir/never.jsonl" "${common[@]}"
expect 2 "agent needs --out" -- "$pkb" agent 1 --agent "true" --steps 1 "${common[@]}"
expect 0 "score the trajectories" -- "$pkb" score "$dir"/{fix_compile,fix_wrong,never,hang,flaky}.jsonl --out "$dir/scores.json"
expect 0 "leaderboard by step budget" -- "$pkb" leaderboard "$dir/scores.json" --out "$dir/board.md"
python3 "$here/check_agent.py" "$dir" || fail=1
exit $fail
