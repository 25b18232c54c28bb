#!/usr/bin/env python3
"""Checks the plots scripts/plot_leaderboard.py drew from a scores file.

usage: check_plots.py SCORES.json... PLOT_DIR  (the scores files given to the script, in order)

Exit 0 when fast_p and outcomes exist as non-trivial PNG and SVG files, the
fast_p SVG has one curve per model whose markers sit where the scores put
them, and the outcomes SVG has one bar per model and outcome (agent_error
included when a model has one) whose height is proportional to its count;
and, when a model has pkb agent trajectories (an agentic object), steps
exists likewise with one curve per such model whose markers sit at (s,
pass@k within s steps) of its step_curve (when none has, steps must not
exist). Exit 1, saying why, otherwise. Standard library only.
"""
import json
import os
import re
import struct
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
# The outcomes the script stacks (its OUTCOMES), then harness errors apart.
STACKED = ["correct", "timing_anomaly", "output_mismatch", "timeout", "runtime_error", "shape_mismatch",
           "load_error", "forbidden_api", "compile_error"]
AGENT_STACKED = ["agent_error"]  # stacked only when some model has one
TOLERANCE_PX = 0.5

failures = []


def fail(msg):
    failures.append(msg)


def check_png(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return fail(f"{path}: not a PNG file")
    w, h = struct.unpack(">II", head[16:24])
    if w < 300 or h < 200:
        fail(f"{path}: {w}x{h} is too small for a plot")


def by_id(root):
    return {g.get("id"): g for g in root.iter() if g.get("id")}


def path_ys(elem):
    """The y coordinates in the first path's 'd' of an element."""
    p = elem.find(f".//{SVG}path")
    if p is None:
        return []
    nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", p.get("d", ""))]
    return nums[1::2]


def linear_fit_ok(pairs, what):
    """All (value, pixel) pairs lie on one line: the axis maps values linearly."""
    distinct = sorted({v for v, _ in pairs})
    if len(distinct) < 2:
        return fail(f"{what}: fewer than two distinct values, nothing to check")
    (v0, y0), (v1, y1) = [next(p for p in pairs if p[0] == v) for v in (distinct[0], distinct[-1])]
    scale = (y1 - y0) / (v1 - v0)
    for v, y in pairs:
        if abs(y0 + (v - v0) * scale - y) > TOLERANCE_PX:
            fail(f"{what}: value {v} drawn at {y:.2f}, expected {y0 + (v - v0) * scale:.2f}")


def check_curves(svg_path, prefix, curves_by_index, what):
    """One group <prefix><i> per entry of curves_by_index ({i: (name, [(x, y)...])}),
    each with one marker per point; markers linear in both x and y over all curves."""
    root = ET.parse(svg_path).getroot()
    ids = by_id(root)
    drawn = sorted(i for i in ids if i.startswith(prefix))
    if len(drawn) != len(curves_by_index):
        fail(f"{svg_path}: {len(drawn)} curves, expected one per {what} ({len(curves_by_index)})")
    xs, ys = [], []
    for i, (name, points) in curves_by_index.items():
        g = ids.get(f"{prefix}{i}")
        if g is None:
            fail(f"{svg_path}: no curve {prefix}{i} for {name}")
            continue
        marks = [(float(u.get("x")), float(u.get("y"))) for u in g.iter(f"{SVG}use") if u.get(XLINK_HREF)]
        if len(marks) != len(points):
            fail(f"{svg_path}: {name}'s curve has {len(marks)} markers, expected {len(points)}")
            continue
        xs += [(p[0], m[0]) for p, m in zip(points, marks)]
        ys += [(p[1], m[1]) for p, m in zip(points, marks)]
    linear_fit_ok(xs, f"{svg_path} marker x")
    linear_fit_ok(ys, f"{svg_path} marker y")
    text = open(svg_path).read()
    for name, _ in curves_by_index.values():  # matplotlib writes each text as a comment before its glyphs
        if f"<!-- {name} -->" not in text:
            fail(f"{svg_path}: legend lacks '{name}'")


def check_steps(svg_path, models):
    check_curves(svg_path, "step_curve_",
                 {i: (name, [tuple(p) for p in m["agentic"]["step_curve"]])
                  for i, (name, m) in enumerate(models.items()) if m.get("agentic")},
                 "model with pkb agent trajectories")


def check_fast_p(svg_path, models):
    check_curves(svg_path, "fast_p_curve_",
                 {i: (name, [tuple(p) for p in m["fast_p_curve"]]) for i, (name, m) in enumerate(models.items())},
                 "model")


def check_outcomes(svg_path, models):
    ids = by_id(ET.parse(svg_path).getroot())
    pairs = []
    stacked = STACKED + [o for o in AGENT_STACKED if any(m["outcomes"].get(o, 0) for m in models.values())]
    for i, (name, m) in enumerate(models.items()):
        for outcome in stacked:
            g = ids.get(f"bar_{outcome}_{i}")
            if g is None:
                fail(f"{svg_path}: no {outcome} bar for {name}")
                continue
            ys = path_ys(g)
            pairs.append((m["outcomes"].get(outcome, 0), max(ys) - min(ys) if ys else 0.0))
        if m.get("harness_errors", 0) and f"bar_harness_error_{i}" not in ids:
            fail(f"{svg_path}: {name} has harness errors but no harness_error bar")
    # Bar heights are proportional to counts: zero for zero, one px-per-sample scale.
    linear_fit_ok(pairs + [(0, 0.0)], f"{svg_path} bar heights")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    *score_paths, plot_dir = sys.argv[1:]
    scores_path = " ".join(score_paths)
    models = {}
    for path in score_paths:  # in the script's order: files, then each file's models
        with open(path) as f:
            models.update(json.load(f)["models"])
    agentic = any(m.get("agentic") for m in models.values())
    stems = ("fast_p", "outcomes") + (("steps",) if agentic else ())
    if not agentic:
        for ext in ("png", "svg"):
            if os.path.exists(os.path.join(plot_dir, f"steps.{ext}")):
                fail(f"steps.{ext} drawn, but no model has pkb agent trajectories")
    for stem in stems:
        for ext, min_bytes in (("png", 5000), ("svg", 5000)):
            path = os.path.join(plot_dir, f"{stem}.{ext}")
            if not os.path.isfile(path):
                fail(f"{path} missing")
            elif os.path.getsize(path) < min_bytes:
                fail(f"{path}: only {os.path.getsize(path)} bytes")
            elif ext == "png":
                check_png(path)
    if not failures:
        check_fast_p(os.path.join(plot_dir, "fast_p.svg"), models)
        check_outcomes(os.path.join(plot_dir, "outcomes.svg"), models)
        if agentic:
            check_steps(os.path.join(plot_dir, "steps.svg"), models)
    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print(f"ok: {len(models)} models: fast_p curves{', step curves' if agentic else ''} and outcome bars "
              f"match {scores_path}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
