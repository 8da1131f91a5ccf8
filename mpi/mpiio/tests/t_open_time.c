/*
 * t_open_time.c -- test 8: opening and closing a large existing file through the library
 * copies nothing in direct placement.
 *
 *   t_open_time STRATEGY    (T_OPEN_MB, default 1024: the file's size; T_OPEN_MAX_MS,
 *                            default 0 = report only: fail above it)
 *
 * Rank 0 writes a file of T_OPEN_MB MiB with pwrite (outside the timing), then every rank
 * meets, and the time from before MPI_File_open (collective, hint atomio_strategy) to after
 * MPI_File_close, the slowest rank's, is printed — a median of 5 open+close pairs, the
 * first one (which starts the in-job servers) reported apart. The file must still hold
 * what rank 0 wrote (its first and last MiB are compared).
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1 << 20)
#define PAIRS 5

static double open_close(const char *plain, const char *strategy)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", strategy);
    t_barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_File fh;
    T_MPI(MPI_File_open(MPI_COMM_WORLD, plain, MPI_MODE_RDWR, info, &fh));
    T_MPI(MPI_File_close(&fh));
    double mine = MPI_Wtime() - t0, slowest = 0;
    MPI_Info_free(&info);
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest * 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    T_ASSERT(argc == 2, "usage: t_open_time STRATEGY");
    long mb = getenv("T_OPEN_MB") ? atol(getenv("T_OPEN_MB")) : 1024;
    double max_ms = getenv("T_OPEN_MAX_MS") ? atof(getenv("T_OPEN_MAX_MS")) : 0;
    T_ASSERT(mb >= 2, "T_OPEN_MB must be at least 2");
    char name[] = "open_time.dat";
    const char *plain = t_fresh_path(name);
    unsigned char *buf = malloc(MIB), *back = malloc(MIB);
    T_ASSERT(buf && back, "out of memory");
    for (int k = 0; k < MIB; k++)
        buf[k] = (unsigned char)(k * 13 + 7);
    if (t_rank == 0) {
        int fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        T_ASSERT(fd >= 0, "cannot create %s", plain);
        for (long i = 0; i < mb; i++)
            T_ASSERT(pwrite(fd, buf, MIB, (off_t)i * MIB) == MIB, "pwrite failed");
        close(fd);
    }
    double first = open_close(plain, argv[1]), ms[PAIRS];
    for (int i = 0; i < PAIRS; i++)
        ms[i] = open_close(plain, argv[1]);
    qsort(ms, PAIRS, sizeof ms[0], by_value);
    if (t_rank == 0) {
        int fd = open(plain, O_RDONLY);
        T_ASSERT(fd >= 0, "the file is gone");
        T_ASSERT(pread(fd, back, MIB, 0) == MIB && memcmp(back, buf, MIB) == 0,
                 "the file's first MiB changed");
        T_ASSERT(pread(fd, back, MIB, (off_t)(mb - 1) * MIB) == MIB && memcmp(back, buf, MIB) == 0,
                 "the file's last MiB changed");
        close(fd);
        printf("%s: open+close of an existing %ld MiB file: %.1f ms (median of %d; first, "
               "starting the servers: %.1f ms)\n",
               argv[1], mb, ms[PAIRS / 2], PAIRS, first);
        fflush(stdout);
        remove(plain);
    }
    T_ASSERT(max_ms <= 0 || ms[PAIRS / 2] <= max_ms, "open+close took %.1f ms (limit %.0f ms)",
             ms[PAIRS / 2], max_ms);
    free(buf);
    free(back);
    t_finalize();
    return 0;
}
