/*
 * tile_io.c -- an ordinary MPI-IO program in the style of mpi-tile-io
 * (Tran et al. 2010 section 6.5): a dense 2-D array of elements in one shared
 * file, one tile per rank, neighbouring tiles overlapping, every rank writing
 * its whole tile with ONE call through a subarray file view, optionally in
 * MPI atomic mode.  It uses nothing but MPI, so it runs unmodified under
 * MPICH, Open MPI, or any PMPI library put in front of them (LD_PRELOAD).
 *
 *   mpiexec -n 4 ./tile_io [--tiles-x 2 --tiles-y 2] [--tile 128 | --tile-x X --tile-y Y]
 *       [--element-bytes 1024] [--overlap 16 | --overlap-x X --overlap-y Y]
 *       [--iterations 1] [--atomic] [--collective] [--path FILE]
 *       [--hint key=value]... [--no-verify] [--keep] [--sync] [--label S]
 *       [--verify-path FILE]
 *   --verify-path FILE: after the close, rank 0 checks the file again as read through FILE
 *   (the same file through another client of a shared file system, one no rank wrote
 *   through: scripts/sharedfs mount check), and that check is the verdict.
 *   mpi-tile-io's own spellings are accepted too: --nr_tiles_x, --sz_tile_x,
 *   --sz_element, --overlap_x, --filename (underscores or dashes).
 *
 * Invariants of the method:
 *   - Geometry (mpi-tile-io's): per dimension the dataset has
 *     n*tile - (n-1)*overlap elements and tile i starts at element
 *     i*(tile - overlap); a tile's size INCLUDES the cells it shares, so
 *     neighbours share exactly `overlap` elements.  Rank r holds tile
 *     (r mod tiles_x, r div tiles_x); the array is row-major (C order), no
 *     header.  0 <= overlap < tile.  tiles_x * tiles_y = ranks.
 *   - Every iteration, every rank issues exactly one write call,
 *     MPI_File_write_at (or _all with --collective) at offset 0 of the view,
 *     count = tile elements of a contiguous element type.
 *   - Timing: per iteration a barrier, then each rank times its own call
 *     (plus MPI_File_sync with --sync); the iteration's time is the maximum
 *     over ranks; the run's time is the sum over iterations.  MiB/s counts
 *     every rank's tile (shared cells once per writer, as mpi-tile-io does).
 *     Buffer filling, verification and waiting are outside the timed region;
 *     waiting ranks poll with nanosleep so they leave the CPU to the writers.
 *   - Data: every element is self-describing: a 16-byte header
 *     {nonce, rank, iteration, low 32 bits of the element index} followed by
 *     words of a keyed SplitMix64 stream of (nonce, rank, iteration, element).
 *     The nonce is fresh per run, so stale data from an earlier run is never
 *     mistaken for this run's.
 *   - Verification (elements >= 16 B, after the timed region, rank 0 reads the
 *     file through MPI-IO, so a PMPI library's files are checked too): the
 *     final file is the result of SOME serial order of the write calls iff
 *     (1) every element is whole and well-placed and was written by the LAST
 *     iteration of a rank whose tile covers it, and (2) the graph with an
 *     edge r -> w whenever w's data won an element that r also covers is
 *     acyclic.  (Non-final iterations can be ordered first; the final ones in
 *     a topological order of that graph.)  Without atomicity, overlapping
 *     noncontiguous writes interleave and make (2) fail (r -> w on one row,
 *     w -> r on another) or tear elements (1).
 *   - Output: exactly one JSON line on stdout, from rank 0; diagnostics on
 *     stderr.  Exit status 0 even if verification fails (the JSON says so);
 *     non-zero on usage or MPI errors.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_HINTS = 16, HDR = 16, MAX_VERIFY_RANKS = 4096 };

typedef struct {
    int tiles_x, tiles_y;
    int64_t tile_x, tile_y, elem, ov_x, ov_y;
    int iters, atomic, collective, verify, keep, sync;
    const char *path, *label, *verify_path;
    int nhints;
    char *hint_key[MAX_HINTS], *hint_val[MAX_HINTS];
} opts_t;

typedef struct {
    int64_t dim_x, dim_y;     /* dataset, elements */
    int64_t start_x, start_y; /* this rank's tile origin */
    int64_t tile_elems, tile_bytes;
} geom_t;

