/*
 * intervals.c -- interval I/O (Logan & Dickens) on the files whose strategy
 * is `interval` or `auto`: the file views of all ranks, intersected, say before any write
 * which bytes can ever conflict.
 *
 * At MPI_File_open (the default view) and at every MPI_File_set_view (both collective),
 * each rank encodes its view -- the flattened filetype as an atomio pattern
 * (atomio_pattern_encode) and the byte where it starts -- and the ranks exchange them with
 * one MPI_Allgather (sizes, displacements, reach) and one MPI_Allgatherv (the patterns) on
 * the file's communicator. Every rank then computes the same interval set from the same
 * inputs (atomio_intervals_from_views) and installs it with its rank
 * (atomio_file_set_intervals): bytes private to a rank are then written and read with no
 * lock; shared bytes are locked; bytes no view declared are locked and counted as
 * fallbacks. With `auto`, atomio picks the strategy from the set (and again at every
 * later view), and the choice with its reason is kept for the stats (stats.c).
 *
 * A view as a pattern: a filetype with data is its tile (`f->tile`, data placed from
 * `view_base`); a contiguous view is one run of `reach` bytes from `view_base` (every byte
 * past it); a view without data is an empty pattern. The analysis covers `reach` bytes past
 * the largest displacement (hint `atomio_interval_reach`, bytes, default 1 TiB; rank 0's
 * value is used by all); beyond its bound every call locks, which is correct whatever the
 * views are.
 *
 * `auto` may choose versioning (heavy overlap): the file then follows versioning.c (writes
 * are snapshots, materialized at sync and close); before a later view switches it away from
 * versioning, the ranks settle (rank 0 materializes) so the user's file holds every write.
 *
 * Interval files (hint atomio_format=interval, at open or at MPI_File_set_view, with
 * atomio_interval_reach = the bytes the views cover, which sizes each rank's region;
 * strategy `interval` on the user's file): at the first MPI_File_set_view the file becomes an
 * interval file laid out by that view's set (atomio_file_set_interval_format; rank 0
 * writes the metadata): each rank's private bytes are cached and written as one stretch
 * per rank at MPI_File_sync and close, shared bytes in place under their locks; reads
 * through the handle see the file's bytes. The layout is fixed by that view: a later
 * MPI_File_set_view is refused (MPI_ERR_UNSUPPORTED_OPERATION), and bytes outside the view
 * are refused. `atomio interval translate FILE OUT --to flat` makes it a flat file again.
 * Other strategies, servers placement or atomic mode off: the hint is ignored (logged).
 *
 * Scope: the set covers the ranks of the opening communicator only. Another open of the
 * same file (another communicator, another job) is not in it, so interval I/O is atomic
 * against the file's own communicator; with ATOMIO_FORCE_ATOMIC=1, which promises atomicity
 * across independent opens, no set is computed (an empty one: every call locks).
 *
 * Invariants: the set installed on every rank's handle is computed from the same bytes, so
 * every rank classifies every byte alike; the exchange is collective and every failure is
 * agreed, and a failed analysis installs an empty set (every byte undeclared: every call
 * locks) -- never the previous view's set, whose private bytes may not be private any more;
 * the allgather also orders every rank's earlier calls on the handle before any rank
 * writes under the new set.
 */
#include "internal.h"
#include "span.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REACH_HINT "atomio_interval_reach"
#define FORMAT_HINT "atomio_format"
#define DEFAULT_REACH (1ULL << 40)

int amio_intervals_wanted(const char *strategy)
{
    return strcmp(strategy, "interval") == 0 || strcmp(strategy, "auto") == 0;
}

