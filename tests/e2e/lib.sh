# Helpers the e2e shell tests share. Sourced, not run; expects $dir.

# expect CODE DESCRIPTION -- command...: runs it (output in $dir/out.txt) and
# sets fail=1 when its exit code is not CODE.
expect() {
  local code=$1 what=$2; shift 3
  "$@" >"$dir/out.txt" 2>&1
  local rc=$?
  if [ "$rc" != "$code" ]; then echo "FAIL: $what: exit $rc, expected $code"; cat "$dir/out.txt"; fail=1
  else echo "ok: $what (exit $rc)"; fi
}

# missing_tool WHAT CI_HINT LOCAL_HINT: ends a test whose tool is absent. CI
# must run every test, so there it fails; elsewhere it exits 77, which CTest
# (SKIP_RETURN_CODE) reports as skipped, not passed.
missing_tool() {
  if [ -n "${CI:-}" ]; then
    echo "FAIL: $1 and CI is set ($2)"
    exit 1
  fi
  echo "SKIPPED: $1 ($3)"
  exit 77
}
