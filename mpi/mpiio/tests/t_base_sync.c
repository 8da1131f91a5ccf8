/*
 * t_base_sync.c -- test 18: a large existing file on atomio's servers (a cached-lock DLM,
 * or ATOMIO_DATA=servers): nothing is copied at open, MPI_File_sync writes only what was
 * written, and the user's file read with plain read() then holds exactly the expected bytes.
 *
 *   t_base_sync STRATEGY   (T_BASE_MB, default 1024: the file's size; T_SYNC_MAX_MS,
 *                           default 0 = report only: fail when the sync took longer;
 *                           T_CHECK_ROOT with T_WORK_ROOT: read the file back through the
 *                           path under T_CHECK_ROOT, another client of the same file system)
 *
 * Rank 0 makes the file sparse (ftruncate) with three patterned 64 KiB patches (at its start,
 * its middle and its end). Then, in atomic mode: every rank reads the middle patch (it must
 * come from the user's file); every rank writes its own 1/P of one MiB at size/4; after a
 * barrier all ranks write the same 8 KiB inside that MiB at once, each with its own byte;
 * after another, rank 0 writes 100 bytes into those 8 KiB (the serial order says they win)
 * and the last rank 100 bytes into the middle patch (the patch's other bytes must stay).
 * MPI_File_sync is timed (the slowest rank's), and the last rank — or the other client —
 * reads the file with pread: the written MiB (the 8 KiB all one rank's byte but rank 0's
 * 100), the patches, the size. The file is closed, opened again (a new session) and the same
 * bytes read back through MPI.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB ((MPI_Offset)1 << 20)
#define PATCH 65536
#define OVER 8192

static MPI_Offset size, mid, dirty;
static int written; /* the writes below were made */

static unsigned char base_byte(MPI_Offset at) { return (unsigned char)(at * 13 + 7) | 1; }

/* The byte the file must hold at `at`, with `over` the byte the overlapping 8 KiB ended with. */
static unsigned char expected(MPI_Offset at, unsigned char over)
{
    if (!written)
        return at < PATCH || (at >= mid && at < mid + PATCH) || at >= size - PATCH ? base_byte(at)
                                                                                 : 0;
    if (at >= dirty + 4096 + 1000 && at < dirty + 4096 + 1100)
        return 0xEE;
    if (at >= dirty + 4096 && at < dirty + 4096 + OVER)
        return over;
    if (at >= dirty && at < dirty + MIB)
        return (unsigned char)(0x10 + (at - dirty) / (MIB / t_size));
    if (at >= mid + 1000 && at < mid + 1100)
        return 0xAB;
    if (at < PATCH || (at >= mid && at < mid + PATCH) || at >= size - PATCH)
        return base_byte(at);
    return 0;
}

/* Compares [at, at + n) of buf against the expected bytes; the overlap's byte is taken from
 * the file itself (one rank's, whichever the servers ordered last). */
static void check(const unsigned char *buf, MPI_Offset at, size_t n, unsigned char over,
                  const char *how)
{
    for (size_t i = 0; i < n; i++)
        T_ASSERT(buf[i] == expected(at + (MPI_Offset)i, over),
                 "%s: byte %lld is %u, expected %u", how, (long long)(at + (MPI_Offset)i), buf[i],
                 expected(at + (MPI_Offset)i, over));
}

static void pread_all(int fd, unsigned char *buf, size_t n, MPI_Offset at)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, buf + done, n - done, (off_t)(at + (MPI_Offset)done));
        T_ASSERT(r > 0, "pread at %lld failed", (long long)(at + (MPI_Offset)done));
        done += (size_t)r;
    }
}

/* The regions worth reading: the patches and the written MiB. */
static const MPI_Offset *regions(size_t *n)
{
    static MPI_Offset r[8];
    r[0] = 0, r[1] = PATCH;
    r[2] = mid, r[3] = PATCH;
    r[4] = size - PATCH, r[5] = PATCH;
    r[6] = dirty, r[7] = MIB;
    *n = 4;
    return r;
}

