#!/usr/bin/env python3
"""The reference fingerprint tables (NOTE [reference fingerprints],
harness/src/worker/output_digest.h).

A table (tests/fixtures/fingerprints/cpu_wW.CLASS.json) maps problem id -> trial key
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
    fingerprints.py check FAMILY RESULTS.jsonl [--class CLASS]
        what check_results.py --fingerprints FAMILY does: against this machine's
        (or CLASS's) table of FAMILY (cpu_wW.json -> cpu_wW.CLASS.json); exit 1
        on a difference or where the class has no table
    fingerprints.py class                          this machine's CPU class
    fingerprints.py env CLASS BUILD_DIR            the environment that
        makes this machine compute as a CLASS machine (NOTE [CPU classes])
    fingerprints.py --self-test                    the check finds planted
        differences (a digest, a rank, a cost, a missing problem, no shared trial)

Assumption, stated in the table: the digests are of CPU runs with one torch
intra-op thread per rank (the driver's OMP_NUM_THREADS = cores / W on a
2-core machine) and this torch build's CPU kernels; a machine that splits a
reduction over more threads, or another torch, may round differently and is
not what the table describes (`conditions`: the run's are compared first).

NOTE [CPU classes]: the CPU's kernels differ too. torch and oneDNN pick
bf16 GEMM and convolution kernels by instruction set, MKL its FFT, reduction
and GEMM kernels by instruction set and by vendor (on a CPU not Intel's it
runs others), and machines of the classes seen (cpu_class(): the vendor and
the best of amx_bf16, avx512_bf16, avx512, avx2) round tens of problems
apart: at W = 2 an AMX Xeon and a Zen 4 EPYC differ in 27 (2026-12-02). So
a table belongs to a class, named in its file name (cpu_wW.CLASS.json) and
its conditions; the check reads this machine's class's table and fails
where there is none (another class's would fail tens of digests, none of
them a change of the code).

A machine records its own class's table, and an Intel one also those of the
classes below it: scripts/fingerprints --class CLASS runs the references
the way such a machine does (class_env: oneDNN capped at the class's
instruction set; for avx2 torch's own kernels at AVX2 width with oneDNN off,
since torch gives an AVX2-only machine's bf16 to its own kernels,
tests/cpu_class/mkldnn_off.cpp; for AMD, MKL's vendor-neutral kernels,
MKL_CBWR=COMPATIBLE). class_env sets PKB_CPU_CLASS too, which cpu_class()
then answers, so that a suite run under it checks the emulated class's
tables. On an AMX Xeon the amd_avx512_bf16 emulation reproduced a Zen 4's
tables in every problem but 62 and 86 (MKL's fp32 GEMM on AMD is none of
its Intel paths), and the amd_avx2 one the digests an AVX2-only EPYC's CI
printed (problem 11) and the problems of 1-43 it failed there (11-16, 31,
39, 42); the emulated tables exclude what no emulation reproduces.
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


ISAS = ("amx_bf16", "avx512_bf16", "avx512", "avx2")  # best first
VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


def cpu_class(cpuinfo="/proc/cpuinfo"):
    """The class of CPU kernels this machine runs (see the module comment),
    or the one it computes as (PKB_CPU_CLASS, set by class_env)."""
    emulated = os.environ.get("PKB_CPU_CLASS")
    if emulated:
        split_class(emulated)
        return emulated
    return machine_class(cpuinfo)


def machine_class(cpuinfo="/proc/cpuinfo"):
    """The class of this machine's CPU, VENDOR_ISA, from /proc/cpuinfo."""
    fields = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                k, _, v = line.partition(":")
                fields.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    flags = fields.get("flags", "").split()
    vendor = VENDORS.get(fields.get("vendor_id"), "other")
    isa = next((i for i, flag in zip(ISAS, ("amx_bf16", "avx512_bf16", "avx512f", "avx2")) if flag in flags), "baseline")
    return f"{vendor}_{isa}"


def split_class(klass):
    """(vendor, isa) of a class name; exits on one that is not."""
    vendor, _, isa = klass.partition("_")
    if vendor not in VENDORS.values() or isa not in ISAS:
        sys.exit(f"{klass}: not a CPU class (VENDOR_ISA: VENDOR intel or amd, ISA one of {', '.join(ISAS)})")
    return vendor, isa


def table_for(path, klass=None):
    """The table the check reads for the family `path` (cpu_wW.json) on this
    machine (or on a `klass` machine): cpu_wW.CLASS.json."""
    root, ext = os.path.splitext(path)
    return f"{root}.{klass or cpu_class()}{ext}"


