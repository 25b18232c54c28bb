#!/usr/bin/env bash
# pkb generate against a local chat-completions server (fake_chat_server.py,
# answers in tests/fixtures/generate/README.md): problems 1-2, 3 samples each,
# 3 requests in flight, through a 429 (Retry-After: 1), a 500 and a stall past
# the per-request timeout; then pkb run and pkb score on the folder. Checked:
# the manifest (prompt hashes against what the server received, settings,
# usage, retries), the files, the outcomes (correct, compile_error, and
# compile_error "no code in the response" per problem), the scores, --resume
# (nothing missing: no request; one sample deleted: one request), SIGINT mid
# run (nothing written is lost; --resume asks only for the rest), and bad
# input: unknown problem, 401, unset key, unreachable endpoint, malformed
# JSON, a reply cut at max tokens, a folder of another model.
set -u
pkb=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir/prompts"
fail=0
. "$here/lib.sh"
log=$dir/requests.jsonl
: >"$log"
python3 "$here/fake_chat_server.py" --port-file "$dir/port" --log "$log" --fixtures "$here/../fixtures" \
  --prompts "$dir/prompts" --stall-s 5 --slow-s 1 --lifetime 300 &
server=$!
trap 'kill "$server" 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || { echo "FAIL: the fake server did not start"; exit 1; }
url=http://127.0.0.1:$(cat "$dir/port")/v1
export PKB_TEST_KEY=test-key
gen=(generate --device cpu --endpoint "$url" --api-key-env PKB_TEST_KEY --request-timeout 2 --retries 3)
requests() { grep -c "\"model\": \"$1\"" "$log"; }
out=$dir/test-model

expect 0 "generate 1-2 x 3 samples, 3 in flight" -- \
  "$pkb" "${gen[@]}" --model test-model --problems 1-2 --samples 3 --concurrency 3 --temperature 0.7 \
  --max-tokens 4096 --out "$out"
cp "$dir/out.txt" "$dir/generate.log"
cat "$dir/generate.log"
n=$(requests test-model)
[ "$n" = 9 ] || { echo "FAIL: $n requests, expected 9 (6 samples + 3 faults)"; fail=1; }
for s in "HTTP 429" "Retry-After: 1" "HTTP 500" "per-request timeout" "generated 6 of 6: 4 with code, 2 without code, 0 failed"; do
  grep -qF "$s" "$dir/generate.log" || { echo "FAIL: generate's log lacks '$s'"; fail=1; }
done
grep -q "ETA" "$dir/generate.log" || { echo "FAIL: no ETA in the progress lines"; fail=1; }
for p in 1 2; do "$pkb" prompt $p >"$dir/prompt_$p.txt"; done

expect 1 "run the folder (correct, compile_error, no code per problem)" -- \
  "$pkb" run --device cpu --nproc 2 --problems 1-2 --solutions "$out" --no-perf --trials 1 --integrity-trials 1 \
  --timeout 60 --out "$dir/test-model.jsonl" --work-dir "$dir/work"
cp "$dir/out.txt" "$dir/run.log"
cat "$dir/run.log"
expect 0 "score" -- "$pkb" score "$dir/test-model.jsonl" --out "$dir/scores.json"
cat "$dir/out.txt"

python3 - "$dir" "$out" <<'PY' || fail=1
import collections, hashlib, json, os, sys
d, out = sys.argv[1], sys.argv[2]
failures = []
def check(ok, what):
    if not ok:
        failures.append(what)

m = json.load(open(os.path.join(out, "manifest.json")))
check(m["schema_version"] == 1 and m["kind"] == "generation", "manifest schema/kind")
check(m["model"] == "test-model" and m["endpoint"].endswith("/v1/chat/completions"), "manifest model/endpoint")
check(m["device"] == "cpu" and m["api_key_env"] == "PKB_TEST_KEY", "manifest device/api_key_env")
check("test-key" not in json.dumps(m), "the API key is in the manifest")
S = m["samples"]
check(sorted((e["problem_id"], e["sample"]) for e in S) == [(p, k) for p in (1, 2) for k in range(3)],
      f"manifest samples {[(e['problem_id'], e['sample']) for e in S]}")