static int g_rank, g_size;

/* ---- helpers ------------------------------------------------------------- */

static uint64_t elem_key(uint32_t nonce, uint32_t rank, uint32_t iter, uint64_t idx)
{
    return splitmix(splitmix(splitmix(((uint64_t)nonce << 32) | rank) ^ iter) ^ idx);
}

/* Writes element `idx`'s bytes as written by (rank, iter) into p[0, esize). */
static void fill_elem(unsigned char *p, int64_t esize, uint32_t nonce, uint32_t rank,
                      uint32_t iter, uint64_t idx)
{
    uint32_t h[4] = {nonce, rank, iter, (uint32_t)idx};
    memcpy(p, h, HDR);
    uint64_t k = elem_key(nonce, rank, iter, idx);
    for (int64_t off = HDR; off < esize; off += 8) {
        uint64_t w = splitmix(k + (uint64_t)off);
        int64_t n = esize - off < 8 ? esize - off : 8;
        memcpy(p + off, &w, (size_t)n);
    }
}

/* ---- options ------------------------------------------------------------- */

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr,
                "usage: tile_io [--tiles-x N --tiles-y N] [--tile N | --tile-x N --tile-y N]\n"
                "  [--element-bytes N] [--overlap N | --overlap-x N --overlap-y N]\n"
                "  [--iterations N] [--atomic] [--collective] [--path FILE]\n"
                "  [--hint key=value]... [--no-verify] [--keep] [--sync] [--label S]\n");
    MPI_Finalize();
    exit(2);
}

/* Canonical option name: dashes for underscores, mpi-tile-io aliases mapped. */
static const char *canon(const char *a, char *buf, size_t n)
{
    snprintf(buf, n, "%s", a);
    for (char *p = buf; *p; p++)
        if (*p == '_')
            *p = '-';
    static const char *alias[][2] = {
        {"--nr-tiles-x", "--tiles-x"},   {"--nr-tiles-y", "--tiles-y"},
        {"--sz-tile-x", "--tile-x"},     {"--sz-tile-y", "--tile-y"},
        {"--sz-element", "--element-bytes"}, {"--filename", "--path"},
    };
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(buf, alias[i][0]))
            return alias[i][1];
    return buf;
}

static int64_t num(const char *v)
{
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (!end || *end || x < 0)
        usage();
    return (int64_t)x;
}

/* Most balanced a*b = n with a >= b (MPI_Dims_create's shape). */
static void near_square(int n, int *a, int *b)
{
    *a = n;
    *b = 1;
    for (int d = 1; (long)d * d <= n; d++)
        if (n % d == 0) {
            *a = n / d;
            *b = d;
        }
}

