#!/usr/bin/env bash
# usage: run_and_check.sh PKB EXPECTED_EXIT RESULTS.jsonl [pkb args...] ::: [check_results.py args...]
# Runs pkb with --out RESULTS.jsonl (removed first), asserts its exit code,
# then checks the records.
set -u
pkb=$1 expected=$2 out=$3
shift 3
pkb_args=()
while [ $# -gt 0 ] && [ "$1" != ":::" ]; do pkb_args+=("$1"); shift; done
[ $# -gt 0 ] && shift
rm -f "$out"
"$pkb" "${pkb_args[@]}" --out "$out"
rc=$?
if [ "$rc" != "$expected" ]; then
  echo "FAIL: pkb exited $rc, expected $expected"
  exit 1
fi
exec python3 "$(dirname "$0")/check_results.py" "$out" "$@"