slugs = {1: "01_allreduce", 2: "02_allgather"}
received = collections.defaultdict(set)
for l in open(os.path.join(d, "requests.jsonl")):
    r = json.loads(l)
    received[r["problem"]].add(r["prompt_sha256"])
for p, slug in slugs.items():
    sent = open(os.path.join(d, "prompts", slug + ".txt")).read()
    check(sent.startswith(open(os.path.join(d, f"prompt_{p}.txt")).read()), f"{slug}: the prompt is not pkb prompt's")
    check("CPU mode" in sent, f"{slug}: no CPU-mode note in the prompt")
    check(received[slug] == {hashlib.sha256(sent.encode()).hexdigest()}, f"{slug}: prompts differ between samples")
for e in S:
    slug = slugs[e["problem_id"]]
    where = f"{slug} #{e['sample']}"
    check(e["prompt_sha256"] in received[slug], f"{where}: prompt_sha256 is not the received prompt's")
    check(e["temperature"] == 0.7 and e["max_tokens"] == 4096, f"{where}: temperature/max_tokens {e['temperature']}")
    check(e["finish_reason"] == "stop" and e["latency_s"] > 0, f"{where}: finish_reason/latency")
    u = e["usage"] or {}
    check(u.get("completion_tokens", 0) > 0 and u.get("prompt_tokens", 0) > 1000, f"{where}: usage {u}")
    check(e["attempts"] == len(e["attempt_log"]), f"{where}: attempts != len(attempt_log)")
    resp = os.path.join(out, e["response"])
    check(e["response"] == f"{slug}/sample_{e['sample']}.response.md" and os.path.isfile(resp), f"{where}: response")
    cand = os.path.join(out, f"{slug}/sample_{e['sample']}.cpp")
    if e["status"] == "code":
        check(e["candidate"] == f"{slug}/sample_{e['sample']}.cpp" and os.path.isfile(cand), f"{where}: candidate")
        check(open(cand).read() in open(resp).read(), f"{where}: the candidate is not the reply's code block")
        check(e["error"] is None, f"{where}: error {e['error']}")
    else:
        check(e["status"] == "no_code" and e["candidate"] is None and not os.path.exists(cand), f"{where}: no_code")
        check(e["error"] == "no code in the response", f"{where}: error {e['error']}")
for p in (1, 2):
    st = sorted(e["status"] for e in S if e["problem_id"] == p)
    check(st == ["code", "code", "no_code"], f"problem {p}: statuses {st}")
check(sum(e["attempts"] for e in S) == 9, f"attempts {sum(e['attempts'] for e in S)}, expected 9")
log = [a for e in S for a in e["attempt_log"]]
check(any(a["http_status"] == 429 and a.get("retry_after") == "1" and a.get("wait_s") == 1 for a in log),
      "no 429 attempt that waited Retry-After: 1")
check(any(a["http_status"] == 500 and a.get("wait_s", 0) >= 1 for a in log), "no 500 attempt with a backoff")
check(any(a["http_status"] is None and "timeout" in (a["error"] or "") and 1.9 < a["seconds"] < 4 for a in log),
      "no attempt that timed out after ~2 s")

