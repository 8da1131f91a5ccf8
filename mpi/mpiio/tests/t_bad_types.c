/*
 * t_bad_types.c -- test 10: bogus and uncommitted datatypes get MPI errors through the
 * file's handler (MPI_ERRORS_RETURN, the default for files), never an abort, and the file
 * stays usable.
 *
 *   t_bad_types STRATEGY
 *
 * Each case must return an error of class MPI_ERR_TYPE: an uncommitted vector and an
 * invalid handle as the memory type of write_at, write, iwrite_at, write_shared and
 * read_at, MPI_DATATYPE_NULL, and an uncommitted filetype in set_view (collective, every
 * rank alike). Then an ordinary write and read of the same file must work.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int cases;

static void expect_type_error(const char *what, int rc)
{
    int cls = t_errclass(rc);
    T_ASSERT(rc != MPI_SUCCESS, "%s: succeeded with a bad datatype", what);
    T_ASSERT(cls == MPI_ERR_TYPE, "%s: error class %d (%s), expected MPI_ERR_TYPE", what, cls,
             t_errstr(rc));
    cases++;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    T_ASSERT(argc == 2, "usage: t_bad_types STRATEGY");
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", argv[1]);
    char name[] = "bad_types.dat";
    const char *path = t_fresh_path(name);
    MPI_File fh;
    T_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    T_MPI(MPI_File_set_atomicity(fh, 1));

    MPI_Datatype uncommitted, bogus = (MPI_Datatype)(intptr_t)0x12345678;
    T_MPI(MPI_Type_vector(4, 1, 2, MPI_INT, &uncommitted));
    int buf[64] = {0};
    MPI_Status st;
    MPI_Request rq;
    MPI_Offset at = (MPI_Offset)t_rank * 256;
    MPI_Datatype bad[3] = {uncommitted, bogus, MPI_DATATYPE_NULL};
    const char *names[3] = {"uncommitted", "invalid handle", "MPI_DATATYPE_NULL"};
    for (int i = 0; i < 3; i++) {
        char what[96];
        snprintf(what, sizeof what, "write_at with an %s type", names[i]);
        expect_type_error(what, MPI_File_write_at(fh, at, buf, 1, bad[i], &st));
        snprintf(what, sizeof what, "write with an %s type", names[i]);
        expect_type_error(what, MPI_File_write(fh, buf, 1, bad[i], &st));
        snprintf(what, sizeof what, "iwrite_at with an %s type", names[i]);
        expect_type_error(what, MPI_File_iwrite_at(fh, at, buf, 1, bad[i], &rq));
        snprintf(what, sizeof what, "write_shared with an %s type", names[i]);
        expect_type_error(what, MPI_File_write_shared(fh, buf, 1, bad[i], &st));
        snprintf(what, sizeof what, "read_at with an %s type", names[i]);
        expect_type_error(what, MPI_File_read_at(fh, at, buf, 1, bad[i], &st));
    }
    /* the file still works */
    for (int k = 0; k < 64; k++)
        buf[k] = t_rank * 1000 + k;
    T_MPI(MPI_File_write_at(fh, at, buf, 64, MPI_INT, &st));
    int back[64];
    T_MPI(MPI_File_read_at(fh, at, back, 64, MPI_INT, &st));
    T_ASSERT(memcmp(back, buf, sizeof buf) == 0, "the bytes written after the errors differ");
    T_MPI(MPI_File_close(&fh));
    MPI_Type_free(&uncommitted);
    MPI_Info_free(&info);
    if (t_rank == 0)
        t_log("%d bad-datatype calls per rank answered with MPI_ERR_TYPE; the file still works",
              cases);
    t_finalize();
    return 0;
}