def class_of(table_path):
    """The class a table file belongs to (its name's CLASS)."""
    klass = os.path.splitext(os.path.splitext(os.path.basename(table_path))[0])[1].lstrip(".")
    split_class(klass)
    return klass


def class_env(klass, build_dir):
    """What makes this machine compute as a `klass` machine does (NOTE [CPU
    classes]): its own class, or on an Intel machine a class at or below its
    instruction set."""
    here = machine_class()
    if klass == here:
        return {}
    vendor, isa = split_class(klass)
    here_vendor, here_isa = here.split("_", 1)
    if here_vendor != "intel" or here_isa not in ISAS or ISAS.index(isa) < ISAS.index(here_isa):
        sys.exit(f"this machine is of class {here}: it cannot compute as a {klass} machine "
                 "(an Intel machine computes as the classes at or below its instruction set)")
    env = {"PKB_CPU_CLASS": klass}
    if vendor == "amd":
        env["MKL_CBWR"] = "COMPATIBLE"
    if isa == "avx2":
        env.update({"ATEN_CPU_CAPABILITY": "avx2", "LD_PRELOAD": os.path.join(build_dir, "tests", "libpkb_mkldnn_off.so")})
    elif isa != here_isa:
        env["ONEDNN_MAX_CPU_ISA"] = {"avx512_bf16": "AVX512_CORE_BF16", "avx512": "AVX512_CORE"}[isa]
    return env


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


def check_family(path, records, klass=None):
    """check() against this machine's (or a `klass` machine's) table of the
    family `path`: (failures, equal, the table's path)."""
    table = table_for(path, klass)
    if not os.path.exists(table):
        return [f"no fingerprint table for CPU class {klass or cpu_class()} ({table}; NOTE [CPU classes]: "
                f"scripts/fingerprints W --class CLASS records it on a machine of that class or above)"], 0, table
    return (*check(load(table), records), table)


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
            cond = dict(conditions(r), cpu_class=class_of(path))
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
    table["recorded_on"] = machine_class()  # the class itself, or the one that computed as it
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
    os.chmod(tmp, 0o644)  # mkstemp makes it 0600
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
        if table_for(base, "amd_avx2") != os.path.join(d, "cpu_w2.amd_avx2.json"):
            bad.append(f"the amd_avx2 table of {base} is {table_for(base, 'amd_avx2')}")
        if not check_family(base, [record(good)], "amd_avx2")[0]:
            bad.append("a class without a table passes the check")
        with open(os.path.join(d, "cpu_w2.amd_avx2.json"), "w") as f:
            json.dump(table, f)
        if check_family(base, [record(good)], "amd_avx2")[0] or not check_family(base, [record(good)], "intel_avx2")[0]:
            bad.append("the check does not read the class's own table, and only it")
        if class_of(table_for(base, "amd_avx512_bf16")) != "amd_avx512_bf16":
            bad.append("class_of does not read the class from a table's name")
        info = os.path.join(d, "cpuinfo")
        open(info, "w").write("processor : 0\nvendor_id : AuthenticAMD\nflags : fpu sse2 avx2 fma\n")
        if machine_class(info) != "amd_avx2":
            bad.append(f"cpu_class of an AVX2 machine is {machine_class(info)}")
        open(info, "w").write("vendor_id : GenuineIntel\nflags : avx2 avx512f avx512_bf16\n")
        if machine_class(info) != "intel_avx512_bf16":
            bad.append(f"cpu_class of an AVX512-BF16 machine is {machine_class(info)}")
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
    if argv == ["class"]:
        print(cpu_class())
        return 0
    if len(argv) == 3 and argv[0] == "env":
        print(" ".join(f"{k}={v}" for k, v in class_env(argv[1], argv[2]).items()))
        return 0
    if len(argv) >= 3 and argv[0] in ("write", "costs"):
        (write if argv[0] == "write" else costs)(argv[1], argv[2:])
        return 0
    if len(argv) in (3, 5) and argv[0] == "check" and (len(argv) == 3 or argv[3] == "--class"):
        records = [json.loads(l) for l in open(argv[2]) if l.strip()]
        failures, equal, table = check_family(argv[1], records, argv[4] if len(argv) == 5 else None)
        for f in failures:
            print("FAIL:", f)
        print(f"{equal} reference digests and costs equal to {table}; {len(failures)} failure(s)")
        return 1 if failures else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
