/*
 * file_ops.c -- MPI_File_set_atomicity, get_atomicity, sync, get_size, set_size,
 * preallocate on atomio files.
 *
 * Atomic mode: MPI_File_set_atomicity(fh, 1) turns on the file's strategy (atomio_set_atomic
 * with the strategy name; rma: rmalock around each call); ATOMIO_FORCE_ATOMIC=1 keeps it on
 * whatever the program asks, and MPI_File_get_atomicity then says 1. The atomicity holds
 * across every handle on the same servers (or, for rma with ATOMIO_RMA_SCOPE=world, the
 * same job), including independent opens on MPI_COMM_SELF, which MPI does not promise.
 * Strategy versioning stays on with atomic mode off (see versioning.c for why).
 *
 * sync: direct placement: every rank fdatasyncs the ordinary file (atomio_sync); with
 * strategy versioning instead the ranks agree their writes returned and rank 0 writes the
 * newest snapshot into the ordinary file and fdatasyncs it (versioning.c). Servers
 * placement: every rank flushes its DLM cache; if anyone wrote since the last export and
 * ATOMIO_EXPORT_ON_SYNC is not 0, the ranks write what was written since then into the
 * ordinary file and fdatasync it (amio_base_export: O(written bytes), not O(file size)), so
 * the bytes survive the job (in-job servers keep their data in a temporary directory);
 * otherwise rank 0 makes the server copy durable (atomio_sync).
 * set_size / preallocate: rank 0 changes the size once, after every rank arrived; a file
 * with versioning snapshots may grow but not shrink (refused on every rank); a server copy
 * that shrinks shortens the ordinary file with it (amio_base_truncate: its bytes past the
 * new end must not come back as the copy's base).
 * get_size: atomio_size, which for versioning is the newest snapshot's size laid over the
 * ordinary file's.
 *
 * Invariants: the collective calls agree on the outcome on every rank before returning;
 * sizes are never negative; preallocate never shrinks a file.
 */
#define _GNU_SOURCE
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int apply_atomic(amio_file *f)
{
    if (f->is_rma)
        return MPI_SUCCESS;
    int rc = atomio_set_atomic(f->af, f->atomic || f->versioning ? f->strategy : NULL);
    amio_intervals_note(f); /* auto chooses again from the file's interval set */
    return rc == ATOMIO_OK ? MPI_SUCCESS : amio_error_atomio(rc, "MPI_File_set_atomicity");
}

int MPI_File_set_atomicity(MPI_File fh, int flag)
{
    amio_file *f = amio_lookup(fh);
    if (!f)
        return PMPI_File_set_atomicity(fh, flag);
    int flags[2] = {flag != 0, -(flag != 0)};
    int code = amio_allreduce_int(flags, 2, MPI_MAX, f->comm);
    if (code == MPI_SUCCESS && flags[0] != -flags[1])
        code = amio_error(MPI_ERR_ARG, "MPI_File_set_atomicity: ranks passed different flags");
    if (code == MPI_SUCCESS) {
        pthread_mutex_lock(&f->mu);
        f->atomic = flag != 0 || amio_cfg.force_atomic;
        code = apply_atomic(f);
        pthread_mutex_unlock(&f->mu);
    }
    return amio_raise(fh, code);
}

int MPI_File_get_atomicity(MPI_File fh, int *flag)
{
    amio_file *f = amio_lookup(fh);
    if (!f)
        return PMPI_File_get_atomicity(fh, flag);
    if (!flag)
        return amio_raise(fh, amio_error(MPI_ERR_ARG, "NULL flag"));
    *flag = f->atomic;
    return MPI_SUCCESS;
}

