#!/usr/bin/env bash
# tile-pair.sh -- the tile writer + tile reader pair of Logan & Dickens §5.2 (issue 11):
# writers' tiles are private (overlap 0), readers' tiles overlap by ghost cells.
#
#   1. writer: `atomio bench tile` (4 clients, 2x2 tiles of 128x128 elements of 1 KiB, overlap 0,
#      3 runs) with limit,none,interval,interval+ifile,romio; --keep keeps the flat files and the
#      interval file (tile-interval+ifile.ival) of the writers' interval set.
#   2. translation: `atomio interval translate` of that interval file to the READERS' interval
#      set (2x2 tiles of 136x136 elements, overlap 16: the same 256x256 array), wall time of
#      the whole process (date +%s.%N around it).
#   3. reader (mpi/bench/tile_read, plain MPICH/ROMIO, 4 ranks): the flat file through a
#      subarray view (independent read, atomic-mode read, collective read) and the translated
#      interval file (each rank its own region + the shared families homed at other ranks),
#      the latter checked byte for byte against the flat file's tiles.
#   4. a summary table.
#
#   ATOMIO=target/release/atomio  NP=4 (only 4 is meaningful: 2x2 tiles)  RUNS=3
#   KEEP=1 keeps the temporary directory (printed)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
A=${ATOMIO:-$ROOT/target/release/atomio}
RUNS=${RUNS:-3}
WRITER=(--overlap-x 0 --overlap-y 0)
READER=(--tile-x 136 --tile-y 136 --overlap-x 16 --overlap-y 16)
[ -x "$A" ] || { echo "missing $A (cargo build --release -p atomio)" >&2; exit 2; }
make -s -C "$ROOT/mpi/bench" tile_read >&2
TR=$ROOT/mpi/bench/tile_read
W=$(mktemp -d "${TMPDIR:-/tmp}/tile-pair.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT
now() { date +%s.%N; }

echo "== machine: $(nproc) cores, $(uname -r); $(mpichversion 2>/dev/null | head -1 | tr -s ' ')"
echo "== scratch: $W ($(df -T "$W" | awk 'NR==2{print $2}'))"
echo
echo "== geometry (atomio explain)"
echo "-- writers: tile ${WRITER[*]}"
"$A" explain tile --clients 4 -- "${WRITER[@]}" | sed -n '2,4p'
echo "-- readers: tile ${READER[*]}"
"$A" explain tile --clients 4 -- "${READER[@]}" | sed -n '2,4p'
echo

echo "== 1. writer: atomio bench tile --clients 4 --runs $RUNS --strategies limit,none,interval,interval+ifile,romio --keep DIR -- ${WRITER[*]}"
"$A" bench tile --clients 4 --runs "$RUNS" --strategies limit,none,interval,interval+ifile,romio \
    --keep "$W" --json "$W/bench-tile.json" --chart "$W/bench-tile.svg" -- "${WRITER[@]}" 2>&1 \
    | grep -v '^chart:\|^JSON:'
ls -l "$W"/*.dat "$W"/*.ival | awk '{print "   ", $5, $NF}'
echo

echo "== 2. translation: atomio interval translate tile-interval+ifile.ival readers.ival --workload tile --clients 4 -- ${READER[*]}"
t0=$(now)
"$A" interval translate "$W/tile-interval+ifile.ival" "$W/readers.ival" --workload tile \
    --clients 4 -- "${READER[@]}" 2>&1 | tee "$W/translate.log"
t1=$(now)
TRANSLATE_S=$(echo "$t1 - $t0" | bc -l)
printf 'translation wall time (whole process): %.3f s\n' "$TRANSLATE_S"
"$A" interval info "$W/readers.ival" --json > "$W/readers-info.json"
python3 - "$W/readers-info.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("readers' interval file: %d families, %d intervals (%d private, %d shared bytes)" % (
    d["families"], d["intervals"], d["private_bytes"], d["shared_bytes"]))
for r in d["ranks"]:
    print("   rank %d region: offset %d, %d bytes, %d families" % (r["rank"], r["offset"], r["bytes"], r["families"]))
EOF
echo

echo "== 3. reader: mpiexec -n 4 $TR ${READER[*]} ..."
: > "$W/readers.jsonl"
run_reader() {
    echo "-- $*"
    timeout 300 mpiexec -n 4 "$TR" "${READER[@]}" "$@" | tee -a "$W/readers.jsonl"
}
FLAT=$W/tile-none.dat
run_reader --path "$FLAT" --label "flat ROMIO"
run_reader --path "$FLAT" --atomic --label "flat ROMIO atomic"
run_reader --path "$FLAT" --collective --label "flat ROMIO collective"
run_reader --interval-file "$W/readers.ival" --verify-flat "$FLAT" --label "interval file"
echo

echo "== 4. summary"
python3 - "$W/bench-tile.json" "$W/readers.jsonl" "$TRANSLATE_S" "$W/translate.log" <<'EOF'
import json, re, sys
rows = json.load(open(sys.argv[1]))
readers = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
tw = float(sys.argv[3])
m = re.search(r"([0-9.]+) s in all", open(sys.argv[4]).read())
tin = float(m.group(1)) if m else float("nan")
none = next(r for r in rows if r["strategy"] == "none")
print("writer (4 clients, 64 MiB per run, median of %d runs)" % none["runs"])
print("  %-15s %9s %8s %14s %16s %10s %9s" % ("strategy", "MiB/s", "seconds", "lock requests",
      "lock-free calls", "fallbacks", "% of none"))
for r in rows:
    pct = 100.0 * r["mib_per_s"] / none["mib_per_s"]
    lf = r.get("lock_free_calls")
    print("  %-15s %9.1f %8.4f %14s %16s %10s %8.0f%%" % (
        r["strategy"], r["mib_per_s"], r["seconds"], r.get("lock_requests"),
        "-" if lf is None else lf, "-" if r.get("interval_fallbacks") is None else r["interval_fallbacks"], pct))
iv = next(r for r in rows if r["strategy"] == "interval")
ok = iv["lock_requests"] == 0 and 100.0 * iv["mib_per_s"] / none["mib_per_s"] >= 90
print("  must-show: interval takes %s lock requests and is %.0f%% of none (target 0 and >= 90%%): %s" % (
    iv["lock_requests"], 100.0 * iv["mib_per_s"] / none["mib_per_s"], "met" if ok else "MISSED"))
print()
print("translation writers' interval file -> readers' interval set: %.3f s wall (process), %.3f s reported by translate" % (tw, tin))
print()
print("reader (4 ranks, 2x2 tiles of 136x136 x 1 KiB, ghost cells 16; %.1f MiB of tiles)" % (readers[0]["bytes"] / 2**20))
print("  %-24s %9s %9s %22s" % ("reader", "seconds", "MiB/s", "incl. translation (s)"))
for r in readers:
    extra = "%.4f" % (r["seconds"] + tw) if r["mode"] == "interval" else "-"
    print("  %-24s %9.4f %9.1f %22s" % (r["label"], r["seconds"], r["mib_per_s"], extra))
ir = next(r for r in readers if r["mode"] == "interval")
print("  interval file: metadata %.4f s, data %.4f s, copy into tiles %.4f s (max over ranks); "
      "%d bytes from own regions + %d shared bytes homed at other ranks, %d read calls in all; "
      "content vs flat file: %s (%d differing bytes)" % (
          ir["meta_seconds"], ir["data_seconds"], ir["copy_seconds"], ir["homed_bytes"],
          ir["foreign_shared_bytes"], ir["read_calls"], ir["verify"], ir["differing_bytes"]))
EOF
