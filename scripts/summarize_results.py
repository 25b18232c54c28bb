#!/usr/bin/env python3
"""Short table of pkb results files.

usage: summarize_results.py RESULTS.jsonl...

Files whose records carry no measured times (ranks sharing a GPU, --no-perf)
get one line each: their outcome counts and the records that are not correct.
Files with measured times get one row per record: its times, where its wall
time went (process.ranks[0].phase_s: setup, trials, timing, ...), the samples
per side, and, for the reference timed against itself, a closing line of the
spread (within 3 % and 5 % of 1.00x) and of the evaluation time.
"""
import collections
import json
import sys


def fmt(v, f):
    return f.format(v) if isinstance(v, (int, float)) else ""


def phases(r, spent):
    """`wall | setup / trials / timing` of rank 0 (NOTE [phase deadlines]), summed into `spent`."""
    p = r.get("process", {})
    ranks = p.get("ranks") or [{}]
    ph = ranks[0].get("phase_s", {})
    spent.update(ph)
    parts = " / ".join(fmt(ph.get(k, 0.0), "{:.1f}") for k in ("setup", "trials", "timing"))
    return f"{fmt(p.get('wall_s'), '{:.1f}')} | {parts if ph else ''}"


def samples(t):
    pr = (t.get("per_rank") or [{}])[0]
    return f"{pr.get('reference', {}).get('n', '')} / {pr.get('candidate', {}).get('n', '')}"


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
    print("| file | problem | W | shape | outcome | reference us | candidate us | speedup | speedup (means) | host_sync | "
          "roof ref | roof cand | wall s | setup / trials / timing s | samples ref / cand |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|")
    spent = collections.Counter()
    wall = 0.0
    self_speedups = []
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
              f"{fmt(roof.get('candidate_fraction'), '{:.3f}')} | {phases(r, spent)} | {samples(t)} |")
        wall += r.get("process", {}).get("wall_s", 0.0)
        if r.get("candidate") == "reference" and isinstance(r.get("speedup"), (int, float)):
            self_speedups.append(r["speedup"])
    print()
    print(f"evaluation time: {wall:.1f} s over {len(rows)} records; rank 0's phases: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in spent.most_common()))
    slowest = sorted(rows, key=lambda nr: -nr[1].get("process", {}).get("wall_s", 0.0))[:12]
    print()
    print("slowest evaluations, rank 0 (trials: summed over trials; loop: the fresh timing loop, NOTE [fresh inputs]):")
    print()
    print("| problem | wall s | trials: draw / candidate / reference / compare / inputs / digest s | loop: total / segments / warm-up / "
          "priming / draws / checks / agreement s | rounds |")
    print("|---|---:|---|---|---:|")
    for name, r in slowest:
        tr = collections.Counter()
        for t in ((r.get("errors") or [{}])[0].get("trials") or []):
            tr.update(t.get("seconds", {}))
        pr = ((r.get("times") or {}).get("per_rank") or [{}])[0]
        lp = pr.get("loop_s", {})
        trials = " / ".join(f"{tr.get(k, 0.0):.1f}" for k in ("draw", "candidate", "reference", "compare", "inputs",
                                                             "digest"))
        loop = " / ".join(f"{lp.get(k, 0.0):.1f}" for k in ("total", "segments", "warm-up", "priming", "draws", "checks",
                                                             "agreement"))
        print(f"| {label(r)} | {r.get('process', {}).get('wall_s', 0.0):.1f} | {trials} | {loop} | {pr.get('rounds', '')} |")
    if self_speedups:
        n = len(self_speedups)
        within = lambda x: sum(abs(v - 1) <= x for v in self_speedups)
        med = sorted(self_speedups)[n // 2]
        print(f"reference against itself: median {med:.3f}x; within 3 %: {within(0.03)}/{n}, within 5 %: {within(0.05)}/{n}")


if __name__ == "__main__":
    main(sys.argv[1:])
