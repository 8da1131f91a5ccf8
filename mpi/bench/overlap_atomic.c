/*
 * overlap_atomic.c -- the smallest demonstration that atomic mode is (or is
 * not) honoured: every rank writes the SAME noncontiguous region of one file
 * at the same time, in atomic mode, round after round; after every round
 * rank 0 reads the region back and checks that one rank's data filled all of
 * it.  Plain MPI: run it under MPICH, under Open MPI 4.1, or under either with
 * atomio's PMPI library preloaded (path "atomio:/..." or ATOMIO_FILES).
 *
 *   mpiexec -n 4 ./overlap_atomic [--blocks 1024] [--block-bytes 4096]
 *       [--rounds 20] [--no-atomic] [--collective] [--path FILE] [--hint k=v]...
 *   mpirun.openmpi --oversubscribe -n 4 ./overlap_atomic.ompi
 *
 * Invariants of the method:
 *   - The file view of every rank is the same vector type: `blocks` blocks of
 *     `block-bytes` bytes, stride 2*block-bytes (holes in between, so the
 *     write is noncontiguous and an MPI library has to split it or sieve it).
 *   - Round k: relaxed barrier; every rank writes the whole view with one
 *     MPI_File_write_at (or _all) of 64-bit words ((k+1) << 32 | (rank+1));
 *     barrier; rank 0 reads the view back through MPI-IO.
 *   - A round is "mixed" if the region holds words of more than one rank, or
 *     any word not written in round k.  Atomic mode allows no mixed round;
 *     without it, mixing is likely but not certain (the writes must actually
 *     interleave), so a clean non-atomic run proves nothing.
 *   - Output: one JSON line from rank 0 (rounds, mixed rounds, how many rounds
 *     each rank won, the first mixed round's writers); exit 0 either way.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void relaxed_barrier(void)
{
    MPI_Request r;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    while (MPI_Test(&r, &done, MPI_STATUS_IGNORE), !done) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static void check(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return;
    char m[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(rc, m, &len);
    fprintf(stderr, "overlap_atomic: %s: %s\n", what, m);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long blocks = 1024, bbytes = 4096, rounds = 20;
    int atomic = 1, collective = 0;
    const char *path = "/tmp/atomio_overlap_atomic.dat";
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--no-atomic"))
            atomic = 0;
        else if (!strcmp(a, "--collective"))
            collective = 1;
        else if (!strcmp(a, "--blocks") && *v)
            blocks = atol(argv[++i]);
        else if (!strcmp(a, "--block-bytes") && *v)
            bbytes = atol(argv[++i]);
        else if (!strcmp(a, "--rounds") && *v)
            rounds = atol(argv[++i]);
        else if (!strcmp(a, "--path") && *v)
            path = argv[++i];
        else if (!strcmp(a, "--hint") && strchr(v, '=') && strchr(v, '=') != v) {
            char key[MPI_MAX_INFO_KEY + 1];
            size_t n = (size_t)(strchr(v, '=') - v);
            snprintf(key, sizeof key, "%.*s", (int)n, v);
            MPI_Info_set(info, key, strchr(v, '=') + 1);
            i++;
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: overlap_atomic [--blocks N] [--block-bytes N] "
                                "[--rounds N] [--no-atomic] [--collective] [--path FILE] "
                                "[--hint key=value]...\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (blocks < 1 || bbytes < 8 || bbytes % 8 || rounds < 1 ||
        blocks * bbytes > (1L << 30)) {
        if (rank == 0)
            fprintf(stderr, "overlap_atomic: need blocks >= 1, block-bytes a multiple of 8, "
                            "rounds >= 1, at most 1 GiB\n");
        MPI_Finalize();
        return 2;
    }

    MPI_Datatype vec;
    check(MPI_Type_vector((int)blocks, (int)bbytes, (int)(2 * bbytes), MPI_BYTE, &vec),
          "MPI_Type_vector");
    check(MPI_Type_commit(&vec), "MPI_Type_commit");
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    relaxed_barrier();
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh),
          "MPI_File_open");
    int set_rc = MPI_SUCCESS, got = -1;
    if (atomic)
        set_rc = MPI_File_set_atomicity(fh, 1);
    MPI_File_get_atomicity(fh, &got);
    check(MPI_File_set_view(fh, 0, MPI_BYTE, vec, "native", info), "set_view");

    size_t words = (size_t)(blocks * bbytes / 8);
    uint64_t *buf = malloc(words * 8), *back = malloc(words * 8);
    long mixed = 0, first_mixed = -1, first_writers = 0;
    long *wins = calloc((size_t)size, sizeof *wins);
    if (!buf || !back || !wins)
        check(MPI_ERR_NO_MEM, "malloc");
    for (long k = 0; k < rounds; k++) {
        for (size_t w = 0; w < words; w++)
            buf[w] = ((uint64_t)(k + 1) << 32) | (uint64_t)(rank + 1);
        relaxed_barrier();
        MPI_Status st;
        int cnt = (int)(words * 8);
        check(collective ? MPI_File_write_at_all(fh, 0, buf, cnt, MPI_BYTE, &st)
                         : MPI_File_write_at(fh, 0, buf, cnt, MPI_BYTE, &st),
              "write");
        relaxed_barrier();
        if (rank == 0) {
            check(MPI_File_read_at(fh, 0, back, cnt, MPI_BYTE, &st), "read");
            unsigned long seen = 0; /* bit r: rank r's words seen (first 64 ranks) */
            int stale = 0;
            for (size_t w = 0; w < words; w++) {
                uint64_t r = (back[w] & 0xffffffffu) - 1;
                if ((back[w] >> 32) != (uint64_t)(k + 1) || r >= (uint64_t)size)
                    stale = 1;
                else
                    seen |= 1UL << (r & 63);
            }
            int writers = __builtin_popcountl(seen);
            if (stale || writers != 1) {
                if (first_mixed < 0) {
                    first_mixed = k;
                    first_writers = writers;
                }
                mixed++;
            } else
                wins[__builtin_ctzl(seen)]++;
        }
    }
    check(MPI_File_close(&fh), "close");
    if (rank == 0) {
        MPI_File_delete(path, MPI_INFO_NULL);
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        for (char *p = lib; *p; p++)
            if (*p == '\n' || *p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
                *p = *p == '\n' ? 0 : ' ';
        printf("{\"bench\":\"overlap_atomic\",\"mpi_library\":\"%s\",\"ranks\":%d,"
               "\"atomic_requested\":%s,\"set_atomicity_rc\":%d,\"atomicity_get\":%d,"
               "\"collective\":%s,\"blocks\":%ld,\"block_bytes\":%ld,\"rounds\":%ld,"
               "\"mixed_rounds\":%ld,\"first_mixed_round\":%ld,\"first_mixed_writers\":%ld,"
               "\"wins\":[",
               lib, size, atomic ? "true" : "false", set_rc, got,
               collective ? "true" : "false", blocks, bbytes, rounds, mixed, first_mixed,
               first_writers);
        for (int r = 0; r < size; r++)
            printf("%s%ld", r ? "," : "", wins[r]);
        printf("]}\n");
    }
    free(buf);
    free(back);
    free(wins);
    MPI_Type_free(&vec);
    MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
