#!/bin/bash
cd /work/main
scripts/hold-freed-memory > /tmp/s47/ab1/hold.txt 2>&1
for i in 1 2; do
  for v in A B; do
    extra=""; [ $v = B ] && extra="--keep-last 8"
    target/release/atomio bench version-readers --strategies limit,versioning --runs 5 --no-verify $extra --json /tmp/s47/ab1/$v-$i.json --chart /tmp/s47/ab1/$v-$i.svg > /tmp/s47/ab1/$v-$i.txt 2>&1
  done
done
echo done > /tmp/s47/ab1/DONE
