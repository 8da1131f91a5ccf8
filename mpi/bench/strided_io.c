/*
 * strided_io.c -- an ordinary MPI-IO program: interleaved noncontiguous writes with no
 * overlap (the S3D / strided-view pattern). Rank r of P owns every
 * P-th block of B bytes of the file: block j of rank r is at file offset (j*P + r)*B. Each
 * rank writes its blocks through a file view (displacement r*B, filetype = B bytes resized
 * to an extent of P*B), optionally in MPI atomic mode, as ONE MPI_File_write_at_all
 * (--collective) or as --calls MPI_File_write_at calls (default 16) of consecutive blocks.
 *
 *   mpiexec -n 4 ./strided_io [--block 4096] [--per-rank 67108864] [--calls 16]
 *       [--collective] [--atomic] [--path FILE] [--hint key=value]... [--no-verify]
 *       [--keep] [--label S] [--contiguous | --plain | --plain-mapped]
 *       [--verify-path FILE] [--sync] [--read]
 *
 * --read: the calls read instead (IOR's read phase; with --calls equal to the blocks per
 *   rank, one block per call: IOR "hard", -t = -b = B): before the timed region the file is
 *   written with the expected bytes (each rank its contiguous 1/P, plain MPI-IO with a byte
 *   view, then MPI_File_sync and a barrier; pwrite for the reference modes), then each call
 *   reads its blocks through the view (--contiguous: each rank preads its bytes
 *   contiguously; --plain: each rank preads its blocks one by one; --plain-mapped: not with
 *   --read). Verified: every byte each rank read is the expected one (then the file, as for
 *   writes).
 *
 * --sync: MPI_File_sync after the calls, inside the timed region: the time until the bytes
 *   are in the file for every client (end to end), not only the calls.
 *
 * --verify-path FILE: after the handle is closed, rank 0 also reads the whole file through
 *   FILE — the same file through another client of a shared file system, one that no rank
 *   wrote through (scripts/sharedfs mount check) — and counts the blocks that are wrong or
 *   missing there ("foreign_bad_blocks"); the verdict is "atomic" only if both checks pass.
 *
 * The reference modes (no MPI-IO, no locks):
 * --contiguous: the same bytes without the pattern: each rank pwrite()s its bytes (same
 *   count) contiguously at offset r*bytes_per_rank of a fresh file, in --calls pieces.
 * --plain: the same pieces written plainly: each rank pwrite()s its blocks one by one at
 *   their strided offsets in a fresh file (the file the MPI modes write): what a plain
 *   writer of this pattern pays the file system.
 * --plain-mapped: the same pieces copied through a shared mapping of that file, the way
 *   atomio's direct placement writes small pieces, with no MPI-IO and no locks: per call,
 *   the file is grown (posix_fallocate, never shrinks) to the call's end, the call's hull
 *   widened to whole 2 MiB folios is mapped (with MADV_HUGEPAGE, and MADV_RANDOM when the
 *   call reaches over 4 MiB), the pages its pieces touch are faulted in by one
 *   madvise(MADV_POPULATE_WRITE) per span of two or more adjacent touched pages (a lone
 *   page is left to its fault), each piece is a
 *   memcpy, and the window is unmapped. The fastest plain way known here for a writer
 *   that may touch only its own bytes (data sieving rewrites its neighbours').
 *
 * Invariants of the method:
 *   - blocks per rank = per_rank / B (whole blocks; B a positive multiple of 8); the file
 *     then holds exactly P * blocks * B bytes in every mode (strided or a reference mode).
 *   - Data: the 8-byte word at file offset 8k is splitmix(nonce ^ splitmix(k)), a function
 *     of the offset only, so the expected file is known whatever the layout and a stale
 *     file from an earlier run (other nonce) never passes.
 *   - Timing: a barrier, then each rank times all of its calls; the run's time is the
 *     maximum over ranks; MiB/s = P * blocks * B / time. Filling buffers and verification
 *     are outside the timed region; waiting ranks sleep instead of spinning.
 *   - Verification (after the timed region, through MPI-IO on the same handle, so a PMPI
 *     library's placement is what is checked, and again for the reference modes with pread): the file
 *     has exactly the expected size and every word is the expected word. The writes are
 *     disjoint, so this is exactly what atomicity leaves; the verdict is "atomic" or
 *     "violated" with the first wrong offset.
 *   - Output: exactly one JSON line on stdout, from rank 0; diagnostics on stderr. Exit
 *     status 0 even if verification fails (the JSON says so); non-zero on usage or I/O errors.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise */

