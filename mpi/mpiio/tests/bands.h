/*
 * bands.h -- the overlapping column bands of t_hdf5_bands.c and t_pnetcdf_bands.c: the
 * geometry, the tag each element carries, and the check of a whole array read back.
 *
 * Layout (P ranks, R rows, C columns, overlap O): rank r writes every row of columns
 * [r*S, r*S + S + O), S = (C - O) / P, so neighbours share O columns of every row. Each
 * element carries a tag: (rank + 1) << 24 | iteration << 16 | (row * 131 + col) & 0xffff,
 * so the checker knows which write call put it there and that it is in its place.
 *
 * The check (bands_check): every element of rank r's own columns is (r, this iteration);
 * each overlap of ranks r and r+1 holds ONE rank's data entirely -- all (r, it) or all
 * (r+1, it). An overlap that mixes both is "mixed": the write was not atomic as a whole.
 * Anything else (a wrong tag, a stale iteration) is a FAIL always.
 */
#ifndef ATOMIO_TESTS_BANDS_H
#define ATOMIO_TESTS_BANDS_H

#include "common.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options both programs take (see their headers). */
struct bands_args {
    const char *path;
    int coll, mode, iters; /* mode: 0 fail on mixed, 1 count, 2 expect mixed */
    unsigned long long rows, cols, overlap;
    unsigned long long rows_per_call; /* 0: the whole band in one call */
    MPI_Info info;
};

/* Parses argv; --rows-per-call only where split_ok (a program that can split its band). */
static inline struct bands_args bands_parse(int argc, char **argv, const char *prog, int split_ok)
{
    struct bands_args a = {NULL, 0, 0, 4, 1024, 8192, 64, 0, MPI_INFO_NULL};
    T_MPI(MPI_Info_create(&a.info));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ind"))
            a.coll = 0;
        else if (!strcmp(argv[i], "--coll"))
            a.coll = 1;
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            a.rows = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc)
            a.cols = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--overlap") && i + 1 < argc)
            a.overlap = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            a.iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rows-per-call") && split_ok && i + 1 < argc)
            a.rows_per_call = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--count"))
            a.mode = 1;
        else if (!strcmp(argv[i], "--expect-mixed"))
            a.mode = 2;
        else if (!strcmp(argv[i], "--info") && i + 1 < argc && strchr(argv[i + 1], '=')) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", argv[++i]);
            *strchr(kv, '=') = '\0';
            T_MPI(MPI_Info_set(a.info, kv, kv + strlen(kv) + 1));
        }
        else if (argv[i][0] != '-' && !a.path)
            a.path = argv[i];
        else
            t_fail("usage: %s PATH [--ind|--coll] [--rows R] [--cols C] [--overlap O] [--iters N]%s "
                   "[--count|--expect-mixed] [--info KEY=VALUE]",
                   prog, split_ok ? " [--rows-per-call K]" : "");
    }
    T_ASSERT(a.path, "no PATH");
    return a;
}

struct bands {
    unsigned long long rows, cols, overlap;
    unsigned long long step, band, first; /* S, S + O, and this rank's first column */
};

/* The geometry for this rank; fails on one that does not split evenly. */
static inline struct bands bands_geometry(const struct bands_args *a)
{
    unsigned long long rows = a->rows, cols = a->cols, overlap = a->overlap;
    int iters = a->iters;
    unsigned long long P = (unsigned long long)t_size;
    T_ASSERT(iters > 0 && iters < 256 && rows > 0 && cols > overlap && (cols - overlap) % P == 0 &&
                 (cols - overlap) / P >= overlap,
             "bad geometry: %llu columns, overlap %llu, %d ranks", cols, overlap, t_size);
    struct bands g = {rows, cols, overlap, (cols - overlap) / P, 0, 0};
    g.band = g.step + overlap;
    g.first = (unsigned long long)t_rank * g.step;
    return g;
}

static inline unsigned bands_tag(int rank, int it, unsigned long long row, unsigned long long col)
{
    return (unsigned)(rank + 1) << 24 | (unsigned)(it & 0xff) << 16 |
           (unsigned)((row * 131 + col) & 0xffff);
}

/* This rank's band of iteration `it`, row-major (rows x band). */
static inline void bands_fill(const struct bands *g, int it, unsigned *buf)
{
    for (unsigned long long i = 0; i < g->rows; i++)
        for (unsigned long long j = 0; j < g->band; j++)
            buf[i * g->band + j] = bands_tag(t_rank, it, i, g->first + j);
}

