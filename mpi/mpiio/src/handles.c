/*
 * handles.c -- the table of MPI file handles atomio serves.
 *
 * The program holds the genuine MPI_File that PMPI_File_open returned for the ordinary
 * file (so MPI_File_get_group, get_amode, get_info, set_errhandler, c2f, ... work
 * untouched); this table maps it to atomio's state. A handle is in the table from the end
 * of a successful MPI_File_open until MPI_File_close removes it, and MPI never hands out
 * the same handle value twice while it is open, so a lookup is unambiguous.
 *
 * Invariants: the table is guarded by one mutex; entries are owned by open_close.c, which
 * adds and removes them; lookups return stable pointers (entries are never moved).
 */
#include "internal.h"
#include "span.h"
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static amio_file **table;
static size_t n, cap;

amio_file *amio_lookup(MPI_File fh)
{
    if (fh == MPI_FILE_NULL)
        return NULL;
    amio_file *f = NULL;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n; i++)
        if (table[i]->fh == fh) {
            f = table[i];
            break;
        }
    pthread_mutex_unlock(&mu);
    return f;
}

int amio_table_add(amio_file *f)
{
    pthread_mutex_lock(&mu);
    if (n == cap) {
        size_t c = cap ? 2 * cap : 16;
        amio_file **t = realloc(table, c * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&mu);
            return -1;
        }
        table = t;
        cap = c;
    }
    table[n++] = f;
    pthread_mutex_unlock(&mu);
    amio_span_opened(f);
    return 0;
}

void amio_table_remove(amio_file *f)
{
    amio_span_closed(f);
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n; i++)
        if (table[i] == f) {
            table[i] = table[--n];
            break;
        }
    pthread_mutex_unlock(&mu);
}

void amio_table_each_path(const char *path, void (*fn)(amio_file *, void *), void *arg)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i]->path, path) == 0)
            fn(table[i], arg);
    pthread_mutex_unlock(&mu);
}
