#!/usr/bin/env bash
# Issue 10's must-shows, each run once with this stop's build (release), in this order:
# regions, tile and row at 64 MiB per client on servers, the MPI tile program, GC, readers.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=results/issue10/stop47
A=./target/release/atomio
S=limit,romio,posix-fcntl,bounding-extent,ching:datatype:one-try,ching:list:one-try,versioning
scripts/hold-freed-memory > $OUT/hold.txt 2>&1
run() { name=$1; shift; echo "$(date +%T) $name" >> $OUT/timeline.txt
  # The shared options go right after `bench <what>`, before any `--` workload arguments.
  "$A" "$1" "$2" --no-progress --json $OUT/$name.json --chart $OUT/$name.svg "${@:3}" > $OUT/$name.txt 2>&1
  echo "$(date +%T) $name rc=$?" >> $OUT/timeline.txt; }
run regions-sweep bench regions-sweep
run tile-y512 bench tile --data servers --strategies $S --runs 5 -- --tile-y 512
run row-h512 bench row --data servers --strategies $S --runs 5 -- --height 512
run mpi-tile bench mpi-tile --strategies versioning,ching:datatype:one-try,bounding-extent,rma --reps 5
run version-gc bench version-gc
scripts/hold-freed-memory >> $OUT/hold.txt 2>&1
run version-readers bench version-readers --strategies limit,versioning --runs 5 --no-verify
echo "$(date +%T) done" >> $OUT/timeline.txt