void amio_intervals_hint(amio_file *f, MPI_Info info)
{
    if (!f->reach)
        f->reach = DEFAULT_REACH;
    if (info == MPI_INFO_NULL)
        return;
    char v[64];
    int flag = 0;
    if (PMPI_Info_get(info, FORMAT_HINT, (int)sizeof v - 1, v, &flag) == MPI_SUCCESS && flag) {
        if (strcmp(v, "interval") == 0)
            f->want_ifile = 1;
        else if (strcmp(v, "flat") == 0)
            f->want_ifile = 0;
        else
            amio_log(1, "ignoring %s=%s (want interval or flat)", FORMAT_HINT, v);
    }
    flag = 0;
    if (PMPI_Info_get(info, REACH_HINT, (int)sizeof v - 1, v, &flag) != MPI_SUCCESS || !flag)
        return;
    char *end = NULL;
    unsigned long long x = strtoull(v, &end, 0);
    if (!end || *end || x == 0)
        amio_log(1, "ignoring %s=%s (want a positive number of bytes)", REACH_HINT, v);
    else {
        f->reach = x;
        f->reach_hinted = 1;
    }
}

void amio_intervals_free(amio_file *f)
{
    if (f->iv)
        atomio_intervals_free(f->iv);
    f->iv = NULL;
}

/* This rank's view as (pattern, displacement); *owned = 1 when the pattern is made here. */
static int local_view(amio_file *f, atomio_pattern **p, int *owned, uint64_t *disp)
{
    *owned = 0;
    *disp = f->view_base;
    if (f->tile_size > 0 && !f->contig && f->tile) {
        *p = f->tile;
        return MPI_SUCCESS;
    }
    uint64_t len = f->tile_size == 0 ? 0 : f->reach;
    int rc = atomio_pattern_bytes(len, p);
    if (rc != ATOMIO_OK)
        return amio_error_atomio(rc, "the view as a pattern");
    *owned = 1;
    return MPI_SUCCESS;
}

typedef struct {
    uint64_t len, disp, reach;
    uint64_t in_hdf5; /* this rank sets the view inside H5Dwrite/H5Fcreate/H5Fopen (hdf5_span.c) */
} head_t;

/* The exchange and the analysis; *set NULL on failure (code says why). *skipped = 1 (set
 * NULL, success) when every rank set this view inside an HDF5 call (hdf5_span.c): HDF5's
 * temporary view of one collective H5Dwrite, undone before it returns, and the default
 * view of H5Fcreate/H5Fopen say nothing of the hyperslabs the program will write. They are
 * not analyzed (a hyperslab's filetype tiled over the reach costs 0.1-0.2 s per view, and
 * the default views make auto lock each call's hull, which serializes every H5Dwrite
 * span against every other); the caller installs the empty set: every call locks exactly
 * its bytes (auto: ching:datatype:one-try). */