static void check_plain(const char *path, unsigned char *buf, unsigned char *over)
{
    int fd = open(path, O_RDONLY);
    T_ASSERT(fd >= 0, "cannot open %s", path);
    struct stat st;
    T_ASSERT(fstat(fd, &st) == 0 && st.st_size == size, "the file's size is %lld, not %lld",
             (long long)st.st_size, (long long)size);
    pread_all(fd, over, 1, dirty + 4096);
    T_ASSERT(*over >= 1 && *over <= t_size, "the overlapping bytes start with %u, no rank's",
             *over);
    size_t n;
    const MPI_Offset *r = regions(&n);
    for (size_t i = 0; i < n; i++) {
        pread_all(fd, buf, (size_t)r[2 * i + 1], r[2 * i]);
        check(buf, r[2 * i], (size_t)r[2 * i + 1], *over, "read() after MPI_File_sync");
    }
    close(fd);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    T_ASSERT(argc == 2, "usage: t_base_sync STRATEGY");
    long mb = getenv("T_BASE_MB") ? atol(getenv("T_BASE_MB")) : 1024;
    double max_ms = getenv("T_SYNC_MAX_MS") ? atof(getenv("T_SYNC_MAX_MS")) : 0;
    T_ASSERT(mb >= 8, "T_BASE_MB must be at least 8");
    size = (MPI_Offset)mb * MIB;
    mid = size / 2 + 12345;
    dirty = size / 4;
    char name[] = "base_sync.dat";
    const char *plain = t_fresh_path(name);
    unsigned char *buf = malloc(MIB), *back = malloc(MIB);
    T_ASSERT(buf && back, "out of memory");
    if (t_rank == 0) {
        int fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        T_ASSERT(fd >= 0 && ftruncate(fd, (off_t)size) == 0, "cannot create %s", plain);
        size_t n;
        const MPI_Offset *r = regions(&n);
        for (size_t i = 0; i < 3; i++) {
            for (MPI_Offset k = 0; k < PATCH; k++)
                buf[k] = base_byte(r[2 * i] + k);
            T_ASSERT(pwrite(fd, buf, PATCH, (off_t)r[2 * i]) == PATCH, "pwrite failed");
        }
        T_ASSERT(fsync(fd) == 0, "fsync failed");
        close(fd);
    }
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", argv[1]);
    t_barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_File fh;
    T_MPI(MPI_File_open(MPI_COMM_WORLD, plain, MPI_MODE_RDWR, info, &fh));
    double open_ms = (MPI_Wtime() - t0) * 1e3, slowest = 0;
    MPI_Allreduce(&open_ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    open_ms = slowest;
    T_MPI(MPI_File_set_atomicity(fh, 1));

    /* the middle patch comes from the user's file */
    T_MPI(MPI_File_read_at(fh, mid, buf, PATCH, MPI_BYTE, MPI_STATUS_IGNORE));
    check(buf, mid, PATCH, 0, "MPI_File_read_at of the user's bytes");

    /* one MiB written: own slices, then one overlapping 8 KiB, then rank 0's 100 bytes */
    MPI_Offset slice = MIB / t_size, from = dirty + slice * t_rank;
    MPI_Offset len = t_rank == t_size - 1 ? dirty + MIB - from : slice;
    memset(buf, 0x10 + t_rank, (size_t)len);
    if (t_rank == t_size - 1) /* the tail slice is the last rank's */
        for (MPI_Offset k = 0; k < len; k++)
            buf[k] = (unsigned char)(0x10 + (from + k - dirty) / slice);
    T_MPI(MPI_File_write_at(fh, from, buf, (int)len, MPI_BYTE, MPI_STATUS_IGNORE));
    t_barrier(MPI_COMM_WORLD);
    memset(buf, 1 + t_rank, OVER);
    T_MPI(MPI_File_write_at(fh, dirty + 4096, buf, OVER, MPI_BYTE, MPI_STATUS_IGNORE));
    t_barrier(MPI_COMM_WORLD);
    memset(buf, 0xEE, 100);
    if (t_rank == 0)
        T_MPI(MPI_File_write_at(fh, dirty + 4096 + 1000, buf, 100, MPI_BYTE, MPI_STATUS_IGNORE));
    memset(buf, 0xAB, 100);
    if (t_rank == t_size - 1)
        T_MPI(MPI_File_write_at(fh, mid + 1000, buf, 100, MPI_BYTE, MPI_STATUS_IGNORE));

    written = 1;
    t_barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    T_MPI(MPI_File_sync(fh));
    double sync_ms = (MPI_Wtime() - t0) * 1e3;
    MPI_Allreduce(&sync_ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    sync_ms = slowest;
    t_barrier(MPI_COMM_WORLD);

    /* the user's file, through plain read() (another client's mount when given) */
    unsigned char over = 0;
    if (t_rank == t_size - 1) {
        char checked[4096];
        const char *check_root = getenv("T_CHECK_ROOT"), *work_root = getenv("T_WORK_ROOT");
        size_t wl = work_root ? strlen(work_root) : 0;
        if (check_root && work_root && strncmp(plain, work_root, wl) == 0)
            snprintf(checked, sizeof checked, "%s%s", check_root, plain + wl);
        else
            snprintf(checked, sizeof checked, "%s", plain);
        check_plain(checked, back, &over);
    }
    MPI_Bcast(&over, 1, MPI_BYTE, t_size - 1, MPI_COMM_WORLD);
    T_MPI(MPI_File_close(&fh));

    /* a new session reads the same bytes back through the servers */
    T_MPI(MPI_File_open(MPI_COMM_WORLD, plain, MPI_MODE_RDONLY, info, &fh));
    T_MPI(MPI_File_set_atomicity(fh, 1));
    size_t n;
    const MPI_Offset *r = regions(&n);
    for (size_t i = 0; i < n; i++) {
        T_MPI(MPI_File_read_at(fh, r[2 * i], buf, (int)r[2 * i + 1], MPI_BYTE, MPI_STATUS_IGNORE));
        check(buf, r[2 * i], (size_t)r[2 * i + 1], over, "MPI_File_read_at in a new session");
    }
    MPI_Offset got = 0;
    T_MPI(MPI_File_get_size(fh, &got));
    T_ASSERT(got == size, "MPI_File_get_size says %lld, not %lld", (long long)got, (long long)size);
    T_MPI(MPI_File_close(&fh));
    MPI_Info_free(&info);
    if (t_rank == 0) {
        printf("%s: %ld MiB file, 1 MiB written: open %.1f ms, MPI_File_sync %.1f ms\n", argv[1],
               mb, open_ms, sync_ms);
        fflush(stdout);
        remove(plain);
    }
    T_ASSERT(max_ms <= 0 || sync_ms <= max_ms, "MPI_File_sync took %.1f ms (limit %.0f ms)",
             sync_ms, max_ms);
    free(buf);
    free(back);
    t_finalize();
    return 0;
}