#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

enum { MAX_HINTS = 16, VERIFY_CHUNK = 8 << 20 };

typedef struct {
    int64_t block, per_rank;
    int calls, collective, atomic, verify, keep, reference, sync, read;
    const char *path, *label, *verify_path;
    int nhints;
    char *hint_key[MAX_HINTS], *hint_val[MAX_HINTS];
} opts_t;

static int g_rank, g_size;

static uint64_t word_at(uint32_t nonce, uint64_t k) { return splitmix(nonce ^ splitmix(k)); }

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr, "usage: strided_io [--block B] [--per-rank BYTES] [--calls N]\n"
                        "  [--collective] [--atomic] [--path FILE] [--hint key=value]...\n"
                        "  [--no-verify] [--keep] [--label S]\n"
                        "  [--contiguous | --plain | --plain-mapped] [--read]\n");
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
    o->block = 4096;
    o->per_rank = 64 << 20;
    o->calls = 16;
    o->verify = 1;
    o->path = "/tmp/atomio_strided_io.dat";
    o->label = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--collective"))
            o->collective = 1;
        else if (!strcmp(a, "--atomic"))
            o->atomic = 1;
        else if (!strcmp(a, "--no-verify"))
            o->verify = 0;
        else if (!strcmp(a, "--keep"))
            o->keep = 1;
        else if (!strcmp(a, "--sync"))
            o->sync = 1;
        else if (!strcmp(a, "--read"))
            o->read = 1;
        else if (!strcmp(a, "--contiguous"))
            o->reference = 1;
        else if (!strcmp(a, "--plain"))
            o->reference = 2;
        else if (!strcmp(a, "--plain-mapped"))
            o->reference = 3;
        else if (!v)
            usage();
        else {
            i++;
            if (!strcmp(a, "--block"))
                o->block = num(v);
            else if (!strcmp(a, "--per-rank"))
                o->per_rank = num(v);
            else if (!strcmp(a, "--calls"))
                o->calls = (int)num(v);
            else if (!strcmp(a, "--path"))
                o->path = v;
            else if (!strcmp(a, "--label"))
                o->label = v;
            else if (!strcmp(a, "--verify-path"))
                o->verify_path = v;
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
    if (o->collective)
        o->calls = 1;
    if (o->block <= 0 || o->block % 8 || o->per_rank < o->block || o->calls < 1 ||
        o->block > (1 << 30) || (o->read && o->reference == 3)) {
        if (g_rank == 0)
            fprintf(stderr, "strided_io: need --block a positive multiple of 8 (<= 1 GiB), "
                            "--per-rank >= --block, --calls >= 1; no --plain-mapped with "
                            "--read\n");
        MPI_Finalize();
        exit(2);
    }
}

/* File offset of byte `i` of this rank's data (in write order). */
static uint64_t file_offset(const opts_t *o, int64_t blocks, uint64_t i)
{
    if (o->reference == 1)
        return (uint64_t)g_rank * (uint64_t)blocks * (uint64_t)o->block + i;
    uint64_t j = i / (uint64_t)o->block;
    return (j * (uint64_t)g_size + (uint64_t)g_rank) * (uint64_t)o->block + i % (uint64_t)o->block;
}

/* Fills this rank's whole buffer (every block is whole words at 8-aligned offsets). */
static void fill(const opts_t *o, int64_t blocks, uint32_t nonce, unsigned char *buf)
{
    uint64_t n = (uint64_t)blocks * (uint64_t)o->block;
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w = word_at(nonce, file_offset(o, blocks, i) / 8);
        memcpy(buf + i, &w, 8);
    }
}

/* Checks [lo, hi) of the file against the expected words: read(off, len) fills buf.
 * Returns the first wrong offset, or -1. */
typedef int (*reader_fn)(void *ctx, uint64_t off, unsigned char *buf, size_t len);

static int64_t check_range(uint64_t lo, uint64_t hi, uint32_t nonce, reader_fn rd, void *ctx,
                           unsigned char *buf)
{
    for (uint64_t off = lo; off < hi; off += VERIFY_CHUNK) {
        size_t len = (size_t)(hi - off < VERIFY_CHUNK ? hi - off : VERIFY_CHUNK);
        if (rd(ctx, off, buf, len) != 0)
            return (int64_t)off;
        for (size_t i = 0; i < len; i += 8) {
            uint64_t w = word_at(nonce, (off + i) / 8), got;
            memcpy(&got, buf + i, 8);
            if (got != w)
                return (int64_t)(off + i);
        }
    }
    return -1;
}

