#!/usr/bin/env bash
# pkb golden replays every recorded file whatever its world size and trial,
# each set at the world size it was recorded at. The fixtures are made here
# for problem 1 (all-reduce): small integers, so every bf16 sum is exact.
#   w3_t1: three ranks, all correct.
#   w2_t2: two ranks, rank 1's recorded output has one element off by 8.
#   w2_t3: rank 1's file is missing (a bad fixture: reported, exit 3).
# usage: golden_sets.sh PKB WORK_DIR
set -u
pkb=$1 work=$2
rm -rf "$work" && mkdir -p "$work/fx/1_allreduce"
python3 - "$work/fx/1_allreduce" <<'PY'
import json, struct, sys
d = sys.argv[1]
def bf16(vals):
    return b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", float(v)))[0] >> 16) for v in vals)
def write(world, rank, trial, inp, out):
    meta = {"problem": 1, "stem": "1_allreduce", "world_size": world, "rank": rank, "trial": trial, "m": 4,
            "n": 4, "dtype": "bfloat16",
            "inputs": {"list": [{"tensor": "input.0", "dtype": "bfloat16", "shape": [4, 4]}]},
            "outputs": {"tensor": "output", "dtype": "bfloat16", "shape": [4, 4]}}
    a, b = bf16(inp), bf16(out)
    header = {"__metadata__": {"pkb": json.dumps(meta)},
              "input.0": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, len(a)]},
              "output": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [len(a), len(a) + len(b)]}}
    h = json.dumps(header).encode()
    with open(f"{d}/w{world}_r{rank}_t{trial}.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + a + b)
def case(world, trial, wrong_rank=None, skip_rank=None):
    ins = [[(r + 1) * (i % 5) + trial for i in range(16)] for r in range(world)]
    total = [sum(col) for col in zip(*ins)]
    for r in range(world):
        if r == skip_rank:
            continue
        out = list(total)
        if r == wrong_rank:
            out[7] += 8
        write(world, r, trial, ins[r], out)
case(3, 1)
case(2, 2, wrong_rank=1)
case(2, 3, skip_rank=1)
PY
"$pkb" golden "$work/fx" --device cpu --problems 1 --out "$work/golden.jsonl" --work-dir "$work/logs" >"$work/table.md"
rc=$?
cat "$work/table.md"
if [ $rc != 3 ]; then
  echo "FAIL: pkb golden exited $rc, expected 3 (a bad fixture set is a harness error)"
  exit 1
fi
grep -q "w2_t3 | bad fixture | | | no file for rank 1" "$work/table.md" || { echo "FAIL: the incomplete set is not reported"; exit 1; }
exec python3 "$(dirname "$0")/check_golden.py" "$work/golden.jsonl" \
  --expect w3_t1/0=match --expect w3_t1/1=match --expect w3_t1/2=match \
  --expect w2_t2/0=match --expect w2_t2/1=output_mismatch:1
