/*
 * common.h -- helpers shared by the MPI-IO test programs (ordinary MPI programs: they call
 * MPI_File_* and are run with libatomio_mpiio.so preloaded; they use libatomio.so only for
 * the verifier and to describe views as patterns).
 *
 * Invariants: a failed check prints "FAIL" with the rank and the reason and aborts the job
 * with exit code 1; a watchdog turns a hang into a failure before mpiexec's 30 s budget;
 * waiting helpers never busy-spin (MPICH ch4 spins in blocking collectives, which on an
 * oversubscribed 2-core machine starves the server threads doing the work).
 */
#ifndef T_COMMON_H
#define T_COMMON_H

#include "atomio.h"
#include "atomio_oracle.h"
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

extern int t_rank, t_size;

/* MPI_Init, ranks, watchdog (T_TIMEOUT seconds, default 28). */
void t_init(int *argc, char ***argv);
void t_finalize(void);

void t_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void t_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An MPI call that must succeed. */
#define T_MPI(call)                                                                        \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != MPI_SUCCESS)                                                            \
            t_fail("%s:%d: %s -> %s", __FILE__, __LINE__, #call, t_errstr(rc_));            \
    } while (0)

/* An atomio call that must succeed. */
#define T_ATOMIO(call)                                                                     \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != ATOMIO_OK)                                                              \
            t_fail("%s:%d: %s -> %s: %s", __FILE__, __LINE__, #call, atomio_error_name(rc_), \
                   atomio_last_error());                                                   \
    } while (0)

/* The same for the oracle (libatomio_oracle.so: atomio_tag_view, atomio_verifier_*). */
#define T_ORACLE(call)                                                                     \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != ATOMIO_OK)                                                              \
            t_fail("%s:%d: %s -> %s: %s", __FILE__, __LINE__, #call, atomio_error_name(rc_), \
                   atomio_oracle_last_error());                                            \
    } while (0)

#define T_ASSERT(cond, ...)                                                                \
    do {                                                                                   \
        if (!(cond))                                                                       \
            t_fail(__VA_ARGS__);                                                           \
    } while (0)

const char *t_errstr(int code);
int t_errclass(int code);

/* Barrier that sleeps while it waits. */
void t_barrier(MPI_Comm comm);
void t_allreduce_int(int *v, int n, MPI_Op op, MPI_Comm comm);

/* Directory for test files: $T_DIR or /tmp. */
const char *t_dir(void);
/* "<prefix><dir>/<name>" into a static rotating buffer. */
const char *t_path(const char *prefix, const char *name);
/* A fresh plain file in the test folder for `name` (':' and '/' become '_'): rank 0 removes
 * any old one, then all ranks of MPI_COMM_WORLD meet. Collective. */
const char *t_fresh_path(char *name);

/* Reads a whole ordinary file (malloc'd; *len set); NULL if missing. */
unsigned char *t_read_file(const char *path, size_t *len);

/* Verifies an exported file against every rank's writes; see t_overlap_writers.c. */

#endif
