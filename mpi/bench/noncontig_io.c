/*
 * noncontig_io.c -- an ordinary MPI-IO program with the access pattern of ROMIO's
 * test/noncontig: small elements, a vector file view, ranks interleaved
 * element by element, memory contiguous (--cmem) or the same vector in memory (--ncmem),
 * timed reads (--read) or writes (--write), optionally in MPI atomic mode.
 *
 *   mpiexec -n 4 ./noncontig_io [--read | --write] [--cmem | --ncmem]
 *       [--element-bytes 4] [--elements 2500] [--calls 256] [--atomic]
 *       [--path FILE] [--hint key=value]... [--no-verify] [--keep] [--label S] [--plain]
 *
 * Geometry (noncontig's, for P ranks instead of 2): an element is E bytes (a multiple of 4,
 * E/4 MPI_INTs; noncontig: one int). Per call each rank accesses K elements (--elements;
 * noncontig: SIZE/2 = 2500). The filetype is noncontig's `newtype`: a vector of K elements
 * with stride P at displacement rank*E inside an extent of K*P*E bytes (built with
 * MPI_Type_create_struct and MPI_Type_create_resized where noncontig used MPI_LB/MPI_UB);
 * etype = one element, view displacement 0. So element j of call c of rank r is at file
 * offset ((c*K + j)*P + r)*E. Memory: --cmem reads/writes K contiguous elements (count K of
 * the element type); --ncmem uses `newtype` in memory too (count 1): a buffer of K*P
 * elements of which the rank's are at (j*P + r)*E, the rest left alone.
 *
 * Calls: --calls MPI_File_read_at / MPI_File_write_at per rank, call c at view offset c*K
 * etypes (the file grows call by call).
 *
 * --read: before the timed region the file is filled with the expected bytes (each rank
 *   writes its 1/P contiguous slice through MPI-IO with a byte view, then MPI_File_sync and a
 *   barrier): then the calls read it. --write: the calls write a fresh file.
 * --plain (reads only, a reference mode): the same reads by a plain reader, without MPI-IO
 *   or locks: per call, one pread of the call's extent (K*P*E bytes, what ROMIO's data
 *   sieving reads) and the rank's elements copied out.
 *
 * Invariants of the method:
 *   - Data: the 4-byte word at file offset 4w is (uint32_t)splitmix(nonce ^ splitmix(w)), a
 *     function of the offset only, so the expected bytes are known in every mode and a stale
 *     file from an earlier run (another nonce) never passes.
 *   - Timing: a barrier, then each rank times all of its calls; the run's time is the
 *     maximum over ranks; MiB/s = P * calls * K * E / time (the bytes the calls move).
 *     Filling buffers, preparing the file and verification are outside the timed region;
 *     waiting ranks sleep instead of spinning.
 *   - Verification (after the timed region): reads: every element each call returned is
 *     the expected one, and with --ncmem every memory byte between the rank's elements is
 *     still the sentinel it was set to; writes: the file (read through MPI-IO on the same
 *     handle with a byte view, each rank a 1/P slice) has exactly the expected size and
 *     bytes. Verdict "atomic" or "violated" with the first wrong offset; the status counts of
 *     every call are checked too (a short call is an error).
 *   - Output: exactly one JSON line on stdout, from rank 0 (fields as strided_io's, plus
 *     mode, memory, element_bytes, elements, calls); diagnostics on stderr. Exit status 0
 *     even if verification fails (the JSON says so); non-zero on usage or I/O errors.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_util.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>

enum { MAX_HINTS = 16, VERIFY_CHUNK = 8 << 20, SENTINEL = 0xa5 };

typedef struct {
    int64_t elem, elements;
    int calls, read, ncmem, atomic, verify, keep, plain;
    const char *path, *label;
    int nhints;
    char *hint_key[MAX_HINTS], *hint_val[MAX_HINTS];
} opts_t;

static int g_rank, g_size;

static uint32_t word_at(uint32_t nonce, uint64_t w)
{
    return (uint32_t)splitmix(nonce ^ splitmix(w));
}

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr, "usage: noncontig_io [--read | --write] [--cmem | --ncmem]\n"
                        "  [--element-bytes E] [--elements K] [--calls N] [--atomic]\n"
                        "  [--path FILE] [--hint key=value]... [--no-verify] [--keep]\n"
                        "  [--label S] [--plain]\n");
    MPI_Finalize();
    exit(2);
}

static int64_t num(const char *v)
{
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (!end || *end || x < 0)
        usage();
    return (int64_t)x;
}

static void parse(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->elem = 4;
    o->elements = 2500;
    o->calls = 256;
    o->read = 1;
    o->verify = 1;
    o->path = "/tmp/atomio_noncontig_io.dat";
    o->label = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--read"))
            o->read = 1;
        else if (!strcmp(a, "--write"))
            o->read = 0;
        else if (!strcmp(a, "--cmem"))
            o->ncmem = 0;
        else if (!strcmp(a, "--ncmem"))
            o->ncmem = 1;
        else if (!strcmp(a, "--atomic"))
            o->atomic = 1;
        else if (!strcmp(a, "--no-verify"))
            o->verify = 0;
        else if (!strcmp(a, "--keep"))
            o->keep = 1;
        else if (!strcmp(a, "--plain"))
            o->plain = 1;
        else if (!v)
            usage();
        else {
            i++;
            if (!strcmp(a, "--element-bytes"))
                o->elem = num(v);
            else if (!strcmp(a, "--elements"))
                o->elements = num(v);
            else if (!strcmp(a, "--calls"))
                o->calls = (int)num(v);
            else if (!strcmp(a, "--path"))
                o->path = v;
            else if (!strcmp(a, "--label"))
                o->label = v;
            else if (!strcmp(a, "--hint")) {
                const char *eq = strchr(v, '=');
                if (!eq || o->nhints == MAX_HINTS)
                    usage();
                o->hint_key[o->nhints] = strndup(v, (size_t)(eq - v));
                o->hint_val[o->nhints] = strdup(eq + 1);
                o->nhints++;
            } else
                usage();
        }
    }
    if (o->elem <= 0 || o->elem % 4 || o->elem > (1 << 20) || o->elements < 1 ||
        o->calls < 1 || o->elements > INT32_MAX / g_size ||
        (uint64_t)o->elements * (uint64_t)g_size * (uint64_t)o->elem > (1ULL << 31) ||
        (o->plain && !o->read)) {
        if (g_rank == 0)
            fprintf(stderr, "noncontig_io: need --element-bytes a positive multiple of 4 "
                            "(<= 1 MiB), --elements >= 1 with a call's extent <= 2 GiB, "
                            "--calls >= 1; --plain with --read only\n");
        MPI_Finalize();
        exit(2);
    }
}

/* File offset of element j of call c of this rank. */
static uint64_t elem_offset(const opts_t *o, int c, int64_t j)
{
    return (((uint64_t)c * (uint64_t)o->elements + (uint64_t)j) * (uint64_t)g_size +
            (uint64_t)g_rank) *
           (uint64_t)o->elem;
}

