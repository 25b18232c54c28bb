#!/usr/bin/env bash
# usage: scripts/slurm/submit.sh SOLUTIONS_DIR NAME OUT_DIR [SHARDS]
# Runs the suite for one model across SHARDS 8-GPU nodes (default 4), one
# shard per node, then merges, scores and writes the leaderboard tables.
# pkb must already be built in build/ on a filesystem the nodes share.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,5p "$0"; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
export PKB_ROOT=$root PKB_SOLUTIONS=$(realpath "$1") PKB_NAME=$2 PKB_OUT=$(realpath -m "$3")
shards=${4:-4}
mkdir -p "$PKB_OUT"
array=$(sbatch --parsable --export=ALL --array=0-$((shards - 1)) --output="$PKB_OUT/shard_%a.log" \
  "$root/scripts/slurm/pkb_shard.sbatch")
merge=$(sbatch --parsable --export=ALL --dependency=afterok:"$array" --output="$PKB_OUT/merge.log" \
  "$root/scripts/slurm/pkb_merge.sbatch")
echo "submitted shards $array (x$shards) and merge $merge; results in $PKB_OUT"
