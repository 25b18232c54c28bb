#!/usr/bin/env python3
"""usage: mem_peak.py [--period S] [--top N] [--guard-mib M] [--out FILE.json] -- COMMAND [ARGS...]

Runs COMMAND and samples the memory of its whole process tree (the command,
the pkb driver, every worker rank and compiler it starts) every S seconds
(default 0.25): the peak over time of the sum of the processes' PSS
(proportional set size: shared pages such as libtorch's text are split
between the processes that map them, so the sum is what the tree costs the
machine) and of their RSS (shared pages counted once per process: an upper
bound). Also the peak per evaluation (the PSS sum of the `pkb worker JOB`
ranks of one job folder), the --top largest of which are printed. Prints to
stderr at the end and exits with COMMAND's status. --guard-mib M: on a
shared machine, kill the tree when the machine's MemAvailable falls below M
MiB (exit 137; the peak is then a lower bound).
How the README's memory table of the tests was measured:

    tests/e2e/mem_peak.py -- ctest --test-dir build -R '^cpu_e2e.reference_np4_b$'
"""
import json
import os
import subprocess
import sys
import time


def tree(root):
    children = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def mem_kib(pid):
    """(pss, rss) in KiB; (0, 0) for a process that is gone."""
    pss = rss = 0
    try:
        with open(f'/proc/{pid}/smaps_rollup') as f:
            for line in f:
                if line.startswith('Pss:'):
                    pss = int(line.split()[1])
                elif line.startswith('Rss:'):
                    rss = int(line.split()[1])
    except OSError:
        pass
    return pss, rss


def job_of(pid):
    """The job folder of a `pkb worker JOB` process, else None."""
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            argv = f.read().split(b'\0')
    except OSError:
        return None
    if len(argv) >= 3 and argv[1] == b'worker':
        return os.path.dirname(argv[2].decode(errors='replace'))
    return None


def mem_available_mib():
    with open('/proc/meminfo') as f:
        for line in f:
            if line.startswith('MemAvailable:'):
                return int(line.split()[1]) / 1024
    return float('inf')


def main():
    args = sys.argv[1:]
    period, out, top, guard = 0.25, None, 5, 0
    while args and args[0] != '--':
        if args[0] == '--period':
            period = float(args[1])
            args = args[2:]
        elif args[0] == '--guard-mib':
            guard = float(args[1])
            args = args[2:]
        elif args[0] == '--top':
            top = int(args[1])
            args = args[2:]
        elif args[0] == '--out':
            out = args[1]
            args = args[2:]
        else:
            sys.exit(__doc__)
    if not args[1:]:
        sys.exit(__doc__)
    t0 = time.monotonic()
    proc = subprocess.Popen(args[1:])
    peak = {'pss_mib': 0.0, 'rss_mib': 0.0, 'pss_at_s': 0.0, 'processes_at_pss_peak': 0, 'max_processes': 0}
    jobs = {}  # job folder -> peak PSS sum of its ranks (MiB)
    while proc.poll() is None:
        pids = tree(proc.pid)
        pss = rss = 0
        now = {}
        for p in pids:
            a, b = mem_kib(p)
            pss += a
            rss += b
            j = job_of(p)
            if j:
                now[j] = now.get(j, 0) + a / 1024
        for j, v in now.items():
            jobs[j] = max(jobs.get(j, 0), v)
        if guard and mem_available_mib() < guard:
            for p in pids:
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            print(f'mem_peak: MemAvailable below {guard:.0f} MiB: killed the tree', file=sys.stderr)
            peak['guard_killed'] = True
        if pss / 1024 > peak['pss_mib']:
            peak.update(pss_mib=pss / 1024, pss_at_s=time.monotonic() - t0, processes_at_pss_peak=len(pids))
        peak['rss_mib'] = max(peak['rss_mib'], rss / 1024)
        peak['max_processes'] = max(peak['max_processes'], len(pids))
        time.sleep(period)
    peak['wall_s'] = time.monotonic() - t0
    peak['rc'] = proc.returncode
    peak['command'] = args[1:]
    peak['jobs_pss_mib'] = dict(sorted(jobs.items(), key=lambda kv: -kv[1]))
    print(f"mem_peak: PSS sum {peak['pss_mib']:.0f} MiB (at {peak['pss_at_s']:.0f} s, "
          f"{peak['processes_at_pss_peak']} processes), RSS sum {peak['rss_mib']:.0f} MiB, "
          f"{peak['wall_s']:.0f} s, rc {proc.returncode}", file=sys.stderr)
    for j, v in list(peak['jobs_pss_mib'].items())[:top]:
        print(f"mem_peak:   {v:6.0f} MiB  {j}", file=sys.stderr)
    if out:
        with open(out, 'w') as f:
            json.dump(peak, f, indent=1)
    return proc.returncode


if __name__ == '__main__':
    sys.exit(main())
