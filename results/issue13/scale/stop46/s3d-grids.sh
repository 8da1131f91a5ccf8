#!/bin/bash
# S3D at 8 clients on two process grids: the same client count, bytes, pieces (36,864 per
# client) and 384-byte runs; only which block of the 96^3 grid each client holds differs.
# 4 clients (2x2x1) beside them. Three rounds, --runs 5 each; run right after
# scripts/hold-freed-memory. Writes s3d-grids.txt beside this script.
#   results/issue13/scale/stop46/s3d-grids.sh [strategies]
out="$(cd "$(dirname "$0")" && pwd)"
cd "$(git -C "$out" rev-parse --show-toplevel)"
st=${1:-none,ching:datatype:one-try,ching:list:one-try}
j=$(mktemp)
for round in 1 2 3; do
  for cfg in "4 2 2 1" "8 2 2 2" "8 2 4 1"; do
    set -- $cfg
    target/release/atomio bench s3d --clients $1 --strategies "$st" --runs 5 --no-progress \
      --no-verify --json "$j" -- --proc-x $2 --proc-y $3 --proc-z $4 > /dev/null 2>&1
    echo "round $round clients $1 grid $2x$3x$4: $(python3 -c "
import json, sys
print(' '.join(f\"{r['strategy']}={r['mib_per_s']:.0f}\" for r in json.load(open(sys.argv[1]))))" "$j")"
  done
done | tee -a "$out/s3d-grids.txt"
rm -f "$j"
