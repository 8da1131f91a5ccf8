#!/usr/bin/env bash
# run-flash-io.sh -- FLASH-IO's checkpoint write through PnetCDF and through Parallel HDF5
# (MPICH), plain and with atomio's PMPI library preloaded. Runs already-built programs only;
# how to build them is in flash-io.md beside this script.
#
#   FLASH_PNETCDF=/path/to/flash_benchmark_io   PnetCDF's benchmarks/FLASH-IO, built for MPICH
#   FLASH_HDF5=mpi/bench/flash_hdf5              default: the repo's (make -C mpi/bench flash_hdf5)
#   ATOMIO_MPIIO_LIB=mpi/mpiio/build/libatomio_mpiio.so   (make -C mpi/mpiio)
#   RUNDIR=/tmp/flash-run    scratch directory on local disk (its flash_* files removed before
#                            every run); LOGDIR (default $RUNDIR.logs) keeps each run's output
#   NP=4 RUNS=3              ranks; runs per configuration (round-robin over configurations)
#   CONFIGS="..."            subset of the configuration names below
#   TSV=FILE                 per-run rows (default: stdout only)
#
# Configurations (program:mode):
#   pnetcdf:*      PnetCDF FLASH-IO (checkpoint, then two plot files; only the checkpoint
#                  time is reported), nonblocking collective puts as the benchmark ships
#   hdf5:*         flash_hdf5, independent transfers (the HDF5 benchmark's Linux default)
#   hdf5-coll:*    flash_hdf5 --collective
#   hdf5-atomic:*  flash_hdf5 --atomic (the program turns MPI atomic mode on)
#   *:plain        MPICH's ROMIO
#   *:atomio       LD_PRELOAD the library, ATOMIO_FILES=$RUNDIR, default strategy; atomic
#                  mode as the program asks (off for all but hdf5-atomic)
#   *:forced       the same with ATOMIO_FORCE_ATOMIC=1 (the default strategy enforced)
# Every run's checkpoint is compared with the first plain one of its program (PnetCDF: cmp;
# HDF5: h5diff from hdf5-tools, if installed); the summary says whether the content matched.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${FLASH_PNETCDF:?set FLASH_PNETCDF to the built PnetCDF benchmarks/FLASH-IO/flash_benchmark_io}"
FLASH_HDF5=${FLASH_HDF5:-$ROOT/mpi/bench/flash_hdf5}
ATOMIO_MPIIO_LIB=${ATOMIO_MPIIO_LIB:-$ROOT/mpi/mpiio/build/libatomio_mpiio.so}
RUNDIR=${RUNDIR:-/tmp/flash-run}
NP=${NP:-4}
RUNS=${RUNS:-3}
TIMEOUT=${TIMEOUT:-300}
CONFIGS=${CONFIGS:-"pnetcdf:plain pnetcdf:atomio pnetcdf:forced hdf5:plain hdf5:atomio hdf5:forced hdf5-coll:plain hdf5-coll:atomio hdf5-coll:forced hdf5-atomic:plain hdf5-atomic:atomio"}
LOGDIR=${LOGDIR:-$RUNDIR.logs}
for f in "$FLASH_PNETCDF" "$FLASH_HDF5" "$ATOMIO_MPIIO_LIB"; do
    [ -e "$f" ] || { echo "missing: $f" >&2; exit 2; }
done
mkdir -p "$RUNDIR" "$LOGDIR"
rm -f "$LOGDIR"/reference_*   # each invocation compares against its own plain runs