static int analyze(amio_file *f, atomio_intervals **set, int *skipped)
{
    *set = NULL;
    *skipped = 0;
    atomio_pattern *mine = NULL;
    int owned = 0;
    head_t h = {0, 0, f->reach, amio_hdf5_depth > 0};
    unsigned char *enc = NULL;
    int code = local_view(f, &mine, &owned, &h.disp);
    if (code == MPI_SUCCESS) {
        size_t len = 0;
        int rc = atomio_pattern_encode(mine, NULL, 0, &len);
        if (rc == ATOMIO_OK && len > INT_MAX / 2)
            code = amio_error(MPI_ERR_TYPE, "the filetype's description is too large (%zu bytes)",
                              len);
        else if (rc == ATOMIO_OK && !(enc = malloc(len ? len : 1)))
            code = amio_error(MPI_ERR_NO_MEM, "out of memory");
        if (rc == ATOMIO_OK && code == MPI_SUCCESS)
            rc = atomio_pattern_encode(mine, enc, len, &len);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "encoding the view");
        h.len = code == MPI_SUCCESS ? len : 0;
    }
    if (owned)
        atomio_pattern_free(mine);

    /* 1. sizes, displacements, reach (a failed rank sends len = UINT64_MAX) */
    if (code != MPI_SUCCESS)
        h.len = UINT64_MAX;
    int n = f->size;
    head_t *all = malloc((size_t)n * sizeof *all);
    int *counts = malloc((size_t)n * sizeof *counts), *displs = malloc((size_t)n * sizeof *displs);
    unsigned char *bytes = NULL;
    atomio_pattern **pats = calloc((size_t)n, sizeof *pats);
    uint64_t *disps = malloc((size_t)n * sizeof *disps);
    int bad = !all || !counts || !displs || !pats || !disps;
    if (bad && code == MPI_SUCCESS)
        code = amio_error(MPI_ERR_NO_MEM, "out of memory");
    /* everyone must take part in the gathers: agree on the allocations first */
    code = amio_agree(code, f->comm, "the interval analysis");
    MPI_Request r;
    int rc = MPI_SUCCESS;
    if (code == MPI_SUCCESS) {
        rc = PMPI_Iallgather(&h, 4, MPI_UINT64_T, all, 4, MPI_UINT64_T, f->comm, &r);
        if (rc == MPI_SUCCESS)
            rc = amio_wait(&r);
        code = rc;
    }
    *skipped = code == MPI_SUCCESS;
    for (int i = 0; *skipped && i < n; i++)
        *skipped = all[i].in_hdf5 != 0 && all[i].len != UINT64_MAX;
    if (*skipped)
        code = MPI_ERR_PENDING; /* not an error: nothing more to exchange, same on every rank */
    uint64_t total = 0;
    for (int i = 0; code == MPI_SUCCESS && i < n; i++) {
        if (all[i].len > INT_MAX || total + all[i].len > INT_MAX) {
            code = amio_error(MPI_ERR_TYPE, "rank %d's view cannot be exchanged", i);
            break;
        }
        counts[i] = (int)all[i].len;
        displs[i] = (int)total;
        total += all[i].len;
        disps[i] = all[i].disp;
    }
    /* every rank saw the same heads: the same verdict */
    if (code == MPI_SUCCESS && !(bytes = malloc(total ? total : 1)))
        code = amio_error(MPI_ERR_NO_MEM, "out of memory");
    code = amio_agree(code, f->comm, "the interval analysis");

    /* 2. the patterns */
    if (code == MPI_SUCCESS) {
        rc = PMPI_Iallgatherv(enc, (int)h.len, MPI_BYTE, bytes, counts, displs, MPI_BYTE, f->comm,
                              &r);
        if (rc == MPI_SUCCESS)
            rc = amio_wait(&r);
        code = rc;
    }
    /* 3. the same analysis everywhere (decoding is deterministic too) */
    for (int i = 0; code == MPI_SUCCESS && i < n; i++) {
        rc = atomio_pattern_decode(bytes + displs[i], (size_t)counts[i], &pats[i]);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "decoding a rank's view");
    }
    if (code == MPI_SUCCESS) {
        rc = atomio_intervals_from_views((size_t)n, (const atomio_pattern *const *)pats, disps,
                                         all[0].reach, set);
        if (rc != ATOMIO_OK) {
            *set = NULL;
            code = amio_error_atomio(rc, "the interval analysis");
        }
    }
    if (*skipped)
        code = MPI_SUCCESS;
    for (int i = 0; pats && i < n; i++)
        if (pats[i])
            atomio_pattern_free(pats[i]);
    free(pats);
    free(disps);
    free(bytes);
    free(counts);
    free(displs);
    free(all);
    free(enc);
    return code;
}

/* What the file runs now; with auto, versioning.c takes over when it chose versioning. */
void amio_intervals_note(amio_file *f)
{
    if (!f->af)
        return;
    if (atomio_get_strategy(f->af, f->in_force, sizeof f->in_force) != ATOMIO_OK)
        f->in_force[0] = 0;
    if (strcmp(f->strategy, "auto") == 0) {
        f->versioning = strcmp(f->in_force, "versioning") == 0;
        char c[sizeof f->choice];
        /* keep the last choice made (atomic mode off has none) */
        if (atomio_file_explain(f->af, c, sizeof c) == ATOMIO_OK && c[0])
            memcpy(f->choice, c, sizeof c);
    }
}

/* Hint atomio_format=interval at the first MPI_File_set_view: the file becomes an interval
 * file laid out by the set just installed (agreed: every rank or none). */
