/*
 * base.c -- the ordinary file as the base of its server copy (servers placement: the
 * cached-lock DLMs, ATOMIO_DATA=servers, files auto forwards).
 *
 * Nothing is copied at open. The server copy starts empty, sized as the ordinary file; the
 * bytes it has not been given are the ordinary file's. They are brought in block by block
 * (BASE_BLOCK bytes) the first time any rank of any job in the session touches the block:
 * before a read or a write reaches the servers, every block below the session's *base size*
 * (the ordinary file's size when the session started) that the call touches is *filled*:
 * read from the ordinary file and written to the copy through the file's strategy, its
 * all-zero chunks skipped (holes stay holes). Which blocks are filled is kept in the
 * session's *fill map*, `.NAME.atomio-base` beside the file: an 8-byte little-endian base
 * size, then one byte per block (1 = filled), each byte checked and set under an OFD lock of
 * its own. A rank remembers the blocks it saw filled and never asks again.
 *
 * Why it is atomic: a block is filled before any byte of it is written or read through the
 * servers, and under the map byte's lock, so a fill never lands after a write of its block
 * (it is ordered before every such write by the strategy, as any completed write is before
 * later ones), and the ordinary file's bytes of an unfilled block are still the session's
 * base (only filled blocks are ever exported into).
 *
 * Every session has its own map: its first open makes the file (or takes the one a crashed
 * session left) and resets it under a lock over the whole map (fill bytes dropped, the header
 * written; an empty map, like none, has nothing to fill), and its last close unlinks it, so
 * nothing is left beside the file. The name so changes inode from session to session, and a
 * client of a file system with several may go on resolving it to the inode it knew: a
 * GlusterFS FUSE client does for its entry timeout (1 s), and opens behind, so a second
 * session's open there read the unlinked map with ESTALE; with that map's pages still
 * cached, it would have read the old session's fill bytes and left blocks unfilled. So every
 * open of the map goes through open_map, which checks the inode it got with the file system
 * and looks a stale name up afresh.
 *
 * Sync and close write back only the *dirty* extents: every rank keeps the file ranges it
 * wrote since the last export; amio_base_export gathers them, merges them into one sorted
 * list, and each rank writes the parts of it that lie in its own BASE_BLOCK-aligned domains
 * (domain d belongs to rank d mod P, so no page of the file is written from two clients),
 * reading the copy's final state (every rank flushed its DLM cache first; the reads take no
 * locks) and pwrite-ing it at its offsets, then fdatasync. The file is never truncated by an
 * export: rank 0 only grows it to the copy's size afterwards. So a reader of the ordinary file
 * sees every byte either as it was or as the copy holds it, never a shortened file, and an
 * export costs O(dirty bytes / ranks) whatever the file's size.
 *
 * Invariants: a block is filled at most once per session (the map byte goes to 1 only after
 * its bytes reached the copy); fills read only blocks below the base size, which only ever
 * shrinks (MPI_File_set_size: amio_base_truncate shortens the ordinary file and the map's base
 * size together under a lock over the whole map); a map is reset only by a session's first
 * open and unlinked only by its last close, both under the session's MUTEX, and every rank
 * reads the map through the name's current inode (open_map), so no session sees another's
 * fill bytes (a crash leaves a map and no session: the next first open resets it); an export
 * writes only bytes below the copy's size; exports are serialized across jobs by the
 * session's MUTEX (rank 0 holds it across the collective), so a later export never writes
 * older bytes than an earlier one.
 */
#define _GNU_SOURCE
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BASE_BLOCK ((uint64_t)1 << 20)
#define MAP_HEADER 8
#define ZERO_CHUNK ((size_t)64 << 10)
#define EXPORT_BATCH ((uint64_t)8 << 20)

static int sys_error(const char *what, const char *path)
{
    return amio_error(MPI_ERR_IO, "%s %s: %s", what, path, strerror(errno));
}

/* An OFD lock over [at, at + len) of the map (len 0: to the end), waiting. */
static int map_lock(int fd, short type, off_t at, off_t len)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = len;
    while (fcntl(fd, F_OFD_SETLKW, &fl) < 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

char *amio_base_map_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    size_t n = strlen(path) + 16;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%.*s.%s.atomio-base", (int)dir, path, path + dir);
    return out;
}

