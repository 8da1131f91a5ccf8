#!/usr/bin/env bash
# pnetcdf.sh -- PnetCDF through the library, 4 ranks (make test-pnetcdf). Not in `make test`:
# Debian packages PnetCDF for Open MPI only, so it needs a PnetCDF built with this MPICH.
#
#   BUILD=<dir with libatomio_mpiio.so and t_pnetcdf_bands> PNETCDF_DIR=<that PnetCDF>
#   [FLASHIO=<PnetCDF's benchmarks/FLASH-IO flash_benchmark_io, built with it>] [RUNS=20]
#   [MPIEXEC=mpiexec (MPICH's Hydra)] tests/pnetcdf.sh
#
#   1. bands: t_pnetcdf_bands (1024 x 8192 NC_UINT, overlap 64, 4 iterations), independent
#      and collective puts, RUNS runs each through the library with ATOMIO_FORCE_ATOMIC=1
#      (PnetCDF has no atomic switch) and its default strategy: every run must end with no
#      overlap mixed (one put atomic as a whole), with ATOMIO_STATS showing atomio served
#      the puts. The same program on plain MPICH, interleaved run by run, is the baseline
#      (MPICH has no atomic mode PnetCDF could ask for): its mixed overlaps are counted.
#      Prints the median put time of each and the ratio.
#   2. the negative control: each band put row by row (--rows-per-call 1), independent,
#      through the library: an overlap ends up mixed (the check sees a non-atomic put).
#   3. FLASH-IO (with FLASHIO): the checkpoint and both plot files written through the
#      library (ATOMIO_FILES, ATOMIO_FORCE_ATOMIC=1), collective (nonblocking puts, its
#      default) and independent (-i), are byte-identical to plain MPICH's, and atomio served
#      the calls.
#
# Invariants: every mpiexec is bounded by `timeout`; the first failure stops the script with
# a non-zero status; the files go under a fresh temporary directory, removed on success.
set -euo pipefail

BUILD=${BUILD:?BUILD must name the build directory}
PNETCDF_DIR=${PNETCDF_DIR:?PNETCDF_DIR must name a PnetCDF built with this MPI}
MPIEXEC=${MPIEXEC:-mpiexec}
RUNS=${RUNS:-20}
LIB="$BUILD/libatomio_mpiio.so"
BANDS="$BUILD/t_pnetcdf_bands"
[ -x "$BANDS" ] || { echo "pnetcdf.sh: $BANDS is missing (make PNETCDF_DIR=...)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/atomio-pnetcdf-tests.XXXXXX")
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}

