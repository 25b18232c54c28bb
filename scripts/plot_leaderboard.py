#!/usr/bin/env python3
"""Leaderboard plots from `pkb score` output: fast_p curves and outcome bars.

usage: plot_leaderboard.py SCORES.json... [--out-dir DIR]

Writes fast_p.{png,svg} (fast_p@k against p, one line per model; k is the
smallest k scored), outcomes.{png,svg} (one stacked bar per model, the
outcome taxonomy in order, agent_error (pkb agent) on top when any model has
one; harness errors shown apart, hatched) and, when a model has pkb agent
trajectories, steps.{png,svg} (the per-step curve: pass@k within the first s
steps against s, one line per such model, from its scores' agentic
step_curve). In the SVGs, curve i is the group fast_p_curve_<i> (steps:
step_curve_<i>) and model i's bar for an outcome is bar_<outcome>_<i> (models
in scores-file order), so tests can find them.
Needs matplotlib (pip install matplotlib; scripts/setup puts it in the venv).
"""
import argparse
import json
import os
import sys

OUTCOMES = ["correct", "timing_anomaly", "output_mismatch", "timeout", "runtime_error", "shape_mismatch",
            "load_error", "forbidden_api", "compile_error"]
# pkb agent's: the agent command failed, nothing was evaluated (scored as a
# failed sample). Stacked only when a model has one, as the leaderboard's
# outcome table shows it only where it happened.
AGENT_OUTCOMES = ["agent_error"]


def load_models(paths):
    models = {}
    for path in paths:
        with open(path) as f:
            scores = json.load(f)
        if scores.get("kind") != "scores":
            sys.exit(f"{path}: not a pkb scores file")
        for name, m in scores["models"].items():
            if name in models:
                sys.exit(f"model '{name}' appears in more than one scores file")
            models[name] = m
    return models


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scores", nargs="+")
    ap.add_argument("--out-dir", default=".")
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = load_models(a.scores)
    os.makedirs(a.out_dir, exist_ok=True)

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (name, m) in enumerate(models.items()):
        ps = [p for p, _ in m["fast_p_curve"]]
        vals = [v for _, v in m["fast_p_curve"]]
        ax.plot(ps, vals, marker="o", label=name, gid=f"fast_p_curve_{i}")
    k = next(iter(models.values())).get("fast_p_curve_k", 1) if models else 1
    ax.set_xlabel("speedup threshold p")
    ax.set_ylabel(f"fast_p@{k}")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.out_dir, f"fast_p.{ext}"))

    fig, ax = plt.subplots(figsize=(1.2 * len(models) + 3, 4))
    names = list(models)
    bottom = [0] * len(names)
    stacked = OUTCOMES + [o for o in AGENT_OUTCOMES if any(models[n]["outcomes"].get(o, 0) for n in names)]
    for outcome in stacked:
        counts = [models[n]["outcomes"].get(outcome, 0) for n in names]
        bars = ax.bar(names, counts, bottom=bottom, label=outcome)
        for i, bar in enumerate(bars):
            bar.set_gid(f"bar_{outcome}_{i}")
        bottom = [b + c for b, c in zip(bottom, counts)]
    he = [models[n].get("harness_errors", 0) for n in names]
    if any(he):
        bars = ax.bar(names, he, bottom=bottom, label="harness_error (not scored)", hatch="//", fill=False)
        for i, bar in enumerate(bars):
            bar.set_gid(f"bar_harness_error_{i}")
    ax.set_ylabel("samples")
    ax.legend(fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.out_dir, f"outcomes.{ext}"))

    written = ["fast_p", "outcomes"]
    agentic = [(i, name, m["agentic"]) for i, (name, m) in enumerate(models.items()) if m.get("agentic")]
    if agentic:
        fig, ax = plt.subplots(figsize=(6, 4))
        top = 0
        for i, name, ag in agentic:
            steps = [s for s, _ in ag["step_curve"]]
            vals = [v for _, v in ag["step_curve"]]
            top = max([top] + vals)
            ax.plot(steps, vals, marker="o", label=name, gid=f"step_curve_{i}")
        k = agentic[0][2].get("step_curve_k", 1)
        ax.set_xlabel("step budget s (attempts)")
        ax.set_ylabel(f"pass@{k} within the first s steps")
        # Scores are over all 87 problems: a run of a few problems stays far
        # below 1, so the axis follows the data (from 0) rather than [0, 1].
        ax.set_ylim(0, min(1.0, top * 1.15) if top > 0 else 1.0)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        for ext in ("png", "svg"):
            fig.savefig(os.path.join(a.out_dir, f"steps.{ext}"))
        written.append("steps")
    else:
        for ext in ("png", "svg"):  # not a stale figure of an earlier run
            stale = os.path.join(a.out_dir, f"steps.{ext}")
            if os.path.exists(stale):
                os.remove(stale)
    print(f"wrote {', '.join(written)} plots (png, svg) to {a.out_dir}")


if __name__ == "__main__":
    main()
