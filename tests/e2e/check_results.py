#!/usr/bin/env python3
"""Checks a pkb results file (JSONL) against expected outcomes.

usage: check_results.py RESULTS.jsonl --expect SAMPLE=OUTCOME ... [--count N]
       [--all OUTCOME] [--times] [--no-survivors]

--expect 3=runtime_error   the record of sample 3 has that outcome
--all correct              every record has that outcome
--count N                  exactly N records
--times                    every correct record has positive reference and candidate times, and on
                           every rank as many timed segments of either side
--no-survivors             no worker process of any record is still alive
--shared-gpu               every record says its ranks shared a GPU (shared_gpu: true)
--reason 3=TEXT            the record of sample 3's reason contains TEXT
--pids-dead DIR            every process named by a file DIR/<anything>.<pid> is gone
--no-sample 99             no record of sample 99 (a forged one)
--max-rounds N             every correct record took at most N timing rounds on every rank
--fingerprints FAMILY      every record's reference digests equal those of
                           this machine's CPU class's table of FAMILY
                           (NOTE [reference fingerprints], fingerprints.py)
"""
import argparse
import json
import os
import sys

import fingerprints


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--all")
    ap.add_argument("--count", type=int)
    ap.add_argument("--times", action="store_true")
    ap.add_argument("--no-survivors", action="store_true")
    ap.add_argument("--shared-gpu", action="store_true")
    ap.add_argument("--reason", action="append", default=[])
    ap.add_argument("--pids-dead")
    ap.add_argument("--no-sample", type=int, action="append", default=[])
    ap.add_argument("--max-rounds", type=int)
    ap.add_argument("--fingerprints")
    ap.add_argument("--contestant-start")
    a = ap.parse_args()

    records = [json.loads(line) for line in open(a.results) if line.strip()]
    failures = []
    if a.count is not None and len(records) != a.count:
        failures.append(f"expected {a.count} records, found {len(records)}")
    by_sample = {}
    for r in records:
        by_sample.setdefault(r["sample"], []).append(r)
        for key in ("schema_version", "outcome", "reason", "problem_id", "world_size", "git_sha", "toolchain"):
            if key not in r:
                failures.append(f"record {r.get('problem_id')}/{r.get('sample')} lacks '{key}'")
    for spec in a.expect:
        sample, outcome = spec.split("=")
        got = [r["outcome"] for r in by_sample.get(int(sample), [])]
        # OUTCOME may list alternatives: correct|timeout.
        if len(got) != 1 or got[0] not in outcome.split("|"):
            failures.append(f"sample {sample}: expected [{outcome}], got {got}")
        for r in by_sample.get(int(sample), []):
            if r["outcome"] != "correct" and not r.get("reason"):
                failures.append(f"sample {sample}: {outcome} without a reason")
    if a.all:
        for r in records:
            if r["outcome"] != a.all:
                failures.append(f"problem {r['problem_id']} sample {r['sample']}: {r['outcome']}: {r.get('reason')}")
    if a.max_rounds is not None:
        for r in records:
            if r["outcome"] != "correct":
                continue
            rounds = [pr.get("rounds") for pr in r.get("times", {}).get("per_rank", [])]
            if not rounds or any(n is None or n > a.max_rounds for n in rounds):
                failures.append(f"problem {r['problem_id']}: rounds {rounds}, expected at most {a.max_rounds}")
    if a.times:
        for r in records:
            if r["outcome"] != "correct":
                continue
            t = r.get("times", {})
            if not (t.get("reference_us", 0) > 0 and t.get("candidate_us", 0) > 0):
                failures.append(f"problem {r['problem_id']}: correct but no times: {t}")
            # The sides alternate and stop together (NOTE [fresh inputs],
            # step 3; the published protocol's counts are fixed): on every
            # rank both took the same number of timed segments.
            for pr in t.get("per_rank", []):
                segs = [pr.get(side, {}).get("segments") for side in ("reference", "candidate")]
                if segs[0] != segs[1]:
                    failures.append(f"problem {r['problem_id']} rank {pr.get('rank')}: timed segments "
                                    f"reference {segs[0]} / candidate {segs[1]}")
    if a.contestant_start:
        # How each rank's contestant started (NOTE [contestant start]): an
        # exec where a fork was expected costs every evaluation a second
        # libtorch initialisation per rank.
        for r in records:
            for c in r.get("contestants") or []:
                got = c.get("contestant", {}).get("start")
                if got != a.contestant_start:
                    failures.append(f"problem {r['problem_id']} sample {r['sample']} rank {c.get('rank')}: "
                                    f"contestant started by {got}, expected {a.contestant_start}")
    if a.shared_gpu:
        for r in records:
            if r.get("shared_gpu") is not True:
                failures.append(f"problem {r['problem_id']} sample {r['sample']}: shared_gpu is {r.get('shared_gpu')}")
    if a.no_survivors:
        for r in records:
            for p in r.get("process", {}).get("ranks", []):
                try:
                    os.kill(p["pid"], 0)
                    # A zombie has exited; anything else is a survivor.
                    with open(f"/proc/{p['pid']}/stat") as f:
                        state = f.read().split(")")[-1].split()[0]
                    if state != "Z":
                        failures.append(f"worker pid {p['pid']} (problem {r['problem_id']}) still alive")
                except (ProcessLookupError, FileNotFoundError):
                    pass
    for spec in a.reason:
        sample, text = spec.split("=", 1)
        for r in by_sample.get(int(sample), []):
            if text not in r.get("reason", ""):
                failures.append(f"sample {sample}: reason lacks '{text}': {r.get('reason', '')[:300]}")
    for s in a.no_sample:
        if s in by_sample:
            failures.append(f"sample {s} has a record (forged?)")
    if a.pids_dead:
        for name in os.listdir(a.pids_dead):
            pid = int(name.rsplit(".", 1)[-1])
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().split(")")[-1].split()[0]
                if state != "Z":
                    failures.append(f"process {pid} ({name}) survived its evaluation")
            except FileNotFoundError:
                pass
    if a.fingerprints:
        # this machine's CPU class's table (NOTE [CPU classes])
        fp_failures, equal, table = fingerprints.check_family(a.fingerprints, records)
        failures += fp_failures
        print(f"{equal} reference digests and costs equal to {os.path.basename(table)}")
    for f in failures:
        print("FAIL:", f)
    summary = ", ".join(f"{s}:{[r['outcome'] for r in rs]}" for s, rs in sorted(by_sample.items()))
    print(f"{len(records)} records ({summary}); {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
