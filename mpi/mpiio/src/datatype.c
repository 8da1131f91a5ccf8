/*
 * datatype.c -- MPI datatypes decoded into atomio patterns that keep their structure.
 *
 * MPI_Type_get_envelope / MPI_Type_get_contents walk the constructor tree; every
 * constructor becomes the matching atomio node, so a vector of 131,072 blocks is one
 * vector node, never a list. Named types are bytes (pair types such as MPI_DOUBLE_INT are
 * two-field structs). darray is built the way ROMIO builds it: per dimension, fastest
 * first, the block or cyclic(k) selection of the indices this process owns, each
 * dimension resized to the whole dimension, the process grid in row-major order.
 *
 * Representation (amio_dtype): the data of one instance placed at origin x is the data of
 * pattern `p` placed at x + `off`, where every displacement inside `p` is >= 0; a parent
 * repeats the type every MPI extent (amio_dtype_elem wraps `p` in a resized node when its
 * own extent differs). Negative displacements (MPI_BOTTOM with absolute addresses, struct
 * fields before the origin) are therefore fine; what cannot be represented is a negative
 * stride between blocks that hold data (and a negative extent), which reorders memory:
 * memory types then fall back to MPI_Pack, file types are an MPI_ERR_TYPE error.
 *
 * Invariants: every derived type handle obtained from MPI_Type_get_contents is freed
 * before returning; the decoded size always equals MPI_Type_size (checked, else an error),
 * so a decoding bug can never move the wrong number of bytes; decoded derived types are
 * cached as an attribute and freed by MPI when the type is freed (refcounted, so a call in
 * progress keeps its copy alive); nesting deeper than MAX_DEPTH is an error, not a crash.
 */
#include "internal.h"
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 40

static int keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    char msg[512];
} why_t;