static int start_interval_file(amio_file *f, const char *what)
{
    if (!f->want_ifile || f->ifile || strcmp(what, "MPI_File_set_view") != 0)
        return MPI_SUCCESS;
    if (!f->direct || !f->atomic || strcmp(f->in_force, "interval") != 0) {
        amio_log(1, "%s: ignoring atomio_format=interval (it needs strategy interval on the "
                    "user's file in atomic mode; the file runs %s)",
                 f->path, f->in_force[0] ? f->in_force : "no atomicity");
        return MPI_SUCCESS;
    }
    if (!f->reach_hinted) {
        /* regions are as long as the analysis reaches: 1 TiB by default */
        amio_log(1, "%s: ignoring atomio_format=interval without %s (the bytes the views "
                    "cover, which size each rank's region of the interval file)",
                 f->path, REACH_HINT);
        return MPI_SUCCESS;
    }
    int rc = atomio_file_set_interval_format(f->af);
    int code = rc == ATOMIO_OK ? MPI_SUCCESS : amio_error_atomio(rc, "the interval format");
    code = amio_agree(code, f->comm, what);
    if (code == MPI_SUCCESS)
        f->ifile = 1;
    return code;
}

int amio_intervals_update(amio_file *f, const char *what)
{
    if (!f->intervals || !f->af)
        return MPI_SUCCESS;
    if (f->ifile)
        return amio_error(MPI_ERR_UNSUPPORTED_OPERATION,
                          "%s: %s is an interval file laid out by its first view; it cannot "
                          "take another view (open it again to change views)",
                          what, f->path);
    /* auto ran versioning under the old view: the user's file gets every write first */
    int code = MPI_SUCCESS;
    if (f->direct && f->versioning && strcmp(f->strategy, "auto") == 0) {
        code = amio_versioning_settle(f, MPI_SUCCESS, 0, what);
        code = amio_agree(code, f->comm, what);
        if (code == MPI_SUCCESS)
            f->dirty = 0;
    }
    if (code != MPI_SUCCESS)
        return code;
    atomio_intervals *set = NULL;
    char why[256] = "";
    /* ATOMIO_FORCE_ATOMIC promises atomicity across independent opens (other
     * communicators), whose views this analysis never sees: nothing may be lock-free */
    int acode = MPI_SUCCESS, skipped = 0;
    if (amio_cfg.force_atomic) {
        amio_log(1, "%s: ATOMIO_FORCE_ATOMIC=1: other opens' views are unknown, every call locks",
                 f->path);
        acode = MPI_ERR_OTHER;
    } else {
        acode = analyze(f, &set, &skipped);
        if (skipped)
            acode = MPI_ERR_OTHER;
    }
    if (acode != MPI_SUCCESS) {
        /* every rank failed alike (agreed): no declared byte, every call locks */
        snprintf(why, sizeof why, "%s",
                 amio_cfg.force_atomic ? "ATOMIO_FORCE_ATOMIC=1: other opens' views are unknown"
                 : skipped ? "a view set inside an HDF5 call (H5Dwrite, H5Fcreate, H5Fopen) on every rank: not analyzed"
                           : atomio_last_error());
        int rc = atomio_intervals_from_views(0, NULL, NULL, 0, &set);
        if (rc != ATOMIO_OK)
            return amio_error_atomio(rc, "an empty interval set");
    }
    int rc = atomio_file_set_intervals(f->af, set, (uint32_t)(acode == MPI_SUCCESS ? f->rank : 0));
    if (rc != ATOMIO_OK) {
        atomio_intervals_free(set);
        return amio_error_atomio(rc, "installing the interval set");
    }
    amio_intervals_free(f);
    f->iv = set;
    f->views++;
    amio_intervals_note(f);
    amio_stats_intervals(f, acode == MPI_SUCCESS ? NULL : why);
    return acode == MPI_SUCCESS ? start_interval_file(f, what) : MPI_SUCCESS;
}
