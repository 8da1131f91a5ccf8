/*
 * pmpi_count.c -- a tiny PMPI tool of the project's own (libpmpi_count.so), standing for
 * Darshan, mpiP or a site's profiler beside libatomio_mpiio.so (test 14): it defines the
 * MPI_ names of a few entry points, counts each call and passes it on to PMPI_; at
 * MPI_Finalize rank 0 prints the counts summed over the ranks:
 *   pmpi_count: init=4 open=4 set_atomicity=4 write_at=24 read_at=4 close=4 finalize=4
 * Built twice: as is, it calls PMPI_NAME by its global symbol (what tools linked against
 * the MPI library do); with -DPMPI_COUNT_DLSYM it finds PMPI_NAME with dlsym(RTLD_NEXT)
 * (what Darshan does when preloaded), and prints "pmpi_count (dlsym): ...".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { C_INIT, C_OPEN, C_ATOM, C_WRITE_AT, C_READ_AT, C_CLOSE, C_FINALIZE, C_N };
static const char *const names[C_N] = {"init",    "open",  "set_atomicity", "write_at",
                                       "read_at", "close", "finalize"};
static long long counts[C_N];

#ifdef PMPI_COUNT_DLSYM
#define KIND " (dlsym)"
#define NEXT(name)                                                                        \
    static __typeof__(&name) next_;                                                       \
    if (!next_)                                                                           \
        next_ = (__typeof__(&name))dlsym(RTLD_NEXT, #name);                               \
    if (!next_) {                                                                         \
        fprintf(stderr, "pmpi_count: dlsym(%s) failed\n", #name);                         \
        abort();                                                                          \
    }
#define CALL(name) next_
#else
#define KIND ""
#define NEXT(name)
#define CALL(name) name
#endif

int MPI_Init(int *argc, char ***argv)
{
    NEXT(PMPI_Init);
    counts[C_INIT]++;
    return CALL(PMPI_Init)(argc, argv);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    NEXT(PMPI_Init_thread);
    counts[C_INIT]++;
    return CALL(PMPI_Init_thread)(argc, argv, required, provided);
}

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    NEXT(PMPI_File_open);
    counts[C_OPEN]++;
    return CALL(PMPI_File_open)(comm, filename, amode, info, fh);
}

int MPI_File_set_atomicity(MPI_File fh, int flag)
{
    NEXT(PMPI_File_set_atomicity);
    counts[C_ATOM]++;
    return CALL(PMPI_File_set_atomicity)(fh, flag);
}

int MPI_File_write_at(MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt,
                      MPI_Status *st)
{
    NEXT(PMPI_File_write_at);
    counts[C_WRITE_AT]++;
    return CALL(PMPI_File_write_at)(fh, off, buf, count, dt, st);
}

int MPI_File_read_at(MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype dt,
                     MPI_Status *st)
{
    NEXT(PMPI_File_read_at);
    counts[C_READ_AT]++;
    return CALL(PMPI_File_read_at)(fh, off, buf, count, dt, st);
}

int MPI_File_close(MPI_File *fh)
{
    NEXT(PMPI_File_close);
    counts[C_CLOSE]++;
    return CALL(PMPI_File_close)(fh);
}

int MPI_Finalize(void)
{
    NEXT(PMPI_Finalize);
    counts[C_FINALIZE]++;
    long long sum[C_N] = {0};
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Reduce(counts, sum, C_N, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("pmpi_count%s:", KIND);
        for (int i = 0; i < C_N; i++)
            printf(" %s=%lld", names[i], sum[i]);
        printf("\n");
        fflush(stdout);
    }
    return CALL(PMPI_Finalize)();
}