/* Offset in the memory buffer of element j (cmem: packed; ncmem: noncontig's layout). */
static uint64_t mem_offset(const opts_t *o, int64_t j)
{
    return o->ncmem ? ((uint64_t)j * (uint64_t)g_size + (uint64_t)g_rank) * (uint64_t)o->elem
                    : (uint64_t)j * (uint64_t)o->elem;
}

/* The expected bytes of file range [off, off + len) (4-aligned). */
static void expected(uint32_t nonce, uint64_t off, unsigned char *out, size_t len)
{
    for (size_t i = 0; i < len; i += 4) {
        uint32_t w = word_at(nonce, (off + i) / 4);
        memcpy(out + i, &w, 4);
    }
}

/* Fills the memory buffer with call c's expected elements (ncmem: the gaps the sentinel). */
static void fill_call(const opts_t *o, uint32_t nonce, int c, unsigned char *buf, size_t cap)
{
    memset(buf, SENTINEL, cap);
    for (int64_t j = 0; j < o->elements; j++)
        expected(nonce, elem_offset(o, c, j), buf + mem_offset(o, j), (size_t)o->elem);
}

/* Checks a read call's buffer; returns the first wrong file offset (or the memory offset
 * of a clobbered gap byte, as -2 - offset), or -1. */
static int64_t check_call(const opts_t *o, uint32_t nonce, int c, const unsigned char *buf,
                          size_t cap, unsigned char *want)
{
    for (int64_t j = 0; j < o->elements; j++) {
        uint64_t f = elem_offset(o, c, j);
        expected(nonce, f, want, (size_t)o->elem);
        if (memcmp(want, buf + mem_offset(o, j), (size_t)o->elem))
            return (int64_t)f;
    }
    if (o->ncmem) {
        for (size_t i = 0; i < cap; i++) {
            uint64_t e = i / (uint64_t)o->elem;
            if (e % (uint64_t)g_size == (uint64_t)g_rank)
                continue;
            if (buf[i] != SENTINEL)
                return -2 - (int64_t)i;
        }
    }
    return -1;
}

