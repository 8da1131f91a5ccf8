/*
 * t_overlap_writers.c -- test 2: several writers with overlapping noncontiguous views in
 * atomic mode, checked by atomio's atomicity verifier, for every strategy named on the
 * command line (each opens its own file with the hint atomio_strategy=<name>).
 *
 *   t_overlap_writers [--self] [--collective] [--sync] [--expect-violation] STRATEGY...
 *
 * Rank r's view: displacement r*SHIFT, filetype MPI_Type_vector(C, B, S, MPI_BYTE): block i
 * covers [r*SHIFT + i*S, +B). With SHIFT = S/2 and B = 3S/4 every block of rank r overlaps
 * blocks of ranks r-1, r+1 (by B - SHIFT) and r+2 (whose block i-1 starts inside it): lots
 * of partial, noncontiguous overlap. Each rank writes its whole view again and again
 * (op k = the k-th write, data = atomio_tag_view tags) for a bounded time; after close,
 * rank 0 rebuilds every rank's view from the formula and asks atomio_verifier_check
 * whether the ordinary file (exported at close) is the result of the writes applied
 * atomically in some order.
 *
 * --self: every rank opens the file independently on MPI_COMM_SELF and never calls
 *   MPI_File_set_atomicity: atomicity must come from ATOMIO_FORCE_ATOMIC=1 and hold across
 *   the independent opens (which MPI itself does not promise).
 * --collective: MPI_File_write_at_all (2 x MIN_OPS calls, the same on every rank): in direct
 *   placement the library gathers each call on one rank and writes it as one atomic call;
 *   the verifier must still see every rank's write whole.
 * Before the close every rank checks MPI_File_get_size against the writes' reach.
 * --sync: the file is checked after MPI_File_sync, before the close (the bytes must be in the
 *   ordinary file then: strategy versioning materializes its snapshots at sync).
 * --expect-violation: the negative control (strategy none): repeat fresh rounds until the
 *   verifier reports a violation (bounded); never catching one fails the test. T_MIN_OPS
 *   (default 2) is the number of racing writes per rank and round, T_BLOCKS (default C)
 *   the number of blocks in each view.
 */
#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C 24 /* blocks per view; T_BLOCKS overrides (the negative control's knob) */
#define S 2048
#define B 1536
#define SHIFT 1024
#define MIN_OPS 3
#define MAX_OPS 400

static int self_mode, expect_violation, collective, sync_check, blocks = C;

static atomio_pattern *view_pattern(void)
{
    atomio_pattern *byte = NULL, *v = NULL;
    T_ATOMIO(atomio_pattern_bytes(1, &byte));
    T_ATOMIO(atomio_pattern_hvector(blocks, B, S, byte, &v));
    atomio_pattern_free(byte);
    return v;
}

/* One round: every rank writes its view repeatedly for `seconds`; returns the verdict
 * (1 atomic, 0 violated, -1 inconclusive) on rank 0 (and prints the report). */
