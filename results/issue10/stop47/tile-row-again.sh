#!/usr/bin/env bash
# Tile and row at 64 MiB per client again, on 217f3f2 (the workload benches now collect a
# versioning run's store before removing its file): tile-y512-b, row-h512-b.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=results/issue10/stop47
S=limit,romio,posix-fcntl,bounding-extent,ching:datatype:one-try,ching:list:one-try,versioning
scripts/hold-freed-memory > /dev/null 2>&1
./target/release/atomio bench tile --no-progress --json $OUT/tile-y512-b.json --chart $OUT/tile-y512-b.svg \
  --data servers --strategies $S --runs 5 -- --tile-y 512 > $OUT/tile-y512-b.txt 2>&1
./target/release/atomio bench row --no-progress --json $OUT/row-h512-b.json --chart $OUT/row-h512-b.svg \
  --data servers --strategies $S --runs 5 -- --height 512 > $OUT/row-h512-b.txt 2>&1
