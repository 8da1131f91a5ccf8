/*
 * hdf5_span.c -- one H5Dwrite, one atomic write: the library defines H5Dwrite (and H5Fcreate,
 * H5Fopen), found first when preloaded like the MPI_ names, and calls HDF5's own, found with
 * dlsym(RTLD_NEXT). Nothing links HDF5: a program without it never calls these.
 *
 * Why: HDF5 turns one independent H5Dwrite of a hyperslab into one MPI_File_write_at per
 * contiguous piece (a row of a column band: 1024 calls for 1024 rows), and MPI atomic mode
 * makes each call atomic, not the dataset write: two ranks' overlapping bands end up mixed
 * row by row (H5Fset_mpi_atomicity's documentation says so). Each call also takes its own
 * lock.
 *
 * The span: while an independent H5Dwrite runs (transfer mode H5FD_MPIO_INDEPENDENT, HDF5's
 * default; amio_span_depth > 0 on this thread), an explicit-offset write (MPI_File_write_at,
 * _c) on an atomio file in atomic mode whose view is contiguous is not written: its bytes are
 * copied into the span (io_calls.c asks amio_span_write) and the call returns success.
 * Before H5Dwrite returns, the pieces of each file are written as ONE atomio_write_list
 * (every server strategy: one lock request for exactly those bytes; rma: one rmalock on
 * their hull, then the pwrites), so the data of one H5Dwrite replaces the overlap of another
 * entirely or not at all. Any other MPI entry point called meanwhile (a read, set_view,
 * sync, close ...: chain.c calls amio_span_barrier first) writes the pieces collected so far
 * first, so program order is kept (a read inside H5Dwrite sees the rows written before it).
 * A piece overlapping an earlier piece of the span writes the earlier ones first (later
 * bytes win, as they would have). A collective H5Dwrite is not collected: HDF5 may
 * synchronize the ranks inside it, after which another rank could read what this one wrote;
 * its data goes as MPI_File_set_view + MPI_File_write_at_all, which direct placement
 * already gathers into one atomic call (collective.c).
 *
 * Views inside HDF5 calls: amio_hdf5_depth > 0 during H5Dwrite, and (span on) H5Fcreate and
 * H5Fopen; a
 * view set then on every rank (the default view of HDF5's open, the temporary filetype of
 * a collective H5Dwrite) is not analyzed for interval I/O (intervals.c): every call locks
 * exactly its bytes, so auto runs ching:datatype:one-try rather than a lock on each call's
 * hull, which would serialize every span against every other.
 *
 * Exact guarantee (ATOMIO_HDF5_SPAN=1, the default): the writes one independent H5Dwrite
 * makes to one atomio file in atomic mode, up to the next other MPI-IO call HDF5 makes in
 * it, are one atomic call -- for contiguous and unfiltered chunked datasets this is the
 * whole dataset write (HDF5 calls nothing else in between) -- as long as the span holds at
 * most ATOMIO_HDF5_SPAN_MAX bytes (default 1 GiB; a larger one is written in parts of at
 * most that size, each atomic). The data is in the file (as a write that returned) before
 * H5Dwrite returns; an error of the span's write makes H5Dwrite return -1 (after the file's
 * error handler was called with it). A collective H5Dwrite is atomic as a whole when HDF5
 * makes it one collective call (contiguous layouts; HDF5 falls back to independent I/O in
 * some cases, e.g. type conversion, and those pieces are then atomic each). ATOMIO_HDF5_SPAN=0
 * turns collection off: every piece is its own atomic call again; an open's hint
 * atomio_hdf5_span (0 or 1, in the MPI_Info HDF5 gets with H5Pset_fapl_mpio) decides for
 * that file, whatever ATOMIO_HDF5_SPAN says.
 *
 * Invariants: a span never outlives its H5Dwrite (written at depth 0, also when HDF5 failed:
 * HDF5 believed those pieces written); pieces handed to atomio_write_list are increasing and
 * non-overlapping; nothing here calls an MPI_/PMPI_ entry point of this library.
 */
#define _GNU_SOURCE
#include "span.h"
#include "hints.h"
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__thread int amio_span_depth;

typedef struct {
    uint64_t off, len; /* file bytes */
    size_t at;         /* where its bytes are in data */
} piece;