recs = [json.loads(l) for l in open(os.path.join(d, "test-model.jsonl")) if l.strip()]
check(len(recs) == 6, f"{len(recs)} records")
by = {(r["problem_id"], r["sample"]): r for r in recs}
for e in S:
    r = by.get((e["problem_id"], e["sample"]))
    if r is None:
        failures.append(f"no record of {e['problem_id']} #{e['sample']}")
        continue
    if e["status"] == "no_code":
        check(r["outcome"] == "compile_error" and r["reason"].startswith("no code in the response"),
              f"no-code sample recorded as {r['outcome']}: {r['reason'][:80]}")
        check(r["candidate"].endswith(".response.md"), f"no-code sample's candidate {r['candidate']}")
    else:
        check(r["outcome"] in ("correct", "compile_error"), f"{r['outcome']}: {r.get('reason', '')[:200]}")
        if r["outcome"] == "compile_error":
            check(r["reason"].startswith("compile failed"), f"compile error reason {r['reason'][:80]}")
for p in (1, 2):
    o = sorted(r["outcome"] for r in recs if r["problem_id"] == p)
    check(o == ["compile_error", "compile_error", "correct"], f"problem {p}: outcomes {o}")

s = json.load(open(os.path.join(d, "scores.json")))["models"]["test-model"]["overall"]
check(abs(s["counts"]["pass@1"] - 2 / 3) < 1e-9 and abs(s["counts"]["pass@3"] - 2) < 1e-9,
      f"pass@1/pass@3 counts {s['counts']['pass@1']}, {s['counts']['pass@3']}")
check(s["samples"] == 6 and s["outcomes"]["correct"] == 2 and s["outcomes"]["compile_error"] == 4,
      f"scores samples/outcomes {s['samples']} {s['outcomes']}")
for f in failures:
    print("FAIL:", f)
print("ok: manifest, files, outcomes and scores" if not failures else "")
sys.exit(1 if failures else 0)
PY

# --resume: nothing missing, then one sample deleted.
before=$(requests test-model)
expect 0 "--resume with nothing missing" -- \
  "$pkb" "${gen[@]}" --model test-model --problems 1-2 --samples 3 --out "$out" --resume
grep -q "nothing to request" "$dir/out.txt" || { echo "FAIL: no 'nothing to request'"; cat "$dir/out.txt"; fail=1; }
[ "$(requests test-model)" = "$before" ] || { echo "FAIL: --resume with nothing missing made requests"; fail=1; }
rm -f "$out"/02_allgather/sample_1.*
expect 0 "--resume after deleting 02_allgather sample 1" -- \
  "$pkb" "${gen[@]}" --model test-model --problems 1-2 --samples 3 --out "$out" --resume
grep -q "1 request(s) (2 problem(s) x 3 sample(s), 5 already written)" "$dir/out.txt" ||
  { echo "FAIL: resume did not ask for exactly the deleted sample"; cat "$dir/out.txt"; fail=1; }
[ "$(requests test-model)" = $((before + 1)) ] || { echo "FAIL: $(($(requests test-model) - before)) requests, expected 1"; fail=1; }
[ -f "$out/02_allgather/sample_1.response.md" ] || { echo "FAIL: the deleted sample was not written again"; fail=1; }
expect 2 "a generated folder without --resume is refused" -- \
  "$pkb" "${gen[@]}" --model test-model --problems 1-2 --samples 3 --out "$out"
grep -q "already holds a generation" "$dir/out.txt" || { echo "FAIL: refusal reason"; cat "$dir/out.txt"; fail=1; }
expect 2 "--resume with another model is refused" -- \
  "$pkb" "${gen[@]}" --model other-model --problems 1-2 --samples 3 --out "$out" --resume
grep -q "holds model 'test-model'" "$dir/out.txt" || { echo "FAIL: other-model reason"; cat "$dir/out.txt"; fail=1; }

