/*
 * errors.c -- MPI error codes that carry atomio's messages, raised through file handlers.
 *
 * MPI lets a library add error codes to a class and give each a string
 * (MPI_Add_error_code / MPI_Add_error_string; a later string replaces the earlier one).
 * At start we probe whether the MPI library reports such a string for a code added to a
 * *predefined* class (MPICH 4.0.2 does not: MPI_Error_string of such a code prints an
 * unrelated error stack):
 *   - if it does, every error is a dynamic code in its natural class (MPI_ERR_IO,
 *     MPI_ERR_TYPE, ...) whose string is the message;
 *   - if not, errors the program may test by class (argument, type, access, amode) are the
 *     plain predefined class codes, and failures inside atomio (I/O, lost servers,
 *     timeouts) are dynamic codes of an "atomio" error class whose strings are the messages.
 * ATOMIO_VERBOSE=1 prints every error with its message to stderr in both cases.
 *
 * Invariants: never aborts by itself (only the program's error handler may); a code's
 * string is the latest message raised with that code (one code per class, so a message can
 * be replaced by a later error of the same class before the program asks for it).
 */
#include "internal.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ready;
static int class_codes_ok;     /* dynamic codes in predefined classes keep their strings */
static int atomio_class = -1;  /* user class for atomio failures (when !class_codes_ok) */

#define MAX_CODES 32
static struct {
    int klass, code;
} codes[MAX_CODES];
static int n_codes;

void amio_errors_init(void)
{
    pthread_mutex_lock(&mu);
    int init = 0;
    if (!ready && PMPI_Initialized(&init) == MPI_SUCCESS && init) {
        int code;
        if (PMPI_Add_error_code(MPI_ERR_IO, &code) == MPI_SUCCESS &&
            PMPI_Add_error_string(code, "atomio probe") == MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int len = 0;
            class_codes_ok = PMPI_Error_string(code, s, &len) == MPI_SUCCESS &&
                             strcmp(s, "atomio probe") == 0;
            if (class_codes_ok && n_codes < MAX_CODES) {
                codes[n_codes].klass = MPI_ERR_IO;
                codes[n_codes++].code = code;
            }
        }
        if (!class_codes_ok && PMPI_Add_error_class(&atomio_class) == MPI_SUCCESS)
            PMPI_Add_error_string(atomio_class, "atomio error");
        ready = 1;
    }
    pthread_mutex_unlock(&mu);
}

/* A dynamic code in `klass` (created once), or -1. Called with mu held. */
static int code_for(int klass)
{
    for (int i = 0; i < n_codes; i++)
        if (codes[i].klass == klass)
            return codes[i].code;
    int code;
    if (n_codes == MAX_CODES || PMPI_Add_error_code(klass, &code) != MPI_SUCCESS)
        return -1;
    codes[n_codes].klass = klass;
    codes[n_codes++].code = code;
    return code;
}

/* `klass` is the predefined class the error belongs to; `dynamic_class` is where the code
 * goes when predefined classes cannot carry strings (-1: use the predefined code). */
static int make(int klass, int dynamic_class, const char *msg)
{
    amio_errors_init();
    amio_log(1, "returning an error: %s", msg);
    pthread_mutex_lock(&mu);
    int target = class_codes_ok ? klass : dynamic_class;
    int code = target >= 0 ? code_for(target) : -1;
    if (code >= 0) {
        char s[MPI_MAX_ERROR_STRING];
        snprintf(s, sizeof s, "atomio: %s", msg);
        PMPI_Add_error_string(code, s);
    } else {
        code = klass;
    }
    pthread_mutex_unlock(&mu);
    return code;
}

int amio_error(int mpi_class, const char *fmt, ...)
{
    char msg[MPI_MAX_ERROR_STRING];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Classes a program tests stay predefined; the rest go to the atomio class. */
    int keep = mpi_class == MPI_ERR_ARG || mpi_class == MPI_ERR_TYPE ||
               mpi_class == MPI_ERR_COUNT || mpi_class == MPI_ERR_READ_ONLY ||
               mpi_class == MPI_ERR_ACCESS || mpi_class == MPI_ERR_AMODE ||
               mpi_class == MPI_ERR_UNSUPPORTED_OPERATION ||
               mpi_class == MPI_ERR_UNSUPPORTED_DATAREP || mpi_class == MPI_ERR_NO_SUCH_FILE ||
               mpi_class == MPI_ERR_FILE_EXISTS || mpi_class == MPI_ERR_FILE ||
               mpi_class == MPI_ERR_REQUEST || mpi_class == MPI_ERR_FILE_IN_USE;
    return make(mpi_class, keep ? -1 : atomio_class, msg);
}

int amio_error_atomio(int rc, const char *what)
{
    int klass;
    switch (rc) {
    case ATOMIO_ENOTFOUND:
        klass = MPI_ERR_NO_SUCH_FILE;
        break;
    case ATOMIO_EEXISTS:
        klass = MPI_ERR_FILE_EXISTS;
        break;
    case ATOMIO_EINVAL:
    case ATOMIO_ELIMIT:
        klass = MPI_ERR_ARG;
        break;
    case ATOMIO_EUNSUPPORTED:
        klass = MPI_ERR_UNSUPPORTED_OPERATION;
        break;
    default:
        klass = MPI_ERR_IO;
        break;
    }
    char msg[MPI_MAX_ERROR_STRING];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, atomio_error_name(rc), atomio_last_error());
    /* Failures inside atomio always carry their message (atomio class on MPICH). */
    return make(klass, atomio_class, msg);
}

int amio_raise(MPI_File fh, int code)
{
    if (code != MPI_SUCCESS)
        PMPI_File_call_errhandler(fh, code);
    return code;
}
