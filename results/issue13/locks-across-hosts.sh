#!/usr/bin/env bash
# `bench locks` and two workloads across emulated hosts (issue 13, item 3): four `atomio server` processes, one
# in each of the network namespaces atomio-h1..h4, and the benchmark's clients in a fifth
# (atomio-h5), so every lock message crosses the bridge between separate TCP/IP stacks. The
# servers listen on their host addresses with a shared token (required beyond loopback).
# For each asked round trip the clients reach the servers through delaying relays in their
# own namespace (`--rtt-us`); the table prints the round trip a ping measured.
#
#   results/issue13/locks-across-hosts.sh [OUTDIR] [RTTS]     (as root; RTTS default "0 100 1000")
#
# Writes OUTDIR/locks-hosts-rtt<R>.{txt,json,svg} and, with WORKLOADS=1 (default),
# OUTDIR/{tile,ior-hard}-hosts-rtt<R>.{txt,json,svg}: direct placement (the user's file on
# the clients' host; the servers hold only locks). Removes its hosts and servers on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-results/issue13}
rtts=${2:-0 100 1000}
workloads=${WORKLOADS:-1}
bin=$PWD/target/release/atomio
[ -x "$bin" ] || { echo "build first: cargo build --release --bin atomio" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d /tmp/atomio-locks-hosts.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/hosts down
  rm -rf "$work"
}
trap cleanup EXIT

scripts/hosts up 5 >/dev/null
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
: > "$work/cluster.toml"
for h in 1 2 3 4; do
  addr=10.78.0.$((10 + h)):7070
  mkdir -p "$work/s$h"
  scripts/hosts exec "$h" "$bin" server --listen "$addr" --token-file "$work/token" \
    --data "$work/s$h" > "$work/s$h.log" 2>&1 &
  pids+=($!)
  printf '[[server]]\naddress = "%s"\n' "$addr" >> "$work/cluster.toml"
done
# wait until every server answers a ping from the clients' host
for _ in $(seq 1 50); do
  if scripts/hosts exec 5 env ATOMIO_TOKEN_FILE="$work/token" "$bin" stats \
       --servers 10.78.0.11:7070,10.78.0.12:7070,10.78.0.13:7070,10.78.0.14:7070 \
       > /dev/null 2>&1; then break; fi
  sleep 0.2
done

for r in $rtts; do
  echo "== RTT asked: $r us (clients on atomio-h5, servers on atomio-h1..h4)"
  scripts/hosts exec 5 env ATOMIO_TOKEN_FILE="$work/token" "$bin" bench locks \
    --cluster "$work/cluster.toml" --transport tcp --clients 4 --spacing 64 --locks 2048 \
    --methods posix,datatype --protocols two-phase,one-try --no-contention --no-interleave --runs 3 \
    --rtt-us "$r" --no-progress --json "$out/locks-hosts-rtt$r.json" \
    --chart "$out/locks-hosts-rtt$r.svg" | tee "$out/locks-hosts-rtt$r.txt"
  if [ "$workloads" = 1 ]; then
    for w in tile ior-hard; do
      echo "== $w, RTT asked: $r us"
      scripts/hosts exec 5 env ATOMIO_TOKEN_FILE="$work/token" "$bin" bench "$w" \
        --cluster "$work/cluster.toml" --clients 4 --runs 3 --rtt-us "$r" \
        --strategies limit,none,romio,posix-fcntl,bounding-extent,ching:posix:two-phase,ching:list:one-try,ching:datatype:one-try,interval,auto \
        --scratch "$work/scratch-$w" --no-progress --json "$out/$w-hosts-rtt$r.json" \
        --chart "$out/$w-hosts-rtt$r.svg" | tee "$out/$w-hosts-rtt$r.txt"
    done
  fi
done