# Ctrl-C while the second of three slow replies is in flight.
"$pkb" "${gen[@]}" --model slow --problems 1 --samples 3 --concurrency 1 --out "$dir/slow" >"$dir/slow.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '"status"' "$dir/slow/manifest.json" 2>/dev/null && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" = 130 ] || { echo "FAIL: pkb generate exited $rc after SIGINT, expected 130 (killed by SIGINT)"; cat "$dir/slow.log"; fail=1; }
grep -q "interrupted by SIGINT" "$dir/slow.log" || { echo "FAIL: no interruption note"; cat "$dir/slow.log"; fail=1; }
written=$(grep -c '"status"' "$dir/slow/manifest.json")
[ "$written" -ge 1 ] && [ "$written" -lt 3 ] || { echo "FAIL: $written samples written before SIGINT"; fail=1; }
ls "$dir"/slow/01_allreduce | grep -q tmp && { echo "FAIL: temporary files left"; fail=1; }
before=$(requests slow)
expect 0 "--resume after SIGINT" -- "$pkb" "${gen[@]}" --model slow --problems 1 --samples 3 --out "$dir/slow" --resume
[ "$(requests slow)" = $((before + 3 - written)) ] ||
  { echo "FAIL: --resume after SIGINT made $(($(requests slow) - before)) requests, expected $((3 - written))"; fail=1; }
[ "$(grep -c '"status"' "$dir/slow/manifest.json")" = 3 ] || { echo "FAIL: not 3 samples after --resume"; fail=1; }
echo "ok: SIGINT after $written sample(s) written; --resume asked for the other $((3 - written))"

# Bad input: a clear error (exit 2) or a recorded failure (exit 1), never a crash.
expect 2 "unknown problem" -- "$pkb" "${gen[@]}" --model test-model --problems 999 --out "$dir/bad0"
[ ! -e "$dir/bad0" ] || { echo "FAIL: an unknown problem left a folder"; fail=1; }
expect 2 "wrong API key (401)" -- env PKB_TEST_KEY=wrong \
  "$pkb" "${gen[@]}" --model test-model --problems 1 --out "$dir/bad1"
grep -q "HTTP 401: Incorrect API key provided.*PKB_TEST_KEY" "$dir/out.txt" || { echo "FAIL: 401 message"; cat "$dir/out.txt"; fail=1; }
expect 2 "unset API key (401)" -- env -u PKB_TEST_KEY "$pkb" "${gen[@]}" --model test-model --problems 1 --out "$dir/bad2"
grep -q "PKB_TEST_KEY, which is unset" "$dir/out.txt" || { echo "FAIL: unset-key message"; cat "$dir/out.txt"; fail=1; }
closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
expect 2 "unreachable endpoint" -- "$pkb" generate --device cpu --endpoint "http://127.0.0.1:$closed/v1" \
  --api-key-env PKB_TEST_KEY --retries 1 --model test-model --problems 1 --out "$dir/bad3"
grep -q "endpoint unreachable" "$dir/out.txt" || { echo "FAIL: unreachable message"; cat "$dir/out.txt"; fail=1; }
expect 1 "malformed JSON: a recorded failure" -- "$pkb" "${gen[@]}" --model malformed --problems 1 --out "$dir/bad4"
expect 0 "a reply cut at max tokens: kept, no code" -- "$pkb" "${gen[@]}" --model truncated --problems 1 --out "$dir/bad5"
python3 - "$dir" <<'PY' || fail=1
import json, os, sys
d = sys.argv[1]
e = json.load(open(os.path.join(d, "bad4/manifest.json")))["samples"][0]
ok = e["status"] == "failed" and "not JSON" in e["error"] and e["response"] is None
ok &= not os.path.exists(os.path.join(d, "bad4/01_allreduce"))
e = json.load(open(os.path.join(d, "bad5/manifest.json")))["samples"][0]
ok &= e["status"] == "no_code" and e["finish_reason"] == "length" and "token limit" in e["error"]
ok &= os.path.isfile(os.path.join(d, "bad5/01_allreduce/sample_0.response.md"))
ok &= not os.path.exists(os.path.join(d, "bad5/01_allreduce/sample_0.cpp"))
print("ok: malformed JSON and a cut reply recorded" if ok else "FAIL: malformed/truncated entries")
sys.exit(0 if ok else 1)
PY
exit $fail
