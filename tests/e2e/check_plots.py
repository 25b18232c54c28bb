#!/usr/bin/env python3
"""Checks the plots scripts/plot_leaderboard.py drew from a scores file.

usage: check_plots.py SCORES.json PLOT_DIR

Exit 0 when fast_p and outcomes exist as non-trivial PNG and SVG files, the
fast_p SVG has one curve per model whose markers sit where the scores put
them, and the outcomes SVG has one bar per model and outcome whose height is
proportional to its count. Exit 1, saying why, otherwise. Standard library only.
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


def check_fast_p(svg_path, models):
    root = ET.parse(svg_path).getroot()
    ids = by_id(root)
    curves = sorted(i for i in ids if i.startswith("fast_p_curve_"))
    if len(curves) != len(models):
        fail(f"{svg_path}: {len(curves)} curves, expected one per model ({len(models)})")
    pairs = []
    for i, (name, m) in enumerate(models.items()):
        g = ids.get(f"fast_p_curve_{i}")
        if g is None:
            continue
        marks = [float(u.get("y")) for u in g.iter(f"{SVG}use") if u.get(XLINK_HREF)]
        vals = [v for _, v in m["fast_p_curve"]]
        if len(marks) != len(vals):
            fail(f"{svg_path}: {name}'s curve has {len(marks)} markers, expected {len(vals)}")
            continue
        pairs += list(zip(vals, marks))
    linear_fit_ok(pairs, f"{svg_path} markers")
    text = open(svg_path).read()
    for name in models:  # matplotlib writes each text as a comment before its glyphs
        if f"<!-- {name} -->" not in text:
            fail(f"{svg_path}: legend lacks '{name}'")


def check_outcomes(svg_path, models):
    ids = by_id(ET.parse(svg_path).getroot())
    pairs = []
    for i, (name, m) in enumerate(models.items()):
        for outcome in STACKED:
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
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    scores_path, plot_dir = sys.argv[1:]
    with open(scores_path) as f:
        models = json.load(f)["models"]
    for stem in ("fast_p", "outcomes"):
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
    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print(f"ok: {len(models)} models: fast_p curves and outcome bars match {scores_path}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
