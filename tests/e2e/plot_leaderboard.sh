#!/usr/bin/env bash
# usage: plot_leaderboard.sh PKB DIR
# scripts/plot_leaderboard.py on synthetic scores: the PNG and SVG plots exist
# and draw the scores (kept under DIR/plots). It runs with the first python
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
"$py" "$here/../../scripts/plot_leaderboard.py" "$dir/scores.json" --out-dir "$dir/plots" ||
  { echo "FAIL: plot_leaderboard.py with $py"; exit 1; }
exec python3 "$here/check_plots.py" "$dir/scores.json" "$dir/plots"
