/*
 * data_path.c -- the bytes of one MPI-IO read or write: memory datatype -> packed buffer ->
 * the view's file bytes, through the atomio servers or (strategy rma) the ordinary file.
 *
 * A call moves n = count x size(datatype) bytes. Memory: a contiguous memory type is used
 * in place; any other is packed with atomio_gather / unpacked with atomio_scatter from its
 * decoded pattern, or with MPI_Pack / MPI_Unpack when the type cannot be decoded (negative
 * strides). File: data bytes [skip, skip + n) of the view, skip = position x etype size:
 * one range for contiguous views (atomio_write_list), else atomio_write_view with the
 * filetype's tile, which keeps the structure. With rma the call's bounding extent
 * (atomio_view_hull) is locked with rmalock in atomic mode around the POSIX I/O.
 *
 * A read that reaches past the end of the file moves only the bytes before it (MPI 4.0
 * 14.4.2: the status then counts fewer bytes); the memory beyond them is left untouched.
 * The size is asked only when the call may reach past a size the file is known to have.
 *
 * Invariants: the individual file pointer moves only when the call succeeded, by the
 * etypes moved (rounded up); nothing is written to the program's buffer but the bytes read;
 * every allocation is freed on every path; atomicity in atomic mode is atomio's (servers)
 * or the lock's (rma): no byte of the call is touched outside it.
 */
#define _GNU_SOURCE
#include "internal.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void amio_status_set(MPI_Status *st, MPI_Count bytes)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    PMPI_Status_set_elements_x(st, MPI_BYTE, bytes);
    PMPI_Status_set_cancelled(st, 0);
}

static void *at(const void *base, int64_t off)
{
    return (void *)((uintptr_t)base + (uintptr_t)off);
}

/* ----- memory side ---------------------------------------------------------------------- */

typedef struct {
    amio_dtype *md;      /* decoded memory type, or NULL: MPI_Pack fallback */
    atomio_pattern *elem;
    int elem_owned;
    uint64_t span;       /* bytes from base the instances reach */
    void *base;          /* buf + md->off */
    int contiguous;      /* the data is n contiguous bytes at base */
} memside;

static int mem_open(memside *m, void *buf, MPI_Count count, MPI_Datatype dt)
{
    memset(m, 0, sizeof *m);
    char why[512];
    if (amio_dtype_try(dt, &m->md, why, sizeof why)) {
        amio_log(2, "memory type packed with MPI_Pack: %s", why);
        m->md = NULL;
        return MPI_SUCCESS;
    }
    const amio_dtype *d = m->md;
    m->base = at(buf, d->off);
    if (d->dense && (count == 1 || d->extent == d->size)) {
        m->contiguous = 1;
        return MPI_SUCCESS;
    }
    if (amio_dtype_elem(d, &m->elem, &m->elem_owned)) {
        amio_dtype_release(m->md); /* negative extent: let MPI_Pack do it */
        m->md = NULL;
        return MPI_SUCCESS;
    }
    uint64_t size, ext, end, nodes;
    int mono;
    atomio_pattern_info(m->elem, &size, &ext, &end, &nodes, &mono);
    m->span = (uint64_t)(count - 1) * ext + end;
    return MPI_SUCCESS;
}

static void mem_close(memside *m)
{
    if (m->elem_owned)
        atomio_pattern_free(m->elem);
    amio_dtype_release(m->md);
}

static int pack(memside *m, const void *buf, MPI_Count count, MPI_Datatype dt, void *out,
                size_t n)
{
    if (m->md) {
        int rc = atomio_gather(m->elem, (uint64_t)count, m->base, (size_t)m->span, out, n);
        return rc == ATOMIO_OK ? MPI_SUCCESS : amio_error_atomio(rc, "packing the memory type");
    }
    if (count > INT32_MAX || n > INT32_MAX)
        return amio_error(MPI_ERR_COUNT, "MPI_Pack fallback limited to 2 GiB per call");
    int position = 0;
    int rc = PMPI_Pack(buf, (int)count, dt, out, (int)n, &position, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS || (size_t)position != n)
        return amio_error(MPI_ERR_TYPE, "MPI_Pack of the memory type failed");
    return MPI_SUCCESS;
}

static int unpack(memside *m, const void *in, size_t n, void *buf, MPI_Count count,
                  MPI_Datatype dt)
{
    if (m->md) {
        int rc = atomio_scatter(m->elem, (uint64_t)count, in, n, m->base, (size_t)m->span);
        return rc == ATOMIO_OK ? MPI_SUCCESS
                               : amio_error_atomio(rc, "unpacking into the memory type");
    }
    if (count > INT32_MAX || n > INT32_MAX)
        return amio_error(MPI_ERR_COUNT, "MPI_Unpack fallback limited to 2 GiB per call");
    int position = 0;
    int rc = PMPI_Unpack(in, (int)n, &position, buf, (int)count, dt, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS || (size_t)position != n)
        return amio_error(MPI_ERR_TYPE, "MPI_Unpack into the memory type failed");
    return MPI_SUCCESS;
}

