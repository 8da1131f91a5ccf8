#!/bin/bash
# Page faults of S3D's plain mapped limit (no atomio) per run, by client count: the
# machine-wide count of an invocation with 1 run and one with 3 (the difference over 2 is
# a run's):  results/issue13/scale/stop45/s3d-faults-per-run.sh
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
for c in 2 4 8 16; do
  for r in 1 3; do
    perf stat -a -e page-faults -x, -o /tmp/pf.txt target/release/atomio bench s3d --clients $c \
      --strategies limit-mapped --runs $r --no-verify --no-progress --chart /tmp/pf.svg >/dev/null 2>&1
    echo "clients $c runs $r: $(grep page-faults /tmp/pf.txt | cut -d, -f1) faults"
  done
done