static int fail(why_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(why_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static int ck(int rc, why_t *w, const char *what)
{
    if (rc == ATOMIO_OK)
        return 0;
    return fail(w, "%s: %s", what, atomio_last_error());
}

static int mul64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static int add64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

int amio_type_is_named(MPI_Datatype t)
{
    int ni, na, nd, comb;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return 1;
    return comb == MPI_COMBINER_NAMED;
}

static void free_contents_type(MPI_Datatype t)
{
    if (t != MPI_DATATYPE_NULL && !amio_type_is_named(t))
        PMPI_Type_free(&t);
}

int amio_dtype_elem(const amio_dtype *d, atomio_pattern **out, int *owned)
{
    uint64_t size, ext, end, nodes;
    int mono;
    *owned = 0;
    if (d->extent < 0)
        return -1;
    if (atomio_pattern_info(d->p, &size, &ext, &end, &nodes, &mono) != ATOMIO_OK)
        return -1;
    if (ext == (uint64_t)d->extent) {
        *out = d->p;
        return 0;
    }
    if (atomio_pattern_resized((uint64_t)d->extent, d->p, out) != ATOMIO_OK)
        return -1;
    *owned = 1;
    return 0;
}

static int elem(const amio_dtype *d, atomio_pattern **out, int *owned, why_t *w)
{
    if (d->extent < 0)
        return fail(w, "an element type with negative extent %lld", (long long)d->extent);
    if (amio_dtype_elem(d, out, owned))
        return fail(w, "resizing an element: %s", atomio_last_error());
    return 0;
}

static void drop(atomio_pattern *p, int owned)
{
    if (owned)
        atomio_pattern_free(p);
}

/* p is a single Bytes node: its length, else -1. */
static int64_t bytes_len(const atomio_pattern *p)
{
    uint64_t size, ext, end, nodes;
    int mono;
    if (atomio_pattern_info(p, &size, &ext, &end, &nodes, &mono) != ATOMIO_OK || nodes != 1)
        return -1;
    return (int64_t)size;
}

/* ----- named types ---------------------------------------------------------------------- */

struct pair {
    MPI_Datatype *t;
    size_t first, second_off, second;
};

#define PAIR(T1, NAME)                                                                    \
    {                                                                                     \
        &NAME, sizeof(T1), offsetof(struct { T1 a; int b; }, b), sizeof(int)              \
    }

static int decode_named(MPI_Datatype t, amio_dtype *d, why_t *w)
{
    MPI_Count tlb, text;
    if (PMPI_Type_get_true_extent_x(t, &tlb, &text) != MPI_SUCCESS)
        return fail(w, "MPI_Type_get_true_extent_x failed");
    if (text == d->size) {
        d->off = (int64_t)tlb;
        return ck(atomio_pattern_bytes((uint64_t)d->size, &d->p), w, "bytes");
    }
    MPI_Datatype float_int = MPI_FLOAT_INT, double_int = MPI_DOUBLE_INT, long_int = MPI_LONG_INT,
                 two_int = MPI_2INT, short_int = MPI_SHORT_INT,
                 long_double_int = MPI_LONG_DOUBLE_INT;
    /* The C layouts MPI defines these as (MPI 4.0, 6.9.4). */
    struct pair pairs[] = {
        PAIR(float, float_int), PAIR(double, double_int), PAIR(long, long_int),
        PAIR(int, two_int),     PAIR(short, short_int),   PAIR(long double, long_double_int),
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (*pairs[i].t != t)
            continue;
        if ((int64_t)(pairs[i].first + pairs[i].second) != d->size)
            break;
        atomio_pattern *a = NULL, *b = NULL;
        int rc = atomio_pattern_bytes(pairs[i].first, &a);
        if (rc == ATOMIO_OK)
            rc = atomio_pattern_bytes(pairs[i].second, &b);
        if (rc == ATOMIO_OK) {
            uint64_t disps[2] = {0, pairs[i].second_off}, lens[2] = {1, 1};
            const atomio_pattern *el[2] = {a, b};
            rc = atomio_pattern_struct(2, disps, lens, el, &d->p);
        }
        atomio_pattern_free(a);
        atomio_pattern_free(b);
        d->off = 0;
        return ck(rc, w, "pair type");
    }
    return fail(w, "a predefined type with holes (size %lld, true extent %lld) that atomio "
                   "does not know",
                (long long)d->size, (long long)text);
}

/* ----- constructors ---------------------------------------------------------------------- */

static int build_hvector(int64_t count, int64_t bl, int64_t stride, const amio_dtype *sub,
                         amio_dtype *d, why_t *w)
{
    if (count < 0 || bl < 0)
        return fail(w, "negative count or block length");
    if (count == 1)
        stride = 0;
    if (stride < 0)
        return fail(w, "a vector with a negative stride (%lld bytes)", (long long)stride);
    d->off = sub->off;
    int64_t len = bytes_len(sub->p);
    int64_t blockbytes;
    if (len >= 0 && len == sub->extent && mul64(bl, len, &blockbytes) == 0 &&
        (count == 1 || stride == blockbytes)) {
        int64_t total;
        if (mul64(count, blockbytes, &total))
            return fail(w, "vector size overflows");
        return ck(atomio_pattern_bytes((uint64_t)total, &d->p), w, "bytes");
    }
    atomio_pattern *e;
    int owned;
    if (elem(sub, &e, &owned, w))
        return -1;
    int rc = atomio_pattern_hvector((uint64_t)count, (uint64_t)bl, (uint64_t)stride, e, &d->p);
    drop(e, owned);
    return ck(rc, w, "vector");
}

/* Blocks at byte displacements `disp` (any sign), each `bl[k]` copies of `sub`. */
static int build_hindexed(int64_t n, const int64_t *bl, const int64_t *disp,
                          const amio_dtype *sub, amio_dtype *d, why_t *w)
{
    int64_t m = INT64_MAX;
    int64_t kept = 0;
    for (int64_t k = 0; k < n; k++) {
        if (bl[k] < 0)
            return fail(w, "negative block length");
        if (bl[k] > 0) {
            kept++;
            if (disp[k] < m)
                m = disp[k];
        }
    }
    if (kept == 0) {
        d->off = 0;
        return ck(atomio_pattern_bytes(0, &d->p), w, "bytes");
    }
    uint64_t *ud = malloc((size_t)kept * sizeof *ud), *ub = malloc((size_t)kept * sizeof *ub);
    if (!ud || !ub) {
        free(ud);
        free(ub);
        return fail(w, "out of memory");
    }
    int64_t j = 0;
    for (int64_t k = 0; k < n; k++)
        if (bl[k] > 0) {
            ud[j] = (uint64_t)(disp[k] - m); /* >= 0, and no overflow: both in int64 */
            ub[j++] = (uint64_t)bl[k];
        }
    atomio_pattern *e;
    int owned, rc = -1;
    if (add64(m, sub->off, &d->off) == 0 && elem(sub, &e, &owned, w) == 0) {
        rc = ck(atomio_pattern_hindexed((size_t)kept, ud, ub, e, &d->p), w, "indexed");
        drop(e, owned);
    } else if (!w->msg[0]) {
        fail(w, "indexed displacement overflows");
    }
    free(ud);
    free(ub);
    return rc;
}

static int decode(MPI_Datatype t, int depth, amio_dtype *d, why_t *w);

static int build_struct(int64_t n, const int64_t *bl, const int64_t *disp,
                        const MPI_Datatype *types, int depth, amio_dtype *d, why_t *w)
{
    amio_dtype *subs = calloc((size_t)(n ? n : 1), sizeof *subs);
    uint64_t *ud = calloc((size_t)(n ? n : 1), sizeof *ud);
    uint64_t *ub = calloc((size_t)(n ? n : 1), sizeof *ub);
    atomio_pattern **el = calloc((size_t)(n ? n : 1), sizeof *el);
    int *owned = calloc((size_t)(n ? n : 1), sizeof *owned);
    int rc = -1;
    int64_t kept = 0, m = INT64_MAX;
    int64_t *abs_disp = calloc((size_t)(n ? n : 1), sizeof *abs_disp);
    if (!subs || !ud || !ub || !el || !owned || !abs_disp) {
        fail(w, "out of memory");
        goto out;
    }
    for (int64_t k = 0; k < n; k++) {
        if (bl[k] < 0) {
            fail(w, "negative block length");
            goto out;
        }
        if (bl[k] == 0)
            continue;
        if (decode(types[k], depth + 1, &subs[k], w))
            goto out;
        if (subs[k].size == 0)
            continue;
        if (add64(disp[k], subs[k].off, &abs_disp[k])) {
            fail(w, "struct displacement overflows");
            goto out;
        }
        if (abs_disp[k] < m)
            m = abs_disp[k];
    }
    for (int64_t k = 0; k < n; k++) {
        if (bl[k] == 0 || subs[k].size == 0)
            continue;
        ud[kept] = (uint64_t)(abs_disp[k] - m);
        ub[kept] = (uint64_t)bl[k];
        if (elem(&subs[k], &el[kept], &owned[kept], w))
            goto out;
        kept++;
    }
    if (kept == 0) {
        d->off = 0;
        rc = ck(atomio_pattern_bytes(0, &d->p), w, "bytes");
    } else {
        d->off = m;
        rc = ck(atomio_pattern_struct((size_t)kept, ud, ub, (const atomio_pattern *const *)el,
                                      &d->p),
                w, "struct");
    }
out:
    for (int64_t k = 0; el && k < kept; k++)
        drop(el[k], owned[k]);
    for (int64_t k = 0; subs && k < n; k++)
        atomio_pattern_free(subs[k].p);
    free(subs);
    free(ud);
    free(ub);
    free(el);
    free(owned);
    free(abs_disp);
    return rc;
}

static int build_subarray(const int *ints, const amio_dtype *sub, amio_dtype *d, why_t *w)
{
    int nd = ints[0];
    if (nd <= 0)
        return fail(w, "subarray with %d dimensions", nd);
    uint64_t *v = malloc(3 * (size_t)nd * sizeof *v);
    if (!v)
        return fail(w, "out of memory");
    for (int i = 0; i < 3 * nd; i++) {
        if (ints[1 + i] < 0) {
            free(v);
            return fail(w, "negative subarray size or start");
        }
        v[i] = (uint64_t)ints[1 + i];
    }
    int fortran = ints[1 + 3 * nd] == MPI_ORDER_FORTRAN;
    atomio_pattern *e;
    int owned, rc = -1;
    d->off = sub->off;
    if (elem(sub, &e, &owned, w) == 0) {
        rc = ck(atomio_pattern_subarray((size_t)nd, v, v + nd, v + 2 * nd, fortran, e, &d->p), w,
                "subarray");
        drop(e, owned);
    }
    free(v);
    return rc;
}

/* The indices of one darray dimension this process owns, as copies of `cur` (whose
 * extent is `slice`, one index). Empty selections never reach here (size 0 types stop
 * earlier). */
static int darray_dim(int distrib, int darg, int64_t gsize, int64_t psize, int64_t coord,
                      atomio_pattern *cur, int64_t slice, atomio_pattern **out, why_t *w)
{
    if (distrib == MPI_DISTRIBUTE_NONE) {
        return ck(atomio_pattern_hvector(1, (uint64_t)gsize, 0, cur, out), w, "darray none");
    }
    if (distrib == MPI_DISTRIBUTE_BLOCK) {
        int64_t b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
        if (b <= 0 || b * psize < gsize)
            return fail(w, "darray block size %lld too small", (long long)b);
        int64_t start = coord * b, len = gsize - start < b ? gsize - start : b, d0;
        if (len <= 0)
            return fail(w, "darray: empty block dimension");
        if (mul64(start, slice, &d0))
            return fail(w, "darray overflows");
        uint64_t disp = (uint64_t)d0, bl = (uint64_t)len;
        return ck(atomio_pattern_hindexed(1, &disp, &bl, cur, out), w, "darray block");
    }
    if (distrib != MPI_DISTRIBUTE_CYCLIC)
        return fail(w, "darray distribution %d", distrib);
    int64_t k = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
    if (k <= 0)
        return fail(w, "darray cyclic block %lld", (long long)k);
    int64_t first = coord * k, period = k * psize;
    int64_t nfull = first + k <= gsize ? (gsize - first - k) / period + 1 : 0;
    int64_t next = first + nfull * period, rem = next < gsize ? gsize - next : 0;
    atomio_pattern *parts[2] = {NULL, NULL};
    uint64_t disps[2], lens[2] = {1, 1};
    size_t n = 0;
    int rc = ATOMIO_OK;
    int64_t stride, d0;
    if (nfull > 0) {
        if (mul64(period, slice, &stride) || mul64(first, slice, &d0))
            return fail(w, "darray overflows");
        rc = atomio_pattern_hvector((uint64_t)nfull, (uint64_t)k, (uint64_t)stride, cur,
                                    &parts[n]);
        disps[n++] = (uint64_t)d0;
    }
    if (rc == ATOMIO_OK && rem > 0) {
        if (mul64(next, slice, &d0)) {
            atomio_pattern_free(parts[0]);
            return fail(w, "darray overflows");
        }
        rc = atomio_pattern_hvector(1, (uint64_t)rem, 0, cur, &parts[n]);
        disps[n++] = (uint64_t)d0;
    }
    if (rc == ATOMIO_OK && n == 0)
        return fail(w, "darray: empty cyclic dimension");
    if (rc == ATOMIO_OK)
        rc = atomio_pattern_struct(n, disps, lens, (const atomio_pattern *const *)parts, out);
    atomio_pattern_free(parts[0]);
    atomio_pattern_free(parts[1]);
    return ck(rc, w, "darray cyclic");
}

static int build_darray(const int *ints, const amio_dtype *sub, amio_dtype *d, why_t *w)
{
    int nprocs = ints[0], rank = ints[1], nd = ints[2];
    const int *gsizes = ints + 3, *distribs = ints + 3 + nd, *dargs = ints + 3 + 2 * nd,
              *psizes = ints + 3 + 3 * nd;
    int order = ints[3 + 4 * nd];
    if (nd <= 0 || nd > 64 || nprocs <= 0)
        return fail(w, "darray with %d dimensions over %d processes", nd, nprocs);
    int64_t coords[64];
    int64_t procs = nprocs, r = rank;
    for (int i = 0; i < nd; i++) {
        if (psizes[i] <= 0 || gsizes[i] <= 0)
            return fail(w, "darray dimension %d: size %d over %d processes", i, gsizes[i],
                        psizes[i]);
        procs /= psizes[i];
        if (procs <= 0)
            return fail(w, "darray process grid larger than its %d processes", nprocs);
        coords[i] = r / procs;
        r %= procs;
    }
    atomio_pattern *cur;
    int owned;
    if (elem(sub, &cur, &owned, w))
        return -1;
    int64_t slice = sub->extent;
    for (int j = 0; j < nd; j++) {
        int i = order == MPI_ORDER_FORTRAN ? j : nd - 1 - j; /* fastest dimension first */
        atomio_pattern *sel = NULL, *next = NULL;
        int64_t ext;
        if (darray_dim(distribs[i], dargs[i], gsizes[i], psizes[i], coords[i], cur, slice, &sel,
                       w) ||
            mul64(gsizes[i], slice, &ext) ||
            ck(atomio_pattern_resized((uint64_t)ext, sel, &next), w, "darray resize")) {
            if (!w->msg[0])
                fail(w, "darray overflows");
            atomio_pattern_free(sel);
            drop(cur, owned);
            return -1;
        }
        atomio_pattern_free(sel);
        drop(cur, owned);
        cur = next;
        owned = 1;
        slice = ext;
    }
    d->p = cur;
    d->off = sub->off;
    return 0;
}

/* ----- the walk ----------------------------------------------------------------------- */

/* AMIO_MPI1_COMBINERS: MPI_COMBINER_{HVECTOR,HINDEXED,STRUCT}_INTEGER (MPI-1 Fortran
 * combiners, removed in MPI-3.0) are still declared by MPICH, but Open MPI 4.1's mpi.h turns
 * them into a failing _Static_assert, and its datatype engine never returns them; so those
 * case labels exist only when building against a library other than Open MPI. */
#ifdef OPEN_MPI
#define AMIO_IS_STRUCT(c) ((c) == MPI_COMBINER_STRUCT)
#else
#define AMIO_IS_STRUCT(c) ((c) == MPI_COMBINER_STRUCT || (c) == MPI_COMBINER_STRUCT_INTEGER)
#endif

static int decode(MPI_Datatype t, int depth, amio_dtype *d, why_t *w)
{
    memset(d, 0, sizeof *d);
    if (depth > MAX_DEPTH)
        return fail(w, "datatype nested deeper than %d", MAX_DEPTH);
    int ni, na, nd, comb;
    MPI_Count lb, ext, size;
    if (t == MPI_DATATYPE_NULL || PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
        PMPI_Type_get_extent_x(t, &lb, &ext) != MPI_SUCCESS ||
        PMPI_Type_size_x(t, &size) != MPI_SUCCESS)
        return fail(w, "not a valid datatype");
    if (size == MPI_UNDEFINED || size < 0)
        return fail(w, "datatype size does not fit");
    d->lb = (int64_t)lb;
    d->extent = (int64_t)ext;
    d->size = (int64_t)size;
    if (size == 0)
        return ck(atomio_pattern_bytes(0, &d->p), w, "bytes");
    if (comb == MPI_COMBINER_NAMED || comb == MPI_COMBINER_F90_REAL ||
        comb == MPI_COMBINER_F90_COMPLEX || comb == MPI_COMBINER_F90_INTEGER)
        return decode_named(t, d, w);

    int *ints = malloc((size_t)(ni + 1) * sizeof *ints);
    MPI_Aint *addrs = malloc((size_t)(na + 1) * sizeof *addrs);
    MPI_Datatype *types = malloc((size_t)(nd + 1) * sizeof *types);
    int64_t *bl = NULL, *disp = NULL;
    amio_dtype sub = {0};
    int rc = -1, got = 0;
    if (!ints || !addrs || !types) {
        fail(w, "out of memory");
        goto out;
    }
    if (PMPI_Type_get_contents(t, ni, na, nd, ints, addrs, types) != MPI_SUCCESS) {
        fail(w, "MPI_Type_get_contents failed");
        goto out;
    }
    got = 1;
    /* Every constructor but struct has exactly one old type. */
    if (!AMIO_IS_STRUCT(comb)) {
        if (nd != 1) {
            fail(w, "combiner %d with %d types", comb, nd);
            goto out;
        }
        if (decode(types[0], depth + 1, &sub, w))
            goto out;
    }
    int n = ni > 0 ? ints[0] : 0;
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
        d->p = sub.p;
        d->off = sub.off;
        sub.p = NULL;
        rc = 0;
        break;
    case MPI_COMBINER_CONTIGUOUS:
        rc = build_hvector(1, n, 0, &sub, d, w);
        break;
    case MPI_COMBINER_VECTOR: {
        int64_t stride;
        if (mul64(ints[2], sub.extent, &stride)) {
            fail(w, "vector stride overflows");
            break;
        }
        rc = build_hvector(n, ints[1], stride, &sub, d, w);
        break;
    }
    case MPI_COMBINER_HVECTOR:
#ifndef OPEN_MPI /* see AMIO_MPI1_COMBINERS above */
    case MPI_COMBINER_HVECTOR_INTEGER:
#endif
        rc = build_hvector(n, ints[1], (int64_t)addrs[0], &sub, d, w);
        break;
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
#ifndef OPEN_MPI /* see AMIO_MPI1_COMBINERS above */
    case MPI_COMBINER_HINDEXED_INTEGER:
#endif
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK: {
        bl = malloc((size_t)(n + 1) * sizeof *bl);
        disp = malloc((size_t)(n + 1) * sizeof *disp);
        if (!bl || !disp || n < 0) {
            fail(w, n < 0 ? "negative count" : "out of memory");
            break;
        }
        int blocked = comb == MPI_COMBINER_INDEXED_BLOCK || comb == MPI_COMBINER_HINDEXED_BLOCK;
        int in_elems = comb == MPI_COMBINER_INDEXED || comb == MPI_COMBINER_INDEXED_BLOCK;
        int ok = 1;
        for (int k = 0; k < n; k++) {
            bl[k] = blocked ? ints[1] : ints[1 + k];
            if (in_elems) {
                int di = blocked ? ints[2 + k] : ints[1 + n + k];
                ok = ok && mul64(di, sub.extent, &disp[k]) == 0;
            } else {
                disp[k] = (int64_t)addrs[k];
            }
        }
        if (!ok) {
            fail(w, "indexed displacement overflows");
            break;
        }
        rc = build_hindexed(n, bl, disp, &sub, d, w);
        break;
    }
    case MPI_COMBINER_STRUCT:
#ifndef OPEN_MPI /* see AMIO_MPI1_COMBINERS above */
    case MPI_COMBINER_STRUCT_INTEGER:
#endif
    {
        bl = malloc((size_t)(n + 1) * sizeof *bl);
        disp = malloc((size_t)(n + 1) * sizeof *disp);
        if (!bl || !disp || n < 0 || n > nd) {
            fail(w, "bad struct");
            break;
        }
        for (int k = 0; k < n; k++) {
            bl[k] = ints[1 + k];
            disp[k] = (int64_t)addrs[k];
        }
        rc = build_struct(n, bl, disp, types, depth, d, w);
        break;
    }
    case MPI_COMBINER_SUBARRAY:
        rc = build_subarray(ints, &sub, d, w);
        break;
    case MPI_COMBINER_DARRAY:
        rc = build_darray(ints, &sub, d, w);
        break;
    default:
        fail(w, "datatype combiner %d is not supported", comb);
        break;
    }
    if (rc == 0) {
        uint64_t psize, pext, pend, nodes;
        int mono;
        if (atomio_pattern_info(d->p, &psize, &pext, &pend, &nodes, &mono) != ATOMIO_OK ||
            (int64_t)psize != d->size) {
            rc = fail(w, "decoded %llu bytes for a type of %lld (combiner %d): not supported",
                      (unsigned long long)psize, (long long)d->size, comb);
        }
    }
out:
    if (got)
        for (int k = 0; k < nd; k++)
            free_contents_type(types[k]);
    atomio_pattern_free(sub.p);
    free(ints);
    free(addrs);
    free(types);
    free(bl);
    free(disp);
    if (rc) {
        atomio_pattern_free(d->p);
        d->p = NULL;
    }
    return rc;
}

/* ----- cache ---------------------------------------------------------------------------- */

static int delete_attr(MPI_Datatype t, int key, void *attr, void *extra)
{
    (void)t;
    (void)key;
    (void)extra;
    amio_dtype_release(attr);
    return MPI_SUCCESS;
}

void amio_datatype_init(void)
{
    pthread_mutex_lock(&mu);
    if (keyval == MPI_KEYVAL_INVALID)
        PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, delete_attr, &keyval, NULL);
    pthread_mutex_unlock(&mu);
}

