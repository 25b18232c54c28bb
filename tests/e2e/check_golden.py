#!/usr/bin/env python3
"""Checks a `pkb golden --out` JSONL against expectations per rank.

usage: check_golden.py RESULTS.jsonl --expect [wW_tT/]RANK=OUTCOME[:MISMATCHES] ...

RANK=match                 the rank's fixture matches
RANK=output_mismatch:1     the rank mismatches on exactly one element in all
w3_t1/2=match              rank 2 of the set recorded at world size 3, trial 1
                           (a bare RANK means w2_t0)
0=match|output_mismatch:1  either (alternatives separated by |)
1=output_mismatch:3@1      3 mismatched elements, all of them in output 1
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--expect", action="append", default=[])
    a = ap.parse_args()
    rows = [json.loads(line) for line in open(a.results) if line.strip()]
    by_key = {f"w{r['world_size']}_t{r.get('trial', 0)}/{r['rank']}": r for r in rows}
    failures = []
    if len(by_key) != len(rows):
        failures.append("some (world, trial, rank) is recorded more than once")
    for e in a.expect:
        rank, want = e.split("=", 1)
        if "/" not in rank:
            rank = "w2_t0/" + rank
        r = by_key.get(rank)
        if r is None:
            failures.append(f"rank {rank}: no record")
            continue
        outputs = r.get("compare", {}).get("outputs", [])
        got = sum(o.get("mismatches", 0) for o in outputs)
        held = False
        for alt in want.split("|"):
            outcome, _, count = alt.partition(":")
            count, _, only = count.partition("@")
            elsewhere = sum(o.get("mismatches", 0) for o in outputs if only and o.get("index") != int(only))
            held |= r["outcome"] == outcome and (not count or got == int(count)) and elsewhere == 0
        if not held:
            failures.append(f"rank {rank}: outcome {r['outcome']} with {got} mismatched elements, expected {want}"
                            f" ({r.get('reason', '')})")
    if len(by_key) != len(a.expect):
        failures.append(f"{len(by_key)} ranks recorded, {len(a.expect)} expected")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(a.expect) - len(failures)} of {len(a.expect)} expectations hold" if not failures else "")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