fail() { echo "FAILED: $*" >&2; exit 1; }
# mpich4 PROGRAM ARGS... / atomio4 PROGRAM ARGS...: 4 ranks, plain or through the library.
mpich4() { timeout 300 "$MPIEXEC" -n 4 "$@"; }
atomio4() { ATOMIO_FORCE_ATOMIC=1 timeout 300 "$MPIEXEC" -n 4 -genv LD_PRELOAD "$LIB" "$@"; }
# The "write S s" of a t_pnetcdf_bands line.
write_s() { sed -n 's/.*write \([0-9.]*\) s.*/\1/p' "$1"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# The calls= of the stats lines of the file named $2 in stats file $1, summed (a line per
# independent rank, one per collective open).
stats_calls() {
  grep -o "atomio-stats file=[^ ]*$2 .* calls=[0-9]*" "$1" | grep -o "[0-9]*$" | awk '{s += $1} END {print s + 0}'
}

ARGS=(--rows 1024 --cols 8192 --overlap 64 --iters 4)
mkdir -p "$WORK/atomio" "$WORK/mpich"
export ATOMIO_FILES="$WORK/atomio/*"

echo "== 1. bands: one put atomic as a whole, $RUNS runs each, interleaved with plain MPICH"
for m in --ind --coll; do
  # at least the puts: 4 ranks x 4 independent ones, or 4 collective ones (counted once each)
  want=16; [ $m = --coll ] && want=4
  : > "$WORK/a.times"; : > "$WORK/m.times"
  mixed_mpich=0
  for i in $(seq 1 "$RUNS"); do
    rm -f "$WORK/stats"
    ATOMIO_STATS="$WORK/stats" atomio4 "$BANDS" "$WORK/atomio/bands.nc" "$m" "${ARGS[@]}" \
      > "$WORK/a.out" 2>&1 || { cat "$WORK/a.out"; fail "bands $m run $i through atomio"; }
    grep -q "mixed 0/12 overlaps" "$WORK/a.out" || { cat "$WORK/a.out"; fail "bands $m run $i: mixed"; }
    calls=$(stats_calls "$WORK/stats" bands.nc)
    [ "${calls:-0}" -ge $want ] || { cat "$WORK/stats"; fail "bands $m run $i: atomio served ${calls:-no} calls"; }
    write_s "$WORK/a.out" >> "$WORK/a.times"
    mpich4 "$BANDS" "$WORK/mpich/bands.nc" "$m" "${ARGS[@]}" --count > "$WORK/m.out" 2>&1 ||
      { cat "$WORK/m.out"; fail "bands $m run $i on MPICH"; }
    write_s "$WORK/m.out" >> "$WORK/m.times"
    mixed_mpich=$((mixed_mpich + $(sed -n 's/.*mixed \([0-9]*\)\/.*/\1/p' "$WORK/m.out")))
    printf '\r   %s: run %d/%d' "$m" "$i" "$RUNS"
  done
  a=$(median < "$WORK/a.times"); b=$(median < "$WORK/m.times")
  printf '\r   %s: atomio %d/%d runs atomic (ATOMIO_STATS calls=%s in the last), median put time %s s; ' \
    "$m" "$RUNS" "$RUNS" "$calls" "$a"
  echo "plain MPICH $b s (its runs mixed $mixed_mpich of $((RUNS * 12)) overlaps); MPICH/atomio time $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b / a}')"
done

echo "== 2. negative control: each band put row by row, independent: an overlap ends up mixed"
atomio4 "$BANDS" "$WORK/atomio/rows.nc" --ind --rows 256 --cols 2048 --overlap 64 --iters 64 \
  --rows-per-call 1 --expect-mixed > "$WORK/n.out" 2>&1 || { cat "$WORK/n.out"; fail "negative control"; }
echo "   $(grep t_pnetcdf_bands "$WORK/n.out")"

if [ -n "${FLASHIO:-}" ]; then
  echo "== 3. FLASH-IO through the library: byte-identical to plain MPICH, collective and independent"
  [ -x "$FLASHIO" ] || fail "FLASHIO=$FLASHIO is not a program"
  for m in coll ind; do
    opt=(); [ $m = ind ] && opt=(-i)
    rm -rf "$WORK/atomio/flash" "$WORK/mpich/flash"; mkdir -p "$WORK/atomio/flash" "$WORK/mpich/flash"
    mpich4 "$FLASHIO" -q "${opt[@]}" -f "$WORK/mpich/flash/f_" > "$WORK/fm.out" 2>&1 ||
      { cat "$WORK/fm.out"; fail "FLASH-IO $m on MPICH"; }
    rm -f "$WORK/stats"
    ATOMIO_FILES="$WORK/atomio/flash/*" ATOMIO_STATS="$WORK/stats" atomio4 "$FLASHIO" -q "${opt[@]}" \
      -f "$WORK/atomio/flash/f_" > "$WORK/fa.out" 2>&1 || { cat "$WORK/fa.out"; fail "FLASH-IO $m through atomio"; }
    n=0; served=()
    for f in "$WORK/mpich/flash/"f_*; do
      g="$WORK/atomio/flash/$(basename "$f")"
      cmp -s "$f" "$g" || fail "FLASH-IO $m: $(basename "$f") differs from MPICH's"
      c=$(stats_calls "$WORK/stats" "$(basename "$f")")
      [ "${c:-0}" -gt 0 ] || { cat "$WORK/stats"; fail "FLASH-IO $m: atomio served no call of $(basename "$f")"; }
      n=$((n + 1)); served+=("$(basename "$f")=$c")
    done
    [ $n = 3 ] || fail "FLASH-IO $m wrote $n files, want 3"
    echo "   $m: $n files byte-identical ($(du -sh "$WORK/atomio/flash" | cut -f1)); ATOMIO_STATS calls: ${served[*]}"
  done
else
  echo "-- 3. FLASH-IO: FLASHIO not given"
fi
rm -rf "$WORK"
echo "pnetcdf.sh: ok"