static int round_once(const char *strategy, int round, double seconds)
{
    char name[256];
    snprintf(name, sizeof name, "t_overlap_%s_%s_%d.dat", self_mode ? "self" : "coll", strategy,
             round);
    const char *plain = t_fresh_path(name);

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", strategy);
    MPI_File fh;
    MPI_Comm comm = self_mode ? MPI_COMM_SELF : MPI_COMM_WORLD;
    T_MPI(MPI_File_open(comm, plain, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    if (!self_mode)
        T_MPI(MPI_File_set_atomicity(fh, 1));
    int atomic = 0;
    T_MPI(MPI_File_get_atomicity(fh, &atomic));
    T_ASSERT(atomic == 1, "atomic mode is off (self mode needs ATOMIO_FORCE_ATOMIC=1)");

    MPI_Datatype ft;
    MPI_Type_vector(blocks, B, S, MPI_BYTE, &ft);
    MPI_Type_commit(&ft);
    MPI_Offset disp = (MPI_Offset)t_rank * SHIFT;
    T_MPI(MPI_File_set_view(fh, disp, MPI_BYTE, ft, "native", MPI_INFO_NULL));

    atomio_pattern *pat = view_pattern();
    size_t len = (size_t)blocks * B;
    unsigned char *buf = malloc(len);
    t_barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int ops = 0;
    /* The negative control races a few barrier-aligned writes per round. Where one write
     * is a few fast pwrites (direct mode) writers run in lockstep and rarely tear: T_BLOCKS
     * makes writes long enough to be preempted midway, T_MIN_OPS races more of them. */
    int min_ops = expect_violation ? (getenv("T_MIN_OPS") ? atoi(getenv("T_MIN_OPS")) : 2)
                                   : MIN_OPS;
    /* collective calls: every rank makes the same number (no clock in the condition) */
    int max_ops = collective ? 2 * MIN_OPS : MAX_OPS;
    while (ops < max_ops &&
           (ops < min_ops || collective || (!expect_violation && MPI_Wtime() - t0 < seconds))) {
        T_ORACLE(atomio_tag_view((uint32_t)t_rank, (uint64_t)ops, (uint64_t)disp, pat, 0, buf,
                                 len));
        if (expect_violation)
            t_barrier(MPI_COMM_WORLD); /* start together: the writes race */
        MPI_Status st;
        if (collective)
            T_MPI(MPI_File_write_at_all(fh, 0, buf, (int)len, MPI_BYTE, &st));
        else
            T_MPI(MPI_File_write_at(fh, 0, buf, (int)len, MPI_BYTE, &st));
        int count = -1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        T_ASSERT(count == (int)len, "write count %d, expected %zu", count, len);
        ops++;
    }
    free(buf);
    t_barrier(MPI_COMM_WORLD); /* every rank's writes returned (independent handles too) */
    /* The size is the writes' reach on every handle (versioning: the newest snapshot's,
     * while the ordinary file may still be empty). */
    MPI_Offset size = -1;
    T_MPI(MPI_File_get_size(fh, &size));
    MPI_Offset reach = (MPI_Offset)(t_size - 1) * SHIFT + (MPI_Offset)(blocks - 1) * S + B;
    T_ASSERT(size == reach, "MPI_File_get_size: %lld bytes, the writes reach %lld",
             (long long)size, (long long)reach);
    if (sync_check)
        T_MPI(MPI_File_sync(fh)); /* the file is checked while still open */
    else
        T_MPI(MPI_File_close(&fh));
    t_barrier(MPI_COMM_WORLD); /* every export (or sync) finished */

    int *all_ops = t_rank == 0 ? malloc(sizeof(int) * (size_t)t_size) : NULL;
    MPI_Gather(&ops, 1, MPI_INT, all_ops, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int verdict = 1;
    if (t_rank == 0) {
        atomio_verifier *v = NULL;
        T_ORACLE(atomio_verifier_new(&v));
        int total = 0;
        for (int r = 0; r < t_size; r++)
            for (int k = 0; k < all_ops[r]; k++, total++)
                T_ORACLE(atomio_verifier_add_write(v, (uint32_t)r, (uint64_t)k,
                                                   (uint64_t)r * SHIFT, pat, 0, len));
        char report[4096];
        T_ORACLE(atomio_verifier_check(v, plain, &verdict, report, sizeof report));
        atomio_verifier_free(v);
        printf("%-32s %s round %d: %d writes: %s\n", strategy, self_mode ? "self" : "coll",
               round, total,
               verdict == 1 ? "atomic" : verdict == 0 ? "VIOLATED" : "inconclusive");
        if (verdict != 1)
            printf("  %.600s\n", report);
        fflush(stdout);
        free(all_ops);
    }
    if (sync_check)
        T_MPI(MPI_File_close(&fh));
    MPI_Type_free(&ft);
    if (t_rank == 0)
        remove(plain);
    atomio_pattern_free(pat);
    MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return verdict;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    double seconds = getenv("T_SECONDS") ? atof(getenv("T_SECONDS")) : 0.6;
    if (getenv("T_BLOCKS"))
        blocks = atoi(getenv("T_BLOCKS"));
    T_ASSERT(blocks > 0 && blocks <= 1 << 20, "T_BLOCKS out of range: %d", blocks);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--self") == 0) {
            self_mode = 1;
            continue;
        }
        if (strcmp(argv[i], "--collective") == 0) {
            collective = 1;
            continue;
        }
        if (strcmp(argv[i], "--sync") == 0) {
            sync_check = 1;
            continue;
        }
        if (strcmp(argv[i], "--expect-violation") == 0) {
            expect_violation = 1;
            continue;
        }
        const char *strategy = argv[i];
        if (!expect_violation) {
            int verdict = round_once(strategy, 0, seconds);
            T_ASSERT(verdict == 1, "strategy %s: the file is not atomic", strategy);
            continue;
        }
        int caught = 0;
        double t0 = MPI_Wtime();
        for (int round = 0; !caught && round < 200 && MPI_Wtime() - t0 < 15; round++)
            caught = round_once(strategy, round, seconds) == 0;
        T_ASSERT(caught, "negative control: strategy %s was never caught violating atomicity",
                 strategy);
        t_log("%s: violation caught, as it must be (the verifier can fail)", strategy);
    }
    t_finalize();
    return 0;
}
