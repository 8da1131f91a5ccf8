#!/usr/bin/env bash
# Two more invocations of the 20 s phases without retention (all-2, all-3).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=results/issue10/stop47/long
scripts/hold-freed-memory > /dev/null 2>&1
for i in 2 3; do
  ./target/release/atomio bench version-readers --strategies limit,versioning --runs 3 --seconds 20 \
    --no-verify --no-progress --json $OUT/all-$i.json --chart $OUT/all-$i.svg > $OUT/all-$i.txt 2>&1
done
