/*
 * session.c -- the ordinary file and its copy on the atomio servers.
 *
 * While any handle in the job (or in any job sharing the servers) has a file open, the
 * servers' copy is the truth; when none has, the ordinary file is. A *session* is the time
 * some handle is open. Sessions are tracked with Linux open-file-description locks
 * (F_OFD_SETLK) on two bytes far beyond any data of the ordinary file, taken by rank 0 of
 * each open's communicator on a descriptor of its own:
 *   SESSION byte: a shared lock held for as long as the handle is open;
 *   MUTEX byte:   an exclusive lock held while entering, exporting or leaving.
 * Enter (under MUTEX): if nobody holds SESSION, this is the first open: drop any stale copy
 * (a crashed job's), create the copy and import the ordinary file's bytes; then hold
 * SESSION. Export (under MUTEX): write the copy's bytes over the ordinary file. Leave
 * (under MUTEX): export if asked, drop SESSION, and if nobody else holds it, remove the
 * copy, so the next open imports whatever the ordinary file then holds.
 *
 * Invariants: entering, exporting and leaving are serialized per file across processes
 * and nodes that see the same file system (OFD locks are per open file description, so
 * ROMIO closing its own descriptor of the file, or atomio_export opening and closing
 * another, never drops them); an import is complete before any other open proceeds; the
 * copy is removed only by the last session; an export reads the copy under MUTEX, so a
 * later export never writes older bytes than an earlier one. A file the process may only
 * read gets its MUTEX as a shared lock (no export is ever needed for it; concurrent first
 * opens of it are then not serialized, see README).
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
#define EXPORT_DOMAIN ((uint64_t)1 << 20)

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
                code = import(f, copy);
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

int amio_session_export(amio_file *f)
{
    int code = lock_mutex(f);
    if (code != MPI_SUCCESS)
        return code;
    int rc = atomio_export(f->af, f->path);
    if (rc != ATOMIO_OK)
        code = amio_error_atomio(rc, "exporting to the ordinary file");
    unlock_mutex(f);
    amio_log(2, "exported %s", f->path);
    return code;
}

/* One rank's share of a parallel export: [lo, hi) of the copy over the ordinary file,
 * through this rank's own descriptor (its own file system client), then flushed. */
static int export_domain(amio_file *f, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return MPI_SUCCESS;
    int fd = open(f->path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return sys_error("opening", f->path);
    unsigned char *buf = malloc(IMPORT_CHUNK);
    int code = buf ? MPI_SUCCESS : amio_error(MPI_ERR_NO_MEM, "out of memory exporting");
    for (uint64_t off = lo; off < hi && code == MPI_SUCCESS;) {
        uint64_t len = hi - off < IMPORT_CHUNK ? hi - off : IMPORT_CHUNK;
        int rc = atomio_read_list(f->af, 1, &off, &len, buf, (size_t)len);
        if (rc != ATOMIO_OK) {
            code = amio_error_atomio(rc, "reading the server copy to export it");
            break;
        }
        for (size_t done = 0; done < len && code == MPI_SUCCESS;) {
            ssize_t w = pwrite(fd, buf + done, (size_t)len - done, (off_t)(off + done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                code = sys_error("writing", f->path);
            else
                done += (size_t)w;
        }
        off += len;
    }
    if (code == MPI_SUCCESS && fdatasync(fd) < 0)
        code = sys_error("flushing (fdatasync)", f->path);
    close(fd);
    free(buf);
    return code;
}

/* size * r / P (without overflow) rounded down to EXPORT_DOMAIN; size itself for r = P. */
static uint64_t domain_start(uint64_t size, uint64_t r, uint64_t P)
{
    if (r >= P)
        return size;
    uint64_t at = size / P * r + size % P * r / P;
    return at / EXPORT_DOMAIN * EXPORT_DOMAIN;
}

/* Collective (see internal.h): rank 0 takes MUTEX and sizes the ordinary file as the copy;
 * then rank r of P writes bytes [D(r), D(r + 1)) with D(r) = size * r / P rounded down to
 * EXPORT_DOMAIN, so ranks on different clients never write the same page; each flushes. */
int amio_session_export_all(amio_file *f)
{
    uint64_t size = 0;
    int code = MPI_SUCCESS, locked = 0;
    if (f->rank == 0) {
        code = lock_mutex(f);
        locked = code == MPI_SUCCESS;
        if (code == MPI_SUCCESS) {
            int rc = atomio_size(f->af, &size);
            if (rc != ATOMIO_OK)
                code = amio_error_atomio(rc, "the server copy's size");
        }
        if (code == MPI_SUCCESS && ftruncate(f->lock_fd, (off_t)size) < 0)
            code = sys_error("sizing (ftruncate)", f->path);
    }
    code = amio_agree(code, f->comm, "exporting");
    if (code == MPI_SUCCESS)
        code = amio_bcast(&size, 1, MPI_UINT64_T, 0, f->comm);
    /* every rank is done writing (sync and close are collective): the copy is read
     * without locks */
    if (code == MPI_SUCCESS && atomio_set_atomic(f->af, NULL) != ATOMIO_OK)
        code = amio_error_atomio(ATOMIO_EINTERNAL, "atomic mode off for the export");
    if (code == MPI_SUCCESS) {
        uint64_t lo = domain_start(size, (uint64_t)f->rank, (uint64_t)f->size);
        uint64_t hi = domain_start(size, (uint64_t)f->rank + 1, (uint64_t)f->size);
        code = amio_agree(export_domain(f, lo, hi), f->comm, "exporting");
    }
    if (f->atomic && atomio_set_atomic(f->af, f->strategy) != ATOMIO_OK && code == MPI_SUCCESS)
        code = amio_error_atomio(ATOMIO_EINTERNAL, "atomic mode back on after the export");
    if (locked)
        unlock_mutex(f);
    if (code == MPI_SUCCESS && f->rank == 0)
        amio_log(2, "exported %s (%llu bytes, every rank its domain)", f->path,
                 (unsigned long long)size);
    return code;
}

int amio_session_leave(amio_file *f, atomio_client *c, int export_first)
{
    if (f->lock_fd < 0)
        return MPI_SUCCESS;
    int code = lock_mutex(f), others = 1;
    if (code == MPI_SUCCESS && export_first) {
        int rc = atomio_export(f->af, f->path);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "exporting to the ordinary file");
        else
            amio_log(2, "exported %s", f->path);
    }
    ofd(f->lock_fd, F_OFD_SETLK, F_UNLCK, SESSION_BYTE, NULL);
    int c2 = others_in_session(f, &others);
    if (code == MPI_SUCCESS)
        code = c2;
    if (c2 == MPI_SUCCESS && !others) {
        int rc = atomio_remove(c, f->path);
        if (rc != ATOMIO_OK && rc != ATOMIO_ENOTFOUND && code == MPI_SUCCESS)
            code = amio_error_atomio(rc, "removing the server copy");
        amio_log(2, "%s: last close, server copy removed", f->path);
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
