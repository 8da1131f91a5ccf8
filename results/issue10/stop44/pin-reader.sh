#!/bin/bash
# experiment: bench + writers on CPU 1, the reader process (the last version-client spawned) on CPU 0
# usage: pinr.sh TAG [extra bench args]
tag=$1; shift
cd /work/main
taskset -c 1 target/release/atomio bench version-readers --strategies versioning --no-verify --no-progress --json /tmp/s44/$tag.json --chart /tmp/s44/$tag.svg "$@" > /tmp/s44/$tag.txt 2>&1 &
B=$!
n=$(( $(echo "$@" | grep -o -- '--writers [0-9]*' | awk '{print $2}') + 0 )); [ $n = 0 ] && n=4
for i in $(seq 1 200); do
  sleep 0.1
  ps=$(pgrep -f "bench version-client" | sort -n)
  if [ $(echo "$ps" | grep -c .) -ge $((n+1)) ]; then p=$(echo "$ps" | tail -1); taskset -a -p -c 0 $p >/dev/null; echo "pinned $p"; break; fi
done
wait $B