/* Checks the whole array (rows x cols, row-major) after iteration `it`; `what` names the
 * write call in messages ("H5Dwrite"). Returns how many overlaps are mixed, and fails on the
 * first one when fail_mixed is set. *checked grows by the number of overlaps looked at. */
static inline int bands_check(const struct bands *g, int it, const unsigned *all, int fail_mixed,
                              const char *what, int *checked)
{
    int mixed = 0;
    for (int r = 0; r < t_size; r++) {
        /* own columns: [r*step + (r ? overlap : 0), r*step + step) + the last band's tail */
        unsigned long long lo = (unsigned long long)r * g->step + (r ? g->overlap : 0);
        unsigned long long hi = r == t_size - 1 ? g->cols : (unsigned long long)r * g->step + g->step;
        for (unsigned long long i = 0; i < g->rows; i++)
            for (unsigned long long j = lo; j < hi; j++)
                if (all[i * g->cols + j] != bands_tag(r, it, i, j))
                    t_fail("iteration %d: element (%llu,%llu) = %#x, want rank %d's %#x", it, i, j,
                           all[i * g->cols + j], r, bands_tag(r, it, i, j));
    }
    for (int r = 0; r + 1 < t_size; r++) {
        unsigned long long lo = (unsigned long long)(r + 1) * g->step, hi = lo + g->overlap;
        size_t of[2] = {0, 0};
        for (unsigned long long i = 0; i < g->rows; i++)
            for (unsigned long long j = lo; j < hi; j++) {
                unsigned v = all[i * g->cols + j];
                if (v == bands_tag(r, it, i, j))
                    of[0]++;
                else if (v == bands_tag(r + 1, it, i, j))
                    of[1]++;
                else
                    t_fail("iteration %d: overlap element (%llu,%llu) = %#x is neither rank %d's "
                           "nor rank %d's",
                           it, i, j, v, r, r + 1);
            }
        (*checked)++;
        if (of[0] && of[1]) {
            mixed++;
            if (fail_mixed)
                t_fail("iteration %d: the overlap of ranks %d and %d mixes both %ss (%zu elements "
                       "of rank %d, %zu of rank %d): not atomic as a whole",
                       it, r, r + 1, what, of[0], r, of[1], r + 1);
        }
    }
    return mixed;
}

/* Writes this rank's band (buf: rows x band); a collective write if the args say --coll. */
typedef void (*bands_write_fn)(void *ctx, const unsigned *buf);
/* Reads the whole array back into all (rows x cols) on rank 0; called on every rank (a
 * collective read takes part with nothing), with all NULL except on rank 0. */
typedef void (*bands_read_fn)(void *ctx, unsigned *all);

/* The iterations: a barrier, every rank's write at once (timed: the slowest rank's, summed
 * over iterations), a barrier, rank 0 reads everything back and checks it. Prints
 * "PROG: ind 4 ranks 256x2048 overlap 64 iters 8: mixed 0/24 overlaps, write 0.123 s"
 * (rank 0) and fails as args' mode says. T_PER_ITER=1 also prints each iteration's time. */
static inline void bands_run(const char *prog, const char *what, const struct bands_args *a,
                             const struct bands *g, bands_write_fn write, bands_read_fn read,
                             void *ctx)
{
    unsigned *buf = malloc(g->rows * g->band * sizeof *buf);
    unsigned *all = t_rank == 0 ? malloc(g->rows * g->cols * sizeof *all) : NULL;
    T_ASSERT(buf && (t_rank || all), "out of memory");
    int mixed = 0, checked = 0, done = 0;
    double write_s = 0;
    for (int it = 0; it < a->iters && !done; it++) {
        bands_fill(g, it, buf);
        t_barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        write(ctx, buf);
        double dt = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        write_s += slowest;
        if (getenv("T_PER_ITER"))
            t_log("  iteration %d: write %.4f s", it, slowest);
        read(ctx, all);
        if (t_rank == 0) {
            mixed += bands_check(g, it, all, a->mode == 0, what, &checked);
            done = a->mode == 2 && mixed > 0;
        }
        MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    int ran = 0;
    MPI_Allreduce(&checked, &ran, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    t_log("%s: %s %d ranks %llux%llu overlap %llu iters %d: mixed %d/%d overlaps, write %.3f s",
          prog, a->coll ? "coll" : "ind", t_size, g->rows, g->cols, g->overlap,
          ran / (t_size > 1 ? t_size - 1 : 1), mixed, ran, write_s);
    if (a->mode == 2 && t_rank == 0 && mixed == 0)
        t_fail("--expect-mixed: no overlap was mixed in %d iterations", a->iters);
    free(buf);
    free(all);
}

#endif