int amio_write_source(void *buf, MPI_Count count, MPI_Datatype dt, size_t n, const void **src,
                      void **owned)
{
    *src = NULL;
    *owned = NULL;
    memside m;
    int code = mem_open(&m, buf, count, dt);
    if (code != MPI_SUCCESS)
        return code;
    if (m.contiguous) {
        *src = m.base;
    } else if (!(*owned = malloc(n ? n : 1))) {
        code = amio_error(MPI_ERR_NO_MEM, "out of memory packing %zu bytes", n);
    } else {
        code = pack(&m, buf, count, dt, *owned, n);
        *src = *owned;
    }
    mem_close(&m);
    if (code != MPI_SUCCESS) {
        free(*owned);
        *owned = NULL;
    }
    return code;
}

/* ----- file side ------------------------------------------------------------------------ */

static int hull(const amio_file *f, uint64_t skip, size_t n, uint64_t *s, uint64_t *e)
{
    if (f->contig) {
        *s = f->view_base + skip;
        *e = *s + n;
        return MPI_SUCCESS;
    }
    int rc = atomio_view_hull(f->view_base, f->tile, skip, n, s, e);
    return rc == ATOMIO_OK ? MPI_SUCCESS : amio_error_atomio(rc, "the call's extent");
}

static int posix_rw(int fd, int is_write, void *buf, size_t n, uint64_t off, const char *path)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = is_write ? pwrite(fd, (char *)buf + done, n - done, (off_t)(off + done))
                             : pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return amio_error(MPI_ERR_IO, "%s %s at %llu: %s", is_write ? "pwrite" : "pread", path,
                              (unsigned long long)(off + done), strerror(errno));
        if (r == 0) { /* reading past the end: zeros (only asked for bytes before it) */
            memset((char *)buf + done, 0, n - done);
            break;
        }
        done += (size_t)r;
    }
    return MPI_SUCCESS;
}

static int file_rw(amio_file *f, int is_write, uint64_t skip, void *buf, size_t n)
{
    int rc;
    if (f->is_rma) {
        if (f->contig)
            return posix_rw(f->data_fd, is_write, buf, n, f->view_base + skip, f->path);
        rc = is_write ? atomio_posix_write_view(f->data_fd, f->view_base, f->tile, skip, buf, n)
                      : atomio_posix_read_view(f->data_fd, f->view_base, f->tile, skip, buf, n);
    } else if (f->contig) {
        uint64_t off = f->view_base + skip, len = n;
        int code = amio_base_touch(f, is_write, 1, &off, &len); /* servers placement's base */
        if (code != MPI_SUCCESS)
            return code;
        rc = is_write ? atomio_write_list(f->af, 1, &off, &len, buf, n)
                      : atomio_read_list(f->af, 1, &off, &len, buf, n);
    } else {
        int code = amio_base_touch_view(f, is_write, skip, n);
        if (code != MPI_SUCCESS)
            return code;
        rc = is_write ? atomio_write_view(f->af, f->view_base, f->tile, skip, buf, n)
                      : atomio_read_view(f->af, f->view_base, f->tile, skip, buf, n);
    }
    return rc == ATOMIO_OK ? MPI_SUCCESS
                           : amio_error_atomio(rc, is_write ? "writing" : "reading");
}

/* How many of the n bytes at view offset skip lie before the end of the file. */
static int available(amio_file *f, uint64_t skip, size_t n, size_t *avail)
{
    *avail = n;
    uint64_t reach; /* an upper bound of the call's last byte + 1 */
    if (f->contig) {
        reach = f->view_base + skip + n;
    } else {
        uint64_t size, ext, end, nodes;
        int mono;
        atomio_pattern_info(f->tile, &size, &ext, &end, &nodes, &mono);
        uint64_t tiles = (skip + n - 1) / f->tile_size + 1;
        reach = tiles > (UINT64_MAX - f->view_base) / ext ? UINT64_MAX
                                                          : f->view_base + tiles * ext;
    }
    if (reach <= f->known_size)
        return MPI_SUCCESS;
    uint64_t size, before;
    int code = amio_file_size(f, &size);
    if (code == MPI_SUCCESS)
        code = amio_view_bytes_before(f, size, &before);
    if (code == MPI_SUCCESS)
        *avail = before <= skip ? 0 : before - skip < n ? (size_t)(before - skip) : n;
    return code;
}

/* ----- one call ------------------------------------------------------------------------- */

