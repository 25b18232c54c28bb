#!/usr/bin/env python3
"""Short table of pkb results files.

usage: summarize_results.py RESULTS.jsonl...

Files whose records carry no measured times (ranks sharing a GPU, --no-perf)
get one line each: their outcome counts and the records that are not correct.
Files with measured times get one row per record.
"""
import collections
import json
import sys


def fmt(v, f):
    return f.format(v) if isinstance(v, (int, float)) else ""


def label(r):
    return f"{r.get('problem_id', 0):02d}_{r.get('slug', '?')}"


def main(paths):
    rows = []
    print("| file | records | outcomes | not correct |")
    print("|---|---:|---|---|")
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        try:
            records = [json.loads(l) for l in open(path) if l.strip()]
        except OSError as e:
            print(f"| {name} | | missing: {e.strerror} | |")
            continue
        counts = collections.Counter(r["outcome"] for r in records)
        bad = [f"{label(r)} w{r.get('world_size')}/r{r.get('rank', '')}: {r['outcome']}"
               for r in records if r["outcome"] not in ("correct", "match")]
        print(f"| {name} | {len(records)} | {', '.join(f'{v} {k}' for k, v in sorted(counts.items()))} | "
              f"{'; '.join(bad)[:600]} |")
        for r in records:
            if r.get("times") and r.get("device") == "cuda" and not r.get("shared_gpu"):
                rows.append((name, r))
    if not rows:
        return
    print()
    print("| file | problem | W | shape | outcome | reference us | candidate us | speedup | speedup (means) | host_sync | roof ref | roof cand |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|")
    for name, r in rows:
        t = r.get("times", {})
        roof = r.get("roofline", {})
        shape = "x".join(str(x) for x in r.get("base_shape", []))
        host_sync = any(pr.get(side, {}).get("host_sync") for pr in t.get("per_rank", [])
                        for side in ("reference", "candidate"))
        print(f"| {name} | {label(r)} | {r.get('world_size')} | {shape} | {r['outcome']} | "
              f"{fmt(t.get('reference_us'), '{:.1f}')} | {fmt(t.get('candidate_us'), '{:.1f}')} | "
              f"{fmt(r.get('speedup'), '{:.2f}x')} | {fmt(r.get('speedup_mean'), '{:.2f}x')} | "
              f"{'yes' if host_sync else ''} | {fmt(roof.get('reference_fraction'), '{:.3f}')} | "
              f"{fmt(roof.get('candidate_fraction'), '{:.3f}')} |")


if __name__ == "__main__":
    main(sys.argv[1:])
