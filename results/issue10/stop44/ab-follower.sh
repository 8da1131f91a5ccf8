#!/bin/bash
cd /work/main
for i in 1 2 3 4; do
scripts/hold-freed-memory >/dev/null 2>&1
for f in 0 1; do
  ATOMIO_NODE_FOLLOWER=$f target/release/atomio bench version-readers --strategies versioning --runs 5 --no-verify --no-progress --json /tmp/s44/abf-$f-$i.json --chart /tmp/s44/abf.svg > /tmp/s44/abf-$f-$i.txt 2>&1
done
done