# one run: prints "config run seconds header unknown close mib status md5"
run_one() {
    local cfg=$1 run=$2 prog=${1%%:*} mode=${1#*:}
    local log="$LOGDIR/${prog}_${mode}_$run.log" chk
    rm -f "${RUNDIR:?}"/flash_*
    local -a env=() cmd=()
    case $mode in
        plain) ;;
        atomio) env=(-genv LD_PRELOAD "$ATOMIO_MPIIO_LIB" -genv ATOMIO_FILES "$RUNDIR") ;;
        forced) env=(-genv LD_PRELOAD "$ATOMIO_MPIIO_LIB" -genv ATOMIO_FILES "$RUNDIR"
                     -genv ATOMIO_FORCE_ATOMIC 1) ;;
        *) echo "bad mode $mode" >&2; return 1 ;;
    esac
    case $prog in
        pnetcdf) cmd=("$FLASH_PNETCDF" "$RUNDIR/flash_"); chk=$RUNDIR/flash_ncmpi_chk_0000.nc ;;
        hdf5) cmd=("$FLASH_HDF5" --prefix "$RUNDIR/flash_") ;;
        hdf5-coll) cmd=("$FLASH_HDF5" --collective --prefix "$RUNDIR/flash_") ;;
        hdf5-atomic) cmd=("$FLASH_HDF5" --atomic --prefix "$RUNDIR/flash_") ;;
        *) echo "bad program $prog" >&2; return 1 ;;
    esac
    [ "$prog" = pnetcdf ] || chk=$RUNDIR/flash_hdf5_chk_0000
    timeout "$TIMEOUT" mpiexec -n "$NP" "${env[@]}" "${cmd[@]}" >"$log" 2>&1
    local rc=$?
    # the checkpoint section is the first of each line kind in FLASH-IO's report
    local t h u c mib
    t=$(awk '/checkpoint time/ {print $4; exit}' "$log")
    h=$(awk '/max header/ {print $4; exit}' "$log")
    u=$(awk '/max unknown/ {print $4; exit}' "$log")
    c=$(awk '/max close/ {print $4; exit}' "$log")
    mib=$(awk '/I\/O amount/ {print $4; exit}' "$log")
    local status=ok
    [ $rc -eq 0 ] && [ -n "$t" ] || status="fail(rc=$rc,log=$log)"
    # content check against the family's first plain checkpoint: PnetCDF byte for byte;
    # HDF5 with h5diff (its object headers carry modification times, so bytes differ)
    local fam=${prog%%-*} same=- ref
    ref="$LOGDIR/reference_$fam"
    if [ "$status" = ok ] && [ -f "$chk" ]; then
        if [ "$mode" = plain ] && [ ! -f "$ref" ]; then
            cp "$chk" "$ref"
        fi
        if [ "$fam" = pnetcdf ]; then
            cmp -s "$chk" "$ref" && same=yes || same=no
        elif command -v h5diff >/dev/null; then
            h5diff -q "$chk" "$ref" >/dev/null 2>&1 && same=yes || same=no
        fi
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cfg" "$run" "${t:--}" "${h:--}" "${u:--}" \
        "${c:--}" "${mib:--}" "$status" "$same"
}

rows=$(mktemp)
printf 'config\trun\tcheckpoint_s\theader_s\tunknowns_s\tclose_s\tMiB\tstatus\tsame_as_plain\n' | tee "$rows"
for run in $(seq 1 "$RUNS"); do
    for cfg in $CONFIGS; do
        run_one "$cfg" "$run" | tee -a "$rows"
    done
done
[ -n "${TSV:-}" ] && cp "$rows" "$TSV"

echo
echo "checkpoint write, $NP ranks, $RUNS runs each (seconds: median [min, max]; MiB/s at the median)"
python3 - "$rows" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
print(f"{'config':20} {'median s':>9} {'min s':>8} {'max s':>8} {'MiB':>8} {'MiB/s':>7}  same content as plain  failed")
seen = []
for r in rows:
    if r['config'] not in seen:
        seen.append(r['config'])
for cfg in seen:
    rs = [r for r in rows if r['config'] == cfg]
    ok = [r for r in rs if r['status'] == 'ok']
    fails = len(rs) - len(ok)
    if not ok:
        print(f"{cfg:20} {'-':>9} {'-':>8} {'-':>8} {'-':>8} {'-':>7}  {'-':21}  {fails}")
        continue
    ts = [float(r['checkpoint_s']) for r in ok]
    med = statistics.median(ts)
    mib = float(ok[0]['MiB'])
    same = {r['same_as_plain'] for r in ok}
    same = same.pop() if len(same) == 1 else '/'.join(sorted(same))
    print(f"{cfg:20} {med:9.4f} {min(ts):8.4f} {max(ts):8.4f} {mib:8.3f} {mib/med:7.1f}  {same:21}  {fails}")
EOF
rm -f "$rows"
