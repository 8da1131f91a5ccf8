#!/bin/bash
# S3D's plain mapped limit (no atomio) at 4 and 8 clients, alternating, under `perf stat -a`
# (software events: page faults, context switches, migrations; 5 runs per invocation):
#   results/issue13/scale/stop45/s3d-faults.sh
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
for c in 4 8 4 8; do
  perf stat -a -e page-faults,context-switches,cpu-migrations,task-clock -x, -o /tmp/pstat-$c.txt \
    target/release/atomio bench s3d --clients $c --strategies limit-mapped --runs 5 --no-verify \
    --no-progress --chart /tmp/s3d-faults.svg 2>&1 | grep -E "^limit-mapped"
  grep -v "^#" /tmp/pstat-$c.txt | grep -v "^$" | cut -d, -f1,3 | tr '\n' ' '; echo
done