void amio_dtype_release(amio_dtype *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&mu);
    int last = --d->refs == 0;
    pthread_mutex_unlock(&mu);
    if (last) {
        atomio_pattern_free(d->p);
        free(d);
    }
}

int amio_dtype_try(MPI_Datatype t, amio_dtype **out, char *why, size_t cap)
{
    *out = NULL;
    int named = amio_type_is_named(t);
    if (!named && keyval != MPI_KEYVAL_INVALID) {
        void *attr = NULL;
        int flag = 0;
        if (PMPI_Type_get_attr(t, keyval, &attr, &flag) == MPI_SUCCESS && flag && attr) {
            pthread_mutex_lock(&mu);
            ((amio_dtype *)attr)->refs++;
            pthread_mutex_unlock(&mu);
            *out = attr;
            return 0;
        }
    }
    amio_dtype *d = malloc(sizeof *d);
    why_t w = {{0}};
    if (!d || decode(t, 0, d, &w)) {
        snprintf(why, cap, "%s", d ? w.msg : "out of memory");
        free(d);
        return -1;
    }
    d->dense = bytes_len(d->p) == d->size;
    d->refs = 1;
    if (!named && keyval != MPI_KEYVAL_INVALID) {
        d->refs = 2;
        if (PMPI_Type_set_attr(t, keyval, d) != MPI_SUCCESS)
            d->refs = 1;
    }
    *out = d;
    return 0;
}

