#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer above its own.

NOTE [include layers]
The harness's layers point one way, from the command line down to the
public headers:

    harness/src/*.cpp (main, cli)  ->  driver/  ->  worker/, scores/  ->  common/  ->  harness/include/pkb/

  - harness/include/pkb/ (the API problems and candidates see) includes only itself;
  - common/ (outcomes, results files, fixtures, plugin loader): common/, pkb/;
  - worker/ (one rank) and scores/ (scores, leaderboards): themselves, common/, pkb/;
    a worker is started by the driver and tells it how it ended through exit
    codes (common/exit_codes.h), never by including it;
  - driver/ (plan, launcher, commands): everything below it;
  - problems/, solutions/ and tests/fixtures/ (problem and candidate plugins):
    only harness/include/pkb/, never harness/src.
tests/unit/ may include anything (it tests the internals).

An include is resolved as the compiler would find it (the including file's
folder, then harness/src, then harness/include); one that resolves to no file
of the tree (a system, torch or CUDA header) is not checked.

    tests/check_layers.py [ROOT]     check the tree at ROOT (default: this checkout)
    tests/check_layers.py --self-test  the checker finds planted violations
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SOURCES = ('.h', '.hpp', '.cpp', '.cc', '.cu', '.cuh')
HARNESS = {'pkb', 'common', 'worker', 'scores', 'driver', 'top'}
ALLOWED = {
    'pkb': {'pkb'},
    'common': {'common', 'pkb'},
    'scores': {'scores', 'common', 'pkb'},
    'worker': {'worker', 'common', 'pkb'},
    'driver': {'driver', 'worker', 'scores', 'common', 'pkb'},
    'top': {'top', 'driver', 'worker', 'scores', 'common', 'pkb'},
    'plugin': {'pkb'},
}
SCANNED = ('harness/include/pkb', 'harness/src', 'problems', 'solutions', 'tests/fixtures')


def layer_of(rel):
    """The layer of a path relative to the root; None: not checked."""
    parts = rel.split('/')
    if rel.startswith('harness/include/pkb/'):
        return 'pkb'
    if rel.startswith('harness/src/'):
        if len(parts) == 3:
            return 'top'
        return parts[2] if parts[2] in HARNESS else 'top'
    if parts[0] in ('problems', 'solutions') or rel.startswith('tests/fixtures/'):
        return 'plugin'
    return None


def resolve(root, including_dir, name):
    for base in (including_dir, os.path.join(root, 'harness/src'), os.path.join(root, 'harness/include')):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return os.path.relpath(p, root).replace(os.sep, '/')
    return None


def violations(root):
    found = []
    for top in SCANNED:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root).replace(os.sep, '/')
                src = layer_of(rel)
                if src is None:
                    continue
                with open(path, errors='replace') as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, d, m.group(1))
                        dst = layer_of(target) if target else None
                        if dst is None or (src == 'plugin' and dst == 'plugin'):
                            continue  # outside the harness, or a plugin's own header
                        if dst not in ALLOWED[src]:
                            found.append(f'{rel}:{n}: {src} includes {dst} ({m.group(1)} -> {target})')
    return found


def self_test():
    planted = {
        'harness/src/worker/w.cpp': '#include "driver/d.h"\n#include "common/c.h"\n',
        'harness/src/common/c.h': '#include "worker/w.h"\n',
        'harness/src/worker/w.h': '#include <pkb/p.h>\n',
        'harness/src/driver/d.h': '#include "worker/w.h"\n#include "scores/s.h"\n',
        'harness/src/scores/s.h': '#include "driver/d.h"\n',
        'harness/include/pkb/p.h': '#include "common/c.h"\n#include <vector>\n',
        'problems/01_x/problem.cpp': '#include "pkb/p.h"\n#include "worker/w.h"\n#include "local.h"\n',
        'problems/01_x/local.h': '',
        'solutions/01_x.cu': '#include "../harness/src/driver/d.h"\n',
    }
    expected = {
        'harness/src/worker/w.cpp:1', 'harness/src/common/c.h:1', 'harness/src/scores/s.h:1',
        'harness/include/pkb/p.h:1', 'problems/01_x/problem.cpp:2', 'solutions/01_x.cu:1',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w') as fh:
                fh.write(text)
        got = {v.split(': ')[0] for v in violations(root)}
    if got != expected:
        print(f'self-test: expected violations {sorted(expected)}, found {sorted(got)}')
        return 1
    print(f'self-test: the {len(expected)} planted upward includes found, nothing else')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    found = violations(os.path.abspath(root))
    for v in found:
        print(v)
    if found:
        print(f'{len(found)} include(s) against NOTE [include layers] (tests/check_layers.py)')
        return 1
    print('include layers: no upward include')
    return 0


if __name__ == '__main__':
    sys.exit(main())
