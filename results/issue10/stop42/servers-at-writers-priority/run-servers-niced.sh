#!/bin/bash
# servers (embedded in the bench process) at the writers' priority: the bench runs under nice 10,
# writers at +0 (so nice 10), and the reader client is reniced back to 0 as soon as it exists.
cd /work/main
out=$1
nice -n 10 target/release/atomio bench version-readers --strategies limit,versioning --runs 5 --no-verify --no-progress --writer-priority nice:0 --json $out.json > $out.txt 2>&1 &
B=$!
# every version-client spawned from now on: the last one of each strategy is the reader (spawned after the writers)
seen=""
while kill -0 $B 2>/dev/null; do
  for p in $(pgrep -f "bench version-client"); do
    case " $seen " in *" $p "*) ;; *) seen="$seen $p";; esac
  done
  # the reader is the 5th client of each row (4 writers, then 1 reader): renice every 5th
  i=0; for p in $seen; do i=$((i+1)); if [ $((i % 5)) = 0 ]; then for t in /proc/$p/task/*; do renice -n 0 -p ${t##*/} >/dev/null 2>&1; done; fi; done
  sleep 0.2
done