typedef struct {
    amio_file *f;
    piece *p;
    size_t n, cap;
    unsigned char *data;
    size_t used, data_cap;
    uint64_t max_end;
    int unsorted;
} pending;

/* The bytes the current H5Dwrite selects (H5Sget_select_npoints x H5Tget_size), or 0: the
 * span's buffer is sized for them at its first piece. */
static __thread uint64_t span_expect;

#define SPAN_FILES 4
#define SPAN_KEEP (64u << 20) /* bytes of span buffer kept between H5Dwrites, per file slot */
static __thread pending span[SPAN_FILES];
static __thread int span_files;

static int span_on = -1;
static uint64_t span_max = 1ULL << 30;

static void span_config(void)
{
    const char *v = getenv("ATOMIO_HDF5_SPAN");
    span_on = !(v && (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "disable")));
    const char *m = getenv("ATOMIO_HDF5_SPAN_MAX");
    if (m && *m) {
        char *end = NULL;
        unsigned long long x = strtoull(m, &end, 0);
        if (end && *end == '\0' && x > 0)
            span_max = x;
        else
            amio_warn("ignoring ATOMIO_HDF5_SPAN_MAX=%s (want a positive byte count)", m);
    }
}

/* Files whose open said atomio_hdf5_span (its value wins over ATOMIO_HDF5_SPAN). */
#define SPAN_HINTED 64
static struct {
    amio_file *f;
    int on;
} hinted[SPAN_HINTED];
static int n_hinted, n_hinted_on; /* n_hinted read without the mutex: a hint only */
static pthread_mutex_t hinted_mu = PTHREAD_MUTEX_INITIALIZER;

void amio_span_opened(amio_file *f)
{
    int v = amio_hints_open_span();
    if (v < 0)
        return;
    pthread_mutex_lock(&hinted_mu);
    if (n_hinted < SPAN_HINTED) {
        hinted[n_hinted].f = f;
        hinted[n_hinted].on = v;
        n_hinted++;
        n_hinted_on += v;
    } else {
        amio_warn("%s: more than %d open files with the hint atomio_hdf5_span; ignored for this one",
                  f->path, SPAN_HINTED);
    }
    pthread_mutex_unlock(&hinted_mu);
}

void amio_span_closed(amio_file *f)
{
    pthread_mutex_lock(&hinted_mu);
    for (int i = 0; i < n_hinted; i++)
        if (hinted[i].f == f) {
            n_hinted_on -= hinted[i].on;
            hinted[i] = hinted[--n_hinted];
            break;
        }
    pthread_mutex_unlock(&hinted_mu);
}

/* The span setting of f: its open's hint, else ATOMIO_HDF5_SPAN. */
static int span_on_for(amio_file *f)
{
    if (!__atomic_load_n(&n_hinted, __ATOMIC_RELAXED))
        return span_on;
    int on = span_on;
    pthread_mutex_lock(&hinted_mu);
    for (int i = 0; i < n_hinted; i++)
        if (hinted[i].f == f)
            on = hinted[i].on;
    pthread_mutex_unlock(&hinted_mu);
    return on;
}

