#!/usr/bin/env python3
"""Reads a pkb verdict (JSON, stdin), writes it with volatile fields replaced.

Kept: every field's presence and type, outcomes, reasons, the mismatching
elements (index, expected, got, max errors: seeded, so deterministic), the
setup. Replaced: times, speedups and roofline fractions (measured), paths
(candidate reduced to its file name), mechanism evidence, and the compiler's
text (its version's wording; the test greps its file:line instead).
"""
import json
import os
import sys

v = json.load(sys.stdin)
v["candidate"] = os.path.basename(v["candidate"])
for key in ("logs", "build_log"):
    if isinstance(v.get(key), str):
        v[key] = "<path>"
if isinstance(v.get("diagnostics"), str):
    v["diagnostics"] = "<diagnostics>"
if isinstance(v.get("times"), dict):
    v["times"] = {k: "<us>" for k in v["times"]}
if isinstance(v.get("speedup"), (int, float)):
    v["speedup"] = "<x>"
if isinstance(v.get("roofline"), dict):
    v["roofline"] = {k: (val if k == "bound" else "<num>") for k, val in v["roofline"].items()}
if isinstance(v.get("mechanisms"), list):
    v["mechanisms"] = [{"name": m["name"], "evidence": "<evidence>"} for m in v["mechanisms"]]
json.dump(v, sys.stdout, indent=2)
sys.stdout.write("\n")
