#!/usr/bin/env bash
# usage: leaderboard_render.sh PKB DIR
# The HTML leaderboard is one self-contained page that renders in headless
# Chromium: a screenshot of it (kept as DIR/leaderboard.png) shows the tables.
# Without chromium (PKB_CHROMIUM overrides the name) the test fails when CI is
# set and otherwise exits 77, which CTest reports as skipped, not passed.
set -u
pkb=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/synthetic.sh"
rm -rf "$dir" && mkdir -p "$dir"
width=1600 height=1000
browser=${PKB_CHROMIUM:-chromium}
command -v "$browser" >/dev/null ||
  missing_tool "'$browser' not found" "scripts/setup installs the Debian package chromium" \
    "apt-get install chromium to run this test"

# screenshot PAGE PNG WIDTH HEIGHT: the page as the browser shows it, network off.
screenshot() {
  rm -f "$2"
  timeout 120 "$browser" --headless --disable-gpu --no-sandbox --hide-scrollbars \
    --user-data-dir="$dir/profile" --host-resolver-rules="MAP * ~NOTFOUND" \
    --window-size="$3,$4" --screenshot="$2" "file://$1" >"$dir/chromium.log" 2>&1
  local rc=$?
  [ $rc = 0 ] && [ -s "$2" ] && return 0
  echo "FAIL: chromium exited $rc without a screenshot of $1"; tail -20 "$dir/chromium.log"
  exit 1
}

synthetic_scores "$pkb" "$dir" >"$dir/score.log" 2>&1 || { echo "FAIL: pkb score"; cat "$dir/score.log"; exit 1; }
"$pkb" leaderboard "$dir/scores.json" --format html --out "$dir/leaderboard.html" ||
  { echo "FAIL: pkb leaderboard --format html"; exit 1; }

fail=0
# Self-contained: nothing fetched, from a server or elsewhere on disk.
if grep -Eion '(src|href)[[:space:]]*=|@import|url\(|https?:|<link|<script' "$dir/leaderboard.html"; then
  echo "FAIL: the page refers to something outside itself (lines above)"; fail=1
else
  echo "ok: the page is self-contained (no src, href, @import, url() or http(s) references)"
fi
for model in modelA modelB; do
  grep -q "<th>$model pass@1→2</th>" "$dir/leaderboard.html" || { echo "FAIL: no column for $model"; fail=1; }
done

screenshot "$dir/leaderboard.html" "$dir/leaderboard.png" $width $height
python3 "$here/check_screenshot.py" "$dir/leaderboard.png" $width $height || fail=1

# The check can fail: a blank page (smaller, so quicker to decode) must not pass it.
printf '<!DOCTYPE html>\n<title>blank</title>\n' >"$dir/blank.html"
screenshot "$dir/blank.html" "$dir/blank.png" 800 600
if python3 "$here/check_screenshot.py" "$dir/blank.png" 800 600 >"$dir/blank_check.txt"; then
  echo "FAIL: a blank page passes the screenshot check"; cat "$dir/blank_check.txt"; fail=1
else
  echo "ok: a blank page fails the screenshot check"
fi
rm -rf "$dir/profile"
[ $fail = 0 ] && echo "screenshot: $dir/leaderboard.png"
exit $fail
