#!/bin/bash
cd /work/main
for i in 1 2; do
for a in noalign align; do
  scripts/hold-freed-memory >/dev/null 2>&1
  rm -rf /tmp/s44/dbg-$a-$i; mkdir -p /tmp/s44/dbg-$a-$i
  if [ $a = noalign ]; then export ATOMIO_DBG_NOALIGN=1; else unset ATOMIO_DBG_NOALIGN; fi
  ATOMIO_DBG_READS=/tmp/s44/dbg-$a-$i target/release/atomio bench version-readers --strategies limit,versioning --runs 5 --no-verify --no-progress --json /tmp/s44/ab-$a-$i.json --chart /tmp/s44/ab-$a-$i.svg > /tmp/s44/ab-$a-$i.txt 2>&1
done
done
