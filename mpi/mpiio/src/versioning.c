/*
 * versioning.c -- strategy versioning: the snapshots and the user's file.
 *
 * With strategy versioning (Tran et al. 2010) no write takes a lock: each write call
 * becomes a new immutable snapshot on the atomio servers (chunks and a segment tree),
 * published in order by the file's version manager. Reads, MPI_File_get_size and the end of
 * file of a view see the newest published snapshot laid over the file's *base*, the bytes
 * no version wrote: the user's file in direct placement (the default), the server copy with
 * ATOMIO_DATA=servers (whose export, atomio_export, writes the newest snapshot).
 *
 * Direct placement: the user's file receives the snapshots' bytes when they are
 * *materialized*, at MPI_File_sync and MPI_File_close (both collective): every rank agrees
 * that its writes returned (one allreduce, which also tells whether any rank wrote since
 * the last materialization); if one did (and the close does not delete the file:
 * MPI_MODE_DELETE_ON_CLOSE), rank 0 writes the newest snapshot into the user's file
 * (atomio_materialize) and fdatasyncs it (atomio_sync); the caller's agreement follows.
 * Materializing makes the snapshots older than the one written unreadable (their unwritten
 * bytes would come from a base that no longer holds them).
 *
 * The strategy stays on at the atomio level when the program turns atomic mode off (MPI
 * allows atomic behaviour in nonatomic mode): a write that went around the snapshots into
 * the user's file would lie under them, hidden wherever a version wrote and overwritten by
 * the next materialization. MPI_File_set_size may grow such a file; shrinking it once a
 * snapshot exists is refused (MPI_ERR_UNSUPPORTED_OPERATION): the snapshots keep their
 * sizes, so the bytes past the new end would stay.
 *
 * Invariants: after MPI_File_sync or MPI_File_close returned success on a file that some
 * rank of the communicator wrote, the user's file holds the newest snapshot as it was when
 * rank 0 began materializing (every write call of the communicator had returned, so it is
 * in it) and is durable. Materializations of one file are serialized across processes and
 * independent opens by an exclusive OFD lock on a byte far beyond its data (next to
 * session.c's two), and each picks the newest snapshot only once it holds the lock, so a
 * materialization never leaves an older snapshot's bytes over a newer one's.
 */
#define _GNU_SOURCE
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* session.c's SESSION byte + 2 */
#define MATERIALIZE_BYTE ((off_t)0x7fffffffffff0002LL)

static int lock_byte(int fd, short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = MATERIALIZE_BYTE;
    fl.l_len = 1;
    int r;
    while ((r = fcntl(fd, type == F_UNLCK ? F_OFD_SETLK : F_OFD_SETLKW, &fl)) < 0 &&
           errno == EINTR)
        ;
    return r;
}

/* Rank 0: the newest snapshot into the user's file, made durable, under the lock. */
static int materialize(amio_file *f)
{
    int fd = open(f->path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return amio_error(MPI_ERR_IO, "opening %s to materialize it: %s", f->path,
                          strerror(errno));
    int code = MPI_SUCCESS;
    if (lock_byte(fd, F_WRLCK) < 0)
        code = amio_error(MPI_ERR_IO, "locking %s (F_OFD_SETLKW): %s", f->path, strerror(errno));
    if (code == MPI_SUCCESS) {
        int rc = atomio_materialize(f->af);
        if (rc == ATOMIO_OK)
            rc = atomio_sync(f->af);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "writing the newest snapshot into the file");
        lock_byte(fd, F_UNLCK);
    }
    close(fd);
    amio_log(2, "materialized %s%s", f->path, code == MPI_SUCCESS ? "" : " (failed)");
    return code;
}

int amio_versioning_settle(amio_file *f, int code, int closing, const char *what)
{
    int dirty = f->dirty;
    int c1 = amio_allreduce_int(&dirty, 1, MPI_MAX, f->comm); /* every rank's writes returned */
    if (code == MPI_SUCCESS)
        code = c1;
    /* a file deleted at this close needs none */
    int wanted = dirty && !(f->amode & MPI_MODE_RDONLY) &&
                 !(closing && (f->amode & MPI_MODE_DELETE_ON_CLOSE));
    if (c1 == MPI_SUCCESS && f->rank == 0 && wanted) {
        int c2 = materialize(f);
        if (c2 != MPI_SUCCESS)
            amio_log(1, "%s: materializing %s failed", what, f->path);
        if (code == MPI_SUCCESS)
            code = c2;
    }
    return code;
}

int amio_versioning_check_shrink(amio_file *f, uint64_t size, const char *what)
{
    uint64_t latest = 0, cur = 0;
    int rc = atomio_latest_version(f->af, &latest);
    if (rc != ATOMIO_OK)
        return amio_error_atomio(rc, what);
    if (latest == 0)
        return MPI_SUCCESS;
    int code = amio_file_size(f, &cur);
    if (code == MPI_SUCCESS && size < cur)
        code = amio_error(MPI_ERR_UNSUPPORTED_OPERATION,
                          "%s: %s has snapshots (strategy versioning, newest %llu): it cannot "
                          "shrink from %llu to %llu bytes",
                          what, f->path, (unsigned long long)latest, (unsigned long long)cur,
                          (unsigned long long)size);
    return code;
}
