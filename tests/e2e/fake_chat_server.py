#!/usr/bin/env python3
"""A chat-completions endpoint for pkb generate's test (tests/e2e/generate.sh).

Speaks POST /v1/chat/completions on 127.0.0.1 (a free port, written to
--port-file), checks "Authorization: Bearer --key" (else 401), and answers by
the request's model:

  test-model  per problem (from the prompt's "# Task: NN_slug" line), the 1st,
              2nd, 3rd, 4th... answer cycles through: a correct CPU kernel,
              one that does not compile, prose without code (fixtures:
              tests/fixtures/generate/README.md). Before any answer, the
              first requests get the --faults, one each, in order: 429 with
              Retry-After: 1, 500, and a stall past the client's timeout.
              A fault is not an answer.
  slow        the same answers, each after --slow-s seconds, no faults.
  malformed   HTTP 200 whose body is not JSON.
  truncated   finish_reason "length", the reply cut inside its code block.

Every request is logged to --log as one JSON line ({"model", "problem",
"answer", "prompt_sha256"}), flushed before the reply (for slow, on arrival);
with --prompts, each problem's prompt is kept there as received. The server exits by itself after
--lifetime seconds. Standard library only.
"""
import argparse
import hashlib
import http.server
import json
import os
import re
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port-file", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--fixtures", required=True, help="tests/fixtures")
ap.add_argument("--key", default="test-key")
ap.add_argument("--faults", default="429,500,stall")
ap.add_argument("--stall-s", type=float, default=6.0)
ap.add_argument("--slow-s", type=float, default=1.0)
ap.add_argument("--lifetime", type=float, default=300.0)
ap.add_argument("--prompts", help="a folder: each problem's last prompt, as received, in NN_slug.txt")
args = ap.parse_args()


def read(rel):
    with open(os.path.join(args.fixtures, rel)) as f:
        return f.read()


def fenced(code):
    return "Here is the kernel.\n\n```cpp\n" + code + ("" if code.endswith("\n") else "\n") + "```\n"


CORRECT = {
    "01_allreduce": read("candidates/01_allreduce/sample_0.cpp"),
    "02_allgather": read("generate/02_allgather.cpp"),
}
BROKEN = read("generate/compile_error.cpp")
PROSE = "I would use a ring all-reduce over the symmetric buffers, but I have not written the code yet.\n"

lock = threading.Lock()
faults = [f for f in args.faults.split(",") if f]
answers = {}  # (model, problem) -> answers given
log = open(args.log, "a")


def answer_for(model, problem):
    """The next answer for (model, problem): (kind, content)."""
    with lock:
        n = answers.get((model, problem), 0)
        answers[(model, problem)] = n + 1
    kind = ["correct", "compile_error", "no_code"][n % 3]
    if kind == "correct":
        return kind, fenced(CORRECT.get(problem, CORRECT["01_allreduce"]))
    if kind == "compile_error":
        return kind, fenced(BROKEN)
    return kind, PROSE


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, headers=()):
        data = body.encode() if isinstance(body, str) else body
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (the stall)
            pass

    def note(self, model, problem, answer):
        with lock:
            log.write(json.dumps({"model": model, "problem": problem, "answer": answer,
                                  "prompt_sha256": self.prompt_sha}) + "\n")
            log.flush()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self.send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
        try:
            req = json.loads(body)
            prompt = req["messages"][0]["content"]
            model = req["model"]
        except Exception as e:  # noqa: BLE001 - any bad request is a 400
            return self.send(400, json.dumps({"error": {"message": f"bad request: {e}"}}))
        m = re.search(r"^# Task: (\d+_\w+)", prompt, re.M)
        problem = m.group(1) if m else "?"
        self.prompt_sha = hashlib.sha256(prompt.encode()).hexdigest()
        if args.prompts:
            with open(os.path.join(args.prompts, problem + ".txt"), "w") as f:
                f.write(prompt)
        if self.headers.get("Authorization") != f"Bearer {args.key}":
            self.note(model, problem, "401")
            return self.send(401, json.dumps({"error": {"message": "Incorrect API key provided", "type": "auth"}}))
        fault = None
        if model == "test-model":
            with lock:
                fault = faults.pop(0) if faults else None
        if fault == "429":
            self.note(model, problem, "429")
            return self.send(429, json.dumps({"error": {"message": "rate limited"}}), [("Retry-After", "1")])
        if fault == "500":
            self.note(model, problem, "500")
            return self.send(500, json.dumps({"error": {"message": "internal error"}}))
        if fault == "stall":
            self.note(model, problem, "stall")
            time.sleep(args.stall_s)  # past the client's timeout; it has gone
            return self.send(503, json.dumps({"error": {"message": "stalled"}}))
        if model == "malformed":
            self.note(model, problem, "malformed")
            return self.send(200, "{this is not json")
        finish = "stop"
        if model == "truncated":
            kind, content, finish = "truncated", "Here is the kernel.\n\n```cpp\n#include <pkb/solution.h>\n", "length"
        else:
            if model == "slow":
                self.note(model, problem, "slow")
                time.sleep(args.slow_s)
            kind, content = answer_for(model, problem)
        if model != "slow":
            self.note(model, problem, kind)
        reply = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4,
                      "total_tokens": len(prompt) // 4 + len(content) // 4},
        }
        self.send(200, json.dumps(reply))


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
tmp = args.port_file + ".tmp"
with open(tmp, "w") as f:
    f.write(str(server.server_address[1]))
os.replace(tmp, args.port_file)
threading.Timer(args.lifetime, lambda: os._exit(0)).start()
try:
    server.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