static int read_mpi(void *ctx, uint64_t off, unsigned char *buf, size_t len)
{
    MPI_Status st;
    int got = 0;
    if (MPI_File_read_at(*(MPI_File *)ctx, (MPI_Offset)off, buf, (int)len, MPI_BYTE, &st) !=
        MPI_SUCCESS)
        return -1;
    MPI_Get_count(&st, MPI_BYTE, &got);
    return got == (int)len ? 0 : -1;
}

static int read_posix(void *ctx, uint64_t off, unsigned char *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pread(*(int *)ctx, buf + done, len - done, (off_t)(off + done));
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

/* Through another client: the blocks of B bytes of the expected file that are wrong or
 * missing at `path` (-1: it cannot be opened). */
static int64_t foreign_bad_blocks(const char *path, uint64_t file_bytes, int64_t block,
                                  uint32_t nonce, unsigned char *buf)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "strided_io: --verify-path %s: %s\n", path, strerror(errno));
        return -1;
    }
    int64_t bad = 0;
    uint64_t chunk = (uint64_t)VERIFY_CHUNK / (uint64_t)block * (uint64_t)block;
    for (uint64_t off = 0; off < file_bytes; off += chunk) {
        size_t len = (size_t)(file_bytes - off < chunk ? file_bytes - off : chunk), got = 0;
        while (got < len) {
            ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        memset(buf + got, 0xa5, len - got); /* missing bytes never match */
        for (size_t b = 0; b < len; b += (size_t)block) {
            for (size_t i = b; i < b + (size_t)block && i < len; i += 8) {
                uint64_t w = word_at(nonce, (off + i) / 8), have;
                memcpy(&have, buf + i, 8);
                if (have != w) {
                    bad++;
                    break;
                }
            }
        }
    }
    char extra;
    if (pread(fd, &extra, 1, (off_t)file_bytes) == 1)
        bad++; /* longer than expected */
    close(fd);
    return bad;
}

