#!/usr/bin/env bash
# 20 s phases instead of 5: versioning's loaded phase then writes ~6 GB of chunks, past the
# kernel's background writeback threshold (~2.3 GB dirty here), unless the writers collect
# as they write (--keep-last 8).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=results/issue10/stop47/long
scripts/hold-freed-memory > /dev/null 2>&1
for v in $([ "${PLAIN:-}" = 1 ] || echo all keep8); do
  extra=(); [ $v = keep8 ] && extra=(--keep-last 8)
  ./target/release/atomio bench version-readers --strategies limit,versioning --runs 3 --seconds 20 \
    --no-verify --no-progress "${extra[@]}" --json $OUT/$v.json --chart $OUT/$v.svg > $OUT/$v.txt 2>&1
done
echo done > /tmp/s47/long-DONE
# Then (run on its own, after the two above): the same 20 s phases with a plain `pread`
# reader beside each row's writers: what the machine adds under versioning's writers.
if [ "${PLAIN:-}" = 1 ]; then
  scripts/hold-freed-memory > /dev/null 2>&1
  ./target/release/atomio bench version-readers --strategies limit,versioning --runs 3 --seconds 20 \
    --no-verify --no-progress --plain-reader --json $OUT/plain.json --chart $OUT/plain.svg > $OUT/plain.txt 2>&1
fi
