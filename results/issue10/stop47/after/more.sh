#!/bin/bash
cd /work/main
for i in 3 4 5 6; do
    target/release/atomio bench version-readers --strategies limit,versioning --runs 5 --no-verify --json /tmp/s47/a2/A-$i.json --chart /tmp/s47/a2/A-$i.svg > /tmp/s47/a2/A-$i.txt 2>&1
done
echo done > /tmp/s47/a2/DONE