int amio_check_call(amio_file *f, int is_write, int explicit_offset, MPI_Offset offset,
                      MPI_Count count, MPI_Datatype dt, size_t *n)
{
    *n = 0;
    if (is_write && (f->amode & MPI_MODE_RDONLY))
        return amio_error(MPI_ERR_READ_ONLY, "writing to %s, opened MPI_MODE_RDONLY", f->path);
    if (!is_write && (f->amode & MPI_MODE_WRONLY))
        return amio_error(MPI_ERR_ACCESS, "reading from %s, opened MPI_MODE_WRONLY", f->path);
    if (explicit_offset && (f->amode & MPI_MODE_SEQUENTIAL))
        return amio_error(MPI_ERR_UNSUPPORTED_OPERATION,
                          "explicit offsets on a file opened MPI_MODE_SEQUENTIAL");
    if (explicit_offset && offset < 0)
        return amio_error(MPI_ERR_ARG, "negative offset %lld", (long long)offset);
    if (count < 0)
        return amio_error(MPI_ERR_COUNT, "negative count %lld", (long long)count);
    int checked = amio_type_check(dt, "the memory datatype");
    if (checked != MPI_SUCCESS)
        return checked;
    MPI_Count tsize;
    if (PMPI_Type_size_x(dt, &tsize) != MPI_SUCCESS ||
        tsize == MPI_UNDEFINED || tsize < 0)
        return amio_error(MPI_ERR_TYPE, "invalid memory datatype");
    MPI_Count total;
    if (__builtin_mul_overflow(count, tsize, &total) || total > (MPI_Count)(SIZE_MAX / 2))
        return amio_error(MPI_ERR_COUNT, "count x datatype size overflows");
    if (total % f->etype_size)
        return amio_error(MPI_ERR_ARG, "%lld bytes is not a whole number of etypes (%d bytes)",
                          (long long)total, f->etype_size);
    if (total > 0 && !f->contig && f->tile_size == 0)
        return amio_error(MPI_ERR_ARG, "the file view selects no bytes");
    *n = (size_t)total;
    return MPI_SUCCESS;
}

int amio_io(amio_file *f, int is_write, int explicit_offset, MPI_Offset offset, void *buf,
            MPI_Count count, MPI_Datatype dt, MPI_Count *bytes)
{
    *bytes = 0;
    size_t n;
    int code = amio_check_call(f, is_write, explicit_offset, offset, count, dt, &n);
    if (code != MPI_SUCCESS || n == 0)
        return code;
    MPI_Offset pos = explicit_offset ? offset : f->pos;
    uint64_t skip;
    if (__builtin_mul_overflow((uint64_t)pos, (uint64_t)f->etype_size, &skip) ||
        skip > (UINT64_MAX >> 2))
        return amio_error(MPI_ERR_ARG, "offset %lld etypes is beyond any file", (long long)pos);

    memside m;
    code = mem_open(&m, buf, count, dt);
    if (code != MPI_SUCCESS)
        return code;
    unsigned char *tmp = NULL;
    size_t moved = 0;
    int locked = 0;
    if (f->is_rma && f->atomic) {
        uint64_t s, e;
        code = hull(f, skip, n, &s, &e);
        if (code == MPI_SUCCESS)
            code = amio_rma_lock(f, s, e);
        locked = code == MPI_SUCCESS;
        if (code == MPI_SUCCESS)
            code = amio_rma_after_acquire(f, s, e);
        if (code != MPI_SUCCESS)
            goto out;
    }
    if (is_write) {
        const void *src = m.base;
        if (!m.contiguous) {
            tmp = malloc(n);
            if (!tmp) {
                code = amio_error(MPI_ERR_NO_MEM, "out of memory packing %zu bytes", n);
                goto out;
            }
            code = pack(&m, buf, count, dt, tmp, n);
            src = tmp;
        }
        if (code == MPI_SUCCESS)
            code = file_rw(f, 1, skip, (void *)src, n);
        if (code == MPI_SUCCESS) {
            moved = n;
            f->dirty = 1;
            if (f->contig && f->view_base + skip + n > f->known_size)
                f->known_size = f->view_base + skip + n;
        }
    } else {
        size_t avail;
        code = available(f, skip, n, &avail);
        if (code != MPI_SUCCESS || avail == 0)
            goto out;
        if (m.contiguous) {
            code = file_rw(f, 0, skip, m.base, avail);
        } else {
            tmp = malloc(n);
            if (!tmp) {
                code = amio_error(MPI_ERR_NO_MEM, "out of memory unpacking %zu bytes", n);
                goto out;
            }
            if (avail < n) /* keep the memory the read does not reach as it is */
                code = pack(&m, buf, count, dt, tmp, n);
            if (code == MPI_SUCCESS)
                code = file_rw(f, 0, skip, tmp, avail);
            if (code == MPI_SUCCESS)
                code = unpack(&m, tmp, n, buf, count, dt);
        }
        if (code == MPI_SUCCESS)
            moved = avail;
    }
out:
    if (locked && is_write && code == MPI_SUCCESS)
        code = amio_rma_before_release(f);
    if (locked) {
        int c2 = amio_rma_unlock(f);
        if (code == MPI_SUCCESS)
            code = c2;
    }
    free(tmp);
    mem_close(&m);
    if (code == MPI_SUCCESS) {
        *bytes = (MPI_Count)moved;
        if (!explicit_offset)
            f->pos = pos + (MPI_Offset)((moved + (size_t)f->etype_size - 1) / (size_t)f->etype_size);
    }
    return code;
}
