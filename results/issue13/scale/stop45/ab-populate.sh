#!/bin/bash
# A/B: the populate gate (today: only calls whose bytes are a quarter of their hull fault
# their touched pages in with MADV_POPULATE_WRITE) against populating every call's spans
# of two pages or more (ATOMIO_DBG_POPULATE=1, a throw-away switch: populate-switch.diff,
# not in the product), alternating, strategy
# `none`, 3 runs each, page faults counted machine-wide:
#   results/issue13/scale/stop45/ab-populate.sh
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
scripts/hold-freed-memory > /dev/null 2>&1
for w in "s3d 8" "s3d 4" "flash 4" "s3asim 4" "tile-pixels 4" "tile 4"; do
  set -- $w
  for pair in 1 2; do
    for pop in gate populate; do
      env_args=()
      [ "$pop" = populate ] && env_args=(ATOMIO_DBG_POPULATE=1)
      perf stat -a -e page-faults -x, -o /tmp/ab-pf.txt env "${env_args[@]}" target/release/atomio bench "$1" \
        --clients "$2" --strategies none --runs 3 --no-verify --no-progress --chart /tmp/ab.svg > /tmp/ab-out.txt 2>&1
      echo "$1 clients $2 pair $pair $pop: $(grep '^none' /tmp/ab-out.txt | awk '{print $3}') MiB/s, $(grep page-faults /tmp/ab-pf.txt | cut -d, -f1) faults"
    done
  done
done
