/*
 * bench_util.h -- what the MPI bench programs share (header-only: each program is one
 * translation unit built by a pattern rule): error exit, barriers that leave the CPU to the
 * writers, page-cache warming, the SplitMix64 data stream, JSON string escaping.
 *
 * Set bu_prog (the program's name, used in messages) and bu_rank before calling bu_die.
 */
#ifndef ATOMIO_BENCH_UTIL_H
#define ATOMIO_BENCH_UTIL_H

#include <mpi.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *bu_prog = "bench";
static int bu_rank;

static inline void bu_die(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "%s rank %d: %s: %s\n", bu_prog, bu_rank, what, msg);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

#define CHECK(call)                                                           \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != MPI_SUCCESS)                                               \
            bu_die(#call, rc_);                                               \
    } while (0)

static inline void bu_nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* A barrier that does not spin: MPICH ch4 busy-polls inside blocking calls,
 * which on an oversubscribed node steals the writers' time slices. */
static inline void relaxed_wait(MPI_Request *r)
{
    int done = 0;
    for (;;) {
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        bu_nap(50000);
    }
}

static inline void relaxed_barrier(MPI_Comm comm)
{
    MPI_Request r;
    MPI_Ibarrier(comm, &r);
    relaxed_wait(&r);
}

/* Page-cache warming before the timed region. On VMs with virtio-balloon free page
 * reporting, memory left free for ~2 s goes back to the host and the next pwrite() into a
 * fresh file pays a host fault per block (5-10x slower). Each rank writes `bytes` into a scratch file beside `path` (any "prefix:" such
 * as ufs: or atomio: dropped) and deletes it, so every configuration starts alike.
 * ATOMIO_BENCH_WARM=0 skips it (for an A/B). Errors only skip the warm-up. */
static inline void bu_warm(const char *path, uint64_t bytes)
{
    const char *env = getenv("ATOMIO_BENCH_WARM");
    if (env && !strcmp(env, "0"))
        return;
    const char *colon = strchr(path, ':'), *slash = strchr(path, '/');
    if (colon && (!slash || colon < slash))
        path = colon + 1;
    char name[4096];
    if (snprintf(name, sizeof name, "%s.warm.%d.%ld", path, bu_rank, (long)getpid()) >=
        (int)sizeof name)
        return;
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return;
    enum { PIECE = 4 << 20 };
    char *buf = malloc(PIECE);
    if (buf) {
        memset(buf, 0x5a, PIECE);
        for (uint64_t at = 0; at < bytes;) {
            size_t n = bytes - at < PIECE ? (size_t)(bytes - at) : PIECE;
            ssize_t w = pwrite(fd, buf, n, (off_t)at);
            if (w <= 0)
                break;
            at += (uint64_t)w;
        }
        free(buf);
    }
    close(fd);
    unlink(name);
}

static inline uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* A fresh per-run value (rank 0 draws it; broadcast it). */
static inline uint32_t bu_nonce(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint32_t)splitmix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30));
}

/* Copies s into out as the inside of a JSON string (quotes and backslashes escaped,
 * control characters dropped or blanked). */
static inline void json_str(const char *s, char *out, size_t cap)
{
    size_t j = 0;
    for (; *s && j + 2 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[j++] = '\\';
            out[j++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f)
            out[j++] = (char)c;
        else if (c == '\n' || c == '\t')
            out[j++] = ' ';
    }
    out[j] = 0;
}

/* The MPI library's one-line version string, JSON-escaped. */
static inline void bu_library(char *out, size_t cap)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    for (char *p = lib; *p; p++)
        if (*p == '\n') {
            *p = 0;
            break;
        }
    json_str(lib, out, cap);
}

#endif