/* A private copy of MPI_COMM_SELF whose handler returns errors, for amio_type_check.
 * (Swapping MPI_COMM_SELF's own handler would not do: MPICH lets a communicator without a
 * handler of its own use MPI_COMM_WORLD's, and restoring "the old one" would pin it.) */
static MPI_Comm check_comm = MPI_COMM_NULL;
static pthread_once_t check_once = PTHREAD_ONCE_INIT;

static void make_check_comm(void)
{
    MPI_Comm c;
    if (PMPI_Comm_dup(MPI_COMM_SELF, &c) == MPI_SUCCESS &&
        PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN) == MPI_SUCCESS)
        check_comm = c;
}

int amio_type_check(MPI_Datatype t, const char *what)
{
    if (t == MPI_DATATYPE_NULL)
        return amio_error(MPI_ERR_TYPE, "%s is MPI_DATATYPE_NULL", what);
    /* MPI_Pack_size checks the handle and that the type is committed, and reports through
     * its communicator's handler, which returns. (Open MPI dereferences a bogus handle
     * whatever we do, as its own calls would.) */
    pthread_once(&check_once, make_check_comm);
    if (check_comm == MPI_COMM_NULL)
        return amio_error(MPI_ERR_INTERN, "cannot duplicate MPI_COMM_SELF");
    int size = 0;
    return PMPI_Pack_size(0, t, check_comm, &size) == MPI_SUCCESS
               ? MPI_SUCCESS
               : amio_error(MPI_ERR_TYPE, "%s is not a valid, committed datatype", what);
}

int amio_dtype_acquire(MPI_Datatype t, amio_dtype **out)
{
    char why[512];
    if (amio_dtype_try(t, out, why, sizeof why))
        return amio_error(MPI_ERR_TYPE, "datatype: %s", why);
    return MPI_SUCCESS;
}