static void parse(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->tile_x = o->tile_y = 128;
    o->elem = 1024;
    o->ov_x = o->ov_y = 16;
    o->iters = 1;
    o->verify = 1;
    o->path = "/tmp/atomio_tile_io.dat";
    o->label = "";
    for (int i = 1; i < argc; i++) {
        char buf[64];
        const char *a = canon(argv[i], buf, sizeof buf);
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--atomic"))
            o->atomic = 1;
        else if (!strcmp(a, "--collective"))
            o->collective = 1;
        else if (!strcmp(a, "--no-verify"))
            o->verify = 0;
        else if (!strcmp(a, "--keep"))
            o->keep = 1;
        else if (!strcmp(a, "--sync"))
            o->sync = 1;
        else if (!strcmp(a, "--write-file")) /* mpi-tile-io's flag; always true */
            ;
        else if (!v)
            usage();
        else {
            i++;
            if (!strcmp(a, "--tiles-x"))
                o->tiles_x = (int)num(v);
            else if (!strcmp(a, "--tiles-y"))
                o->tiles_y = (int)num(v);
            else if (!strcmp(a, "--tile"))
                o->tile_x = o->tile_y = num(v);
            else if (!strcmp(a, "--tile-x"))
                o->tile_x = num(v);
            else if (!strcmp(a, "--tile-y"))
                o->tile_y = num(v);
            else if (!strcmp(a, "--element-bytes"))
                o->elem = num(v);
            else if (!strcmp(a, "--overlap"))
                o->ov_x = o->ov_y = num(v);
            else if (!strcmp(a, "--overlap-x"))
                o->ov_x = num(v);
            else if (!strcmp(a, "--overlap-y"))
                o->ov_y = num(v);
            else if (!strcmp(a, "--iterations"))
                o->iters = (int)num(v);
            else if (!strcmp(a, "--path"))
                o->path = v;
            else if (!strcmp(a, "--label"))
                o->label = v;
            else if (!strcmp(a, "--verify-path"))
                o->verify_path = v;
            else if (!strcmp(a, "--hint")) {
                const char *eq = strchr(v, '=');
                if (!eq || eq == v || o->nhints == MAX_HINTS)
                    usage();
                o->hint_key[o->nhints] = strndup(v, (size_t)(eq - v));
                o->hint_val[o->nhints] = strdup(eq + 1);
                o->nhints++;
            } else
                usage();
        }
    }
    if (!o->tiles_x && !o->tiles_y)
        near_square(g_size, &o->tiles_x, &o->tiles_y);
    else if (!o->tiles_y && o->tiles_x > 0)
        o->tiles_y = g_size / o->tiles_x;
    else if (!o->tiles_x && o->tiles_y > 0)
        o->tiles_x = g_size / o->tiles_y;
    if (o->tiles_x < 1 || o->tiles_y < 1 || (long)o->tiles_x * o->tiles_y != g_size) {
        if (g_rank == 0)
            fprintf(stderr, "tile_io: tiles_x * tiles_y (%d * %d) must equal the ranks (%d)\n",
                    o->tiles_x, o->tiles_y, g_size);
        usage();
    }
    if (o->tile_x < 1 || o->tile_y < 1 || o->elem < 1 || o->iters < 1 ||
        o->ov_x >= o->tile_x || o->ov_y >= o->tile_y) {
        if (g_rank == 0)
            fprintf(stderr, "tile_io: need tile >= 1, element >= 1, iterations >= 1, "
                            "0 <= overlap < tile\n");
        usage();
    }
    /* MPI counts are int: the tile's element count and the subarray sizes */
    if (o->tile_x * o->tile_y > INT32_MAX || o->elem > INT32_MAX ||
        o->tiles_x * (o->tile_x - o->ov_x) + o->ov_x > INT32_MAX ||
        o->tiles_y * (o->tile_y - o->ov_y) + o->ov_y > INT32_MAX) {
        if (g_rank == 0)
            fprintf(stderr, "tile_io: sizes exceed MPI int counts\n");
        usage();
    }
}

static geom_t geometry(const opts_t *o, int rank)
{
    geom_t g;
    g.dim_x = o->tiles_x * (o->tile_x - o->ov_x) + o->ov_x;
    g.dim_y = o->tiles_y * (o->tile_y - o->ov_y) + o->ov_y;
    g.start_x = (rank % o->tiles_x) * (o->tile_x - o->ov_x);
    g.start_y = (rank / o->tiles_x) * (o->tile_y - o->ov_y);
    g.tile_elems = o->tile_x * o->tile_y;
    g.tile_bytes = g.tile_elems * o->elem;
    return g;
}

/* ---- verification (rank 0) ---------------------------------------------- */

/* Covering tile indices of element coordinate c along one axis: [*lo, *hi]. */
static void covering(int64_t c, int64_t tile, int64_t ov, int n, int *lo, int *hi)
{
    int64_t step = tile - ov;
    int64_t h = c / step;
    if (h > n - 1)
        h = n - 1;
    int64_t l = h;
    while (l > 0 && (l - 1) * step + tile > c)
        l--;
    *lo = (int)l;
    *hi = (int)h;
}