static int pread_all(int fd, unsigned char *buf, size_t len, uint64_t off)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

/* Where rank r's 1/P slice of a file of `bytes` bytes starts (4-aligned; r = P: the end). */
static uint64_t slice_edge(uint64_t bytes, int r)
{
    return r >= g_size ? bytes : bytes / (uint64_t)g_size * (uint64_t)r / 4 * 4;
}

/* Strips a "prefix:" such as atomio: from a path (for --plain's open). */
static const char *plain_path(const char *path)
{
    const char *colon = strchr(path, ':'), *slash = strchr(path, '/');
    return colon && (!slash || colon < slash) ? colon + 1 : path;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    bu_prog = "noncontig_io";
    bu_rank = g_rank;
    opts_t o;
    parse(argc, argv, &o);
    const uint64_t E = (uint64_t)o.elem, K = (uint64_t)o.elements, P = (uint64_t)g_size;
    const uint64_t call_extent = K * P * E, file_bytes = call_extent * (uint64_t)o.calls;
    const uint64_t my_bytes = K * E * (uint64_t)o.calls;
    const size_t cap = (size_t)(o.ncmem ? call_extent : K * E);

    uint32_t nonce = g_rank == 0 ? bu_nonce() : 0;
    MPI_Bcast(&nonce, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
    /* one buffer per call: the reads are checked after the timed region */
    unsigned char *bufs = malloc(cap * (size_t)o.calls), *vbuf = malloc(VERIFY_CHUNK);
    unsigned char *want = malloc(VERIFY_CHUNK), *window = o.plain ? malloc(call_extent) : NULL;
    if (!bufs || !vbuf || !want || (o.plain && !window))
        bu_die("out of memory", MPI_ERR_NO_MEM);
    for (int c = 0; c < o.calls; c++) {
        if (o.read)
            memset(bufs + cap * (size_t)c, SENTINEL, cap);
        else
            fill_call(&o, nonce, c, bufs + cap * (size_t)c, cap);
    }

    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 0; i < o.nhints; i++)
        MPI_Info_set(info, o.hint_key[i], o.hint_val[i]);
    MPI_Datatype elem, vec, newtype;
    CHECK(MPI_Type_contiguous((int)(E / 4), MPI_INT, &elem));
    CHECK(MPI_Type_commit(&elem));
    CHECK(MPI_Type_vector((int)K, 1, g_size, elem, &vec));
    {
        int bl = 1;
        MPI_Aint d = (MPI_Aint)((uint64_t)g_rank * E);
        MPI_Datatype inner;
        CHECK(MPI_Type_create_struct(1, &bl, &d, &vec, &inner));
        CHECK(MPI_Type_create_resized(inner, 0, (MPI_Aint)call_extent, &newtype));
        CHECK(MPI_Type_commit(&newtype));
        MPI_Type_free(&inner);
    }

    if (g_rank == 0)
        MPI_File_delete(o.path, MPI_INFO_NULL); /* absent is fine */
    relaxed_barrier(MPI_COMM_WORLD);
    MPI_File fh;
    int set_rc = MPI_SUCCESS, atom_get = -1;
    CHECK(MPI_File_open(MPI_COMM_WORLD, o.path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    if (o.read) {
        /* the expected file, each rank its contiguous slice, outside the timed region */
        uint64_t lo = slice_edge(file_bytes, g_rank), hi = slice_edge(file_bytes, g_rank + 1);
        for (uint64_t off = lo; off < hi; off += VERIFY_CHUNK) {
            size_t len = (size_t)(hi - off < VERIFY_CHUNK ? hi - off : VERIFY_CHUNK);
            expected(nonce, off, vbuf, len);
            MPI_Status st;
            CHECK(MPI_File_write_at(fh, (MPI_Offset)off, vbuf, (int)len, MPI_BYTE, &st));
        }
        CHECK(MPI_File_sync(fh));
        relaxed_barrier(MPI_COMM_WORLD);
        CHECK(MPI_File_sync(fh));
    }
    if (o.atomic)
        set_rc = MPI_File_set_atomicity(fh, 1);
    MPI_File_get_atomicity(fh, &atom_get);
    CHECK(MPI_File_set_view(fh, 0, elem, newtype, "native", info));
    int fd = -1;
    if (o.plain) {
        fd = open(plain_path(o.path), O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "noncontig_io: %s: %s\n", o.path, strerror(errno));
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }

    if (!o.read)
        bu_warm(o.path, my_bytes);
    /* the timed region: all of this rank's calls */
    relaxed_barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int c = 0; c < o.calls; c++) {
        unsigned char *buf = bufs + cap * (size_t)c;
        if (o.plain) {
            if (pread_all(fd, window, (size_t)call_extent, (uint64_t)c * call_extent) != 0) {
                fprintf(stderr, "noncontig_io: pread: %s\n", strerror(errno));
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            for (uint64_t j = 0; j < K; j++)
                memcpy(buf + mem_offset(&o, (int64_t)j), window + (j * P + (uint64_t)g_rank) * E,
                       (size_t)E);
            continue;
        }
        MPI_Status st;
        MPI_Offset at = (MPI_Offset)((uint64_t)c * K);
        int cnt = o.ncmem ? 1 : (int)K;
        MPI_Datatype mt = o.ncmem ? newtype : elem;
        if (o.read)
            CHECK(MPI_File_read_at(fh, at, buf, cnt, mt, &st));
        else
            CHECK(MPI_File_write_at(fh, at, buf, cnt, mt, &st));
        int done = 0;
        CHECK(MPI_Get_count(&st, MPI_BYTE, &done));
        if ((uint64_t)done != K * E)
            bu_die(o.read ? "short read" : "short write", MPI_ERR_IO);
    }
    double mine = MPI_Wtime() - t0, slowest = 0;
    MPI_Request rq;
    MPI_Ireduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD, &rq);
    relaxed_wait(&rq);
    if (fd >= 0)
        close(fd);

    /* verification */
    long long first_bad = LLONG_MAX, size = (long long)file_bytes;
    if (o.verify && o.read) {
        for (int c = 0; c < o.calls && first_bad == LLONG_MAX; c++) {
            int64_t b = check_call(&o, nonce, c, bufs + cap * (size_t)c, cap, want);
            if (b != -1)
                first_bad = b;
        }
    } else if (o.verify) {
        uint64_t lo = slice_edge(file_bytes, g_rank), hi = slice_edge(file_bytes, g_rank + 1);
        relaxed_barrier(MPI_COMM_WORLD);
        MPI_Offset s = 0;
        CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
        CHECK(MPI_File_get_size(fh, &s));
        size = (long long)s;
        for (uint64_t off = lo; off < hi && first_bad == LLONG_MAX; off += VERIFY_CHUNK) {
            size_t len = (size_t)(hi - off < VERIFY_CHUNK ? hi - off : VERIFY_CHUNK);
            MPI_Status st;
            int got = 0;
            CHECK(MPI_File_read_at(fh, (MPI_Offset)off, vbuf, (int)len, MPI_BYTE, &st));
            MPI_Get_count(&st, MPI_BYTE, &got);
            expected(nonce, off, want, len);
            if ((size_t)got != len) {
                first_bad = (long long)(off + (uint64_t)got);
                break;
            }
            for (size_t i = 0; i < len; i += 4)
                if (memcmp(vbuf + i, want + i, 4)) {
                    first_bad = (long long)(off + i);
                    break;
                }
        }
    }
    /* a clobbered memory gap (negative) is reported before any wrong file offset */
    MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    CHECK(MPI_File_close(&fh));
    relaxed_barrier(MPI_COMM_WORLD);
    if (!o.keep && g_rank == 0)
        MPI_File_delete(o.path, MPI_INFO_NULL);

    if (g_rank == 0) {
        char libj[256], pathj[1024], labelj[256], why[256] = "";
        bu_library(libj, sizeof libj);
        json_str(o.path, pathj, sizeof pathj);
        json_str(o.label, labelj, sizeof labelj);
        int ok = size == (long long)file_bytes && first_bad == LLONG_MAX;
        if (size != (long long)file_bytes)
            snprintf(why, sizeof why, "file has %lld bytes, expected %" PRIu64, size,
                     file_bytes);
        else if (first_bad < -1)
            snprintf(why, sizeof why, "memory byte %lld between the elements overwritten",
                     -2 - first_bad);
        else if (!ok)
            snprintf(why, sizeof why, "wrong bytes at file offset %lld (first)", first_bad);
        const char *verdict = !o.verify ? "skipped" : ok ? "atomic" : "violated";
        double bytes = (double)(P * my_bytes);
        printf("{\"bench\":\"noncontig_io\",\"label\":\"%s\",\"mpi_library\":\"%s\","
               "\"ranks\":%d,\"mode\":\"%s\",\"memory\":\"%s\",\"element_bytes\":%" PRId64
               ",\"elements\":%" PRId64 ",\"calls\":%d,\"reference\":%s,\"atomic\":%s,"
               "\"atomicity_set_rc\":%d,\"atomicity_get\":%d,\"path\":\"%s\",\"bytes\":%.0f,"
               "\"seconds\":%.6f,\"iter_seconds\":[%.6f],\"mib_per_s\":%.3f,"
               "\"verify\":\"%s\",\"violation\":\"%s\",\"bad_elements\":%d}\n",
               labelj, libj, g_size, o.read ? "read" : "write", o.ncmem ? "ncmem" : "cmem",
               o.elem, o.elements, o.calls, o.plain ? "true" : "false",
               o.atomic ? "true" : "false", set_rc, atom_get, pathj, bytes, slowest, slowest,
               slowest > 0 ? bytes / (1 << 20) / slowest : 0.0, verdict, why, ok ? 0 : 1);
        fflush(stdout);
    }
    free(bufs);
    free(vbuf);
    free(want);
    free(window);
    for (int i = 0; i < o.nhints; i++) {
        free(o.hint_key[i]);
        free(o.hint_val[i]);
    }
    MPI_Info_free(&info);
    MPI_Type_free(&newtype);
    MPI_Type_free(&vec);
    MPI_Type_free(&elem);
    MPI_Finalize();
    return 0;
}
