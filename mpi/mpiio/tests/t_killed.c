/*
 * t_killed.c -- test 7: a rank killed with SIGKILL mid-job loses no acknowledged write
 * (direct placement: a write that returned is in the user's file, nothing waits for close).
 *
 *   mpiexec -n P t_killed STRATEGY        the job: rank P-1 kills itself after 10 writes
 *   t_killed --check P                    (no mpiexec) checks the file against the acks
 *
 * The job: every rank writes RECORDS records of REC bytes, record i of rank r at offset
 * (i*P + r)*REC, in atomic mode with the given strategy, each with MPI_File_write_at; after
 * each write returns, the rank appends "i" to its acknowledgement file ack.<r> with one
 * unbuffered write(2). Rank P-1 raises SIGKILL after its 10th acknowledged write; the
 * others keep writing (the launcher then kills them too, at some point). Nobody closes.
 * The check: every acknowledged record is in the file, byte for byte (its bytes are a
 * function of (r, i)), and the killed rank acknowledged its 10 records (the test is not
 * vacuous).
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REC 4096
#define RECORDS 400
#define KILL_AFTER 10

static void record(int r, int i, unsigned char *buf)
{
    for (int k = 0; k < REC; k++)
        buf[k] = (unsigned char)((r * 131 + i * 7 + k) % 251);
}

static const char *data_path(void) { return t_path("", "killed.dat"); }

static int check(int ranks)
{
    int fd = open(data_path(), O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "FAIL: %s missing\n", data_path());
        return 1;
    }
    unsigned char want[REC], got[REC];
    int acked = 0, killed_acked = 0;
    for (int r = 0; r < ranks; r++) {
        char name[64];
        snprintf(name, sizeof name, "ack.%d", r);
        FILE *a = fopen(t_path("", name), "r");
        if (!a)
            continue;
        int i;
        while (fscanf(a, "%d", &i) == 1) {
            record(r, i, want);
            off_t off = ((off_t)i * ranks + r) * REC;
            if (pread(fd, got, REC, off) != REC || memcmp(want, got, REC) != 0) {
                fprintf(stderr, "FAIL: rank %d's acknowledged record %d is not in the file\n", r,
                        i);
                return 1;
            }
            acked++;
            killed_acked += r == ranks - 1;
        }
        fclose(a);
    }
    close(fd);
    if (killed_acked < KILL_AFTER) {
        fprintf(stderr, "FAIL: the killed rank acknowledged %d records, expected %d\n",
                killed_acked, KILL_AFTER);
        return 1;
    }
    printf("every acknowledged write is in the file: %d records (%d by the killed rank)\n",
           acked, killed_acked);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--check") == 0)
        return check(atoi(argv[2]));
    t_init(&argc, &argv);
    T_ASSERT(argc == 2, "usage: t_killed STRATEGY | t_killed --check RANKS");
    char name[] = "killed.dat";
    const char *plain = t_fresh_path(name);
    char ackname[64];
    snprintf(ackname, sizeof ackname, "ack.%d", t_rank);
    int ack = open(t_path("", ackname), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    T_ASSERT(ack >= 0, "cannot create %s", ackname);

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", argv[1]);
    MPI_File fh;
    T_MPI(MPI_File_open(MPI_COMM_WORLD, plain, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    T_MPI(MPI_File_set_atomicity(fh, 1));
    t_barrier(MPI_COMM_WORLD);
    unsigned char buf[REC];
    for (int i = 0; i < RECORDS; i++) {
        record(t_rank, i, buf);
        MPI_Status st;
        MPI_Offset off = ((MPI_Offset)i * t_size + t_rank) * REC;
        if (MPI_File_write_at(fh, off, buf, REC, MPI_BYTE, &st) != MPI_SUCCESS)
            break; /* a peer died (its server thread with it): stop, acknowledged stays */
        char line[16];
        int n = snprintf(line, sizeof line, "%d\n", i);
        if (write(ack, line, (size_t)n) != n)
            break;
        if (t_rank == t_size - 1 && i + 1 == KILL_AFTER)
            raise(SIGKILL);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    /* only reached if the launcher did not stop us: leave without closing, as a crash */
    _exit(0);
}
