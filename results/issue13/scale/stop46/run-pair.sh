#!/bin/bash
# One calibrate-then-validate pair, every group (bench locks, ior-hard, tile, s3d):
#   results/issue13/scale/stop46/run-pair.sh N [--io-beside]
# writes calib-N.json, calibrate-N.txt, validate-N.{txt,json} beside this script.
# `--io-beside` is passed to `sim validate` (the data path's terms measured again right
# before each workload benchmark; pair 3io).
set -e
out="$(cd "$(dirname "$0")" && pwd)"
cd "$(git -C "$out" rev-parse --show-toplevel)"
N=$1
shift
scripts/hold-freed-memory > /dev/null 2>&1
target/release/atomio sim calibrate --json "$out/calib-$N.json" --patience 30 > "$out/calibrate-$N.txt" 2>&1
target/release/atomio sim validate --costs "$out/calib-$N.json" --runs 11 --patience 30 "$@" \
    --json "$out/validate-$N.json" > "$out/validate-$N.txt" 2>&1
