#!/bin/bash
cd /work/main
(while true; do echo "$(date +%T.%N | cut -c1-10) $(du -sm /tmp/atomio-version-readers-* 2>/dev/null | awk '{s+=$1}END{print s+0}') $(grep -E '^(Dirty|Writeback|MemFree|Cached):' /proc/meminfo | awk '{printf "%s %d ", $1, $2/1024}') $(grep -E '^(nr_written|pgfault|pgalloc_normal) ' /proc/vmstat | awk '{printf "%s ", $2}') $(head -1 /proc/stat)"; sleep 0.5; done > /tmp/s47/mon2/mon.txt) &
M=$!
target/release/atomio bench version-readers --strategies limit,versioning --runs 5 --no-verify --json /tmp/s47/mon2/vr.json --chart /tmp/s47/mon2/vr.svg > /tmp/s47/mon2/vr.txt 2>&1
kill $M
echo done > /tmp/s47/mon2/DONE
