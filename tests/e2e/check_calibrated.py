#!/usr/bin/env python3
"""Checks a file written by `pkb calibrate` (NOTE [calibrated roofline]).

usage: check_calibrated.py FILE.json [RUN.jsonl]

Every GPU measures HBM, the bf16 GEMM and the launch latency; with two GPUs
or more, NVLink (three mechanisms) and the cross-GPU barrier are measured
too, otherwise they say why not. Rates must be plausible for a GPU of the
H100/H200 class or any later one (loose bounds: a unit error fails them).
With RUN.jsonl (a `pkb run --calibrated FILE` results file), every timed
record must carry roofline.calibrated with both fractions.
"""
import json
import sys


def main():
    t = json.load(open(sys.argv[1]))
    failures = []

    def need(cond, what):
        if not cond:
            failures.append(what)

    rates, lat = t.get("rates", {}), t.get("latencies", {})
    n = t.get("provenance", {}).get("gpus_calibrated", 0)
    need(t.get("calibrated") is True, '"calibrated": true')
    need(n >= 1 and len(t.get("raw", [])) == n, "one raw entry per calibrated GPU")
    for key, lo, hi in [("hbm_bw", 3e11, 5e13), ("peak_bf16_flops", 5e13, 1e16)]:
        e = rates.get(key, {})
        need(e.get("source") == "measured", f"{key} measured (got {e.get('source')}: {e.get('reason')})")
        need(lo < e.get("value", 0) < hi, f"{key} = {e.get('value')} within ({lo:g}, {hi:g})")
        need(t.get(key) == e.get("value"), f"top-level {key} is the rate's value")
    kl = lat.get("kernel_launch", {})
    for k in ["gpu_back_to_back_us", "event_pair_us", "host_enqueue_us", "host_roundtrip_us"]:
        need(isinstance(kl.get(k), (int, float)) and 0 < kl[k] < 1000, f"kernel_launch {k} = {kl.get(k)} us")
    nv = rates.get("nvlink_bw_per_dir", {})
    mechs = ["nvlink_sm_load_bw_per_dir", "nvlink_sm_store_bw_per_dir", "nvlink_copy_engine_bw_per_dir"]
    if n >= 2:
        need(nv.get("source") == "measured", f"NVLink measured (got {nv.get('source')}: {nv.get('reason')})")
        for m in mechs:
            e = rates.get(m, {})
            need(e.get("source") == "measured" and 1e10 < e.get("value", 0) < 5e12, f"{m}: {e}")
        for k in ["device", "stream"]:
            b = lat.get("barrier", {}).get(k, {})
            need(b.get("source") == "measured" and 0 < (b.get("value_us") or 0) < 1000, f"barrier {k}: {b}")
    else:
        for m in ["nvlink_bw_per_dir"] + mechs:
            e = rates.get(m, {})
            need(e.get("source") in ("datasheet", "absent") and "one GPU" in e.get("reason", ""), f"{m}: {e}")
        need(lat.get("barrier", {}).get("device", {}).get("source") == "absent", "barrier absent with one GPU")
    for k in ["date", "git_sha", "host", "gpus", "toolchain"]:
        need(k in t.get("provenance", {}), f"provenance.{k}")

    if len(sys.argv) > 2:
        timed = 0
        for line in open(sys.argv[2]):
            if not line.strip():
                continue
            r = json.loads(line)
            if "times" not in r:
                continue
            timed += 1
            c = r.get("roofline", {}).get("calibrated", {})
            need(c.get("topology") == t.get("name") and "reference_fraction" in c and "candidate_fraction" in c,
                 f"{r.get('slug')}: roofline.calibrated {c}")
        need(timed > 0, "some timed record in " + sys.argv[2])

    for f in failures:
        print("FAIL:", f)
    print(f"{sys.argv[1]}: {n} GPU(s), {'ok' if not failures else str(len(failures)) + ' failure(s)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
