/*
 * t_hints.c -- settings the ROMIO way (hints_file.c): opens PATH with an MPI_Info made of
 * the KEY=VALUE arguments, sets atomic mode, every rank writes its own 4 KiB block and
 * reads every block back (checked), closes. What the settings did is read from stderr by
 * tests/run.sh (ATOMIO_STATS lines, warnings, ATOMIO_VERBOSE's table).
 *
 *   t_hints PATH [KEY=VALUE ...]
 * Output (rank 0): "t_hints: N ranks, K hints: verified".
 */
#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 4096

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    T_ASSERT(argc >= 2, "usage: t_hints PATH [KEY=VALUE ...]");
    MPI_Info info;
    T_MPI(MPI_Info_create(&info));
    for (int i = 2; i < argc; i++) {
        char kv[512];
        snprintf(kv, sizeof kv, "%s", argv[i]);
        char *eq = strchr(kv, '=');
        T_ASSERT(eq, "argument %s is not KEY=VALUE", argv[i]);
        *eq = '\0';
        T_MPI(MPI_Info_set(info, kv, eq + 1));
    }
    MPI_File fh;
    T_MPI(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    T_MPI(MPI_File_set_atomicity(fh, 1));
    unsigned char buf[BLOCK];
    memset(buf, 'a' + t_rank % 26, sizeof buf);
    T_MPI(MPI_File_write_at(fh, (MPI_Offset)t_rank * BLOCK, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE));
    t_barrier(MPI_COMM_WORLD);
    for (int r = 0; r < t_size; r++) {
        T_MPI(MPI_File_read_at(fh, (MPI_Offset)r * BLOCK, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE));
        for (int j = 0; j < BLOCK; j++)
            T_ASSERT(buf[j] == 'a' + r % 26, "block %d byte %d = %#x", r, j, buf[j]);
    }
    T_MPI(MPI_File_close(&fh));
    MPI_Info_free(&info);
    t_log("t_hints: %d ranks, %d hints: verified", t_size, argc - 2);
    t_finalize();
    return 0;
}
