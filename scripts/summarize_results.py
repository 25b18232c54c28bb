#!/usr/bin/env python3
"""Short table of pkb results files: one row per record.

usage: summarize_results.py RESULTS.jsonl...
"""
import json
import sys


def fmt(v, f):
    return f.format(v) if isinstance(v, (int, float)) else ""


def main(paths):
    print("| file | problem | shape | outcome | reference us | candidate us | speedup | speedup (means) | roof ref | roof cand |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        try:
            lines = [l for l in open(path) if l.strip()]
        except OSError as e:
            print(f"| {path} | (missing: {e.strerror}) | | | | | | | | |")
            continue
        for line in lines:
            r = json.loads(line)
            t = r.get("times", {})
            roof = r.get("roofline", {})
            shape = "x".join(str(x) for x in r.get("base_shape", []))
            print(f"| {path.rsplit('/', 1)[-1]} | {r['problem_id']:02d}_{r['slug']} | {shape} | {r['outcome']} | "
                  f"{fmt(t.get('reference_us'), '{:.1f}')} | {fmt(t.get('candidate_us'), '{:.1f}')} | "
                  f"{fmt(r.get('speedup'), '{:.2f}x')} | {fmt(r.get('speedup_mean'), '{:.2f}x')} | {fmt(roof.get('reference_fraction'), '{:.2f}')} | "
                  f"{fmt(roof.get('candidate_fraction'), '{:.2f}')} |")


if __name__ == "__main__":
    main(sys.argv[1:])
