#!/usr/bin/env bash
# sharedfs.sh -- atomio on file systems with several clients (scripts/sharedfs; make test
# runs this through crates/atomio-cli/tests/mpi_io.rs). Every result is read back through a
# client that did not write it.
#
#   BUILD=<dir with libatomio_mpiio.so, the test programs and strided_io> [ATOMIO_BIN=…]
#   [PARTS="suite strided localflock"] tests/sharedfs.sh
#
#   suite       GlusterFS, two clients: the MPI suite (tests/run.sh) with ranks 0, 2 on
#               client 1 and 1, 3 on client 2, its files on the volume; the steps whose
#               oracle is ROMIO itself (t_semantics' shared file pointer and sizes) are not
#               run here, because ROMIO is wrong on such a file system.
#   strided     GlusterFS, two clients: rank r of 4 owns every 4th block of B bytes
#               (B = 384, 4096, 47008), 16 write_at calls per rank, atomic mode, for every
#               strategy and auto, and one write_at_all; the file is verified through the
#               check client. MPICH's own atomic mode (ROMIO's data sieving) is run too: the
#               check must catch it writing stale bytes in at least one of its runs (the
#               checker's negative control).
#   localflock  bindfs clients whose fcntl locks stay inside each client (as Lustre
#               mounted localflock): MPICH's atomic mode is not atomic there (caught by the
#               verifier in at least one of a few rounds); atomio's lock servers and rma are.
#
# Needs root, MPICH, glusterfs-server and bindfs (scripts/setup installs them).
#
# Invariants: the bed is torn down on every exit; a step's failure stops the script with a
# non-zero status; every mpiexec is bounded by `timeout`.
set -euo pipefail

BUILD=${BUILD:?BUILD must name the build directory}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BED="$ROOT/scripts/sharedfs"
MPIEXEC_BED="$ROOT/scripts/sharedfs-mpiexec"
LIB="$BUILD/libatomio_mpiio.so"
PARTS=${PARTS:-suite strided localflock}
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} ATOMIO_BENCH_WARM=0

cleanup() { "$BED" down >/dev/null 2>&1 || true; }
trap cleanup EXIT

fail() { echo "FAILED: $*" >&2; exit 1; }
RUNS=0

# One strided run: label, block, extra strided_io args…; env PRE=1 preloads atomio.
# Prints "label B=… verdict foreign_bad=…" and sets VERDICT.
strided() {
  local label=$1 block=$2; shift 2
  local shared pre=()
  shared=$("$BED" path)
  if [ -n "${PRE:-}" ]; then pre=(-genv LD_PRELOAD "$LIB" -genv ATOMIO_FILES "$shared/*"); fi
  # A fresh name per run: a client may resolve a name to the file deleted under it for a
  # second (the check client read the previous run's file).
  local out name="strided-$((RUNS += 1)).dat"
  out=$(timeout 120 "$MPIEXEC_BED" -n 4 "${pre[@]}" "$BUILD/strided_io" --block "$block" \
    --per-rank "${PER_RANK:-1048576}" --path "$shared/$name" \
    --verify-path "$("$BED" mount check)/$name" "$@" 2>"$BUILD/strided.err" | tail -1) ||
    { cat "$BUILD/strided.err" >&2; fail "$label B=$block: strided_io failed"; }
  VERDICT=$(echo "$out" | sed -n 's/.*"verify":"\([a-z]*\)".*/\1/p')
  echo "  $label B=$block: $VERDICT (blocks wrong through the check client: $(echo "$out" | sed -n 's/.*"foreign_bad_blocks":\([-0-9]*\).*/\1/p'))"
}

