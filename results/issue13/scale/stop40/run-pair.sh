#!/bin/bash
# One calibrate-then-validate pair, as every pair in this directory ran:
#   results/issue13/scale/stop40/run-pair.sh N [RUNS]  (RUNS 5 for pairs 1-2, 11 from 3 on)
# writes calib-N.json, calibrate-N.txt, validate-N.{txt,json} beside this script.
set -e
out="$(cd "$(dirname "$0")" && pwd)"
cd "$(git -C "$out" rev-parse --show-toplevel)"
N=$1; R=${2:-11}
scripts/hold-freed-memory > /dev/null 2>&1
target/release/atomio sim calibrate --json "$out/calib-$N.json" --patience 30 > "$out/calibrate-$N.txt" 2>&1
target/release/atomio sim validate --costs "$out/calib-$N.json" --groups ior-hard,tile,s3d \
    --runs "$R" --patience 30 --json "$out/validate-$N.json" > "$out/validate-$N.txt" 2>&1
