#!/usr/bin/env bash
# usage: plot_leaderboard.sh PKB DIR [agent]
# scripts/plot_leaderboard.py on synthetic scores: the PNG and SVG plots exist
# and draw the scores (kept under DIR/plots). With "agent" (a build with CPU
# mode), the scores of two short pkb agent runs on problem 1 are plotted with
# them: fix_compile.sh (correct at step 2 of 3) and an agent command that
# always fails (agent_error), so the per-step curve and the agent_error bar
# are drawn from a real run's scores. It runs with the first python
# that has matplotlib: $PKB_PYTHON, python3, then the venv scripts/setup makes
# (~/.cache/pkb/venv, or $PKB_VENV). Without one the test fails when CI is set
# and otherwise exits 77, which CTest reports as skipped, not passed.
set -u
pkb=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/synthetic.sh"
rm -rf "$dir" && mkdir -p "$dir"
py=""
for cand in ${PKB_PYTHON:-} python3 "${PKB_VENV:-$HOME/.cache/pkb/venv}/bin/python"; do
  if "$cand" -c 'import matplotlib' >/dev/null 2>&1; then py=$cand; break; fi
done
[ -n "$py" ] ||
  missing_tool "no python with matplotlib" "scripts/setup installs it into the venv" \
    "run scripts/setup, or pip install matplotlib"

synthetic_scores "$pkb" "$dir" >"$dir/score.log" 2>&1 || { echo "FAIL: pkb score"; cat "$dir/score.log"; exit 1; }
scores=("$dir/scores.json")
if [ "${3:-}" = agent ]; then
  fail=0
  common=(--device cpu --nproc 2 --trials 1 --no-perf --timeout 60)
  expect 0 "agent fix_compile: compile_error, then correct" -- "$pkb" agent 1 --steps 3 --out "$dir/fix_compile.jsonl" \
    --agent "bash $here/../fixtures/agents/fix_compile.sh $here/../fixtures/candidates/01_allreduce/sample_0.cpp 16" \
    "${common[@]}"
  expect 1 "agent that always fails: agent_error" -- \
    "$pkb" agent 1 --agent "exit 3" --name failing --steps 2 --out "$dir/failing.jsonl" "${common[@]}"
  expect 0 "score the agent runs" -- \
    "$pkb" score "$dir/fix_compile.jsonl" "$dir/failing.jsonl" --out "$dir/agent_scores.json" --k 1,2
  [ "$fail" = 0 ] || exit 1
  scores+=("$dir/agent_scores.json")
fi
"$py" "$here/../../scripts/plot_leaderboard.py" "${scores[@]}" --out-dir "$dir/plots" ||
  { echo "FAIL: plot_leaderboard.py with $py"; exit 1; }
exec python3 "$here/check_plots.py" "${scores[@]}" "$dir/plots"
