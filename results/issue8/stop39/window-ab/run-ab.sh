#!/bin/bash
cd /tmp
out=/tmp/s39/ab
/work/main/scripts/hold-freed-memory > $out/hold.txt 2>&1
for i in 1 2 3; do
  for v in base new; do
    if [ $v = base ]; then exe=/tmp/base/atomio; src=/tmp/base-src/bench; else exe=/work/main/target/release/atomio; src=/work/main/mpi/bench; fi
    $exe bench mpi-strided --block 384 --src $src --no-progress --json $out/strided-$v-$i.json --chart $out/strided-$v-$i.svg > $out/strided-$v-$i.txt 2>&1
    for c in 8 4; do
      $exe bench s3d --clients $c --runs 5 --strategies limit,limit-mapped,none,romio,bounding-extent,ching:datatype:one-try --no-progress --json $out/s3d$c-$v-$i.json --chart $out/s3d$c-$v-$i.svg > $out/s3d$c-$v-$i.txt 2>&1
    done
    date >> $out/progress.txt; echo "$v $i done" >> $out/progress.txt
  done
done
echo ALLDONE >> $out/progress.txt
