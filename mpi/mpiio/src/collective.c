/*
 * collective.c -- MPI_File_write_all / MPI_File_write_at_all on a direct-placement file:
 * the whole collective call is gathered on rank 0 of the file's communicator and written by
 * it as ONE atomio_write_list of the union of every rank's file ranges.
 *
 * Why: interleaved noncontiguous views (rank r owns every P-th block) make each rank's
 * write thousands of small pieces — one pwrite each, under the inode lock the ranks share.
 * Gathered, the union is a few long ranges (often one): the bytes move once through shared
 * memory and once into the file, in large writes. ROMIO's two-phase I/O does the same for
 * non-atomic calls; in atomic mode ROMIO gives it up (every rank locks its bounding extent
 * and the calls serialize), which is why its collective atomic writes crawl.
 *
 * Atomicity: every rank's bytes are inside the one atomio_write_list, which the strategy
 * makes atomic against every other atomio writer of the file (other communicators, other
 * jobs, independent calls); within the call, overlapping bytes take the data of the highest
 * rank, on every range alike, so the result is the ranks' writes applied whole in rank order.
 * One lock request for the union (made by one rank) also means no hold-and-wait between
 * ranks, so collectives on overlapping files cannot deadlock each other.
 *
 * When it applies: direct placement, not interval I/O (strategy `interval`, or `auto` that
 * chose it: each rank writes its own part, see amio_write_all), and the call's total (all ranks) at most ATOMIO_CB_MAX
 * bytes (default 1 GiB; 0 turns aggregation off) -- the decision is made from values every
 * rank agrees on, so all take the same path. Otherwise each rank's call is independent
 * (amio_io), as MPI atomic mode also allows. Reads stay independent.
 *
 * Invariants: every rank returns the same success or failure; a failure on any rank before
 * the write means nothing is written; every allocation is freed on every path; messages are
 * at most 1 GiB (MPI int counts).
 */
#include "internal.h"
#include <stdlib.h>
#include <string.h>

enum { TAG_RUNS = 7101, TAG_DATA = 7102 };
static const uint64_t CHUNK = 1u << 30;

typedef struct {
    uint64_t off, len;
} run_t;

/* This rank's file ranges for data bytes [skip, skip + n) of the view (n > 0). */
static int call_runs(amio_file *f, uint64_t skip, size_t n, run_t **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    if (f->contig) {
        run_t *r = malloc(sizeof *r);
        if (!r)
            return amio_error(MPI_ERR_NO_MEM, "out of memory");
        r->off = f->view_base + skip;
        r->len = n;
        *out = r;
        *count = 1;
        return MPI_SUCCESS;
    }
    size_t cap = 256, got = 0;
    for (;;) {
        uint64_t *offs = malloc(cap * sizeof *offs), *lens = malloc(cap * sizeof *lens);
        if (!offs || !lens) {
            free(offs);
            free(lens);
            return amio_error(MPI_ERR_NO_MEM, "out of memory listing %zu ranges", cap);
        }
        int rc = atomio_view_runs(f->view_base, f->tile, skip, n, offs, lens, cap, &got);
        if (rc == ATOMIO_OK && got <= cap) {
            run_t *r = malloc((got ? got : 1) * sizeof *r);
            if (r)
                for (size_t i = 0; i < got; i++)
                    r[i] = (run_t){offs[i], lens[i]};
            free(offs);
            free(lens);
            if (!r)
                return amio_error(MPI_ERR_NO_MEM, "out of memory");
            *out = r;
            *count = got;
            return MPI_SUCCESS;
        }
        free(offs);
        free(lens);
        if (rc != ATOMIO_OK)
            return amio_error_atomio(rc, "the call's file ranges");
        cap = got;
    }
}

static int xfer(int is_send, void *p, uint64_t n, int peer, int tag, MPI_Comm comm)
{
    for (uint64_t at = 0; at < n; at += CHUNK) {
        int len = (int)(n - at < CHUNK ? n - at : CHUNK);
        MPI_Request r;
        int rc = is_send ? PMPI_Isend((char *)p + at, len, MPI_BYTE, peer, tag, comm, &r)
                         : PMPI_Irecv((char *)p + at, len, MPI_BYTE, peer, tag, comm, &r);
        if (rc == MPI_SUCCESS)
            rc = amio_wait(&r);
        if (rc != MPI_SUCCESS)
            return amio_error(MPI_ERR_OTHER, "collective write: moving data between ranks");
    }
    return MPI_SUCCESS;
}

static int by_offset(const void *a, const void *b)
{
    uint64_t x = ((const run_t *)a)->off, y = ((const run_t *)b)->off;
    return x < y ? -1 : x > y;
}

/* Rank 0's buffers, all allocated before any data moves (a rank 0 short of memory says so
 * before the other ranks start sending, so nobody waits on a send that is never received). */
typedef struct {
    run_t *all, *seg;
    uint64_t *segpos, *so, *sl;
    size_t *first; /* rank r's ranges are all[first[r] .. first[r + 1]) */
    unsigned char *stage, *ubuf;
} agg_t;

