#!/usr/bin/env bash
# ompi_demo.sh -- Open MPI 4.1 programs in atomic mode, without and with atomio
# (make demo-ompi runs this). Open MPI 4.1's OMPIO accepts MPI_File_set_atomicity(fh, 1)
# and ignores it; the same unmodified programs with libatomio_mpiio.so preloaded must be
# atomic. Prints each command and the JSON line the program printed.
#
#   LIB=<Open MPI build of libatomio_mpiio.so> BENCH=<mpi/bench with *.ompi built>
#   [OMPIRUN=mpirun.openmpi] [RUNS=3] tests/ompi_demo.sh
#
# Invariants: one mpirun at a time, each bounded by `timeout 120`; files under a fresh
# temporary directory, removed at the end; a run that fails stops the script (non-zero).
set -euo pipefail

LIB=${LIB:?LIB must name the Open MPI build of libatomio_mpiio.so}
BENCH=${BENCH:?BENCH must name mpi/bench}
OMPIRUN=${OMPIRUN:-mpirun.openmpi}
RUNS=${RUNS:-3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/atomio-ompi-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# Prints the command, runs it in $BENCH, prints the fields that matter of its JSON line.
run() {
  echo "\$ $*"
  local out
  out=$(cd "$BENCH" && timeout 120 "$@")
  echo "$out" | grep '^{' |
    grep -oE '"(atomicity_get|mixed_rounds|wins|mib_per_s|verify|violation)":("[^"]*"|\[[^]]*\]|[-0-9.]+)' |
    paste -sd' ' - | sed 's/^/  -> /'
}

O=("$OMPIRUN" --oversubscribe -n 4)
P=(-x "LD_PRELOAD=$LIB")
for s in none ching:datatype:one-try rma; do
  for i in $(seq "$RUNS"); do
    if [ "$s" = none ]; then
      run "${O[@]}" ./overlap_atomic.ompi --path "$WORK/ov.dat"
    else
      run "${O[@]}" "${P[@]}" -x "ATOMIO_STRATEGY=$s" ./overlap_atomic.ompi --path "atomio:$WORK/ov.dat"
    fi
  done
done
for s in none ching:datatype:one-try rma; do
  for i in $(seq "$RUNS"); do
    if [ "$s" = none ]; then
      run "${O[@]}" ./tile_io.ompi --atomic --path "$WORK/tile.dat"
    else
      run "${O[@]}" "${P[@]}" -x "ATOMIO_STRATEGY=$s" ./tile_io.ompi --atomic --path "atomio:$WORK/tile.dat"
    fi
  done
done
# An unmodified program that does not even ask for atomic mode, on an unprefixed path:
# ATOMIO_FILES takes the file, ATOMIO_FORCE_ATOMIC makes it atomic.
for i in $(seq "$RUNS"); do
  run "${O[@]}" "${P[@]}" -x "ATOMIO_FILES=$WORK/*" -x ATOMIO_FORCE_ATOMIC=1 \
    ./tile_io.ompi --path "$WORK/forced.dat"
done
