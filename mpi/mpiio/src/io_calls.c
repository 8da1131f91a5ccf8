/*
 * io_calls.c -- the MPI-IO data-access entry points: read/write with individual file
 * pointers and explicit offsets (_at), collective (_all), nonblocking (i...), split
 * collective (_begin/_end), and (MPI 4) their large-count _c forms.
 *
 * Every one of them: a handle atomio does not take goes to the PMPI function with the same
 * arguments; otherwise the call is one amio_io (data_path.c) under the handle's mutex.
 *   - Collective writes (write_all, write_at_all) on a direct-placement file are gathered
 *     on one rank and written as one atomic call (collective.c); other collective calls take
 *     the independent path: each rank's call is atomic on its own (what MPI atomic mode
 *     asks), and no rank waits for another.
 *   - Nonblocking calls complete at initiation and return a completed generalized request
 *     (nonblocking.c); atomic semantics are those of the blocking call.
 *   - Split collectives do the access in _begin and report its status in _end.
 *   - Shared file pointer calls (_shared, _ordered, seek_shared, get_position_shared) take
 *     their place from the shared pointer (shared_fp.c), then are explicit-offset accesses;
 *     _ordered_begin does the ordered access, _end reports it.
 *
 * Invariants: an error is passed through the file's error handler exactly once, by the
 * entry point; a status is filled only on success; MPI_STATUS_IGNORE is honoured.
 */
#include "internal.h"
#include "span.h"
#include <string.h>

static int blocking(amio_file *f, int is_write, int explicit_offset, MPI_Offset off, void *buf,
                    MPI_Count count, MPI_Datatype dt, MPI_Status *st)
{
    MPI_Count bytes = 0;
    if (amio_span_depth && is_write && explicit_offset) { /* inside H5Dwrite: hdf5_span.c */
        int handled = 0;
        int code = amio_span_write(f, off, buf, count, dt, &bytes, &handled);
        if (code != MPI_SUCCESS || handled) {
            if (code == MPI_SUCCESS)
                amio_status_set(st, bytes);
            return amio_raise(f->fh, code);
        }
    }
    pthread_mutex_lock(&f->mu);
    int code = amio_io(f, is_write, explicit_offset, off, buf, count, dt, &bytes);
    pthread_mutex_unlock(&f->mu);
    if (code == MPI_SUCCESS)
        amio_status_set(st, bytes);
    return amio_raise(f->fh, code);
}

static int collective_write(amio_file *f, int explicit_offset, MPI_Offset off, const void *buf,
                            MPI_Count count, MPI_Datatype dt, MPI_Status *st)
{
    MPI_Count bytes = 0;
    pthread_mutex_lock(&f->mu);
    int code = amio_write_all(f, explicit_offset, off, buf, count, dt, &bytes);
    pthread_mutex_unlock(&f->mu);
    if (code == MPI_SUCCESS)
        amio_status_set(st, bytes);
    return amio_raise(f->fh, code);
}

static int nonblocking(amio_file *f, int is_write, int explicit_offset, MPI_Offset off,
                       void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req)
{
    MPI_Count bytes = 0;
    if (!req)
        return amio_raise(f->fh, amio_error(MPI_ERR_REQUEST, "NULL request"));
    *req = MPI_REQUEST_NULL;
    pthread_mutex_lock(&f->mu);
    int code = amio_io(f, is_write, explicit_offset, off, buf, count, dt, &bytes);
    pthread_mutex_unlock(&f->mu);
    if (code == MPI_SUCCESS)
        code = amio_grequest_done(bytes, req);
    return amio_raise(f->fh, code);
}

static int split_begin(amio_file *f, int is_write, int explicit_offset, MPI_Offset off,
                       void *buf, MPI_Count count, MPI_Datatype dt)
{
    if (f->split_active)
        return amio_raise(f->fh, amio_error(MPI_ERR_ARG, "a split collective is already "
                                                         "active on this file"));
    MPI_Count bytes = 0;
    pthread_mutex_lock(&f->mu);
    int code = amio_io(f, is_write, explicit_offset, off, buf, count, dt, &bytes);
    f->split_active = 1;
    f->split_err = code;
    memset(&f->split_status, 0, sizeof f->split_status);
    if (code == MPI_SUCCESS)
        amio_status_set(&f->split_status, bytes);
    pthread_mutex_unlock(&f->mu);
    return amio_raise(f->fh, code);
}

static int split_end(amio_file *f, MPI_Status *st)
{
    if (!f->split_active)
        return amio_raise(f->fh, amio_error(MPI_ERR_ARG, "no split collective is active"));
    f->split_active = 0;
    if (f->split_err == MPI_SUCCESS && st != MPI_STATUS_IGNORE)
        *st = f->split_status;
    return f->split_err; /* already raised by _begin */
}

