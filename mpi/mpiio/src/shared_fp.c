/*
 * shared_fp.c -- the shared file pointer of an atomio file: MPI_File_read/write_shared,
 * read/write_ordered (and their nonblocking and split forms), seek_shared and
 * get_position_shared.
 *
 * The pointer (in etypes of the current view, MPI 4.0 14.4.4) is one int64 in a hidden
 * file beside the file (".NAME.atomio-shfp.NONCE", the nonce drawn by rank 0 at open so
 * that independent opens of the same file have independent pointers), read and updated
 * under an fcntl lock -- what ROMIO does. Nothing is created or exchanged at open: the
 * hidden file is created by the first rank that uses the pointer, and while it is empty
 * the pointer is `sfp_init` (0, or the end of file with MPI_MODE_APPEND), which every rank
 * knows. (An MPI window would cost a collective MPI_Win_allocate at every open and
 * MPI_Win_free at every close: ~30-40 ms of a 4-rank open+close here, for a pointer most
 * programs never use.) Rank 0 removes the hidden file at close, after every rank closed.
 *
 * An independent access takes its place with one atomic fetch-and-add of its etype count,
 * then is an explicit-offset access at that place; so concurrent _shared calls get
 * disjoint places in some serial order, as MPI asks. An ordered access is collective: an
 * exclusive prefix sum of the counts gives each rank its place after the ranks before it,
 * and rank 0 advances the pointer by the total once. seek_shared and set_view
 * (collective) let rank 0 set it, then all ranks synchronize. Like ROMIO, the pointer
 * advances by what a read asked for, even past the end of file. File systems: the hidden
 * file needs a writable directory and working fcntl locks across the job's nodes (local
 * file systems, NFS with lockd, Lustre mounted with -o flock, GPFS), as ROMIO's does.
 *
 * Invariants: the pointer is never negative; an access that fails to take its place does
 * not move it; collective calls agree on their outcome on every rank (an error on one rank
 * is an error on all) before returning.
 */
#define _GNU_SOURCE
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t amio_sfp_nonce(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    x ^= (uint64_t)getpid() << 32;
    /* splitmix64: neighbouring clocks give unrelated names */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int amio_sfp_open(amio_file *f, uint64_t nonce)
{
    const char *slash = strrchr(f->path, '/');
    int dir_len = slash ? (int)(slash - f->path) + 1 : 0;
    const char *base = slash ? slash + 1 : f->path;
    char name[PATH_MAX + 64];
    int n = snprintf(name, sizeof name, "%.*s.%s.atomio-shfp.%016llx", dir_len, f->path, base,
                     (unsigned long long)nonce);
    if (n < 0 || n >= PATH_MAX)
        return amio_error(MPI_ERR_BAD_FILE, "%s: the path is too long for the shared file "
                                            "pointer's hidden file",
                          f->path);
    f->sfp_path = strdup(name);
    f->sfp_fd = -1;
    f->sfp_init = f->pos;
    return f->sfp_path ? MPI_SUCCESS : amio_error(MPI_ERR_NO_MEM, "out of memory");
}

void amio_sfp_close(amio_file *f, int remove)
{
    if (f->sfp_fd >= 0)
        close(f->sfp_fd);
    f->sfp_fd = -1;
    if (remove && f->sfp_path)
        unlink(f->sfp_path); /* absent when nobody used the pointer */
    free(f->sfp_path);
    f->sfp_path = NULL;
}

static int sfp_fail(amio_file *f, const char *what, int err)
{
    return amio_error(MPI_ERR_IO, "shared file pointer of %s: %s %s: %s", f->path, what,
                      f->sfp_path ? f->sfp_path : "(none)", strerror(err));
}

static int lock_word(int fd, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 8};
    while (fcntl(fd, F_SETLKW, &fl) != 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

/* Atomically: *old = pointer; then pointer = set ? v : pointer + v (v = 0: just read). */
static int update(amio_file *f, int set, int64_t v, int64_t *old)
{
    if (!f->sfp_path)
        return amio_error(MPI_ERR_INTERN, "shared file pointer of %s: not open", f->path);
    if (f->sfp_fd < 0) {
        f->sfp_fd = open(f->sfp_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (f->sfp_fd < 0)
            return sfp_fail(f, "creating", errno);
        int caches = ATOMIO_FS_PRIVATE;
        if (atomio_fs_caches(f->sfp_fd, f->caches[0] ? f->caches : NULL, &caches, NULL, 0) !=
            ATOMIO_OK)
            caches = ATOMIO_FS_PRIVATE;
        f->sfp_private = caches == ATOMIO_FS_PRIVATE;
    }
    int writes = set || v != 0;
    if (lock_word(f->sfp_fd, writes ? F_WRLCK : F_RDLCK) != 0)
        return sfp_fail(f, "locking", errno);
    /* Where clients cache privately, the word is read from the file system, not from this
     * client's cached page, and written back to it before the lock goes. */
    if (f->sfp_private && atomio_forget_cached(f->sfp_fd, 0, 0) != ATOMIO_OK) {
        lock_word(f->sfp_fd, F_UNLCK);
        return sfp_fail(f, "reading", EIO);
    }
    int64_t cur = f->sfp_init;
    unsigned char b[8];
    ssize_t got = pread(f->sfp_fd, b, 8, 0);
    int code = MPI_SUCCESS;
    if (got < 0) {
        code = sfp_fail(f, "reading", errno);
    } else if (got == 8) {
        cur = 0;
        for (int i = 7; i >= 0; i--)
            cur = (int64_t)(((uint64_t)cur << 8) | b[i]);
    }
    int64_t next = cur;
    if (code == MPI_SUCCESS && writes) {
        if (set)
            next = v;
        else if (__builtin_add_overflow(cur, v, &next))
            code = amio_error(MPI_ERR_ARG, "shared file pointer of %s overflows", f->path);
    }
    if (code == MPI_SUCCESS && writes) {
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)((uint64_t)next >> (8 * i));
        if (pwrite(f->sfp_fd, b, 8, 0) != 8)
            code = sfp_fail(f, "writing", errno ? errno : EIO);
        else if (f->sfp_private && fdatasync(f->sfp_fd) != 0)
            code = sfp_fail(f, "flushing", errno);
    }
    if (lock_word(f->sfp_fd, F_UNLCK) != 0 && code == MPI_SUCCESS)
        code = sfp_fail(f, "unlocking", errno);
    if (code == MPI_SUCCESS)
        *old = cur;
    return code;
}

static int fetch_add(amio_file *f, int64_t delta, int64_t *old)
{
    return update(f, 0, delta, old);
}

/* Rank 0 only: pointer = v. */
static int store(amio_file *f, int64_t v)
{
    int64_t old;
    return update(f, 1, v, &old);
}

/* The etypes `count` `dt` make (the access must be whole etypes). */
static int etypes_of(amio_file *f, MPI_Count count, MPI_Datatype dt, int64_t *out)
{
    MPI_Count sz = 0;
    if (count < 0)
        return amio_error(MPI_ERR_COUNT, "negative count");
    int checked = amio_type_check(dt, "the memory datatype");
    if (checked != MPI_SUCCESS)
        return checked;
    if (PMPI_Type_size_x(dt, &sz) != MPI_SUCCESS || sz < 0)
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