static void put_u64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

/* Has the name this descriptor was opened by left its inode? ESTALE: the inode is gone (the
 * stat asks the file system, not this client's cache); no link: unlinked, open elsewhere. */
static int name_left(int fd)
{
    struct statx st;
    if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_NLINK, &st) < 0)
        return errno == ESTALE;
    return st.stx_nlink == 0;
}

/* The map opened read-write (`creat`: made if missing) through the name's current inode, or
 * -1 with errno. The name changes inode with every session (see the top), and this client
 * may still resolve it to an earlier session's map, unlinked: the open succeeds (GlusterFS
 * opens behind), name_left tells; or resolve it to nothing where a map now is (a negative
 * entry cached). Then the name is looked up afresh, once: an exclusive create makes the
 * kernel revalidate the entry with the file system (FUSE sends a new LOOKUP) and fails with
 * EEXIST where a map is; should it make the map instead (none was there), that one is empty:
 * nothing to fill, as no map, and the session's last close unlinks it. This is the one place
 * that meets a changed name; nothing else opens the map by its name. */
static int open_map(const char *map, int creat)
{
    int flags = O_RDWR | O_CLOEXEC | (creat ? O_CREAT : 0);
    int fd = open(map, flags, 0644);
    if (fd >= 0 && !name_left(fd))
        return fd;
    if (fd < 0 && errno != ENOENT)
        return -1;
    if (fd >= 0)
        close(fd);
    fd = open(map, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST)
        fd = open(map, O_RDWR | O_CLOEXEC);
    if (fd >= 0 && name_left(fd)) {
        close(fd);
        errno = ESTALE;
        return -1;
    }
    return fd;
}

/* Under a lock over the whole map: every fill byte dropped and, for a base of base_size > 0
 * bytes, the header written (0: left empty), flushed. */
static int reset_map(int fd, uint64_t base_size, const char *map)
{
    if (map_lock(fd, F_WRLCK, 0, 0) < 0)
        return sys_error("locking", map);
    unsigned char h[MAP_HEADER];
    put_u64(h, base_size);
    int code = MPI_SUCCESS;
    if (ftruncate(fd, 0) < 0 ||
        (base_size > 0 && pwrite(fd, h, sizeof h, 0) != (ssize_t)sizeof h) || fdatasync(fd) < 0)
        code = sys_error("resetting", map);
    map_lock(fd, F_UNLCK, 0, 0);
    return code;
}

int amio_base_start(const char *path, uint64_t base_size, int *made)
{
    *made = 0;
    char *map = amio_base_map_path(path);
    if (!map)
        return amio_error(MPI_ERR_NO_MEM, "out of memory");
    /* made even for nothing to fill (empty), so that every rank finds one */
    int fd = open_map(map, 1);
    if (fd < 0) {
        free(map);
        return MPI_SUCCESS; /* a directory (or a map) we may not write: the caller imports */
    }
    int code = reset_map(fd, base_size, map);
    close(fd);
    if (code == MPI_SUCCESS)
        *made = base_size > 0;
    else
        unlink(map); /* the open fails: nothing left beside the file */
    free(map);
    return code;
}

int amio_base_remove(const char *path)
{
    char *map = amio_base_map_path(path);
    if (!map)
        return amio_error(MPI_ERR_NO_MEM, "out of memory");
    int code = unlink(map) < 0 && errno != ENOENT ? sys_error("removing", map) : MPI_SUCCESS;
    free(map);
    return code;
}