static void agg_free(agg_t *a)
{
    free(a->all);
    free(a->seg);
    free(a->segpos);
    free(a->so);
    free(a->sl);
    free(a->first);
    free(a->stage);
    free(a->ubuf);
    memset(a, 0, sizeof *a);
}

static int agg_alloc(agg_t *a, int P, const uint64_t *counts /* [runs, bytes] per rank */)
{
    memset(a, 0, sizeof *a);
    uint64_t runs = 0, bytes = 0, max_bytes = 0;
    for (int r = 0; r < P; r++) {
        runs += counts[2 * r];
        bytes += counts[2 * r + 1];
        if (counts[2 * r + 1] > max_bytes)
            max_bytes = counts[2 * r + 1];
    }
    size_t k = (size_t)(runs ? runs : 1);
    a->all = malloc(k * sizeof *a->all);
    a->seg = malloc(k * sizeof *a->seg);
    a->segpos = malloc(k * sizeof *a->segpos);
    a->so = malloc(k * sizeof *a->so);
    a->sl = malloc(k * sizeof *a->sl);
    a->first = malloc((size_t)(P + 1) * sizeof *a->first);
    a->ubuf = malloc((size_t)(bytes ? bytes : 1)); /* the union is at most every byte */
    a->stage = malloc((size_t)(max_bytes ? max_bytes : 1));
    if (!a->all || !a->seg || !a->segpos || !a->so || !a->sl || !a->first || !a->ubuf ||
        !a->stage) {
        agg_free(a);
        return amio_error(MPI_ERR_NO_MEM,
                          "collective write: rank 0 out of memory (%llu bytes, %llu ranges)",
                          (unsigned long long)bytes, (unsigned long long)runs);
    }
    a->first[0] = 0;
    for (int r = 0; r < P; r++)
        a->first[r + 1] = a->first[r] + (size_t)counts[2 * r];
    return MPI_SUCCESS;
}

/* Rank 0: the union of every rank's ranges, the data placed in rank order, one write. */
static int aggregate(amio_file *f, agg_t *a, const run_t *mine, const void *my_data,
                     const uint64_t *counts)
{
    int P = f->size, code = MPI_SUCCESS;
    size_t total_runs = a->first[P];
    if (counts[0] > 0)
        memcpy(a->all, mine, (size_t)counts[0] * sizeof *a->all);
    for (int r = 1; r < P && code == MPI_SUCCESS; r++)
        code = xfer(0, a->all + a->first[r], counts[2 * r] * sizeof(run_t), r, TAG_RUNS,
                    f->comm);
    if (code != MPI_SUCCESS)
        return code;

    /* the union: sorted, overlapping or touching ranges merged */
    run_t *seg = a->seg;
    memcpy(seg, a->all, total_runs * sizeof *seg);
    qsort(seg, total_runs, sizeof *seg, by_offset);
    size_t nseg = 0;
    for (size_t i = 0; i < total_runs; i++) {
        run_t r = seg[i];
        if (nseg && r.off <= seg[nseg - 1].off + seg[nseg - 1].len) {
            uint64_t end = r.off + r.len, cur = seg[nseg - 1].off + seg[nseg - 1].len;
            if (end > cur)
                seg[nseg - 1].len = end - seg[nseg - 1].off;
        } else {
            seg[nseg++] = r;
        }
    }
    uint64_t ulen = 0;
    for (size_t i = 0; i < nseg; i++) {
        a->segpos[i] = ulen;
        a->so[i] = seg[i].off;
        a->sl[i] = seg[i].len;
        ulen += seg[i].len;
    }
    /* rank order: a later rank's bytes overwrite an earlier one's where they overlap */
    for (int r = 0; r < P && code == MPI_SUCCESS; r++) {
        const unsigned char *data = my_data;
        if (r > 0) {
            code = xfer(0, a->stage, counts[2 * r + 1], r, TAG_DATA, f->comm);
            data = a->stage;
        }
        uint64_t at = 0;
        for (size_t i = a->first[r]; i < a->first[r + 1] && code == MPI_SUCCESS; i++) {
            run_t x = a->all[i];
            size_t lo = 0, hi = nseg; /* the segment holding x: the last with off <= x.off */
            while (hi - lo > 1) {
                size_t mid = (lo + hi) / 2;
                if (seg[mid].off <= x.off)
                    lo = mid;
                else
                    hi = mid;
            }
            memcpy(a->ubuf + a->segpos[lo] + (x.off - seg[lo].off), data + at, x.len);
            at += x.len;
        }
    }
    if (code == MPI_SUCCESS && nseg > 0)
        code = amio_base_touch(f, 1, nseg, a->so, a->sl); /* a forwarded file's base */
    if (code == MPI_SUCCESS && nseg > 0) {
        int rc = atomio_write_list(f->af, nseg, a->so, a->sl, a->ubuf, ulen);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "writing (collective)");
    }
    return code;
}

