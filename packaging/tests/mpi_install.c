/* An ordinary MPI program (it does not link atomio) run with the installed
 * libatomio_mpiio.so preloaded (packaging/test-install.sh): every rank writes whole
 * blocks of its own byte into one `atomio:` file in atomic mode, ROUNDS times;
 * rank 0 then checks that each block is one rank's byte throughout (each call atomic) and
 * prints the libatomio*.so this process mapped, which the test checks are the installed ones.
 *   mpi_install atomio:PATH */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 256 * 1024, ROUNDS = 8 };

static void fail(const char *what, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, s, &n);
    fprintf(stderr, "mpi_install: %s: %s\n", what, s);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, rc, flag = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2)
        fail("usage: mpi_install atomio:PATH", MPI_ERR_ARG);
    MPI_File fh;
    rc = MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                       &fh);
    if (rc != MPI_SUCCESS)
        fail("MPI_File_open (is libatomio_mpiio.so preloaded?)", rc);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    if ((rc = MPI_File_set_atomicity(fh, 1)) != MPI_SUCCESS)
        fail("MPI_File_set_atomicity", rc);
    MPI_File_get_atomicity(fh, &flag);
    if (!flag)
        fail("atomic mode is off", MPI_ERR_OTHER);
    unsigned char *buf = malloc(BLOCK);
    memset(buf, 'A' + rank, BLOCK);
    /* Every rank writes the same ROUNDS blocks: each block is written by all ranks at once. */
    for (int r = 0; r < ROUNDS; r++) {
        MPI_Offset off = (MPI_Offset)r * BLOCK;
        if ((rc = MPI_File_write_at(fh, off, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE)) !=
            MPI_SUCCESS)
            fail("MPI_File_write_at", rc);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int bad = 0;
    if (rank == 0) {
        for (int r = 0; r < ROUNDS; r++) {
            if ((rc = MPI_File_read_at(fh, (MPI_Offset)r * BLOCK, buf, BLOCK, MPI_BYTE,
                                       MPI_STATUS_IGNORE)) != MPI_SUCCESS)
                fail("MPI_File_read_at", rc);
            if (buf[0] < 'A' || buf[0] >= 'A' + size)
                bad++;
            for (int i = 1; i < BLOCK; i++)
                if (buf[i] != buf[0]) {
                    bad++;
                    break;
                }
        }
    }
    MPI_File_close(&fh);
    if (rank == 0) {
        FILE *maps = fopen("/proc/self/maps", "r");
        char line[4096], last[4096] = "";
        while (maps && fgets(line, sizeof line, maps)) {
            char *p = strchr(line, '/');
            if (!p || !strstr(p, "/libatomio"))
                continue;
            if (strcmp(p, last) != 0)
                printf("mapped %s", p);
            strcpy(last, p);
        }
        if (maps)
            fclose(maps);
        if (bad)
            printf("mpi_install: %d of %d blocks mix ranks' bytes: NOT atomic\n", bad, ROUNDS);
        else
            printf("mpi_install ok: %d ranks, %d blocks of %d bytes, each one rank's\n", size,
                   ROUNDS, BLOCK);
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