int amio_base_open(amio_file *f)
{
    int ro = (f->amode & MPI_MODE_RDONLY) != 0;
    f->user_fd = open(f->path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (f->user_fd < 0 && !ro && (errno == EACCES || errno == EROFS || errno == EPERM))
        f->user_fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->user_fd < 0)
        return sys_error("opening", f->path);
    int caches = ATOMIO_FS_PRIVATE;
    if (atomio_fs_caches(f->user_fd, f->caches[0] ? f->caches : NULL, &caches, NULL, 0) !=
        ATOMIO_OK)
        caches = ATOMIO_FS_PRIVATE;
    f->base_private = caches == ATOMIO_FS_PRIVATE;
    char *map = amio_base_map_path(f->path);
    if (!map)
        return amio_error(MPI_ERR_NO_MEM, "out of memory");
    f->base_fd = open_map(map, 0);
    int code = MPI_SUCCESS;
    if (f->base_fd < 0 && errno != ENOENT) {
        /* none here, or an empty one, where the directory or the map refuses us: the first
         * open, refused too, imported the file whole (or there is nothing to fill) */
        int e = errno;
        struct stat st;
        if (stat(map, &st) == 0 ? st.st_size != 0 : errno != ENOENT) {
            errno = e;
            code = sys_error("opening the fill map", map);
        }
    }
    if (f->base_fd >= 0) {
        unsigned char h[MAP_HEADER];
        if (f->base_private)
            atomio_forget_cached(f->base_fd, 0, MAP_HEADER);
        ssize_t r = pread(f->base_fd, h, sizeof h, 0);
        if (r == 0) { /* empty: nothing to fill */
            close(f->base_fd);
            f->base_fd = -1;
        } else if (r != (ssize_t)sizeof h) {
            code = r < 0 ? sys_error("reading the fill map", map)
                         : amio_error(MPI_ERR_IO, "reading the fill map %s: a torn header", map);
        } else {
            f->base_size = get_u64(h);
        }
        size_t blocks = (size_t)((f->base_size + BASE_BLOCK - 1) / BASE_BLOCK);
        f->filled = code == MPI_SUCCESS && blocks ? calloc(blocks, 1) : NULL;
        if (code == MPI_SUCCESS && blocks && !f->filled)
            code = amio_error(MPI_ERR_NO_MEM, "out of memory");
    }
    free(map);
    return code;
}

void amio_base_close(amio_file *f)
{
    if (f->base_fd >= 0)
        close(f->base_fd);
    if (f->user_fd >= 0)
        close(f->user_fd);
    f->base_fd = f->user_fd = -1;
    free(f->filled);
    free(f->dirty_runs);
    f->filled = NULL;
    f->dirty_runs = NULL;
    f->n_dirty = f->dirty_cap = f->dirty_merged = 0;
}