/* Shared file pointer accesses (shared_fp.c): `ordered` ones are collective. */
static int shared(amio_file *f, int is_write, int ordered, void *buf, MPI_Count count,
                  MPI_Datatype dt, MPI_Status *st)
{
    MPI_Count bytes = 0;
    int code = ordered ? amio_sfp_ordered(f, is_write, buf, count, dt, &bytes)
                       : amio_sfp_access(f, is_write, buf, count, dt, &bytes);
    if (code == MPI_SUCCESS)
        amio_status_set(st, bytes);
    return amio_raise(f->fh, code);
}

static int shared_i(amio_file *f, int is_write, void *buf, MPI_Count count, MPI_Datatype dt,
                    MPI_Request *req)
{
    MPI_Count bytes = 0;
    if (!req)
        return amio_raise(f->fh, amio_error(MPI_ERR_REQUEST, "NULL request"));
    *req = MPI_REQUEST_NULL;
    int code = amio_sfp_access(f, is_write, buf, count, dt, &bytes);
    if (code == MPI_SUCCESS)
        code = amio_grequest_done(bytes, req);
    return amio_raise(f->fh, code);
}

static int shared_begin(amio_file *f, int is_write, void *buf, MPI_Count count,
                        MPI_Datatype dt)
{
    if (f->split_active)
        return amio_raise(f->fh, amio_error(MPI_ERR_ARG, "a split collective is already "
                                                         "active on this file"));
    MPI_Count bytes = 0;
    int code = amio_sfp_ordered(f, is_write, buf, count, dt, &bytes);
    pthread_mutex_lock(&f->mu);
    f->split_active = 1;
    f->split_err = code;
    memset(&f->split_status, 0, sizeof f->split_status);
    if (code == MPI_SUCCESS)
        amio_status_set(&f->split_status, bytes);
    pthread_mutex_unlock(&f->mu);
    return amio_raise(f->fh, code);
}

/* ----- the entry points, for int counts and (MPI 4) MPI_Count counts -------------------- */

#define RW_IND(NAME, CT, Q, W)                                                            \
    int NAME(MPI_File fh, Q void *buf, CT count, MPI_Datatype dt, MPI_Status *st)         \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, buf, count, dt, st);                                       \
        return blocking(f, W, 0, 0, (void *)buf, count, dt, st);                          \
    }

#define RW_AT(NAME, CT, Q, W)                                                             \
    int NAME(MPI_File fh, MPI_Offset off, Q void *buf, CT count, MPI_Datatype dt,         \
             MPI_Status *st)                                                              \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, off, buf, count, dt, st);                                  \
        return blocking(f, W, 1, off, (void *)buf, count, dt, st);                        \
    }

#define W_ALL(NAME, CT)                                                                   \
    int NAME(MPI_File fh, const void *buf, CT count, MPI_Datatype dt, MPI_Status *st)     \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, buf, count, dt, st);                                       \
        return collective_write(f, 0, 0, buf, count, dt, st);                             \
    }

#define W_AT_ALL(NAME, CT)                                                                \
    int NAME(MPI_File fh, MPI_Offset off, const void *buf, CT count, MPI_Datatype dt,     \
             MPI_Status *st)                                                              \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, off, buf, count, dt, st);                                  \
        return collective_write(f, 1, off, buf, count, dt, st);                           \
    }

#define RW_I(NAME, CT, Q, W)                                                              \
    int NAME(MPI_File fh, Q void *buf, CT count, MPI_Datatype dt, MPI_Request *req)       \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, buf, count, dt, req);                                      \
        return nonblocking(f, W, 0, 0, (void *)buf, count, dt, req);                      \
    }

#define RW_I_AT(NAME, CT, Q, W)                                                           \
    int NAME(MPI_File fh, MPI_Offset off, Q void *buf, CT count, MPI_Datatype dt,         \
             MPI_Request *req)                                                            \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, off, buf, count, dt, req);                                 \
        return nonblocking(f, W, 1, off, (void *)buf, count, dt, req);                    \
    }

#define RW_BEGIN(NAME, CT, Q, W)                                                          \
    int NAME(MPI_File fh, Q void *buf, CT count, MPI_Datatype dt)                         \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, buf, count, dt);                                           \
        return split_begin(f, W, 0, 0, (void *)buf, count, dt);                           \
    }

#define RW_BEGIN_AT(NAME, CT, Q, W)                                                       \
    int NAME(MPI_File fh, MPI_Offset off, Q void *buf, CT count, MPI_Datatype dt)         \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, off, buf, count, dt);                                      \
        return split_begin(f, W, 1, off, (void *)buf, count, dt);                         \
    }

#define RW_END(NAME, Q)                                                                   \
    int NAME(MPI_File fh, Q void *buf, MPI_Status *st)                                    \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, buf, st);                                                  \
        return split_end(f, st);                                                          \
    }