part_suite() {
  echo "== sharedfs suite: the MPI suite with ranks over two GlusterFS clients"
  "$BED" up 2 >/dev/null
  # ROMIO's reference files: data sieving and collective buffering rewrite neighbours'
  # bytes from stale caches here; plain writes are what ROMIO gets right.
  printf 'romio_ds_write disable\nromio_ds_read disable\nromio_cb_write disable\nromio_cb_read disable\n' \
    >"$BUILD/romio_hints_bed"
  # Not run here, each for its reason: 3c, 3d, 4b, 5a, 5b and 6b take ROMIO as their
  # oracle (t_semantics), and ROMIO's shared file pointer and sizes are stale on a file
  # system whose clients cache privately; 13 and 16a check auto's choice on one client
  # (interval I/O; here auto forwards); 16b and 17 (HDF5's span switched off, the settings
  # file) do not depend on the file system, and 16b's one call per row on a forwarded file
  # outlasts its watchdog on two cores. 18 runs here: its second open, a new session, reads
  # the session's new fill map through another client, which may still resolve the map's
  # name to the previous session's, unlinked (it read that one with ESTALE; src/base.c's
  # open_map now looks such a name up afresh).
  ROMIO_HINTS="$BUILD/romio_hints_bed" T_WORK_ROOT=$("$BED" path) T_CHECK_ROOT=$("$BED" mount check) \
    MPIEXEC="$MPIEXEC_BED" \
    EXCEPT="3c 3d 4b 5a 5b 6b 13 16a 16b 17" \
    EXCEPT_WHY="see tests/sharedfs.sh: its oracle or its subject is one client's" \
    BUILD="$BUILD" "$HERE/run.sh" || fail "the MPI suite over two clients"
  "$BED" down >/dev/null
}

part_strided() {
  echo "== sharedfs strided: interleaved blocks from ranks on two GlusterFS clients"
  "$BED" up 2 >/dev/null
  local s b
  for b in 384 4096 47008; do
    for s in auto ching:datatype:one-try ching:list:alt-try ching:posix:two-phase \
      bounding-extent bounding-extent:sieve block:stripe whole-file romio posix-fcntl \
      interval rma seqdlm versioning; do
      PRE=1 ATOMIO_STRATEGY=$s strided "$s" "$b" --atomic --sync
      [ "$VERDICT" = atomic ] || fail "strategy $s at B=$b is not correct through another client"
    done
  done
  PRE=1 strided "auto write_at_all" 384 --atomic --sync --collective
  [ "$VERDICT" = atomic ] || fail "auto's collective write is not correct through another client"
  PRE=1 ATOMIO_STRATEGY=ching:datatype:one-try strided "ching:datatype:one-try write_at_all" 384 \
    --atomic --sync --collective
  [ "$VERDICT" = atomic ] || fail "a direct collective write is not correct through another client"
  # The negative control: ROMIO's atomic mode (fcntl lock + data sieving over stale pages).
  local caught=0 i
  for i in 1 2 3; do
    strided "MPICH atomic, run $i" 4096 --atomic --sync
    [ "$VERDICT" = atomic ] || caught=$((caught + 1))
  done
  echo "  the check caught MPICH's atomic mode writing stale bytes in $caught of 3 runs"
  [ "$caught" -gt 0 ] || fail "the check never caught ROMIO's stale write-back (is it reading a writer's cache?)"
  "$BED" down >/dev/null
}

part_localflock() {
  echo "== sharedfs localflock: fcntl locks that stay inside each client"
  ATOMIO_BED_KIND=localflock "$BED" up 2 >/dev/null
  local dir
  dir=$(mktemp -d "$("$BED" path)/lf.XXXXXX")
  # MPICH alone: its atomic mode locks with fcntl, which does not reach the other client.
  T_DIR="$dir" timeout 120 "$MPIEXEC_BED" -n 4 "$BUILD/t_overlap_writers" \
    --expect-violation mpich-atomic ||
    fail "MPICH's atomic mode was never caught violating with node-local locks"
  T_DIR="$dir" timeout 120 "$MPIEXEC_BED" -n 4 -genv LD_PRELOAD "$LIB" \
    "$BUILD/t_overlap_writers" ching:datatype:one-try bounding-extent rma auto ||
    fail "atomio with node-local fcntl locks"
  "$BED" down >/dev/null
}

for p in $PARTS; do
  "part_$p"
done
echo "all shared file system tests passed"