static int write_posix(int fd, const unsigned char *buf, size_t len, uint64_t off)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pwrite(fd, buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

/* --plain-mapped: one call's pieces (bytes [off, off + len) of this rank's data, whole
 * blocks) copied through a mapping of the call's page hull. */
static int write_mapped(const opts_t *o, int fd, int64_t blocks, const unsigned char *buf,
                        uint64_t off, uint64_t len)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), b = (uint64_t)o->block;
    uint64_t lo = file_offset(o, blocks, off), hi = file_offset(o, blocks, off + len - b) + b;
    int rc = posix_fallocate(fd, 0, (off_t)hi);
    if (rc != 0) {
        errno = rc; /* posix_fallocate returns the error instead of setting errno */
        return -1;
    }
    /* as atomio does (ATOMIO_MMAP_HUGE=0 turns it off in both): large folios, the window
     * on whole 2 MiB folios at both ends (mapped.rs's LARGE_FOLIO; the bytes past hi are
     * mapped, never touched), and for a call reaching over 4 MiB (mapped.rs's SPREAD) no
     * readahead of the next folio, which races with the other ranks' faults */
    const char *huge_env = getenv("ATOMIO_MMAP_HUGE");
    const int huge = !huge_env || strcmp(huge_env, "0");
    const uint64_t folio = (uint64_t)2 << 20, grain = huge ? folio : page;
    uint64_t base = lo / grain * grain, span = (hi + grain - 1) / grain * grain - base;
    unsigned char *m = mmap(NULL, (size_t)span, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                            (off_t)base);
    if (m == MAP_FAILED)
        return -1;
    if (huge) {
        madvise(m, (size_t)span, MADV_HUGEPAGE);
        if (hi - lo > ((uint64_t)4 << 20))
            madvise(m, (size_t)span, MADV_RANDOM);
    }
    /* populate each span of adjacent touched pages, then copy the pieces in it */
    uint64_t s0 = 0, s1 = 0, first = off;
    for (uint64_t at = off; at <= off + len; at += b) {
        uint64_t p0 = 0, p1 = 0;
        if (at < off + len) {
            uint64_t f = file_offset(o, blocks, at);
            p0 = f / page * page;
            p1 = (f + b + page - 1) / page * page;
            if (p1 > base + span)
                p1 = base + span;
            if (at > off && p0 <= s1) {
                s1 = p1 > s1 ? p1 : s1;
                continue;
            }
        }
        if (at > off) {
            if (s1 - s0 > page) /* as atomio: a one-page span is left to its fault */
                madvise(m + (s0 - base), (size_t)(s1 - s0), MADV_POPULATE_WRITE);
            for (uint64_t c = first; c < at; c += b)
                memcpy(m + (file_offset(o, blocks, c) - base), buf + c, (size_t)b);
        }
        s0 = p0;
        s1 = p1;
        first = at;
    }
    return munmap(m, (size_t)span);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    bu_prog = "strided_io";
    bu_rank = g_rank;
    opts_t o;
    parse(argc, argv, &o);
    int64_t blocks = o.per_rank / o.block;
    uint64_t my_bytes = (uint64_t)blocks * (uint64_t)o.block;
    uint64_t file_bytes = my_bytes * (uint64_t)g_size;
    if (blocks > INT32_MAX || (o.collective && my_bytes > INT32_MAX)) {
        if (g_rank == 0)
            fprintf(stderr, "strided_io: sizes exceed MPI int counts\n");
        MPI_Finalize();
        return 2;
    }

    uint32_t nonce = g_rank == 0 ? bu_nonce() : 0;
    MPI_Bcast(&nonce, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
    unsigned char *buf = malloc(my_bytes), *vbuf = malloc(VERIFY_CHUNK);
    if (!buf || !vbuf)
        bu_die("out of memory", MPI_ERR_NO_MEM);
    fill(&o, blocks, nonce, buf);

    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 0; i < o.nhints; i++)
        MPI_Info_set(info, o.hint_key[i], o.hint_val[i]);
    MPI_File fh = MPI_FILE_NULL;
    MPI_Datatype piece = MPI_DATATYPE_NULL, ftype = MPI_DATATYPE_NULL;
    int fd = -1, set_rc = MPI_SUCCESS, atom_get = -1;
    if (g_rank == 0) {
        if (o.reference)
            unlink(o.path);
        else
            MPI_File_delete(o.path, MPI_INFO_NULL); /* absent is fine */
    }
    relaxed_barrier(MPI_COMM_WORLD);
    if (o.reference) {
        fd = open(o.path, O_RDWR | O_CREAT, 0644);
        if (fd < 0) {
            fprintf(stderr, "strided_io: %s: %s\n", o.path, strerror(errno));
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    } else {
        CHECK(MPI_File_open(MPI_COMM_WORLD, o.path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
        if (o.atomic)
            set_rc = MPI_File_set_atomicity(fh, 1);
        MPI_File_get_atomicity(fh, &atom_get);
        CHECK(MPI_Type_contiguous((int)o.block, MPI_BYTE, &piece));
        CHECK(MPI_Type_create_resized(piece, 0, (MPI_Aint)o.block * g_size, &ftype));
        CHECK(MPI_Type_commit(&ftype));
        CHECK(MPI_File_set_view(fh, (MPI_Offset)g_rank * o.block, MPI_BYTE, ftype, "native",
                                info));
    }

    /* --read: the expected file first, each rank its contiguous 1/P (outside the timing) */
    unsigned char *rbuf = NULL;
    if (o.read) {
        uint64_t lo = file_bytes * (uint64_t)g_rank / (uint64_t)g_size / 8 * 8;
        uint64_t hi = g_rank + 1 == g_size
                          ? file_bytes
                          : file_bytes * (uint64_t)(g_rank + 1) / (uint64_t)g_size / 8 * 8;
        for (uint64_t off = lo; off < hi; off += VERIFY_CHUNK) {
            size_t len = (size_t)(hi - off < VERIFY_CHUNK ? hi - off : VERIFY_CHUNK);
            for (size_t i = 0; i < len; i += 8) {
                uint64_t w = word_at(nonce, (off + i) / 8);
                memcpy(vbuf + i, &w, 8);
            }
            if (o.reference) {
                if (write_posix(fd, vbuf, len, off) != 0) {
                    fprintf(stderr, "strided_io: pwrite: %s\n", strerror(errno));
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            } else {
                CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", info));
                CHECK(MPI_File_write_at(fh, (MPI_Offset)off, vbuf, (int)len, MPI_BYTE,
                                        MPI_STATUS_IGNORE));
            }
        }
        if (!o.reference) {
            CHECK(MPI_File_sync(fh));
            relaxed_barrier(MPI_COMM_WORLD);
            CHECK(MPI_File_sync(fh));
            CHECK(MPI_File_set_view(fh, (MPI_Offset)g_rank * o.block, MPI_BYTE, ftype, "native",
                                    info));
        } else {
            relaxed_barrier(MPI_COMM_WORLD);
        }
        rbuf = calloc(1, my_bytes);
        if (!rbuf)
            bu_die("out of memory", MPI_ERR_NO_MEM);
    } else {
        bu_warm(o.path, my_bytes);
    }
    /* the timed region: all of this rank's calls */
    relaxed_barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int c = 0; c < o.calls; c++) {
        int64_t b0 = blocks * c / o.calls, b1 = blocks * (c + 1) / o.calls;
        uint64_t off = (uint64_t)b0 * (uint64_t)o.block;
        uint64_t len = (uint64_t)(b1 - b0) * (uint64_t)o.block;
        if (o.reference == 3) {
            if (len && write_mapped(&o, fd, blocks, buf, off, len) != 0) {
                fprintf(stderr, "strided_io: mapped write: %s\n", strerror(errno));
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            continue;
        }
        if (o.read && o.reference) {
            /* --plain: block by block at the strided offsets; --contiguous: one pread */
            uint64_t step = o.reference == 2 ? (uint64_t)o.block : len;
            for (uint64_t at = off; at < off + len; at += step)
                if (read_posix(&fd, file_offset(&o, blocks, at), rbuf + at, (size_t)step) != 0) {
                    fprintf(stderr, "strided_io: pread: %s\n", strerror(errno));
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            continue;
        }
        if (o.reference == 2) {
            for (uint64_t at = off; at < off + len; at += (uint64_t)o.block)
                if (write_posix(fd, buf + at, (size_t)o.block,
                                file_offset(&o, blocks, at)) != 0) {
                    fprintf(stderr, "strided_io: pwrite: %s\n", strerror(errno));
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            continue;
        }
        if (o.reference) {
            if (write_posix(fd, buf + off, len, (uint64_t)g_rank * my_bytes + off) != 0) {
                fprintf(stderr, "strided_io: pwrite: %s\n", strerror(errno));
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            continue;
        }
        MPI_Status st;
        int done = 0;
        if (o.read && o.collective)
            CHECK(MPI_File_read_at_all(fh, (MPI_Offset)off, rbuf + off, (int)len, MPI_BYTE, &st));
        else if (o.read)
            CHECK(MPI_File_read_at(fh, (MPI_Offset)off, rbuf + off, (int)len, MPI_BYTE, &st));
        else if (o.collective)
            CHECK(MPI_File_write_at_all(fh, (MPI_Offset)off, buf + off, (int)len, MPI_BYTE, &st));
        else
            CHECK(MPI_File_write_at(fh, (MPI_Offset)off, buf + off, (int)len, MPI_BYTE, &st));
        CHECK(MPI_Get_count(&st, MPI_BYTE, &done));
        if ((uint64_t)done != len)
            bu_die(o.read ? "short read" : "short write", MPI_ERR_IO);
    }
    if (o.sync) {
        if (o.reference && fsync(fd) != 0) {
            fprintf(stderr, "strided_io: fsync: %s\n", strerror(errno));
            MPI_Abort(MPI_COMM_WORLD, 3);
        } else if (!o.reference) {
            CHECK(MPI_File_sync(fh));
        }
    }
    double mine = MPI_Wtime() - t0, slowest = 0;
    MPI_Request rq;
    MPI_Ireduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD, &rq);
    relaxed_wait(&rq);

    /* verification: what each rank read, then each rank checks a 1/P slice of the file */
    int64_t bad = -1;
    long long size = -1;
    if (o.verify && o.read) {
        for (uint64_t i = 0; i < my_bytes && bad < 0; i += (uint64_t)o.block)
            if (memcmp(rbuf + i, buf + i, (size_t)o.block)) {
                for (uint64_t k = i; k < i + (uint64_t)o.block; k++)
                    if (rbuf[k] != buf[k]) {
                        bad = (int64_t)file_offset(&o, blocks, k);
                        break;
                    }
            }
    }
    if (o.verify && bad < 0) {
        uint64_t lo = file_bytes * (uint64_t)g_rank / (uint64_t)g_size;
        uint64_t hi = file_bytes * (uint64_t)(g_rank + 1) / (uint64_t)g_size;
        relaxed_barrier(MPI_COMM_WORLD);
        if (o.reference) {
            size = (long long)lseek(fd, 0, SEEK_END);
            bad = check_range(lo, hi, nonce, read_posix, &fd, vbuf);
        } else {
            MPI_Offset s = 0;
            CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
            CHECK(MPI_File_get_size(fh, &s));
            size = (long long)s;
            bad = check_range(lo, hi, nonce, read_mpi, &fh, vbuf);
        }
    }
    long long first_bad = bad < 0 ? LLONG_MAX : (long long)bad;
    MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (o.reference)
        close(fd);
    else
        CHECK(MPI_File_close(&fh));
    relaxed_barrier(MPI_COMM_WORLD);
    long long foreign_bad = -2; /* not checked */
    if (o.verify && o.verify_path && o.reference != 1 && g_rank == 0)
        foreign_bad = foreign_bad_blocks(o.verify_path, file_bytes, o.block, nonce, vbuf);
    if (!o.keep && g_rank == 0) {
        if (o.reference)
            unlink(o.path);
        else
            MPI_File_delete(o.path, MPI_INFO_NULL);
    }

    if (g_rank == 0) {
        char libj[256], pathj[1024], labelj[256], why[256] = "";
        bu_library(libj, sizeof libj);
        json_str(o.path, pathj, sizeof pathj);
        json_str(o.label, labelj, sizeof labelj);
        /* Through another client, that check is the verdict: a writer's own client may
         * show it its own stale cache (or size), which no other reader sees. */
        int own_ok = size == (long long)file_bytes && first_bad == LLONG_MAX;
        int ok = foreign_bad == -2 ? own_ok : foreign_bad == 0;
        if (foreign_bad > 0 || foreign_bad == -1)
            snprintf(why, sizeof why, "through another client: %lld of %" PRIu64
                     " blocks wrong or missing", foreign_bad, file_bytes / (uint64_t)o.block);
        else if (foreign_bad == 0)
            ; /* the writers' own view is not the verdict here */
        else if (size != (long long)file_bytes)
            snprintf(why, sizeof why, "file has %lld bytes, expected %" PRIu64, size,
                     file_bytes);
        else if (!ok)
            snprintf(why, sizeof why, "wrong bytes at offset %lld (first)", first_bad);
        const char *verdict = !o.verify ? "skipped" : ok ? "atomic" : "violated";
        double bytes = (double)file_bytes;
        printf("{\"bench\":\"strided_io\",\"label\":\"%s\",\"mpi_library\":\"%s\",\"ranks\":%d,"
               "\"block\":%" PRId64 ",\"blocks_per_rank\":%" PRId64 ",\"calls\":%d,"
               "\"collective\":%s,\"reference\":%s,\"atomic\":%s,\"atomicity_set_rc\":%d,"
               "\"atomicity_get\":%d,\"path\":\"%s\",\"bytes\":%.0f,\"seconds\":%.6f,"
               "\"iter_seconds\":[%.6f],\"mib_per_s\":%.3f,\"verify\":\"%s\","
               "\"violation\":\"%s\",\"bad_elements\":%d,\"foreign_bad_blocks\":%lld,"
               "\"mode\":\"%s\"}\n",
               labelj, libj, g_size, o.block, blocks, o.calls, o.collective ? "true" : "false",
               o.reference ? "true" : "false", o.atomic ? "true" : "false", set_rc, atom_get, pathj,
               bytes, slowest, slowest, slowest > 0 ? bytes / (1 << 20) / slowest : 0.0, verdict,
               why, ok ? 0 : 1, foreign_bad, o.read ? "read" : "write");
        fflush(stdout);
    }
    free(buf);
    free(rbuf);
    free(vbuf);
    for (int i = 0; i < o.nhints; i++) {
        free(o.hint_key[i]);
        free(o.hint_val[i]);
    }
    MPI_Info_free(&info);
    if (ftype != MPI_DATATYPE_NULL)
        MPI_Type_free(&ftype);
    if (piece != MPI_DATATYPE_NULL)
        MPI_Type_free(&piece);
    MPI_Finalize();
    return 0;
}
