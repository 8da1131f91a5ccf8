#!/bin/sh
# Issue 10's lock-vs-versioning comparison: bench tile and bench row, 4 clients, direct
# placement (versioning's base is the user's file; its MiB/s includes materializing the
# newest snapshot into it at the end, PIO MiB/s is the calls alone), 3 runs per strategy
# per invocation, 3 invocations each.
set -e
cd "$(dirname "$0")/../.."
S=limit,none,romio,posix-fcntl,bounding-extent,ching:list:one-try,ching:datatype:one-try,versioning
for w in tile row; do
  for i in 1 2 3; do
    ./target/release/atomio bench $w --clients 4 --strategies $S --runs 3 --no-progress \
      --json results/issue10/$w-$i.json --chart results/issue10/$w-$i.svg > results/issue10/$w-$i.txt 2>&1
  done
done