/* Reads [lo, hi) of the ordinary file into buf; *got = bytes before its end. */
static int read_user(amio_file *f, unsigned char *buf, uint64_t lo, uint64_t hi, size_t *got)
{
    *got = 0;
    if (f->base_private)
        atomio_forget_cached(f->user_fd, lo, hi - lo);
    while (lo + *got < hi) {
        ssize_t r = pread(f->user_fd, buf + *got, (size_t)(hi - lo - *got), (off_t)(lo + *got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return sys_error("reading", f->path);
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return MPI_SUCCESS;
}

static int all_zero(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* Writes the bytes of [lo, lo + n) held in buf to the copy, all-zero chunks left out (the
 * copy reads them as zeros already); the nonzero chunks are packed to the front of buf. */
static int put_copy(amio_file *f, unsigned char *buf, uint64_t lo, size_t n)
{
    uint64_t offs[BASE_BLOCK / ZERO_CHUNK + 1], lens[BASE_BLOCK / ZERO_CHUNK + 1];
    size_t k = 0, packed = 0;
    for (size_t at = 0; at < n; at += ZERO_CHUNK) {
        size_t len = n - at < ZERO_CHUNK ? n - at : ZERO_CHUNK;
        if (all_zero(buf + at, len))
            continue;
        if (k > 0 && offs[k - 1] + lens[k - 1] == lo + at) {
            lens[k - 1] += len;
        } else {
            offs[k] = lo + at;
            lens[k] = len;
            k++;
        }
        if (packed != at)
            memmove(buf + packed, buf + at, len);
        packed += len;
    }
    if (k == 0)
        return MPI_SUCCESS;
    int rc = atomio_write_list(f->af, k, offs, lens, buf, packed);
    return rc == ATOMIO_OK ? MPI_SUCCESS : amio_error_atomio(rc, "filling the server copy");
}

/* Block b is in the copy once this returns MPI_SUCCESS (filled now, or before by anyone). */
static int fill_block(amio_file *f, uint64_t b)
{
    uint64_t lo = b * BASE_BLOCK;
    uint64_t hi = lo + BASE_BLOCK < f->base_size ? lo + BASE_BLOCK : f->base_size;
    if (lo >= hi) {
        f->filled[b] = 1;
        return MPI_SUCCESS;
    }
    off_t at = (off_t)(MAP_HEADER + b);
    if (map_lock(f->base_fd, F_WRLCK, at, 1) < 0)
        return sys_error("locking the fill map of", f->path);
    if (f->base_private)
        atomio_forget_cached(f->base_fd, (uint64_t)at, 1);
    unsigned char v = 0;
    int code = MPI_SUCCESS;
    if (pread(f->base_fd, &v, 1, at) < 0)
        code = sys_error("reading the fill map of", f->path);
    if (code == MPI_SUCCESS && v == 0) {
        unsigned char *buf = malloc(BASE_BLOCK);
        size_t got = 0;
        code = buf ? read_user(f, buf, lo, hi, &got)
                   : amio_error(MPI_ERR_NO_MEM, "out of memory filling %s", f->path);
        if (code == MPI_SUCCESS)
            code = put_copy(f, buf, lo, got);
        free(buf);
        if (code == MPI_SUCCESS)
            f->base_read += got;
        v = 1;
        if (code == MPI_SUCCESS && pwrite(f->base_fd, &v, 1, at) != 1)
            code = sys_error("writing the fill map of", f->path);
        if (code == MPI_SUCCESS && f->base_private && fdatasync(f->base_fd) < 0)
            code = sys_error("flushing the fill map of", f->path);
    }
    map_lock(f->base_fd, F_UNLCK, at, 1);
    if (code == MPI_SUCCESS)
        f->filled[b] = 1;
    return code;
}

static int cmp_run(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts n (offset, length) pairs and merges overlapping and adjacent ones; returns the
 * number left. */
static size_t merge_runs(uint64_t *r, size_t n)
{
    if (n == 0)
        return 0;
    qsort(r, n, 2 * sizeof *r, cmp_run);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        uint64_t end = r[2 * k] + r[2 * k + 1];
        if (r[2 * i] <= end) {
            uint64_t e2 = r[2 * i] + r[2 * i + 1];
            if (e2 > end)
                r[2 * k + 1] = e2 - r[2 * k];
        } else {
            k++;
            r[2 * k] = r[2 * i];
            r[2 * k + 1] = r[2 * i + 1];
        }
    }
    return k + 1;
}

/* Appends a range to the dirty list, merging the list when it has doubled since its last
 * merge. */
static int note_dirty(amio_file *f, uint64_t off, uint64_t len)
{
    if (f->n_dirty > 0) { /* a call right after the previous one: extend it */
        uint64_t *last = f->dirty_runs + 2 * (f->n_dirty - 1);
        if (last[0] + last[1] == off) {
            last[1] += len;
            return MPI_SUCCESS;
        }
    }
    if (f->n_dirty == f->dirty_cap) {
        if (f->n_dirty >= 4096 && f->n_dirty >= 2 * f->dirty_merged) {
            f->n_dirty = f->dirty_merged = merge_runs(f->dirty_runs, f->n_dirty);
        }
        if (f->n_dirty == f->dirty_cap) {
            size_t cap = f->dirty_cap ? 2 * f->dirty_cap : 64;
            uint64_t *r = realloc(f->dirty_runs, cap * 2 * sizeof *r);
            if (!r)
                return amio_error(MPI_ERR_NO_MEM, "out of memory noting written ranges");
            f->dirty_runs = r;
            f->dirty_cap = cap;
        }
    }
    f->dirty_runs[2 * f->n_dirty] = off;
    f->dirty_runs[2 * f->n_dirty + 1] = len;
    f->n_dirty++;
    return MPI_SUCCESS;
}

int amio_base_touch(amio_file *f, int is_write, size_t n, const uint64_t *offs,
                    const uint64_t *lens)
{
    if (f->direct || f->is_rma || f->user_fd < 0)
        return MPI_SUCCESS;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] == 0)
            continue;
        if (f->base_fd >= 0 && offs[i] < f->base_size) {
            uint64_t end = offs[i] + lens[i] < f->base_size ? offs[i] + lens[i] : f->base_size;
            for (uint64_t b = offs[i] / BASE_BLOCK; b <= (end - 1) / BASE_BLOCK; b++) {
                if (f->filled[b])
                    continue;
                int code = fill_block(f, b);
                if (code != MPI_SUCCESS)
                    return code;
            }
        }
        if (is_write) {
            int code = note_dirty(f, offs[i], lens[i]);
            if (code != MPI_SUCCESS)
                return code;
        }
    }
    return MPI_SUCCESS;
}

int amio_base_touch_view(amio_file *f, int is_write, uint64_t skip, size_t n)
{
    if (f->direct || f->is_rma || f->user_fd < 0 || n == 0)
        return MPI_SUCCESS;
    if (!is_write && (f->base_fd < 0 || f->base_size == 0))
        return MPI_SUCCESS; /* a read with nothing to fill */
    uint64_t so[64], sl[64];
    uint64_t *o = so, *l = sl;
    size_t cnt = 0;
    int rc = atomio_view_runs(f->view_base, f->tile, skip, n, o, l, 64, &cnt);
    if (rc == ATOMIO_OK && cnt > 64) {
        o = malloc(cnt * sizeof *o);
        l = malloc(cnt * sizeof *l);
        if (!o || !l) {
            free(o == so ? NULL : o);
            free(l == sl ? NULL : l);
            return amio_error(MPI_ERR_NO_MEM, "out of memory listing a call's ranges");
        }
        size_t again = 0;
        rc = atomio_view_runs(f->view_base, f->tile, skip, n, o, l, cnt, &again);
    }
    int code = rc == ATOMIO_OK ? amio_base_touch(f, is_write, cnt, o, l)
                               : amio_error_atomio(rc, "a call's ranges");
    if (o != so) {
        free(o);
        free(l);
    }
    return code;
}

int amio_base_truncate(amio_file *f, uint64_t size)
{
    int fd = f->user_fd;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return sys_error("stat", f->path);
    if ((uint64_t)st.st_size <= size)
        return MPI_SUCCESS;
    int code = MPI_SUCCESS;
    /* under a lock over the whole map, so no fill reads the bytes being cut */
    if (f->base_fd >= 0 && map_lock(f->base_fd, F_WRLCK, 0, 0) < 0)
        return sys_error("locking the fill map of", f->path);
    if (ftruncate(fd, (off_t)size) < 0)
        code = sys_error("shortening (ftruncate)", f->path);
    if (code == MPI_SUCCESS && f->base_fd >= 0) {
        unsigned char h[MAP_HEADER];
        if (f->base_private)
            atomio_forget_cached(f->base_fd, 0, MAP_HEADER);
        if (pread(f->base_fd, h, sizeof h, 0) != (ssize_t)sizeof h)
            code = sys_error("reading the fill map of", f->path);
        else if (get_u64(h) > size) {
            put_u64(h, size);
            if (pwrite(f->base_fd, h, sizeof h, 0) != (ssize_t)sizeof h || fdatasync(f->base_fd) < 0)
                code = sys_error("writing the fill map of", f->path);
        }
    }
    if (f->base_fd >= 0)
        map_lock(f->base_fd, F_UNLCK, 0, 0);
    return code;
}

void amio_base_resized(amio_file *f, uint64_t size)
{
    if (size < f->base_size)
        f->base_size = size;
}

/* Reads the k pieces (o, l) of the batch (`batched` bytes) from the copy and writes them
 * at their offsets into the ordinary file. */
static int write_batch(amio_file *f, const uint64_t *o, const uint64_t *l, size_t k,
                       unsigned char *buf, uint64_t batched)
{
    int rc = atomio_read_list(f->af, k, o, l, buf, (size_t)batched);
    if (rc != ATOMIO_OK)
        return amio_error_atomio(rc, "reading the server copy to export it");
    size_t p = 0;
    for (size_t j = 0; j < k; j++) {
        for (size_t done = 0; done < l[j];) {
            ssize_t w =
                pwrite(f->user_fd, buf + p + done, (size_t)(l[j] - done), (off_t)(o[j] + done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return sys_error("writing", f->path);
            done += (size_t)w;
        }
        p += l[j];
    }
    return MPI_SUCCESS;
}

/* This rank's share of the merged list r (n runs; bytes below `size` only): the parts in
 * domains d with d mod P = rank, written from the copy into the ordinary file. */
static int export_share(amio_file *f, const uint64_t *r, size_t n, uint64_t size, uint64_t *moved)
{
    enum { CAP = 256 };
    *moved = 0;
    uint64_t o[CAP], l[CAP], batched = 0;
    size_t k = 0;
    unsigned char *buf = NULL;
    int code = MPI_SUCCESS;
    for (size_t i = 0; i < n && code == MPI_SUCCESS; i++) {
        uint64_t at = r[2 * i], end = r[2 * i] + r[2 * i + 1];
        if (end > size)
            end = size;
        while (at < end && code == MPI_SUCCESS) {
            uint64_t next = (at / BASE_BLOCK + 1) * BASE_BLOCK;
            if (next > end)
                next = end;
            if ((at / BASE_BLOCK) % (uint64_t)f->size == (uint64_t)f->rank) {
                if (!buf && !(buf = malloc(EXPORT_BATCH)))
                    code = amio_error(MPI_ERR_NO_MEM, "out of memory exporting");
                if (code == MPI_SUCCESS && (k == CAP || batched + (next - at) > EXPORT_BATCH)) {
                    code = write_batch(f, o, l, k, buf, batched);
                    *moved += batched;
                    k = 0;
                    batched = 0;
                }
                o[k] = at;
                l[k] = next - at;
                k++;
                batched += next - at;
            }
            at = next;
        }
    }
    if (code == MPI_SUCCESS && k > 0) {
        code = write_batch(f, o, l, k, buf, batched);
        *moved += batched;
    }
    if (code == MPI_SUCCESS && *moved > 0 && fdatasync(f->user_fd) < 0)
        code = sys_error("flushing (fdatasync)", f->path);
    free(buf);
    return code;
}

/* The pairs of every rank's dirty list, on every rank (nonblocking collectives waited for
 * without spinning): *all (malloc'ed) holds *total numbers. Each rank sends (failed, its
 * count of numbers, size) first, so the one exchange also agrees on going on and hands out
 * rank 0's size (*size0). Collective; every rank returns the same success or failure. */
static int gather_lists(amio_file *f, int failed, uint64_t size, uint64_t *size0, uint64_t **all,
                        size_t *total)
{
    *all = NULL;
    *total = 0;
    size_t P = (size_t)f->size;
    uint64_t mine[3] = {(uint64_t)failed, 2 * (uint64_t)f->n_dirty, size};
    uint64_t *meta = malloc(3 * P * sizeof *meta);
    int *counts = malloc(P * sizeof *counts), *displs = malloc(P * sizeof *displs);
    int code = meta && counts && displs ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    code = amio_agree(code, f->comm, "exporting");
    MPI_Request req;
    if (code == MPI_SUCCESS) {
        code = PMPI_Iallgather(mine, 3, MPI_UINT64_T, meta, 3, MPI_UINT64_T, f->comm, &req);
        if (code == MPI_SUCCESS)
            code = amio_wait(&req);
    }
    for (size_t r = 0; code == MPI_SUCCESS && r < P; r++) {
        if (meta[3 * r])
            code = amio_error(MPI_ERR_IO, "exporting %s failed on some rank", f->path);
        else if (meta[3 * r + 1] > (uint64_t)INT32_MAX - *total)
            code = amio_error(MPI_ERR_NO_MEM, "%s: too many written ranges to export", f->path);
        else {
            displs[r] = (int)*total;
            counts[r] = (int)meta[3 * r + 1];
            *total += (size_t)meta[3 * r + 1];
        }
    }
    if (code == MPI_SUCCESS) {
        *size0 = meta[2];
        *all = malloc((*total ? *total : 2) * sizeof **all);
        code = amio_agree(*all ? MPI_SUCCESS : MPI_ERR_NO_MEM, f->comm, "exporting");
    }
    if (code == MPI_SUCCESS) {
        code = PMPI_Iallgatherv(f->dirty_runs ? f->dirty_runs : *all, (int)mine[1], MPI_UINT64_T,
                                *all, counts, displs, MPI_UINT64_T, f->comm, &req);
        if (code == MPI_SUCCESS)
            code = amio_wait(&req);
    }
    free(meta);
    free(counts);
    free(displs);
    return code;
}

/* versioning on the servers: its bytes are snapshots, not the copy's objects; rank 0 writes
 * the newest snapshot whole (atomio_export), as the dirty ranges cannot be read plainly. */
static int export_snapshot(amio_file *f)
{
    int code = MPI_SUCCESS;
    if (f->rank == 0) {
        code = amio_session_lock(f);
        if (code == MPI_SUCCESS) {
            int rc = atomio_export(f->af, f->path);
            if (rc != ATOMIO_OK)
                code = amio_error_atomio(rc, "exporting the newest snapshot");
            amio_session_unlock(f);
        }
    }
    code = amio_agree(code, f->comm, "exporting");
    if (code == MPI_SUCCESS)
        f->n_dirty = f->dirty_merged = 0;
    return code;
}

int amio_base_export(amio_file *f)
{
    if (f->versioning)
        return export_snapshot(f);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t size = 0;
    int code = MPI_SUCCESS, locked = 0;
    if (f->rank == 0) {
        code = amio_session_lock(f);
        locked = code == MPI_SUCCESS;
        if (code == MPI_SUCCESS) {
            int rc = atomio_size(f->af, &size);
            if (rc != ATOMIO_OK)
                code = amio_error_atomio(rc, "the server copy's size");
        }
    }
    if (f->user_fd < 0 && code == MPI_SUCCESS)
        code = amio_error(MPI_ERR_READ_ONLY, "%s: no writable descriptor to export with", f->path);
    /* every rank's dirty list, merged, on every rank; rank 0's size */
    f->n_dirty = f->dirty_merged = merge_runs(f->dirty_runs, f->n_dirty);
    uint64_t *all = NULL;
    size_t total = 0;
    int gc = gather_lists(f, code != MPI_SUCCESS, size, &size, &all, &total);
    if (code == MPI_SUCCESS)
        code = gc;
    size_t n = code == MPI_SUCCESS ? merge_runs(all, total / 2) : 0;
    /* every rank is done writing and flushed (sync and close are collective): the copy is
     * read without locks */
    if (code == MPI_SUCCESS && atomio_set_atomic(f->af, NULL) != ATOMIO_OK)
        code = amio_error_atomio(ATOMIO_EINTERNAL, "atomic mode off for the export");
    uint64_t moved = 0;
    if (code == MPI_SUCCESS)
        code = export_share(f, all, n, size, &moved);
    if ((f->atomic || f->versioning) && atomio_set_atomic(f->af, f->strategy) != ATOMIO_OK &&
        code == MPI_SUCCESS)
        code = amio_error_atomio(ATOMIO_EINTERNAL, "atomic mode back on after the export");
    /* the size: the file only ever grows here (bytes not yet in are zeros or old, as during
     * any export; never a shorter file) */
    if (f->rank == 0 && code == MPI_SUCCESS) {
        struct stat st;
        if (fstat(f->user_fd, &st) < 0)
            code = sys_error("stat", f->path);
        else if ((uint64_t)st.st_size < size &&
                 (ftruncate(f->user_fd, (off_t)size) < 0 || fsync(f->user_fd) < 0))
            code = sys_error("growing (ftruncate)", f->path);
    }
    code = amio_agree(code, f->comm, "exporting");
    if (locked)
        amio_session_unlock(f);
    if (code == MPI_SUCCESS) {
        f->exported += moved;
        f->n_dirty = f->dirty_merged = 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (f->rank == 0)
        amio_log(2, "exported %s: %zu written ranges, this rank %llu bytes, size %llu, %.6f s",
                 f->path, n, (unsigned long long)moved, (unsigned long long)size,
                 (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    free(all);
    return code;
}
