/*
 * shared_fp.c -- the shared file pointer of an atomio file: MPI_File_read/write_shared,
 * read/write_ordered (and their nonblocking and split forms), seek_shared and
 * get_position_shared.
 *
 * The pointer (in etypes of the current view, MPI 4.0 14.4.4) is one int64 in an MPI
 * window owned by rank 0 of the file's communicator (PMPI_Win_allocate at open, freed at
 * close). An independent access takes its place with one atomic fetch-and-add of its etype
 * count (passive target, shared lock), then is an explicit-offset access at that place;
 * so concurrent _shared calls get disjoint places in some serial order, as MPI asks. An
 * ordered access is collective: an exclusive prefix sum of the counts gives each rank its
 * place after the ranks before it, and rank 0 advances the pointer by the total once.
 * seek_shared and set_view (collective) let rank 0 set it, then all ranks synchronize.
 * Like ROMIO, the pointer advances by what a read asked for, even past the end of file.
 *
 * Invariants: the pointer is never negative; an access that fails to take its place does
 * not move it; collective calls agree on their outcome on every rank (an error on one rank
 * is an error on all) before returning.
 */
#include "internal.h"
#include <string.h>

int amio_sfp_open(amio_file *f)
{
    int64_t *base = NULL;
    MPI_Aint sz = f->rank == 0 ? (MPI_Aint)sizeof(int64_t) : 0;
    int rc = PMPI_Win_allocate(sz, sizeof(int64_t), MPI_INFO_NULL, f->comm, &base, &f->sfp_win);
    if (rc != MPI_SUCCESS) {
        f->sfp_win = MPI_WIN_NULL;
        return amio_error(MPI_ERR_IO, "shared file pointer: MPI_Win_allocate failed");
    }
    if (f->rank == 0) {
        PMPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, f->sfp_win);
        *base = f->pos; /* 0, or the end of file with MPI_MODE_APPEND */
        PMPI_Win_unlock(0, f->sfp_win);
    }
    return amio_barrier(f->comm);
}

void amio_sfp_close(amio_file *f)
{
    if (f->sfp_win != MPI_WIN_NULL)
        PMPI_Win_free(&f->sfp_win);
    f->sfp_win = MPI_WIN_NULL;
}

/* Atomically: *old = pointer; pointer += delta (delta 0: just read it). */
static int fetch_add(amio_file *f, int64_t delta, int64_t *old)
{
    int rc = PMPI_Win_lock(MPI_LOCK_SHARED, 0, 0, f->sfp_win);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Fetch_and_op(&delta, old, MPI_INT64_T, 0, 0, delta ? MPI_SUM : MPI_NO_OP,
                               f->sfp_win);
        int rc2 = PMPI_Win_unlock(0, f->sfp_win);
        if (rc == MPI_SUCCESS)
            rc = rc2;
    }
    return rc == MPI_SUCCESS ? MPI_SUCCESS
                             : amio_error(MPI_ERR_IO, "shared file pointer of %s: RMA failed",
                                          f->path);
}

/* Rank 0 only: pointer = v. */
static int store(amio_file *f, int64_t v)
{
    int64_t old;
    int rc = PMPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, f->sfp_win);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Fetch_and_op(&v, &old, MPI_INT64_T, 0, 0, MPI_REPLACE, f->sfp_win);
        int rc2 = PMPI_Win_unlock(0, f->sfp_win);
        if (rc == MPI_SUCCESS)
            rc = rc2;
    }
    return rc == MPI_SUCCESS ? MPI_SUCCESS
                             : amio_error(MPI_ERR_IO, "shared file pointer of %s: RMA failed",
                                          f->path);
}

/* The etypes `count` `dt` make (the access must be whole etypes). */
static int etypes_of(amio_file *f, MPI_Count count, MPI_Datatype dt, int64_t *out)
{
    MPI_Count sz = 0;
    if (count < 0)
        return amio_error(MPI_ERR_COUNT, "negative count");
    if (dt == MPI_DATATYPE_NULL || PMPI_Type_size_x(dt, &sz) != MPI_SUCCESS || sz < 0)
        return amio_error(MPI_ERR_TYPE, "invalid datatype");
    MPI_Count bytes;
    if (__builtin_mul_overflow(count, sz, &bytes))
        return amio_error(MPI_ERR_COUNT, "count x datatype size overflows");
    if (bytes % f->etype_size)
        return amio_error(MPI_ERR_ARG, "only whole etypes can be accessed (%lld bytes, etype "
                                       "%d bytes)",
                          (long long)bytes, f->etype_size);
    *out = (int64_t)(bytes / f->etype_size);
    return MPI_SUCCESS;
}

static int at_place(amio_file *f, int is_write, int64_t place, void *buf, MPI_Count count,
                    MPI_Datatype dt, MPI_Count *bytes)
{
    pthread_mutex_lock(&f->mu);
    int code = amio_io(f, is_write, 1, (MPI_Offset)place, buf, count, dt, bytes);
    pthread_mutex_unlock(&f->mu);
    return code;
}

