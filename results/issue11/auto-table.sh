#!/usr/bin/env bash
# auto vs every other strategy on every workload of `atomio bench list`, one invocation per
# workload (ratios inside one run), RUNS (default 7) runs each (median), verified.
# Usage: results/issue11/auto-table.sh [OUTDIR]   (writes OUTDIR/<workload>.json)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/issue11-auto}
mkdir -p "$out"
bin=target/release/atomio
S=limit,none,romio,posix-fcntl,bounding-extent,bounding-extent:sieve,block:4096,ching:list:one-try,ching:datatype:one-try,interval,auto
for w in $($bin bench list | awk 'NR>2 {print $1}'); do
  echo "== $w"
  $bin bench "$w" --clients 4 --runs "${RUNS:-7}" --strategies "$S" --no-progress \
    --json "$out/$w.json" --chart "$out/$w.svg" | tail -n +2
done