int MPI_File_sync(MPI_File fh)
{
    amio_file *f = amio_lookup(fh);
    if (!f)
        return PMPI_File_sync(fh);
    int code = MPI_SUCCESS;
    if (f->is_rma) {
        if (!(f->amode & MPI_MODE_RDONLY) && fsync(f->data_fd) < 0)
            code = amio_error(MPI_ERR_IO, "fsync %s: %s", f->path, strerror(errno));
        /* sync-barrier-sync: later reads must see what other clients synced */
        if (code == MPI_SUCCESS)
            code = amio_rma_after_acquire(f, 0, 0);
        return amio_raise(fh, amio_agree(code, f->comm, "MPI_File_sync"));
    }
    if (f->direct && f->versioning) {
        /* the writes are snapshots: rank 0 materializes them once every rank is done */
        code = amio_versioning_settle(f, code, 0, "MPI_File_sync");
        code = amio_agree(code, f->comm, "MPI_File_sync");
        if (code == MPI_SUCCESS)
            f->dirty = 0;
        return amio_raise(fh, code);
    }
    if (f->direct) {
        /* each rank flushes what its own descriptor wrote (other hosts' caches too) */
        int rc = (f->amode & MPI_MODE_RDONLY) ? ATOMIO_OK : atomio_sync(f->af);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "MPI_File_sync");
        return amio_raise(fh, amio_agree(code, f->comm, "MPI_File_sync"));
    }
    /* every rank's cached-lock DLM bytes reach the servers before the export */
    int frc = (f->amode & MPI_MODE_RDONLY) ? ATOMIO_OK : atomio_flush(f->af);
    if (frc != ATOMIO_OK)
        code = amio_error_atomio(frc, "flushing cached writes at MPI_File_sync");
    int dirty = f->dirty;
    int c1 = amio_allreduce_int(&dirty, 1, MPI_MAX, f->comm); /* every rank's writes are done */
    if (code == MPI_SUCCESS)
        code = c1;
    /* a forwarded file's bytes must be in the ordinary file whatever the setting */
    if (dirty && (amio_cfg.export_on_sync || f->forwarded)) {
        code = amio_agree(code, f->comm, "MPI_File_sync");
        if (code == MPI_SUCCESS)
            code = amio_base_export(f);
        if (code == MPI_SUCCESS)
            f->dirty = 0;
        return amio_raise(fh, code);
    }
    if (code == MPI_SUCCESS && f->rank == 0) {
        int rc = atomio_sync(f->af);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "MPI_File_sync");
    }
    return amio_raise(fh, amio_agree(code, f->comm, "MPI_File_sync"));
}

int MPI_File_get_size(MPI_File fh, MPI_Offset *size)
{
    amio_file *f = amio_lookup(fh);
    if (!f)
        return PMPI_File_get_size(fh, size);
    if (!size)
        return amio_raise(fh, amio_error(MPI_ERR_ARG, "NULL size"));
    uint64_t s = 0;
    pthread_mutex_lock(&f->mu);
    int code = amio_file_size(f, &s);
    pthread_mutex_unlock(&f->mu);
    if (code == MPI_SUCCESS)
        *size = (MPI_Offset)s;
    return amio_raise(fh, code);
}

/* Rank 0 resizes (grow_only: preallocate), after every rank arrived; all agree. */
static int resize(amio_file *f, MPI_Offset size, int grow_only, const char *what)
{
    int code = size < 0 ? amio_error(MPI_ERR_ARG, "%s: negative size %lld", what, (long long)size)
                        : MPI_SUCCESS;
    if (code == MPI_SUCCESS && (f->amode & MPI_MODE_RDONLY))
        code = amio_error(MPI_ERR_READ_ONLY, "%s on a file opened MPI_MODE_RDONLY", what);
    code = amio_agree(code, f->comm, what);
    if (code != MPI_SUCCESS)
        return code;
    if (f->rank == 0) {
        uint64_t cur = 0;
        if (grow_only)
            code = amio_file_size(f, &cur);
        else if (f->versioning)
            code = amio_versioning_check_shrink(f, (uint64_t)size, what);
        if (code == MPI_SUCCESS && (!grow_only || cur < (uint64_t)size)) {
            if (f->is_rma) {
                int r = grow_only ? posix_fallocate(f->data_fd, 0, (off_t)size)
                                  : (ftruncate(f->data_fd, (off_t)size) < 0 ? errno : 0);
                if (r)
                    code = amio_error(MPI_ERR_IO, "%s %s: %s", what, f->path, strerror(r));
            } else {
                int rc = atomio_set_size(f->af, (uint64_t)size);
                if (rc != ATOMIO_OK)
                    code = amio_error_atomio(rc, what);
                if (code == MPI_SUCCESS && !f->direct && !grow_only)
                    code = amio_base_truncate(f, (uint64_t)size);
            }
        }
    }
    code = amio_agree(code, f->comm, what);
    if (code == MPI_SUCCESS) {
        f->dirty = 1;
        if (!grow_only) {
            amio_note_size(f, (uint64_t)size);
            amio_base_resized(f, (uint64_t)size);
        }
    }
    return code;
}

int MPI_File_set_size(MPI_File fh, MPI_Offset size)
{
    amio_file *f = amio_lookup(fh);
    if (!f)
        return PMPI_File_set_size(fh, size);
    return amio_raise(fh, resize(f, size, 0, "MPI_File_set_size"));
}

int MPI_File_preallocate(MPI_File fh, MPI_Offset size)
{
    amio_file *f = amio_lookup(fh);
    if (!f)
        return PMPI_File_preallocate(fh, size);
    return amio_raise(fh, resize(f, size, 1, "MPI_File_preallocate"));
}
