/*
 * session.c -- the ordinary file and its copy on the atomio servers.
 *
 * While any handle in the job (or in any job sharing the servers) has a file open, the
 * servers' copy laid over the ordinary file is the truth (base.c: the copy holds what was
 * written and the blocks filled from the ordinary file; the rest is the ordinary file's);
 * when none has, the ordinary file is. A *session* is the time some handle is open.
 * Sessions are tracked with Linux open-file-description locks (F_OFD_SETLK) on two bytes
 * far beyond any data of the ordinary file, taken by rank 0 of each open's communicator on
 * a descriptor of its own:
 *   SESSION byte: a shared lock held for as long as the handle is open;
 *   MUTEX byte:   an exclusive lock held while entering, exporting or leaving.
 * Enter (under MUTEX): if nobody holds SESSION, this is the first open: drop any stale copy
 * (a crashed job's), create the copy sized as the ordinary file and the session's fill map
 * (reset, if a crashed job left one) — nothing is copied; only where the directory refuses a fill map is
 * the ordinary file imported whole, as before any map existed — then hold SESSION. Export
 * (under MUTEX, base.c): the dirty extents written over the ordinary file. Leave (under
 * MUTEX): drop SESSION, and if nobody else holds it, remove the copy and the fill map, so the
 * next open starts from whatever the ordinary file then holds.
 *
 * Invariants: entering, exporting and leaving are serialized per file across processes
 * and nodes that see the same file system (OFD locks are per open file description, so
 * ROMIO closing its own descriptor of the file never drops them); a session's copy and fill
 * map are made before any other open proceeds; the copy and the map are removed only by the
 * last session; an export reads the copy under MUTEX, so a later export never writes older
 * bytes than an earlier one. A file the process may only read gets its MUTEX as a shared
 * lock (no export is ever needed for it; concurrent first opens of it are then not
 * serialized, see README).
 */
#define _GNU_SOURCE
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SESSION_BYTE ((off_t)0x7fffffffffff0000LL)
#define MUTEX_BYTE (SESSION_BYTE + 1)
#define IMPORT_CHUNK ((size_t)8 << 20)

static int ofd(int fd, int cmd, short type, off_t at, short *seen)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = 1;
    int r;
    while ((r = fcntl(fd, cmd, &fl)) < 0 && errno == EINTR)
        ;
    if (seen)
        *seen = fl.l_type;
    return r;
}

static int sys_error(const char *what, const char *path)
{
    return amio_error(MPI_ERR_IO, "%s %s: %s", what, path, strerror(errno));
}

static int lock_mutex(amio_file *f)
{
    if (ofd(f->lock_fd, F_OFD_SETLKW, f->lock_rw ? F_WRLCK : F_RDLCK, MUTEX_BYTE, NULL) < 0)
        return sys_error("locking (F_OFD_SETLKW)", f->path);
    return MPI_SUCCESS;
}

static void unlock_mutex(amio_file *f)
{
    ofd(f->lock_fd, F_OFD_SETLK, F_UNLCK, MUTEX_BYTE, NULL);
}

/* Does another open file description hold SESSION? */
static int others_in_session(amio_file *f, int *others)
{
    short seen = F_UNLCK;
    if (ofd(f->lock_fd, F_OFD_GETLK, F_WRLCK, SESSION_BYTE, &seen) < 0)
        return sys_error("testing a lock (F_OFD_GETLK)", f->path);
    *others = seen != F_UNLCK;
    return MPI_SUCCESS;
}

static int all_zero(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* Copies the ordinary file into the (new, empty) server copy; holes stay holes. */
static int import(amio_file *f, atomio_file *copy)
{
    struct stat st;
    if (fstat(f->lock_fd, &st) < 0)
        return sys_error("stat", f->path);
    if (st.st_size == 0)
        return MPI_SUCCESS;
    unsigned char *buf = malloc(IMPORT_CHUNK);
    if (!buf)
        return amio_error(MPI_ERR_NO_MEM, "out of memory importing %s", f->path);
    int code = MPI_SUCCESS;
    for (uint64_t off = 0; off < (uint64_t)st.st_size && code == MPI_SUCCESS;) {
        size_t want = (uint64_t)st.st_size - off < IMPORT_CHUNK ? (size_t)((uint64_t)st.st_size - off)
                                                                : IMPORT_CHUNK;
        ssize_t got = pread(f->lock_fd, buf, want, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            code = sys_error("reading", f->path);
            break;
        }
        if (got == 0)
            break; /* the file shrank meanwhile: import what there is */
        uint64_t len = (uint64_t)got;
        if (!all_zero(buf, (size_t)got)) {
            int rc = atomio_write_list(copy, 1, &off, &len, buf, (size_t)got);
            if (rc != ATOMIO_OK)
                code = amio_error_atomio(rc, "importing the ordinary file");
        }
        off += len;
    }
    free(buf);
    if (code == MPI_SUCCESS) {
        int rc = atomio_set_size(copy, (uint64_t)st.st_size);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "sizing the imported file");
    }
    amio_log(2, "imported %s (%lld bytes)", f->path, (long long)st.st_size);
    return code;
}

