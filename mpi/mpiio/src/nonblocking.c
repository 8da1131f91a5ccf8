/*
 * nonblocking.c -- the request of a nonblocking MPI-IO call (MPI_File_iwrite, iread_at_all,
 * ...) on an atomio file.
 *
 * The operation is complete when the i-call returns: it ran to completion, with the same
 * atomic semantics as the blocking call, before the request was made. The request is a
 * generalized request (MPI_Grequest_start) completed at once (MPI_Grequest_complete), so
 * MPI_Wait / MPI_Test / MPI_Waitall on it, mixed with any other requests, return at once
 * with a status that counts the bytes moved.
 *
 * Invariants: the request owns its state, freed by MPI through free_fn exactly once; the
 * status reports the bytes moved, not cancelled; an i-call that fails returns its error
 * and MPI_REQUEST_NULL, never a request.
 */
#include "internal.h"
#include <stdlib.h>

typedef struct {
    MPI_Count bytes;
} done_t;

static int query_fn(void *extra, MPI_Status *st)
{
    done_t *d = extra;
    PMPI_Status_set_elements_x(st, MPI_BYTE, d->bytes);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int free_fn(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS; /* already complete: nothing to cancel */
}

int amio_grequest_done(MPI_Count bytes, MPI_Request *req)
{
    done_t *d = malloc(sizeof *d);
    if (!d)
        return amio_error(MPI_ERR_NO_MEM, "out of memory for a request");
    d->bytes = bytes;
    int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, d, req);
    if (rc != MPI_SUCCESS) {
        free(d);
        return rc;
    }
    return PMPI_Grequest_complete(*req);
}
