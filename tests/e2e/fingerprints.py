#!/usr/bin/env python3
"""The reference fingerprint tables (NOTE [reference fingerprints],
harness/src/worker/output_digest.h).

A table (tests/fixtures/fingerprints/cpu_wW.json) maps problem id -> trial key
("INDEX:KIND", as the worker numbers trials: published trials first, then the
integrity ones) -> one sha256 per rank of that trial's reference outputs, and
problem id -> "cost" -> the problem's cost model on trial 0's inputs (the
record's `cost`, compared exactly). A refactor of a reference that keeps every
fingerprint computes the same bytes and the same roofline.

    fingerprints.py write TABLE RESULTS.jsonl...   enter the runs' digests into
        TABLE (created when absent; the problems of these runs replace theirs,
        the others stay); every record must be correct
    fingerprints.py costs TABLE RESULTS.jsonl...   only the runs' cost models
        into TABLE's problems (for a baseline from a harness without digests)
    fingerprints.py check TABLE RESULTS.jsonl      what check_results.py
        --fingerprints does (exit 1 on a difference)
    fingerprints.py --self-test                    the check finds planted
        differences (a digest, a rank, a cost, a missing problem, no shared trial)

Assumption, stated in the table: the digests are of CPU runs with one torch
intra-op thread per rank (the driver's OMP_NUM_THREADS = cores / W on a
2-core machine) and this torch build's CPU kernels; a machine that splits a
reduction over more threads, or another torch, may round differently and is
not what the table describes (`conditions`: the run's are compared first).

The CPU's kernels differ too: torch and oneDNN pick bf16 GEMM and
convolution kernels by instruction set, and an AVX2-only machine rounds
problems 11-16, 31, 39, 42, 68, ... differently from the machine the first
tables came from. So a table belongs to a CPU class (cpu_class(): the
machine's best of amx_bf16, avx512_bf16, avx512, avx2), named in its
conditions and its file name, cpu_wW.CLASS.json; the check uses this
machine's class's table, or where there is none cpu_wW.json, the tables
recorded before the class was a condition (on another class than avx2:
an AVX2 machine failed 34 of their digests, 2026-12-02).
"""
import json
import os
import sys
import tempfile


def trial_digests(record):
    """{trial key: {rank: digest}} of one record (its ranks' trial entries)."""
    out = {}
    for rank_entry in record.get("errors", []):
        rank = rank_entry.get("rank", -1)
        for t in rank_entry.get("trials", []):
            if "reference_digest" in t:
                out.setdefault(f"{t['trial']}:{t['kind']}", {})[rank] = t["reference_digest"]
    return out


def conditions(record):
    """What the digests depend on besides the code (see the module comment),
    but for the CPU class, which only this machine can tell (cpu_class)."""
    return {"device": record.get("device"), "base_shape": record.get("base_shape"),
            "dtype": record.get("dtype"), "torch": record.get("toolchain", {}).get("torch")}


def cpu_class(cpuinfo="/proc/cpuinfo"):
    """This machine's class of CPU kernels (see the module comment)."""
    try:
        with open(cpuinfo) as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        flags = []
    for flag, name in (("amx_bf16", "amx_bf16"), ("avx512_bf16", "avx512_bf16"), ("avx512f", "avx512"),
                       ("avx2", "avx2")):
        if flag in flags:
            return name
    return "baseline"


def table_for(path, klass=None):
    """The table the check reads for `path` (cpu_wW.json) on this machine:
    its class's (cpu_wW.CLASS.json) where there is one, else `path`."""
    klass = klass or cpu_class()
    root, ext = os.path.splitext(path)
    classed = f"{root}.{klass}{ext}"
    return classed if os.path.exists(classed) else path


def load(path):
    with open(path) as f:
        return json.load(f)


def check(table, records):
    """The failures (strings) of `records` against `table`, and how many
    (problem, trial, rank) digests were compared equal."""
    failures, equal = [], 0
    problems = table.get("problems", {})
    excluded = table.get("excluded", {})
    for r in records:
        pid = str(r.get("problem_id"))
        where = f"problem {pid} (W = {r.get('world_size')})"
        if r.get("world_size") != table.get("world_size"):
            failures.append(f"{where}: the table is for W = {table.get('world_size')}")
            continue
        if pid in excluded:
            continue
        if pid not in problems:
            failures.append(f"{where}: no fingerprint in the table (scripts/fingerprints adds it)")
            continue
        cond = conditions(r)
        want_cond = {k: v for k, v in table.get("conditions", {}).items() if k != "cpu_class"}
        if cond != want_cond:
            failures.append(f"{where}: run under {cond}, the table under {table.get('conditions')}")
            continue
        got = trial_digests(r)
        compared = 0  # digests; the cost alone proves nothing about the outputs
        if "cost" in problems[pid]:
            if r.get("cost") != problems[pid]["cost"]:
                failures.append(f"{where}: cost {r.get('cost')}, the table has {problems[pid]['cost']}")
            else:
                equal += 1
        for key, want in problems[pid].items():
            if key == "cost":
                continue
            if key not in got:
                continue  # a run with other trials: it compares those it shares
            for rank, digest in enumerate(want):
                compared += 1
                if got[key].get(rank) != digest:
                    failures.append(f"{where} trial {key} rank {rank}: reference digest "
                                    f"{got[key].get(rank)}, the table has {digest}")
                else:
                    equal += 1
        if compared == 0:
            failures.append(f"{where}: none of its trials {sorted(got)} is in the table {sorted(problems[pid])}")
    return failures, equal


