/*
 * ompi_atomicity.c -- what does this MPI library do with
 * MPI_File_set_atomicity(fh, 1)?  Written for Open MPI 4.1 (whose OMPIO
 * component is suspected of ignoring it) but plain MPI, so the same source
 * runs under MPICH for contrast.
 *
 *   mpirun.openmpi --oversubscribe -n 2 ./ompi_atomicity.ompi [--path FILE]
 *   mpirun.openmpi --oversubscribe --mca io romio321 -n 2 ./ompi_atomicity.ompi
 *   mpiexec -n 2 ./ompi_atomicity
 *
 * Steps (all ranks, collective where MPI says so):
 *   1. open FILE (create, read-write) with the default error handler for files
 *      (MPI_ERRORS_RETURN), and record MPI_File_get_atomicity (the default);
 *   2. MPI_File_set_atomicity(fh, 1): record the return code, its error class
 *      and string; then MPI_File_get_atomicity again;
 *   3. write 8 bytes per rank at disjoint offsets and read them back, so a
 *      library that accepts the call but breaks I/O is noticed too;
 *   4. MPI_File_set_atomicity(fh, 0) and get again.
 * Invariant: prints exactly one JSON line (rank 0) plus a one-line human
 * summary on stderr; exit status 0 unless the file cannot be opened.  What it
 * cannot see: whether writes are actually atomic -- overlap_atomic checks
 * that.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void describe(int rc, int *cls, char *msg, size_t cap)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    *cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, cls);
        MPI_Error_string(rc, s, &len);
    }
    json_str(s, msg, cap);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *path = "/tmp/atomio_ompi_atomicity.dat";
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--path"))
            path = argv[++i];

    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                           MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        char m[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, m, &len);
        fprintf(stderr, "rank %d: MPI_File_open(%s): %s\n", rank, path, m);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int flag_default = -1, flag_after = -1, flag_off = -1;
    MPI_File_get_atomicity(fh, &flag_default);
    int set_rc = MPI_File_set_atomicity(fh, 1);
    MPI_File_get_atomicity(fh, &flag_after);

    /* I/O in (supposedly) atomic mode still works? */
    long long mine = 0x0101010101010101LL * (rank + 1), back = 0;
    MPI_Status st;
    int wrc = MPI_File_write_at(fh, (MPI_Offset)rank * 8, &mine, 8, MPI_BYTE, &st);
    MPI_Barrier(MPI_COMM_WORLD);
    int rrc = MPI_File_read_at(fh, (MPI_Offset)rank * 8, &back, 8, MPI_BYTE, &st);
    int io_ok = wrc == MPI_SUCCESS && rrc == MPI_SUCCESS && back == mine, all_ok = 0;
    MPI_Allreduce(&io_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

    int unset_rc = MPI_File_set_atomicity(fh, 0);
    MPI_File_get_atomicity(fh, &flag_off);
    MPI_File_close(&fh);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING], libj[256], msg[MPI_MAX_ERROR_STRING + 8],
            umsg[MPI_MAX_ERROR_STRING + 8];
        int len = 0, cls = 0, ucls = 0;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl)
            *nl = 0;
        json_str(lib, libj, sizeof libj);
        describe(set_rc, &cls, msg, sizeof msg);
        describe(unset_rc, &ucls, umsg, sizeof umsg);
        const char *io = getenv("OMPI_MCA_io");
        char ioj[64];
        json_str(io ? io : "", ioj, sizeof ioj);
        const char *verdict =
            set_rc != MPI_SUCCESS ? "refused"
            : flag_after != 1     ? "accepted but get_atomicity says 0"
                                  : "accepted (flag stored; whether writes honour it: see overlap_atomic)";
        printf("{\"bench\":\"ompi_atomicity\",\"mpi_library\":\"%s\",\"ranks\":%d,"
               "\"ompi_mca_io_env\":\"%s\",\"atomicity_default\":%d,\"set_atomicity_rc\":%d,"
               "\"set_atomicity_class\":%d,\"set_atomicity_error\":\"%s\","
               "\"atomicity_after_set\":%d,\"io_after_set_ok\":%s,\"unset_rc\":%d,"
               "\"unset_error\":\"%s\",\"atomicity_after_unset\":%d,\"verdict\":\"%s\"}\n",
               libj, size, ioj, flag_default, set_rc, cls, msg, flag_after,
               all_ok ? "true" : "false", unset_rc, umsg, flag_off, verdict);
        fprintf(stderr, "%s: MPI_File_set_atomicity(fh, 1) -> %d%s%s; get_atomicity -> %d; %s\n",
                libj, set_rc, set_rc ? " " : "", msg, flag_after, verdict);
    }
    MPI_Finalize();
    return 0;
}
