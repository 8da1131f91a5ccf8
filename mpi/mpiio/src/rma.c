/*
 * rma.c -- the `rma` strategy: no servers. Byte-range locks over MPI one-sided
 * communication (mpi/rmalock: Thakur, Ross and Latham's algorithm, mode "paper", or
 * the direct-grant FIFO table, the default; ATOMIO_RMA_MODE), I/O with pread/pwrite on the
 * ordinary file.
 *
 * Scope of the lock (ATOMIO_RMA_SCOPE):
 *   file  (default) one lock object per open, created collectively over the file's
 *         communicator, its table on rank hash(path) mod size. Only processes of the same
 *         open exclude each other: two independent opens (e.g. each on MPI_COMM_SELF)
 *         do NOT, exactly like MPI's own promise, which covers one collective open.
 *   world one lock object for the whole job, created at MPI_Init over MPI_COMM_WORLD and
 *         shared by every rma file, so independent opens exclude each other too; ranges
 *         of different files then also conflict (false sharing across files).
 *
 * Invariants: in atomic mode a rank holds the lock on the call's bounding extent for the
 * whole of the call's I/O and at most one range at a time (rmalock's contract; the
 * world-scope object is additionally guarded by a process mutex, since all of this
 * process's files share it); lock errors are MPI errors, never aborts.
 */
#define _GNU_SOURCE
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int lock_error(int rc, const char *what)
{
    return amio_error(MPI_ERR_IO, "rma lock %s: %s", what, rmalock_strerror(rc));
}

int amio_rma_open(amio_file *f)
{
    int flags = (f->amode & MPI_MODE_RDONLY) ? O_RDONLY : O_RDWR;
    f->data_fd = open(f->path, flags | O_CLOEXEC);
    int code = MPI_SUCCESS;
    if (f->data_fd < 0)
        code = amio_error(MPI_ERR_IO, "opening %s: %s", f->path, strerror(errno));
    if (code == MPI_SUCCESS) {
        int caches = ATOMIO_FS_PRIVATE;
        char fs[64] = "";
        int rc = atomio_fs_caches(f->data_fd, f->caches[0] ? f->caches : NULL, &caches, fs,
                                  sizeof fs);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "finding what the file lives on");
        f->private_caches = caches == ATOMIO_FS_PRIVATE;
        amio_log(2, "%s: on %s, %s client caches", f->path, fs,
                 caches == ATOMIO_FS_SHARED ? "shared" : caches == ATOMIO_FS_COHERENT ? "coherent" : "private");
    }
    if (amio_cfg.rma_world) {
        if (!amio_rt.world_lock && code == MPI_SUCCESS)
            code = amio_error(MPI_ERR_IO, "ATOMIO_RMA_SCOPE=world but the job-wide lock was "
                                          "not created at MPI_Init");
        return code;
    }
    /* Collective: every rank creates, even after a local failure, then all agree. */
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = f->path; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    int rc = rmalock_create(f->comm, amio_cfg.rma_mode, (int)(h % (uint64_t)f->size), &f->rlock);
    if (rc != RMALOCK_OK && code == MPI_SUCCESS)
        code = lock_error(rc, "create");
    return code;
}

/* Where client caches are private: after a lock on [s, e) is granted, this client's cached
 * pages of it and its cached size are forgotten (a read then asks the file system). */
int amio_rma_after_acquire(amio_file *f, uint64_t s, uint64_t e)
{
    if (!f->private_caches)
        return MPI_SUCCESS;
    int rc = atomio_forget_cached(f->data_fd, s, e - s);
    return rc == ATOMIO_OK ? MPI_SUCCESS : amio_error_atomio(rc, "forgetting cached pages");
}

/* Where client caches are private: a write's bytes reach the file system before its lock
 * is released. */
int amio_rma_before_release(amio_file *f)
{
    if (f->private_caches && fdatasync(f->data_fd) < 0)
        return amio_error(MPI_ERR_IO, "fdatasync %s: %s", f->path, strerror(errno));
    return MPI_SUCCESS;
}

int amio_rma_close(amio_file *f)
{
    int code = MPI_SUCCESS;
    if (f->rlock) {
        int rc = rmalock_free(&f->rlock);
        if (rc != RMALOCK_OK)
            code = lock_error(rc, "free");
    }
    if (f->data_fd >= 0)
        close(f->data_fd);
    f->data_fd = -1;
    return code;
}

int amio_rma_lock(amio_file *f, uint64_t start, uint64_t end)
{
    if (end <= start)
        return MPI_SUCCESS;
    if (start > INT64_MAX || end > INT64_MAX)
        return amio_error(MPI_ERR_ARG, "rma lock beyond the largest offset");
    rmalock_t *lk = f->rlock;
    if (!lk) {
        pthread_mutex_lock(&amio_rt.world_lock_mu);
        lk = amio_rt.world_lock;
    }
    int rc = rmalock_acquire(lk, (int64_t)start, (int64_t)end);
    if (rc != RMALOCK_OK) {
        if (!f->rlock)
            pthread_mutex_unlock(&amio_rt.world_lock_mu);
        return lock_error(rc, "acquire");
    }
    return MPI_SUCCESS;
}

int amio_rma_unlock(amio_file *f)
{
    rmalock_t *lk = f->rlock ? f->rlock : amio_rt.world_lock;
    int rc = rmalock_release(lk);
    if (!f->rlock)
        pthread_mutex_unlock(&amio_rt.world_lock_mu);
    return rc == RMALOCK_OK ? MPI_SUCCESS : lock_error(rc, "release");
}