#define SHARED(NAME, CT, Q, W, ORD)                                                       \
    int NAME(MPI_File fh, Q void *buf, CT count, MPI_Datatype dt, MPI_Status *st)         \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, buf, count, dt, st);                                       \
        return shared(f, W, ORD, (void *)buf, count, dt, st);                             \
    }

#define SHARED_I(NAME, CT, Q, W)                                                          \
    int NAME(MPI_File fh, Q void *buf, CT count, MPI_Datatype dt, MPI_Request *req)       \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, buf, count, dt, req);                                      \
        return shared_i(f, W, (void *)buf, count, dt, req);                               \
    }

#define SHARED_BEGIN(NAME, CT, Q, W)                                                      \
    int NAME(MPI_File fh, Q void *buf, CT count, MPI_Datatype dt)                         \
    {                                                                                     \
        amio_file *f = amio_lookup(fh);                                                   \
        if (!f)                                                                           \
            return P##NAME(fh, buf, count, dt);                                           \
        return shared_begin(f, W, (void *)buf, count, dt);                                \
    }

#define ALL_FORMS(SUFFIX, CT)                                                             \
    RW_IND(MPI_File_read##SUFFIX, CT, , 0)                                                \
    RW_IND(MPI_File_read_all##SUFFIX, CT, , 0)                                            \
    RW_IND(MPI_File_write##SUFFIX, CT, const, 1)                                          \
    W_ALL(MPI_File_write_all##SUFFIX, CT)                                                 \
    RW_AT(MPI_File_read_at##SUFFIX, CT, , 0)                                              \
    RW_AT(MPI_File_read_at_all##SUFFIX, CT, , 0)                                          \
    RW_AT(MPI_File_write_at##SUFFIX, CT, const, 1)                                        \
    W_AT_ALL(MPI_File_write_at_all##SUFFIX, CT)                                           \
    RW_I(MPI_File_iread##SUFFIX, CT, , 0)                                                 \
    RW_I(MPI_File_iread_all##SUFFIX, CT, , 0)                                             \
    RW_I(MPI_File_iwrite##SUFFIX, CT, const, 1)                                           \
    RW_I(MPI_File_iwrite_all##SUFFIX, CT, const, 1)                                       \
    RW_I_AT(MPI_File_iread_at##SUFFIX, CT, , 0)                                           \
    RW_I_AT(MPI_File_iread_at_all##SUFFIX, CT, , 0)                                       \
    RW_I_AT(MPI_File_iwrite_at##SUFFIX, CT, const, 1)                                     \
    RW_I_AT(MPI_File_iwrite_at_all##SUFFIX, CT, const, 1)                                 \
    RW_BEGIN(MPI_File_read_all_begin##SUFFIX, CT, , 0)                                    \
    RW_BEGIN(MPI_File_write_all_begin##SUFFIX, CT, const, 1)                              \
    RW_BEGIN_AT(MPI_File_read_at_all_begin##SUFFIX, CT, , 0)                              \
    RW_BEGIN_AT(MPI_File_write_at_all_begin##SUFFIX, CT, const, 1)                        \
    SHARED(MPI_File_read_shared##SUFFIX, CT, , 0, 0)                                      \
    SHARED(MPI_File_write_shared##SUFFIX, CT, const, 1, 0)                                \
    SHARED(MPI_File_read_ordered##SUFFIX, CT, , 0, 1)                                     \
    SHARED(MPI_File_write_ordered##SUFFIX, CT, const, 1, 1)                               \
    SHARED_I(MPI_File_iread_shared##SUFFIX, CT, , 0)                                      \
    SHARED_I(MPI_File_iwrite_shared##SUFFIX, CT, const, 1)                                \
    SHARED_BEGIN(MPI_File_read_ordered_begin##SUFFIX, CT, , 0)                            \
    SHARED_BEGIN(MPI_File_write_ordered_begin##SUFFIX, CT, const, 1)

ALL_FORMS(, int)
#if MPI_VERSION >= 4
ALL_FORMS(_c, MPI_Count)
#endif

RW_END(MPI_File_read_all_end, )
RW_END(MPI_File_write_all_end, const)
RW_END(MPI_File_read_at_all_end, )
RW_END(MPI_File_write_at_all_end, const)
RW_END(MPI_File_read_ordered_end, )
RW_END(MPI_File_write_ordered_end, const)

int MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence)
{
    amio_file *f = amio_lookup(fh);
    if (!f)
        return PMPI_File_seek_shared(fh, offset, whence);
    return amio_raise(fh, amio_sfp_seek(f, offset, whence));
}

int MPI_File_get_position_shared(MPI_File fh, MPI_Offset *offset)
{
    amio_file *f = amio_lookup(fh);
    if (!f)
        return PMPI_File_get_position_shared(fh, offset);
    if (!offset)
        return amio_raise(fh, amio_error(MPI_ERR_ARG, "MPI_File_get_position_shared: NULL "
                                                      "offset"));
    return amio_raise(fh, amio_sfp_position(f, offset));
}
