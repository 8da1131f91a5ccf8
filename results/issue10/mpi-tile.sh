#!/usr/bin/env bash
# Issue 10: versioning beside MPICH's atomic mode in the MPI tile benchmark (direct
# placement), three invocations of each: write calls timed alone, then with
# MPI_File_sync after each write (tile_io --sync; for versioning the sync is where rank 0
# materializes the newest snapshot into the user's file).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=results/issue10
S=versioning,ching:datatype:one-try,bounding-extent,rma
[ "${SERIES:-}" = b ] || for i in 1 2 3; do
  ./target/release/atomio bench mpi-tile --strategies $S --reps 5 --no-progress \
    --json $OUT/mpi-tile-$i.json --chart $OUT/mpi-tile-$i.svg | tee $OUT/mpi-tile-$i.txt
  ./target/release/atomio bench mpi-tile --strategies $S --reps 5 --no-progress \
    --json $OUT/mpi-tile-sync-$i.json --chart $OUT/mpi-tile-sync-$i.svg -- --sync \
    | tee $OUT/mpi-tile-sync-$i.txt
done
# Second series (after commit a8beae2: materialize copies same-host chunks with
# copy_file_range): the sync runs again, as mpi-tile-sync-b-N.
if [ "${SERIES:-}" = b ]; then
  for i in 1 2 3; do
    ./target/release/atomio bench mpi-tile --strategies $S --reps 5 --no-progress \
      --json $OUT/mpi-tile-sync-b-$i.json --chart $OUT/mpi-tile-sync-b-$i.svg -- --sync \
      | tee $OUT/mpi-tile-sync-b-$i.txt
  done
fi