static int cmp_piece(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int posix_write(int fd, const unsigned char *buf, uint64_t len, uint64_t off,
                       const char *path)
{
    uint64_t done = 0;
    while (done < len) {
        ssize_t r = pwrite(fd, buf + done, (size_t)(len - done), (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return amio_error(MPI_ERR_IO, "pwrite %s at %llu: %s", path,
                              (unsigned long long)(off + done), r < 0 ? strerror(errno) : "0 bytes");
        done += (uint64_t)r;
    }
    return MPI_SUCCESS;
}

/* Writes one file's pieces as one atomic call and empties the list. */
static int flush_one(pending *s)
{
    if (!s->n)
        return MPI_SUCCESS;
    amio_file *f = s->f;
    int code = MPI_SUCCESS;
    unsigned char *data = s->data, *sorted = NULL;
    if (s->unsorted) { /* out of order but disjoint: lay the bytes out in file order */
        qsort(s->p, s->n, sizeof *s->p, cmp_piece);
        sorted = malloc(s->used ? s->used : 1);
        if (!sorted)
            code = amio_error(MPI_ERR_NO_MEM, "out of memory ordering an H5Dwrite's pieces");
        for (size_t i = 0, at = 0; sorted && i < s->n; at += s->p[i].len, i++) {
            memcpy(sorted + at, s->data + s->p[i].at, s->p[i].len);
            s->p[i].at = at;
        }
        data = sorted;
    }
    uint64_t *offs = NULL, *lens = NULL;
    if (code == MPI_SUCCESS && !f->is_rma) {
        offs = malloc(s->n * sizeof *offs);
        lens = malloc(s->n * sizeof *lens);
        if (!offs || !lens)
            code = amio_error(MPI_ERR_NO_MEM, "out of memory listing an H5Dwrite's pieces");
        for (size_t i = 0; offs && lens && i < s->n; i++) {
            offs[i] = s->p[i].off;
            lens[i] = s->p[i].len;
        }
    }
    uint64_t lo = s->p[0].off, hi = s->p[s->n - 1].off + s->p[s->n - 1].len;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (code == MPI_SUCCESS) {
        pthread_mutex_lock(&f->mu);
        if (f->is_rma) {
            code = amio_rma_lock(f, lo, hi);
            int locked = code == MPI_SUCCESS;
            if (code == MPI_SUCCESS)
                code = amio_rma_after_acquire(f, lo, hi);
            for (size_t i = 0; code == MPI_SUCCESS && i < s->n; i++)
                code = posix_write(f->data_fd, data + s->p[i].at, s->p[i].len, s->p[i].off, f->path);
            if (locked && code == MPI_SUCCESS)
                code = amio_rma_before_release(f);
            if (locked) {
                int c2 = amio_rma_unlock(f);
                if (code == MPI_SUCCESS)
                    code = c2;
            }
        } else {
            code = amio_base_touch(f, 1, s->n, offs, lens); /* servers placement's base */
            int rc = code == MPI_SUCCESS
                         ? atomio_write_list(f->af, s->n, offs, lens, data, s->used)
                         : ATOMIO_OK;
            if (rc != ATOMIO_OK)
                code = amio_error_atomio(rc, "writing an H5Dwrite's span");
        }
        if (code == MPI_SUCCESS) {
            f->dirty = 1;
            if (hi > f->known_size)
                f->known_size = hi;
        }
        pthread_mutex_unlock(&f->mu);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    amio_log(2, "H5Dwrite span: %zu pieces, %zu bytes, [%llu, %llu) of %s in one call: %s in %.6f s",
             s->n, s->used, (unsigned long long)lo, (unsigned long long)hi, f->path,
             code == MPI_SUCCESS ? "written" : "failed",
             (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    free(offs);
    free(lens);
    free(sorted);
    s->n = 0;
    s->used = 0;
    s->max_end = 0;
    s->unsorted = 0;
    if (code != MPI_SUCCESS)
        amio_raise(f->fh, code);
    return code;
}

static int flush_all(void)
{
    int code = MPI_SUCCESS;
    for (int i = 0; i < span_files; i++) {
        int c = flush_one(&span[i]);
        if (code == MPI_SUCCESS)
            code = c;
    }
    return code;
}

/* After an H5Dwrite: the lists are empty; their memory is kept for the next H5Dwrite (no
 * page faults again) unless it is large. */
static void release_big(void)
{
    for (int i = 0; i < span_files; i++) {
        if (span[i].data_cap > SPAN_KEEP) {
            free(span[i].data);
            span[i].data = NULL;
            span[i].data_cap = 0;
        }
        span[i].f = NULL;
    }
}

void amio_span_barrier(void)
{
    (void)flush_all(); /* an error was raised through the file's handler and is logged */
}

static pending *pending_of(amio_file *f)
{
    for (int i = 0; i < span_files; i++)
        if (span[i].f == f)
            return &span[i];
    for (int i = 0; i < span_files; i++)
        if (!span[i].f) { /* a slot of an earlier H5Dwrite: empty, its memory kept */
            span[i].f = f;
            return &span[i];
        }
    if (span_files == SPAN_FILES)
        return NULL;
    pending *s = &span[span_files++];
    memset(s, 0, sizeof *s);
    s->f = f;
    return s;
}

int amio_span_write(amio_file *f, MPI_Offset off, const void *buf, MPI_Count count,
                    MPI_Datatype dt, MPI_Count *bytes, int *handled)
{
    *handled = 0;
    *bytes = 0;
    size_t n;
    int code = MPI_SUCCESS;
    int eligible = span_on_for(f) && f->atomic && f->contig && !f->ifile &&
                   (f->is_rma ? f->data_fd >= 0 : f->af != NULL);
    if (eligible)
        code = amio_check_call(f, 1, 1, off, count, dt, &n);
    pending *s = eligible && code == MPI_SUCCESS && n > 0 ? pending_of(f) : NULL;
    uint64_t start = 0;
    if (s && (__builtin_mul_overflow((uint64_t)off, (uint64_t)f->etype_size, &start) ||
              __builtin_add_overflow(start, f->view_base, &start) || start > (UINT64_MAX >> 2)))
        s = NULL;
    if (!s) { /* not the span's: written by the caller, after the span's pieces */
        amio_span_barrier();
        return MPI_SUCCESS;
    }
    uint64_t end = start + n;
    int overlaps = 0;
    if (start < s->max_end)
        for (size_t i = 0; i < s->n && !overlaps; i++)
            overlaps = start < s->p[i].off + s->p[i].len && s->p[i].off < end;
    if (overlaps || s->used + n > span_max) {
        if ((code = flush_one(s)) != MPI_SUCCESS)
            return code;
    }
    const void *src;
    void *owned;
    code = amio_write_source((void *)buf, count, dt, n, &src, &owned);
    if (code != MPI_SUCCESS)
        return code;
    if (s->used + n > s->data_cap) {
        size_t cap = s->data_cap ? s->data_cap : 1 << 20;
        while (cap < s->used + n)
            cap *= 2;
        if (s->used == 0 && span_expect > cap) /* the whole H5Dwrite at once, no regrowth */
            cap = (size_t)span_expect;
        unsigned char *d = s->used == 0 ? (free(s->data), malloc(cap)) : realloc(s->data, cap);
        if (!d) {
            free(owned);
            return amio_error(MPI_ERR_NO_MEM, "out of memory collecting an H5Dwrite (%zu bytes)",
                              s->used + n);
        }
        s->data = d;
        s->data_cap = cap;
    }
    memcpy(s->data + s->used, src, n);
    free(owned);
    piece *last = s->n ? &s->p[s->n - 1] : NULL;
    if (last && last->off + last->len == start && last->at + last->len == s->used) {
        last->len += n; /* adjacent to the previous piece: one range */
    } else {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 256;
            piece *p = realloc(s->p, cap * sizeof *p);
            if (!p)
                return amio_error(MPI_ERR_NO_MEM, "out of memory collecting an H5Dwrite");
            s->p = p;
            s->cap = cap;
        }
        if (start < s->max_end)
            s->unsorted = 1;
        s->p[s->n++] = (piece){start, n, s->used};
    }
    s->used += n;
    if (end > s->max_end)
        s->max_end = end;
    *bytes = (MPI_Count)n;
    *handled = 1;
    return MPI_SUCCESS;
}

/* ----- H5Dwrite, H5Fcreate, H5Fopen ------------------------------------------------------ */

/* hid_t is int64_t since HDF5 1.10 (an int before: passed in the same register). */
typedef int64_t amio_hid_t;
typedef int (*h5dwrite_fn)(amio_hid_t, amio_hid_t, amio_hid_t, amio_hid_t, amio_hid_t,
                           const void *);
typedef int (*h5pget_dxpl_mpio_fn)(amio_hid_t, int *);
typedef amio_hid_t (*h5fcreate_fn)(const char *, unsigned, amio_hid_t, amio_hid_t);
typedef amio_hid_t (*h5fopen_fn)(const char *, unsigned, amio_hid_t);
typedef int64_t (*h5sget_select_npoints_fn)(amio_hid_t);
typedef size_t (*h5tget_size_fn)(amio_hid_t);
static h5sget_select_npoints_fn h5sget_select_npoints;
static h5tget_size_fn h5tget_size;
static h5dwrite_fn next_h5dwrite;
static h5pget_dxpl_mpio_fn h5pget_dxpl_mpio;
static h5fcreate_fn next_h5fcreate;
static h5fopen_fn next_h5fopen;
static pthread_once_t h5_once = PTHREAD_ONCE_INIT;
__thread int amio_hdf5_depth;

static void h5_resolve(void)
{
    next_h5dwrite = (h5dwrite_fn)dlsym(RTLD_NEXT, "H5Dwrite");
    h5pget_dxpl_mpio = (h5pget_dxpl_mpio_fn)dlsym(RTLD_NEXT, "H5Pget_dxpl_mpio");
    next_h5fcreate = (h5fcreate_fn)dlsym(RTLD_NEXT, "H5Fcreate");
    next_h5fopen = (h5fopen_fn)dlsym(RTLD_NEXT, "H5Fopen");
    h5sget_select_npoints = (h5sget_select_npoints_fn)dlsym(RTLD_NEXT, "H5Sget_select_npoints");
    h5tget_size = (h5tget_size_fn)dlsym(RTLD_NEXT, "H5Tget_size");
    span_config();
}

static void *h5_missing(const char *name)
{
    fprintf(stderr, "atomio-mpiio: %s called but no HDF5 library after libatomio_mpiio.so "
                    "defines it\n", name);
    return NULL;
}

/* Whether H5Dwrite with this transfer property list is independent (H5FD_MPIO_INDEPENDENT,
 * HDF5's default): only then are its writes collected. A collective H5Dwrite may
 * synchronize the ranks inside (and another rank could then read what this one wrote), so
 * its writes are never deferred; its MPI calls are collective ones anyway. */
static int independent(amio_hid_t dxpl)
{
    if (dxpl == 0) /* H5P_DEFAULT */
        return 1;
    int mode = -1;
    return h5pget_dxpl_mpio && h5pget_dxpl_mpio(dxpl, &mode) >= 0 && mode == 0;
}

#define H5_API __attribute__((visibility("default")))
H5_API int H5Dwrite(amio_hid_t dset, amio_hid_t mem_type, amio_hid_t mem_space,
                    amio_hid_t file_space, amio_hid_t dxpl, const void *buf);
H5_API amio_hid_t H5Fcreate(const char *name, unsigned flags, amio_hid_t fcpl, amio_hid_t fapl);
H5_API amio_hid_t H5Fopen(const char *name, unsigned flags, amio_hid_t fapl);

int H5Dwrite(amio_hid_t dset, amio_hid_t mem_type, amio_hid_t mem_space, amio_hid_t file_space,
             amio_hid_t dxpl, const void *buf)
{
    pthread_once(&h5_once, h5_resolve);
    if (!next_h5dwrite)
        return h5_missing("H5Dwrite"), -1;
    int collect = (span_on || __atomic_load_n(&n_hinted_on, __ATOMIC_RELAXED) > 0) && independent(dxpl);
    amio_hdf5_depth++;
    amio_span_depth += collect;
    if (collect && amio_span_depth == 1) {
        /* H5S_ALL (0) as the memory space means the file space's selection */
        amio_hid_t sp = mem_space ? mem_space : file_space;
        int64_t pts = sp && h5sget_select_npoints ? h5sget_select_npoints(sp) : -1;
        size_t size = pts > 0 && h5tget_size ? h5tget_size(mem_type) : 0;
        span_expect = size && (uint64_t)pts <= span_max / size ? (uint64_t)pts * size : 0;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = next_h5dwrite(dset, mem_type, mem_space, file_space, dxpl, buf);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    amio_log(2, "H5Dwrite (%s): HDF5's part %.6f s", collect ? "independent, collected" : "not collected",
             (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    amio_hdf5_depth--;
    if (collect && --amio_span_depth == 0) {
        int code = flush_all();
        release_big();
        if (code != MPI_SUCCESS && rc >= 0)
            rc = -1;
    }
    return rc;
}

amio_hid_t H5Fcreate(const char *name, unsigned flags, amio_hid_t fcpl, amio_hid_t fapl)
{
    pthread_once(&h5_once, h5_resolve);
    if (!next_h5fcreate)
        return h5_missing("H5Fcreate"), -1;
    amio_hdf5_depth += span_on; /* the default views matter to the span only */
    amio_hid_t id = next_h5fcreate(name, flags, fcpl, fapl);
    amio_hdf5_depth -= span_on;
    return id;
}

amio_hid_t H5Fopen(const char *name, unsigned flags, amio_hid_t fapl)
{
    pthread_once(&h5_once, h5_resolve);
    if (!next_h5fopen)
        return h5_missing("H5Fopen"), -1;
    amio_hdf5_depth += span_on;
    amio_hid_t id = next_h5fopen(name, flags, fapl);
    amio_hdf5_depth -= span_on;
    return id;
}