typedef struct {
    int ok;
    long bad_elems;
    char why[256];
    unsigned char *edge; /* P*P: edge[r*P + w] = 1 iff w's data won over r */
} verdict_t;

/* Records a bad element; the first one's description is kept. */
static void bad(verdict_t *v, const char *what, int64_t x, int64_t y, uint32_t rank,
                uint32_t iter)
{
    if (v->ok)
        snprintf(v->why, sizeof v->why, "element (%lld,%lld) %s (header: rank %lu, iteration %lu)",
                 (long long)x, (long long)y, what, (unsigned long)rank, (unsigned long)iter);
    v->ok = 0;
    v->bad_elems++;
}

static void check_elem(const opts_t *o, verdict_t *v, const unsigned char *p, int64_t x,
                       int64_t y, int64_t dim_x, uint32_t nonce, unsigned char *scratch)
{
    uint32_t h[4];
    memcpy(h, p, HDR);
    uint64_t idx = (uint64_t)y * (uint64_t)dim_x + (uint64_t)x;
    int xl, xh, yl, yh;
    covering(x, o->tile_x, o->ov_x, o->tiles_x, &xl, &xh);
    covering(y, o->tile_y, o->ov_y, o->tiles_y, &yl, &yh);
    if (h[0] != nonce || h[1] >= (uint32_t)g_size || h[3] != (uint32_t)idx) {
        bad(v, "is not whole data of this run at this place", x, y, h[1], h[2]);
        return;
    }
    int w = (int)h[1], wx = w % o->tiles_x, wy = w / o->tiles_x;
    if (wx < xl || wx > xh || wy < yl || wy > yh) {
        bad(v, "holds data of a rank whose tile does not cover it", x, y, h[1], h[2]);
        return;
    }
    if (h[2] != (uint32_t)(o->iters - 1)) {
        bad(v, "holds a rank's earlier iteration, not its last", x, y, h[1], h[2]);
        return;
    }
    fill_elem(scratch, o->elem, nonce, (uint32_t)w, h[2], idx);
    if (memcmp(scratch, p, (size_t)o->elem)) {
        bad(v, "is torn", x, y, h[1], h[2]);
        return;
    }
    for (int ty = yl; ty <= yh; ty++)
        for (int tx = xl; tx <= xh; tx++) {
            int r = ty * o->tiles_x + tx;
            if (r != w)
                v->edge[(size_t)r * (size_t)g_size + (size_t)w] = 1;
        }
}

/* Returns 1 and describes a cycle in `why` if the edge graph has one. */
static int find_cycle(const unsigned char *edge, int n, char *why, size_t cap)
{
    int *color = calloc((size_t)n, sizeof *color), *parent = malloc((size_t)n * sizeof(int));
    int *stack = malloc((size_t)n * sizeof(int)), *next = calloc((size_t)n, sizeof(int));
    int found = 0;
    for (int s = 0; s < n && !found; s++) {
        if (color[s])
            continue;
        int sp = 0;
        stack[sp++] = s;
        color[s] = 1;
        parent[s] = -1;
        while (sp && !found) {
            int u = stack[sp - 1];
            if (next[u] == n) {
                color[u] = 2;
                sp--;
                continue;
            }
            int w = next[u]++;
            if (!edge[(size_t)u * (size_t)n + (size_t)w])
                continue;
            if (color[w] == 1) { /* back edge u -> w closes w -> ... -> u -> w */
                int chain[64], m = 0;
                for (int k = u; k >= 0 && m < 64; k = parent[k]) {
                    chain[m++] = k;
                    if (k == w)
                        break;
                }
                int len = snprintf(why, cap, "no serial order: cycle");
                for (int k = m - 1; k >= 0 && len < (int)cap - 24; k--)
                    len += snprintf(why + len, cap - (size_t)len, " %d ->", chain[k]);
                if (len < (int)cap - 24)
                    snprintf(why + len, cap - (size_t)len, " %d (r -> s: s's data won over r's)",
                             w);
                found = 1;
            } else if (color[w] == 0) {
                color[w] = 1;
                parent[w] = u;
                stack[sp++] = w;
            }
        }
    }
    free(color);
    free(parent);
    free(stack);
    free(next);
    return found;
}