int amio_sfp_access(amio_file *f, int is_write, void *buf, MPI_Count count, MPI_Datatype dt,
                    MPI_Count *bytes)
{
    int64_t n = 0, place = 0;
    int code = etypes_of(f, count, dt, &n);
    if (code == MPI_SUCCESS)
        code = fetch_add(f, n, &place);
    if (code == MPI_SUCCESS)
        code = at_place(f, is_write, place, buf, count, dt, bytes);
    return code;
}

int amio_sfp_ordered(amio_file *f, int is_write, void *buf, MPI_Count count, MPI_Datatype dt,
                     MPI_Count *bytes)
{
    int64_t n = 0, sums[2] = {0, 0}, before = 0, base = 0;
    int code = amio_agree(etypes_of(f, count, dt, &n), f->comm, "ordered access");
    if (code != MPI_SUCCESS)
        return code;
    int rc = PMPI_Exscan(&n, &before, 1, MPI_INT64_T, MPI_SUM, f->comm);
    if (f->rank == 0)
        before = 0; /* Exscan leaves rank 0's result undefined */
    sums[0] = n;
    if (rc == MPI_SUCCESS)
        rc = PMPI_Allreduce(MPI_IN_PLACE, sums, 1, MPI_INT64_T, MPI_SUM, f->comm);
    if (rc == MPI_SUCCESS && f->rank == 0)
        code = fetch_add(f, sums[0], &base);
    if (rc == MPI_SUCCESS)
        rc = amio_bcast(&base, 1, MPI_INT64_T, 0, f->comm);
    if (rc != MPI_SUCCESS && code == MPI_SUCCESS)
        code = amio_error(MPI_ERR_IO, "ordered access: a collective failed");
    code = amio_agree(code, f->comm, "ordered access");
    if (code == MPI_SUCCESS)
        code = at_place(f, is_write, base + before, buf, count, dt, bytes);
    return code;
}

int amio_sfp_seek(amio_file *f, MPI_Offset offset, int whence)
{
    int64_t args[2] = {offset, whence}, mx[2], mn[2];
    int rc = PMPI_Allreduce(args, mx, 2, MPI_INT64_T, MPI_MAX, f->comm);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Allreduce(args, mn, 2, MPI_INT64_T, MPI_MIN, f->comm);
    if (rc != MPI_SUCCESS)
        return amio_error(MPI_ERR_IO, "MPI_File_seek_shared: a collective failed");
    if (mx[0] != mn[0] || mx[1] != mn[1])
        return amio_error(MPI_ERR_ARG, "MPI_File_seek_shared: ranks passed different "
                                       "arguments");
    if (whence != MPI_SEEK_SET && whence != MPI_SEEK_CUR && whence != MPI_SEEK_END)
        return amio_error(MPI_ERR_ARG, "MPI_File_seek_shared: whence %d", whence);
    if (whence == MPI_SEEK_SET && offset < 0)
        return amio_error(MPI_ERR_ARG, "MPI_File_seek_shared to a negative offset");
    int code = MPI_SUCCESS;
    if (f->rank == 0) {
        int64_t base = 0, np;
        if (whence == MPI_SEEK_CUR) {
            code = fetch_add(f, 0, &base);
        } else if (whence == MPI_SEEK_END) {
            MPI_Offset e = 0;
            pthread_mutex_lock(&f->mu);
            code = amio_eof_etypes(f, &e);
            pthread_mutex_unlock(&f->mu);
            base = e;
        }
        if (code == MPI_SUCCESS && (__builtin_add_overflow(base, (int64_t)offset, &np) || np < 0))
            code = amio_error(MPI_ERR_ARG, "MPI_File_seek_shared to a negative offset");
        if (code == MPI_SUCCESS)
            code = store(f, np);
    }
    /* only rank 0 knows the outcome: everyone gets its error class */
    int klass = MPI_SUCCESS;
    if (code != MPI_SUCCESS && PMPI_Error_class(code, &klass) != MPI_SUCCESS)
        klass = MPI_ERR_IO;
    rc = amio_bcast(&klass, 1, MPI_INT, 0, f->comm);
    if (rc != MPI_SUCCESS && code == MPI_SUCCESS)
        code = rc;
    if (code == MPI_SUCCESS && klass != MPI_SUCCESS)
        code = amio_error(klass, "MPI_File_seek_shared failed on rank 0");
    return code;
}

int amio_sfp_reset(amio_file *f)
{
    int code = f->rank == 0 ? store(f, 0) : MPI_SUCCESS;
    return amio_agree(code, f->comm, "MPI_File_set_view (shared file pointer)");
}

int amio_sfp_position(amio_file *f, MPI_Offset *out)
{
    int64_t v = 0;
    int code = fetch_add(f, 0, &v);
    if (code == MPI_SUCCESS)
        *out = (MPI_Offset)v;
    return code;
}