static int sum_u64(uint64_t *v, int n, MPI_Comm comm)
{
    MPI_Request r;
    int rc = PMPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_UINT64_T, MPI_SUM, comm, &r);
    return rc == MPI_SUCCESS ? amio_wait(&r) : rc;
}

/* The aggregated call, under f->mu. Returns the agreed code; *done: bytes of this rank. */
static int gathered(amio_file *f, int explicit_offset, MPI_Offset offset, const void *buf,
                    MPI_Count count, MPI_Datatype dt, MPI_Count *done, int *fallback)
{
    *done = 0;
    *fallback = 0;
    size_t n = 0;
    uint64_t skip = 0;
    const void *src = NULL;
    void *owned = NULL;
    run_t *runs = NULL;
    size_t nruns = 0;
    MPI_Offset pos = explicit_offset ? offset : f->pos;
    int code = amio_check_call(f, 1, explicit_offset, offset, count, dt, &n);
    if (code == MPI_SUCCESS && n > 0 &&
        (__builtin_mul_overflow((uint64_t)pos, (uint64_t)f->etype_size, &skip) ||
         skip > (UINT64_MAX >> 2)))
        code = amio_error(MPI_ERR_ARG, "offset %lld etypes is beyond any file", (long long)pos);
    if (code == MPI_SUCCESS && n > 0)
        code = amio_write_source((void *)buf, count, dt, n, &src, &owned);
    if (code == MPI_SUCCESS && n > 0)
        code = call_runs(f, skip, n, &runs, &nruns);

    /* agree: anyone failed? the call's total? */
    uint64_t v[2] = {code != MPI_SUCCESS, code == MPI_SUCCESS ? n : 0};
    int rc = sum_u64(v, 2, f->comm);
    if (code == MPI_SUCCESS && rc != MPI_SUCCESS)
        code = rc;
    if (code == MPI_SUCCESS && v[0] > 0)
        code = amio_error(MPI_ERR_IO, "collective write failed on another rank");
    if (code != MPI_SUCCESS || v[1] == 0)
        goto out;
    if (v[1] > amio_cfg.cb_max) {
        *fallback = 1;
        goto out;
    }

    uint64_t mine[2] = {nruns, n};
    uint64_t *counts = f->rank == 0 ? malloc(2 * (size_t)f->size * sizeof *counts) : NULL;
    uint64_t dummy[2];
    MPI_Request r;
    rc = PMPI_Igather(mine, 2, MPI_UINT64_T, counts ? (void *)counts : (void *)dummy, 2,
                      MPI_UINT64_T, 0, f->comm, &r);
    if (rc == MPI_SUCCESS)
        rc = amio_wait(&r);
    agg_t a;
    memset(&a, 0, sizeof a);
    int wcode = rc;
    if (f->rank == 0 && wcode == MPI_SUCCESS)
        wcode = counts ? agg_alloc(&a, f->size, counts)
                       : amio_error(MPI_ERR_NO_MEM, "collective write: out of memory");
    /* rank 0 says whether it can take the data; only then does the data move */
    int go = wcode == MPI_SUCCESS;
    rc = amio_bcast(&go, 1, MPI_INT, 0, f->comm);
    if (rc != MPI_SUCCESS)
        go = 0;
    if (!go && wcode == MPI_SUCCESS)
        wcode = amio_error(MPI_ERR_IO, "collective write: rank 0 cannot take the data");
    if (go && f->rank == 0) {
        wcode = aggregate(f, &a, runs, src, counts);
    } else if (go) {
        wcode = xfer(1, runs, nruns * sizeof *runs, 0, TAG_RUNS, f->comm);
        if (wcode == MPI_SUCCESS)
            wcode = xfer(1, (void *)src, n, 0, TAG_DATA, f->comm);
    }
    agg_free(&a);
    free(counts);
    code = amio_agree(wcode, f->comm, "collective write");
    if (code == MPI_SUCCESS) {
        *done = (MPI_Count)n;
        f->dirty = 1;
        if (!explicit_offset)
            f->pos = pos + (MPI_Offset)(n / (size_t)f->etype_size);
    }
out:
    free(owned);
    free(runs);
    return code;
}

int amio_write_all(amio_file *f, int explicit_offset, MPI_Offset offset, const void *buf,
                   MPI_Count count, MPI_Datatype dt, MPI_Count *bytes)
{
    *bytes = 0;
    /* Interval I/O: rank 0 may not write other ranks' private bytes (their owners write
     * them lock-free; atomio refuses), and private bytes need no lock anyway: each rank
     * writes its own part (in_force is the same on every rank: the same interval set). */
    int by_intervals = f->atomic && f->iv && strcmp(f->in_force, "interval") == 0;
    if (!(f->direct || f->forwarded) || amio_cfg.cb_max == 0 || by_intervals)
        return amio_io(f, 1, explicit_offset, offset, (void *)buf, count, dt, bytes);
    int fallback = 0;
    int code = gathered(f, explicit_offset, offset, buf, count, dt, bytes, &fallback);
    if (fallback)
        code = amio_io(f, 1, explicit_offset, offset, (void *)buf, count, dt, bytes);
    return code;
}