/* Collective.  Rank 0 reads the whole dataset row block by row block. */
/* Reads len bytes at off into buf: through the MPI handle or a POSIX descriptor. */
typedef struct {
    MPI_File fh;
    int fd;
} reader_t;

static void read_bytes(reader_t *r, int64_t off, unsigned char *buf, size_t len)
{
    if (r->fd < 0) {
        MPI_Status st;
        CHECK(MPI_File_read_at(r->fh, off, buf, (int)len, MPI_BYTE, &st));
        return;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(r->fd, buf + got, len - got, (off_t)(off + (int64_t)got));
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    memset(buf + got, 0, len - got); /* missing bytes: zeros, which no element header is */
}

/* Rank 0: the verdict on the file of `size` bytes read through r. */
static void verify_bytes(const opts_t *o, reader_t *r, int64_t size, uint32_t nonce, verdict_t *v)
{
    geom_t g = geometry(o, 0);
    v->ok = 1;
    v->bad_elems = 0;
    v->why[0] = 0;
    v->edge = NULL;
    int64_t row = g.dim_x * o->elem;
    if (size < row * g.dim_y) {
        v->ok = 0;
        snprintf(v->why, sizeof v->why, "file has %lld bytes, dataset %lld", (long long)size,
                 (long long)(row * g.dim_y));
    }
    int64_t rows = (64 << 20) / row;
    if (rows < 1)
        rows = 1;
    if (rows > INT32_MAX / row)
        rows = INT32_MAX / row;
    unsigned char *buf = malloc((size_t)(rows * row)), *scratch = malloc((size_t)o->elem);
    v->edge = calloc((size_t)g_size * (size_t)g_size, 1);
    if (!buf || !scratch || !v->edge)
        bu_die("verify: out of memory", MPI_ERR_NO_MEM);
    for (int64_t y0 = 0; y0 < g.dim_y; y0 += rows) {
        int64_t n = g.dim_y - y0 < rows ? g.dim_y - y0 : rows;
        read_bytes(r, y0 * row, buf, (size_t)(n * row));
        for (int64_t y = y0; y < y0 + n; y++)
            for (int64_t x = 0; x < g.dim_x; x++)
                check_elem(o, v, buf + (y - y0) * row + x * o->elem, x, y, g.dim_x, nonce,
                           scratch);
    }
    if (v->ok && find_cycle(v->edge, g_size, v->why, sizeof v->why))
        v->ok = 0;
    free(buf);
    free(scratch);
    free(v->edge);
    v->edge = NULL;
}

/* Collective: the verdict (on rank 0) on the file as read through the handle. */
static void verify(const opts_t *o, MPI_File fh, uint32_t nonce, verdict_t *v)
{
    CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    if (g_rank == 0) {
        MPI_Offset size = 0;
        CHECK(MPI_File_get_size(fh, &size));
        reader_t r = {fh, -1};
        verify_bytes(o, &r, (int64_t)size, nonce, v);
    }
    relaxed_barrier(MPI_COMM_WORLD);
}

/* Rank 0, after the close: the verdict on the file as read through path. */
static void verify_path(const opts_t *o, const char *path, uint32_t nonce, verdict_t *v)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        v->ok = 0;
        snprintf(v->why, sizeof v->why, "--verify-path %s: cannot open", path);
        return;
    }
    reader_t r = {MPI_FILE_NULL, fd};
    verify_bytes(o, &r, (int64_t)lseek(fd, 0, SEEK_END), nonce, v);
    close(fd);
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    bu_prog = "tile_io";
    bu_rank = g_rank;
    opts_t o;
    parse(argc, argv, &o);
    geom_t g = geometry(&o, g_rank);
    int can_verify = o.verify && o.elem >= HDR && g_size <= MAX_VERIFY_RANKS;

    /* types: element = esize bytes; the view is this rank's tile */
    MPI_Datatype etype, tile;
    CHECK(MPI_Type_contiguous((int)o.elem, MPI_BYTE, &etype));
    CHECK(MPI_Type_commit(&etype));
    int sizes[2] = {(int)g.dim_y, (int)g.dim_x};
    int sub[2] = {(int)o.tile_y, (int)o.tile_x};
    int starts[2] = {(int)g.start_y, (int)g.start_x};
    CHECK(MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, etype, &tile));
    CHECK(MPI_Type_commit(&tile));

    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 0; i < o.nhints; i++)
        MPI_Info_set(info, o.hint_key[i], o.hint_val[i]);

    /* fresh file and nonce per run */
    uint32_t nonce = 0;
    if (g_rank == 0) {
        MPI_File_delete(o.path, MPI_INFO_NULL); /* absent is fine */
        nonce = bu_nonce();
    }
    MPI_Bcast(&nonce, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, o.path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh);
    if (rc != MPI_SUCCESS)
        bu_die("MPI_File_open", rc);
    int set_rc = MPI_SUCCESS, atom_get = -1;
    if (o.atomic)
        set_rc = MPI_File_set_atomicity(fh, 1);
    MPI_File_get_atomicity(fh, &atom_get);
    if (set_rc != MPI_SUCCESS && g_rank == 0) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(set_rc, msg, &len);
        fprintf(stderr, "tile_io: MPI_File_set_atomicity(1) failed: %s\n", msg);
    }
    CHECK(MPI_File_set_view(fh, 0, etype, tile, "native", info));

    unsigned char *buf = malloc((size_t)g.tile_bytes);
    double *iter_t = calloc((size_t)o.iters, sizeof *iter_t);
    double *iter_max = calloc((size_t)o.iters, sizeof *iter_max);
    if (!buf || !iter_t || !iter_max)
        bu_die("out of memory", MPI_ERR_NO_MEM);
    for (int it = 0; it < o.iters; it++) {
        for (int64_t ty = 0; ty < o.tile_y; ty++)
            for (int64_t tx = 0; tx < o.tile_x; tx++) {
                uint64_t idx = (uint64_t)(g.start_y + ty) * (uint64_t)g.dim_x +
                               (uint64_t)(g.start_x + tx);
                fill_elem(buf + (ty * o.tile_x + tx) * o.elem, o.elem, nonce,
                          (uint32_t)g_rank, (uint32_t)it, idx);
            }
        if (it == 0)
            bu_warm(o.path, (uint64_t)g.tile_bytes);
        relaxed_barrier(MPI_COMM_WORLD);
        MPI_Status st;
        double t0 = MPI_Wtime();
        if (o.collective)
            rc = MPI_File_write_at_all(fh, 0, buf, (int)g.tile_elems, etype, &st);
        else
            rc = MPI_File_write_at(fh, 0, buf, (int)g.tile_elems, etype, &st);
        if (rc != MPI_SUCCESS)
            bu_die(o.collective ? "MPI_File_write_at_all" : "MPI_File_write_at", rc);
        if (o.sync)
            CHECK(MPI_File_sync(fh));
        iter_t[it] = MPI_Wtime() - t0;
        int done = 0;
        CHECK(MPI_Get_count(&st, etype, &done));
        if (done != (int)g.tile_elems)
            bu_die("short write", MPI_ERR_IO);
    }
    MPI_Request rq;
    MPI_Ireduce(iter_t, iter_max, o.iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD, &rq);
    relaxed_wait(&rq);

    verdict_t v = {.ok = 1};
    if (can_verify)
        verify(&o, fh, nonce, &v);
    CHECK(MPI_File_close(&fh));
    relaxed_barrier(MPI_COMM_WORLD);
    if (can_verify && o.verify_path && g_rank == 0)
        verify_path(&o, o.verify_path, nonce, &v);
    if (!o.keep && g_rank == 0)
        MPI_File_delete(o.path, MPI_INFO_NULL);

    if (g_rank == 0) {
        double total = 0;
        for (int it = 0; it < o.iters; it++)
            total += iter_max[it];
        double bytes = (double)g.tile_bytes * g_size * o.iters;
        char libj[256], pathj[1024], labelj[256], whyj[600], hints[2048];
        int len = 0;
        bu_library(libj, sizeof libj);
        json_str(o.path, pathj, sizeof pathj);
        json_str(o.label, labelj, sizeof labelj);
        json_str(v.why, whyj, sizeof whyj);
        int hn = snprintf(hints, sizeof hints, "{");
        for (int i = 0; i < o.nhints && hn < (int)sizeof hints - 300; i++) {
            char k[128], val[128];
            json_str(o.hint_key[i], k, sizeof k);
            json_str(o.hint_val[i], val, sizeof val);
            hn += snprintf(hints + hn, sizeof hints - (size_t)hn, "%s\"%s\":\"%s\"", i ? "," : "",
                           k, val);
        }
        snprintf(hints + hn, sizeof hints - (size_t)hn, "}");
        const char *verdict = !o.verify ? "skipped"
                              : !can_verify ? "n/a"
                              : v.ok ? "atomic" : "violated";
        char iters[4096];
        int n = 0;
        for (int it = 0; it < o.iters && n < (int)sizeof iters - 32; it++)
            n += snprintf(iters + n, sizeof iters - (size_t)n, "%s%.6f", it ? "," : "",
                          iter_max[it]);
        char errs[MPI_MAX_ERROR_STRING] = "", errj[MPI_MAX_ERROR_STRING + 16];
        if (set_rc != MPI_SUCCESS)
            MPI_Error_string(set_rc, errs, &len);
        json_str(errs, errj, sizeof errj);
        printf("{\"bench\":\"tile_io\",\"label\":\"%s\",\"mpi_library\":\"%s\",\"ranks\":%d,"
               "\"tiles_x\":%d,\"tiles_y\":%d,\"tile_x\":%" PRId64 ",\"tile_y\":%" PRId64 ","
               "\"element_bytes\":%" PRId64 ",\"overlap_x\":%" PRId64 ",\"overlap_y\":%" PRId64
               ",\"dataset_x\":%" PRId64 ",\"dataset_y\":%" PRId64 ",\"iterations\":%d,"
               "\"atomic\":%s,\"atomicity_set_rc\":%d,\"atomicity_set_error\":\"%s\","
               "\"atomicity_get\":%d,\"collective\":%s,\"sync\":%s,\"path\":\"%s\","
               "\"hints\":%s,\"bytes\":%.0f,\"seconds\":%.6f,\"iter_seconds\":[%s],"
               "\"mib_per_s\":%.3f,\"verify\":\"%s\",\"violation\":\"%s\","
               "\"bad_elements\":%ld}\n",
               labelj, libj, g_size, o.tiles_x, o.tiles_y, o.tile_x, o.tile_y, o.elem, o.ov_x,
               o.ov_y, g.dim_x, g.dim_y, o.iters, o.atomic ? "true" : "false", set_rc, errj,
               atom_get, o.collective ? "true" : "false", o.sync ? "true" : "false", pathj,
               hints, bytes, total, iters, total > 0 ? bytes / (1 << 20) / total : 0.0,
               verdict, whyj, v.bad_elems);
        fflush(stdout);
    }
    free(buf);
    free(iter_t);
    free(iter_max);
    for (int i = 0; i < o.nhints; i++) {
        free(o.hint_key[i]);
        free(o.hint_val[i]);
    }
    MPI_Info_free(&info);
    MPI_Type_free(&tile);
    MPI_Type_free(&etype);
    MPI_Finalize();
    return 0;
}