/* The new copy of a first open: sized as the ordinary file over a fresh fill map (nothing
 * copied); imported whole only where the directory refuses a fill map. */
static int start_copy(amio_file *f, atomio_file *copy)
{
    struct stat st;
    if (fstat(f->lock_fd, &st) < 0)
        return sys_error("stat", f->path);
    int made = 0;
    int code = amio_base_start(f->path, (uint64_t)st.st_size, &made);
    if (code != MPI_SUCCESS)
        return code;
    if (st.st_size > 0 && !made) {
        amio_log(1, "%s: no fill map can be made beside the file: importing it whole",
                 f->path);
        return import(f, copy);
    }
    int rc = atomio_set_size(copy, (uint64_t)st.st_size);
    if (rc != ATOMIO_OK)
        return amio_error_atomio(rc, "sizing the server copy");
    amio_log(2, "%s: server copy of %lld bytes over the file, nothing copied", f->path,
             (long long)st.st_size);
    return MPI_SUCCESS;
}

int amio_session_enter(amio_file *f, atomio_client *c)
{
    f->lock_rw = 1;
    f->lock_fd = open(f->path, O_RDWR | O_CLOEXEC);
    if (f->lock_fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
        f->lock_rw = 0;
        f->lock_fd = open(f->path, O_RDONLY | O_CLOEXEC);
    }
    if (f->lock_fd < 0)
        return sys_error("opening", f->path);
    int code = lock_mutex(f), others = 0;
    if (code != MPI_SUCCESS)
        goto fail_fd;
    code = others_in_session(f, &others);
    if (code == MPI_SUCCESS && !others) {
        int rc = atomio_remove(c, f->path); /* a stale copy from a job that crashed */
        if (rc != ATOMIO_OK && rc != ATOMIO_ENOTFOUND) {
            code = amio_error_atomio(rc, "removing a stale server copy");
        } else {
            atomio_file *copy = NULL;
            rc = atomio_open(c, f->path, ATOMIO_CREATE | ATOMIO_EXCL, amio_cfg.stripe_size,
                             amio_cfg.stripe_count, &copy);
            if (rc == ATOMIO_EEXISTS) {
                rc = ATOMIO_OK; /* read-only file: another first open won the race */
            } else if (rc != ATOMIO_OK) {
                code = amio_error_atomio(rc, "creating the server copy");
            } else {
                code = start_copy(f, copy);
                atomio_close(copy);
                if (code != MPI_SUCCESS)
                    atomio_remove(c, f->path);
            }
        }
    }
    if (code == MPI_SUCCESS && ofd(f->lock_fd, F_OFD_SETLK, F_RDLCK, SESSION_BYTE, NULL) < 0)
        code = sys_error("locking (F_OFD_SETLK)", f->path);
    unlock_mutex(f);
    if (code == MPI_SUCCESS) {
        amio_log(2, "%s: %s session", f->path, others ? "joined a" : "started the");
        return MPI_SUCCESS;
    }
fail_fd:
    close(f->lock_fd);
    f->lock_fd = -1;
    return code;
}

int amio_session_lock(amio_file *f)
{
    return lock_mutex(f);
}

void amio_session_unlock(amio_file *f)
{
    unlock_mutex(f);
}

int amio_session_leave(amio_file *f, atomio_client *c)
{
    if (f->lock_fd < 0)
        return MPI_SUCCESS;
    int code = lock_mutex(f), others = 1;
    ofd(f->lock_fd, F_OFD_SETLK, F_UNLCK, SESSION_BYTE, NULL);
    int c2 = others_in_session(f, &others);
    if (code == MPI_SUCCESS)
        code = c2;
    if (c2 == MPI_SUCCESS && !others) {
        int rc = atomio_remove(c, f->path);
        if (rc != ATOMIO_OK && rc != ATOMIO_ENOTFOUND && code == MPI_SUCCESS)
            code = amio_error_atomio(rc, "removing the server copy");
        amio_base_remove(f->path); /* one left (not ours to remove) is reset at next entry */
        amio_log(2, "%s: last close, server copy and fill map removed", f->path);
    }
    unlock_mutex(f);
    close(f->lock_fd);
    f->lock_fd = -1;
    return code;
}

int amio_session_busy(const char *path, int *busy)
{
    *busy = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return MPI_SUCCESS; /* no ordinary file: PMPI_File_delete will say so */
    short seen = F_UNLCK;
    int r = ofd(fd, F_OFD_GETLK, F_WRLCK, SESSION_BYTE, &seen);
    close(fd);
    if (r < 0)
        return sys_error("testing a lock (F_OFD_GETLK)", path);
    *busy = seen != F_UNLCK;
    return MPI_SUCCESS;
}
