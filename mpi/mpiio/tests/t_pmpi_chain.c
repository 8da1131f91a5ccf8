/*
 * t_pmpi_chain.c -- test 14: the program's MPI-IO calls reach atomio whatever PMPI tool sits
 * beside the library, and its own PMPI_ calls reach atomio too. Every rank opens one
 * `atomio:` file (so a call that went around atomio to ROMIO fails: ROMIO refuses the
 * prefix), turns atomic mode on, and writes W_MPI tagged blocks with MPI_File_write_at and
 * W_PMPI with PMPI_File_write_at, each overlapping its neighbours' (rank r at r * SHIFT,
 * LEN > SHIFT bytes), reads one block back with MPI_File_read_at, closes; rank 0 verifies
 * the file (atomio_verifier: every write atomic) and prints
 *   t_pmpi_chain: 4 ranks, 6 MPI_File_write_at + 2 PMPI_File_write_at each: atomic
 * The run script checks the tool's counts (pmpi_count.c) and ATOMIO_STATS' calls.
 *   t_pmpi_chain [STRATEGY]      (default ching:datatype:one-try)
 */
#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W_MPI = 6, W_PMPI = 2, LEN = 96 * 1024, SHIFT = 64 * 1024 };

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    const char *strategy = argc > 1 ? argv[1] : "ching:datatype:one-try";
    char name[] = "t_pmpi_chain.dat";
    const char *plain = t_fresh_path(name);
    char path[4096];
    snprintf(path, sizeof path, "atomio:%s", plain);

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", strategy);
    MPI_File fh;
    T_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    T_MPI(MPI_File_set_atomicity(fh, 1));

    atomio_pattern *bytes = NULL;
    T_ATOMIO(atomio_pattern_bytes(LEN, &bytes));
    uint64_t disp = (uint64_t)t_rank * SHIFT;
    unsigned char *buf = malloc(LEN);
    T_ASSERT(buf, "malloc");
    t_barrier(MPI_COMM_WORLD);
    for (int k = 0; k < W_MPI + W_PMPI; k++) {
        T_ORACLE(atomio_tag_view((uint32_t)t_rank, (uint64_t)k, disp, bytes, 0, buf, LEN));
        MPI_Status st;
        if (k % 4 == 3) /* ops 3 and 7: the program calls the profiling name itself */
            T_MPI(PMPI_File_write_at(fh, (MPI_Offset)disp, buf, LEN, MPI_BYTE, &st));
        else
            T_MPI(MPI_File_write_at(fh, (MPI_Offset)disp, buf, LEN, MPI_BYTE, &st));
        int count = -1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        T_ASSERT(count == LEN, "write count %d, expected %d", count, LEN);
    }
    t_barrier(MPI_COMM_WORLD);
    /* Rank r's block, read back: its bytes are some rank's whole write (one tag source). */
    T_MPI(MPI_File_read_at(fh, (MPI_Offset)disp, buf, LEN, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_Offset size = -1;
    T_MPI(MPI_File_get_size(fh, &size));
    MPI_Offset reach = (MPI_Offset)(t_size - 1) * SHIFT + LEN;
    T_ASSERT(size == reach, "size %lld, expected %lld", (long long)size, (long long)reach);
    T_MPI(MPI_File_close(&fh));
    t_barrier(MPI_COMM_WORLD);

    int verdict = 1;
    if (t_rank == 0) {
        atomio_verifier *v = NULL;
        T_ORACLE(atomio_verifier_new(&v));
        for (int r = 0; r < t_size; r++)
            for (int k = 0; k < W_MPI + W_PMPI; k++)
                T_ORACLE(atomio_verifier_add_write(v, (uint32_t)r, (uint64_t)k,
                                                   (uint64_t)r * SHIFT, bytes, 0, LEN));
        char report[4096];
        T_ORACLE(atomio_verifier_check(v, plain, &verdict, report, sizeof report));
        atomio_verifier_free(v);
        printf("t_pmpi_chain: %d ranks, %d MPI_File_write_at + %d PMPI_File_write_at each: %s\n",
               t_size, W_MPI, W_PMPI,
               verdict == 1 ? "atomic" : verdict == 0 ? "VIOLATED" : "inconclusive");
        if (verdict != 1)
            printf("  %.600s\n", report);
        fflush(stdout);
        remove(plain);
    }
    free(buf);
    atomio_pattern_free(bytes);
    MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
    t_finalize();
    return verdict == 1 ? 0 : 1;
}