def write(path, result_files):
    table = load(path) if os.path.exists(path) else {"problems": {}, "excluded": {}}
    for rf in result_files:
        for line in open(rf):
            if not line.strip():
                continue
            r = json.loads(line)
            pid = str(r["problem_id"])
            if r["outcome"] != "correct":
                sys.exit(f"{rf}: problem {pid} is {r['outcome']}: {r.get('reason')}")
            w = r["world_size"]
            if table.setdefault("world_size", w) != w:
                sys.exit(f"{rf}: problem {pid} ran at W = {w}, the table is for {table['world_size']}")
            cond = dict(conditions(r), cpu_class=cpu_class())
            if table.setdefault("conditions", cond) != cond:
                sys.exit(f"{rf}: problem {pid} ran under {cond}, the table under {table['conditions']}")
            entry = {}
            for key, by_rank in sorted(trial_digests(r).items(), key=lambda kv: int(kv[0].split(":")[0])):
                if sorted(by_rank) != list(range(w)):
                    sys.exit(f"{rf}: problem {pid} trial {key}: digests of ranks {sorted(by_rank)} of {w}")
                entry[key] = [by_rank[i] for i in range(w)]
            if not entry:
                sys.exit(f"{rf}: problem {pid} has no reference digest (a worker without output_digest?)")
            if "cost" in r:
                entry["cost"] = r["cost"]
            table["problems"][pid] = entry
    save(path, table)


def costs(path, result_files):
    table = load(path)
    for rf in result_files:
        for line in open(rf):
            if line.strip():
                r = json.loads(line)
                pid = str(r["problem_id"])
                want = {k: v for k, v in table["conditions"].items() if k != "cpu_class"}
                if r.get("world_size") != table["world_size"] or conditions(r) != want:
                    sys.exit(f"{rf}: problem {pid} ran at W = {r.get('world_size')} under {conditions(r)}")
                if pid in table["problems"] and "cost" in r:
                    table["problems"][pid]["cost"] = r["cost"]
    save(path, table)


def save(path, table):
    table["problems"] = dict(sorted(table["problems"].items(), key=lambda kv: int(kv[0])))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".fingerprints.")
    with os.fdopen(fd, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)  # atomically: a table is never half written
    print(f"{path}: {len(table['problems'])} problems")


def self_test():
    def record(digests, cost=1.0, pid=1, w=2):
        return {"problem_id": pid, "world_size": w, "device": "cpu", "base_shape": [128, 128], "dtype": "bfloat16",
                "toolchain": {"torch": "2.11.0"}, "cost": {"flops_per_rank": cost},
                "errors": [{"rank": r, "trials": [{"trial": t, "kind": k, "reference_digest": d[r % len(d)]}
                                                  for (t, k), d in digests.items()]} for r in range(w)]}
    good = {(0, "published"): ["a", "b"], (2, "integrity"): ["c", "d"]}
    table = {"world_size": 2, "conditions": conditions(record(good)), "excluded": {"9": "why"},
             "problems": {"1": {"0:published": ["a", "b"], "2:integrity": ["c", "d"], "cost": {"flops_per_rank": 1.0}}}}
    cases = {
        "equal": (record(good), 0),
        "other trials only compared where shared": (record({(0, "published"): ["a", "b"], (1, "integrity"): ["x", "y"]}), 0),
        "a digest": (record({(0, "published"): ["a", "b"], (2, "integrity"): ["c", "x"]}), 1),
        "ranks swapped": (record({(0, "published"): ["b", "a"], (2, "integrity"): ["c", "d"]}), 2),
        "a cost": (record(good, cost=2.0), 1),
        "a problem not in the table": (record(good, pid=3), 1),
        "an excluded problem": (record(good, pid=9), 0),
        "no shared trial": (record({(1, "published"): ["a", "b"]}), 1),
        "another world size": (record(good, w=4), 1),
    }
    bad = []
    import tempfile as tf
    with tf.TemporaryDirectory() as d:
        base = os.path.join(d, "cpu_w2.json")
        open(base, "w").write("{}")
        if table_for(base, "avx2") != base:
            bad.append("a class without a table of its own does not fall back to the table without a class")
        open(os.path.join(d, "cpu_w2.avx2.json"), "w").write("{}")
        if table_for(base, "avx2") != os.path.join(d, "cpu_w2.avx2.json") or table_for(base, "avx512") != base:
            bad.append("a class's own table is not the one read")
        info = os.path.join(d, "cpuinfo")
        open(info, "w").write("processor : 0\nflags : fpu sse2 avx2 fma\n")
        if cpu_class(info) != "avx2":
            bad.append(f"cpu_class of an AVX2 machine is {cpu_class(info)}")
        open(info, "w").write("flags : avx2 avx512f avx512_bf16\n")
        if cpu_class(info) != "avx512_bf16":
            bad.append(f"cpu_class of an AVX512-BF16 machine is {cpu_class(info)}")
    for name, (rec, want) in cases.items():
        got = len(check(table, [rec])[0])
        if got != want:
            bad.append(f"{name}: {got} failure(s), expected {want}")
    for b in bad:
        print("self-test:", b)
    if not bad:
        print(f"self-test: the {len(cases)} planted cases give the expected failures")
    return 1 if bad else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) >= 3 and argv[0] in ("write", "costs"):
        (write if argv[0] == "write" else costs)(argv[1], argv[2:])
        return 0
    if len(argv) == 3 and argv[0] == "check":
        records = [json.loads(l) for l in open(argv[2]) if l.strip()]
        failures, equal = check(load(table_for(argv[1])), records)
        for f in failures:
            print("FAIL:", f)
        print(f"{equal} reference digests and costs equal to {argv[1]}; {len(failures)} failure(s)")
        return 1 if failures else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
