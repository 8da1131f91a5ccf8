/*
 * common.c -- see common.h. Invariants: every failure path ends in MPI_Abort(1) after a
 * message on stderr; nothing here busy-polls.
 */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int t_rank, t_size;

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: watchdog: the test hung\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
    }
    _exit(1);
}

void t_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    const char *t = getenv("T_TIMEOUT");
    signal(SIGALRM, on_alarm);
    alarm(t ? (unsigned)atoi(t) : 28);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void t_finalize(void)
{
    t_barrier(MPI_COMM_WORLD);
    MPI_Finalize();
}

void t_fail(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL rank %d: %s\n", t_rank, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

void t_log(const char *fmt, ...)
{
    if (t_rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

const char *t_errstr(int code)
{
    static char s[MPI_MAX_ERROR_STRING + 64];
    char e[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, e, &len) != MPI_SUCCESS)
        snprintf(e, sizeof e, "?");
    snprintf(s, sizeof s, "error %d (class %d): %s", code, t_errclass(code), e);
    return s;
}

int t_errclass(int code)
{
    int c = -1;
    MPI_Error_class(code, &c);
    return c;
}

static void wait_sleeping(MPI_Request *r)
{
    for (int i = 0;; i++) {
        int done = 0;
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        struct timespec ts = {0, i < 100 ? 20000 : 200000};
        nanosleep(&ts, NULL);
    }
}

void t_barrier(MPI_Comm comm)
{
    MPI_Request r;
    MPI_Ibarrier(comm, &r);
    wait_sleeping(&r);
}

void t_allreduce_int(int *v, int n, MPI_Op op, MPI_Comm comm)
{
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_INT, op, comm, &r);
    wait_sleeping(&r);
}

const char *t_dir(void)
{
    const char *d = getenv("T_DIR");
    return d && *d ? d : "/tmp";
}

const char *t_path(const char *prefix, const char *name)
{
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 4096, "%s%s/%s", prefix, t_dir(), name);
    return b;
}

const char *t_fresh_path(char *name)
{
    for (char *p = name; *p; p++)
        if (*p == ':' || *p == '/')
            *p = '_';
    const char *plain = t_path("", name);
    if (t_rank == 0)
        remove(plain);
    t_barrier(MPI_COMM_WORLD);
    return plain;
}

unsigned char *t_read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    /* What the file system holds, not this client's cache of it: on a file system whose
     * clients cache privately (scripts/sharedfs), pages this client read before another
     * client wrote may still be cached after close and reopen. Size from the server too. */
    posix_fadvise(fileno(fp), 0, 0, POSIX_FADV_DONTNEED);
    struct statx sx;
    statx(fileno(fp), "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_SIZE, &sx);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    size_t got = b ? fread(b, 1, (size_t)n, fp) : 0;
    fclose(fp);
    if (!b || got != (size_t)n) {
        free(b);
        return NULL;
    }
    *len = (size_t)n;
    return b;
}
