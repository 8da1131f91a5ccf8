/*
 * tile_read.c -- the reader half of the tile writer/reader pair (Logan & Dickens 2008 §5.2):
 * a dense 2-D array of elements in one file, one tile per rank, neighbouring tiles
 * overlapping by ghost cells, every rank reading its whole tile.  Plain MPI (ROMIO under
 * MPICH); no atomio code.
 *
 *   mpiexec -n 4 ./tile_read [--tiles-x 2 --tiles-y 2] [--tile N | --tile-x X --tile-y Y]
 *       [--element-bytes 1024] [--overlap N | --overlap-x X --overlap-y Y]
 *       [--atomic] [--collective] [--hint key=value]... [--label S]
 *       (--path FLAT | --interval-file IVAL [--verify-flat FLAT])
 *
 * Modes:
 *   flat (--path): the flat file, row-major, no header (tile_io's and atomio's flat files).
 *     A subarray file view of the rank's tile, then ONE MPI_File_read_at (or
 *     MPI_File_read_at_all with --collective) of the whole tile.  --atomic opens the file
 *     read-write and turns MPI atomic mode on (ROMIO: data sieving under an fcntl lock of
 *     the extent; ROMIO takes a WRITE lock even to read, which on a read-only descriptor
 *     fails with EBADF and is ignored, so a read-only open would read unlocked).
 *   interval (--interval-file): an atomio interval file whose interval set is THIS reader
 *     tiling's (made by `atomio interval translate SRC DST --workload tile --clients N --
 *     <these tile params>`).  Byte layout (crates/atomio-interval/src/ifile.rs): a 128-byte
 *     header, then the metadata (process table ranks x {offset, len, families} u64, interval
 *     table families x {start, len, stride, count u64; home u32, owner u32}, owner-set table
 *     owner_sets x {kind u32, n u32}, owner ranks u32...), all little-endian.  Every rank reads
 *     the header and the metadata (two MPI_File_read_at), then its own region (the families
 *     homed at it: private ones and the shared ones whose lowest owner it is) with ONE
 *     MPI_File_read_at, then the shared families homed at other ranks whose owner set holds
 *     it (each family's intervals are stored consecutively; physically adjacent families are
 *     merged into one read), and copies the intervals into its tile buffer by their logical
 *     offsets.  Plain MPI-IO on the file opened with MPI_INFO_NULL; no file view.
 *
 * Invariants of the method:
 *   - Geometry (tile_io's / mpi-tile-io's): per dimension the dataset has
 *     n*tile - (n-1)*overlap elements, tile i starts at element i*(tile - overlap), rank r
 *     holds tile (r mod tiles_x, r div tiles_x).  tiles_x * tiles_y = ranks.
 *   - Timing: a barrier, then each rank times its reads (interval mode: the metadata reads,
 *     the parsing, the data reads and the copy into the tile buffer); the run's time is the
 *     maximum over ranks.  Opening, the file view and verification are outside it.  MiB/s
 *     counts every rank's tile (ghost cells once per reader).
 *   - Interval mode checks: the header's magic, version, rank count; the regions' lengths
 *     equal the sum of their families; every interval lies inside the reading rank's tile;
 *     the bytes copied equal the tile's size.  --verify-flat FLAT then reads the tile from
 *     FLAT as flat mode does and compares every byte.
 *   - Output: one JSON line on stdout from rank 0; diagnostics on stderr.  Exit status 0
 *     unless usage, MPI or interval-file errors (a verify mismatch is reported in the JSON).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_util.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_HINTS = 16, IV_HEADER = 128 };

typedef struct {
    int tiles_x, tiles_y;
    int64_t tile_x, tile_y, elem, ov_x, ov_y;
    int atomic, collective;
    const char *path, *ival, *verify_flat, *label;
    int nhints;
    char *hint_key[MAX_HINTS], *hint_val[MAX_HINTS];
} opts_t;

typedef struct {
    int64_t dim_x, dim_y, start_x, start_y, tile_elems, tile_bytes;
} geom_t;

static int g_rank, g_size;

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr,
                "usage: tile_read [--tiles-x N --tiles-y N] [--tile N | --tile-x N --tile-y N]\n"
                "  [--element-bytes N] [--overlap N | --overlap-x N --overlap-y N]\n"
                "  [--atomic] [--collective] [--hint key=value]... [--label S]\n"
                "  (--path FLAT | --interval-file IVAL [--verify-flat FLAT])\n");
    MPI_Finalize();
    exit(2);
}

static void fail(const char *msg)
{
    fprintf(stderr, "tile_read rank %d: %s\n", g_rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 4);
}

static int64_t num(const char *v)
{
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (!end || *end || x < 0)
        usage();
    return (int64_t)x;
}

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
    o->label = "";
    for (int i = 1; i < argc; i++) {
        char a[64];
        snprintf(a, sizeof a, "%s", argv[i]);
        for (char *p = a; *p; p++)
            if (*p == '_')
                *p = '-';
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--atomic"))
            o->atomic = 1;
        else if (!strcmp(a, "--collective"))
            o->collective = 1;
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
            else if (!strcmp(a, "--path"))
                o->path = v;
            else if (!strcmp(a, "--interval-file"))
                o->ival = v;
            else if (!strcmp(a, "--verify-flat"))
                o->verify_flat = v;
            else if (!strcmp(a, "--label"))
                o->label = v;
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
            fprintf(stderr, "tile_read: tiles_x * tiles_y (%d * %d) must equal the ranks (%d)\n",
                    o->tiles_x, o->tiles_y, g_size);
        usage();
    }
    if (o->tile_x < 1 || o->tile_y < 1 || o->elem < 1 || o->ov_x >= o->tile_x ||
        o->ov_y >= o->tile_y || o->tile_x * o->tile_y > INT32_MAX || o->elem > INT32_MAX ||
        o->tiles_x * (o->tile_x - o->ov_x) + o->ov_x > INT32_MAX ||
        o->tiles_y * (o->tile_y - o->ov_y) + o->ov_y > INT32_MAX) {
        if (g_rank == 0)
            fprintf(stderr, "tile_read: need 0 <= overlap < tile and sizes within MPI ints\n");
        usage();
    }
    if (!!o->path == !!o->ival) {
        if (g_rank == 0)
            fprintf(stderr, "tile_read: exactly one of --path and --interval-file\n");
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

/* MPI_File_read_at of any length (int counts: chunks of 1 GiB); returns the read calls. */
static long read_bytes(MPI_File fh, MPI_Offset off, unsigned char *buf, int64_t len)
{
    long calls = 0;
    while (len > 0) {
        int n = len > (1 << 30) ? (1 << 30) : (int)len;
        MPI_Status st;
        CHECK(MPI_File_read_at(fh, off, buf, n, MPI_BYTE, &st));
        int got = 0;
        CHECK(MPI_Get_count(&st, MPI_BYTE, &got));
        if (got != n)
            fail("short read");
        off += n;
        buf += n;
        len -= n;
        calls++;
    }
    return calls;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = (x << 8) | p[i];
    return x;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Flat mode: the tile through a subarray view; one read call (collective or not). */
static void read_flat(const opts_t *o, const geom_t *g, const char *path, int atomic,
                      int collective, MPI_Info info, unsigned char *buf, double *t)
{
    MPI_Datatype etype, tile;
    CHECK(MPI_Type_contiguous((int)o->elem, MPI_BYTE, &etype));
    CHECK(MPI_Type_commit(&etype));
    int sizes[2] = {(int)g->dim_y, (int)g->dim_x};
    int sub[2] = {(int)o->tile_y, (int)o->tile_x};
    int starts[2] = {(int)g->start_y, (int)g->start_x};
    CHECK(MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, etype, &tile));
    CHECK(MPI_Type_commit(&tile));
    /* atomic: opened read-write, because ROMIO (MPICH 4.0.2) locks an atomic-mode read's
     * extent with an fcntl WRITE lock, which fails with EBADF on a read-only descriptor
     * and is then ignored (the read runs unlocked) */
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, path, atomic ? MPI_MODE_RDWR : MPI_MODE_RDONLY,
                           info, &fh);
    if (rc != MPI_SUCCESS)
        bu_die("MPI_File_open (flat)", rc);
    if (atomic)
        CHECK(MPI_File_set_atomicity(fh, 1));
    CHECK(MPI_File_set_view(fh, 0, etype, tile, "native", info));
    relaxed_barrier(MPI_COMM_WORLD);
    MPI_Status st;
    double t0 = MPI_Wtime();
    if (collective)
        rc = MPI_File_read_at_all(fh, 0, buf, (int)g->tile_elems, etype, &st);
    else
        rc = MPI_File_read_at(fh, 0, buf, (int)g->tile_elems, etype, &st);
    if (t)
        *t = MPI_Wtime() - t0;
    if (rc != MPI_SUCCESS)
        bu_die(collective ? "MPI_File_read_at_all" : "MPI_File_read_at", rc);
    int got = 0;
    CHECK(MPI_Get_count(&st, etype, &got));
    if (got != (int)g->tile_elems)
        fail("short tile read");
    CHECK(MPI_File_close(&fh));
    MPI_Type_free(&tile);
    MPI_Type_free(&etype);
}

typedef struct {
    double t_meta, t_data, t_copy;
    long calls;
    int64_t homed_bytes, foreign_bytes, copied;
} ival_stats_t;

typedef struct {
    uint64_t phys, bytes;
    uint32_t fam;
} piece_t;

static int by_phys(const void *a, const void *b)
{
    const piece_t *x = a, *y = b;
    return x->phys < y->phys ? -1 : x->phys > y->phys;
}

/* Copies the logical bytes [L, L+len) of the flat file, held at src, into the tile buffer. */
static void place(const opts_t *o, const geom_t *g, unsigned char *tile, uint64_t L,
                  uint64_t len, const unsigned char *src, int64_t *copied)
{
    uint64_t row = (uint64_t)(g->dim_x * o->elem);
    uint64_t x0 = (uint64_t)(g->start_x * o->elem), x1 = x0 + (uint64_t)(o->tile_x * o->elem);
    while (len > 0) {
        uint64_t y = L / row, c = L % row;
        uint64_t piece = row - c < len ? row - c : len;
        if (y < (uint64_t)g->start_y || y >= (uint64_t)(g->start_y + o->tile_y) || c < x0 ||
            c + piece > x1) {
            char m[160];
            snprintf(m, sizeof m, "interval byte %" PRIu64 " (+%" PRIu64 ") is outside this rank's "
                     "tile: the interval file is not this reader tiling's", L, piece);
            fail(m);
        }
        memcpy(tile + (y - (uint64_t)g->start_y) * (uint64_t)(o->tile_x * o->elem) + (c - x0),
               src, piece);
        *copied += (int64_t)piece;
        L += piece;
        src += piece;
        len -= piece;
    }
}

/* Interval mode (see the header comment). */
static void read_ival(const opts_t *o, const geom_t *g, unsigned char *tile, ival_stats_t *s)
{
    memset(s, 0, sizeof *s);
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, o->ival, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS)
        bu_die("MPI_File_open (interval file)", rc);
    relaxed_barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    unsigned char h[IV_HEADER];
    s->calls += read_bytes(fh, 0, h, IV_HEADER);
    if (memcmp(h, "ATOMIOIV", 8) || le32(h + 8) != 1 || le32(h + 12) != IV_HEADER)
        fail("not an interval file of format version 1");
    uint32_t ranks = le32(h + 16);
    uint64_t meta_len = le64(h + 32), fams = le64(h + 56), nsets = le64(h + 64),
             nranks = le64(h + 72);
    if (ranks != (uint32_t)g_size)
        fail("the interval file's rank count differs from the communicator's");
    if (meta_len != ranks * 24ull + fams * 40 + nsets * 8 + nranks * 4 || meta_len > (1ull << 32))
        fail("interval file metadata length does not match its counts");
    unsigned char *meta = malloc(meta_len ? meta_len : 1);
    if (!meta)
        fail("out of memory (metadata)");
    s->calls += read_bytes(fh, IV_HEADER, meta, (int64_t)meta_len);
    const unsigned char *proc = meta, *fam = meta + ranks * 24ull,
                        *sets = fam + fams * 40, *rks = sets + nsets * 8;
    /* owner sets: does this rank belong to set k? */
    unsigned char *mine = calloc(nsets ? nsets : 1, 1);
    uint64_t *phys = malloc((fams ? fams : 1) * sizeof *phys);
    uint64_t *cursor = malloc(ranks * sizeof *cursor);
    if (!mine || !phys || !cursor)
        fail("out of memory (tables)");
    uint64_t at = 0;
    for (uint64_t k = 0; k < nsets; k++) {
        uint32_t kind = le32(sets + 8 * k), n = le32(sets + 8 * k + 4);
        if (kind != 0)
            fail("unresolved owner sets are not supported by this reader");
        if (at + n > nranks)
            fail("owner sets list more ranks than stored");
        for (uint32_t j = 0; j < n; j++)
            if (le32(rks + 4 * (at + j)) == (uint32_t)g_rank)
                mine[k] = 1;
        at += n;
    }
    /* physical offsets: each rank's families in table order from its region's offset */
    for (uint32_t r = 0; r < ranks; r++)
        cursor[r] = le64(proc + 24ull * r);
    for (uint64_t i = 0; i < fams; i++) {
        const unsigned char *f = fam + 40 * i;
        uint32_t home = le32(f + 32), owner = le32(f + 36);
        if (home >= ranks || owner >= nsets)
            fail("family with home or owner out of range");
        phys[i] = cursor[home];
        cursor[home] += le64(f + 8) * le64(f + 24);
    }
    for (uint32_t r = 0; r < ranks; r++)
        if (cursor[r] - le64(proc + 24ull * r) != le64(proc + 24ull * r + 8))
            fail("a region's length differs from the sum of its families");
    /* what to read: my region (one read), then foreign families I own (merged when adjacent) */
    uint64_t my_off = le64(proc + 24ull * (uint64_t)g_rank);
    s->homed_bytes = (int64_t)le64(proc + 24ull * (uint64_t)g_rank + 8);
    piece_t *pc = malloc((fams ? fams : 1) * sizeof *pc);
    size_t np = 0;
    for (uint64_t i = 0; i < fams; i++) {
        const unsigned char *f = fam + 40 * i;
        if (le32(f + 32) != (uint32_t)g_rank && mine[le32(f + 36)]) {
            pc[np].phys = phys[i];
            pc[np].bytes = le64(f + 8) * le64(f + 24);
            pc[np].fam = (uint32_t)i;
            s->foreign_bytes += (int64_t)pc[np].bytes;
            np++;
        }
    }
    qsort(pc, np, sizeof *pc, by_phys);
    unsigned char *stage = malloc((size_t)(s->homed_bytes + s->foreign_bytes) + 1);
    uint64_t *stage_at = malloc((fams ? fams : 1) * sizeof *stage_at);
    if (!stage || !stage_at)
        fail("out of memory (staging)");
    double t1 = MPI_Wtime();
    s->t_meta = t1 - t0;
    s->calls += read_bytes(fh, (MPI_Offset)my_off, stage, s->homed_bytes);
    uint64_t sp = (uint64_t)s->homed_bytes;
    for (size_t a = 0; a < np;) {
        size_t b = a + 1;
        uint64_t len = pc[a].bytes;
        while (b < np && pc[b].phys == pc[a].phys + len)
            len += pc[b++].bytes;
        s->calls += read_bytes(fh, (MPI_Offset)pc[a].phys, stage + sp, (int64_t)len);
        for (size_t c = a; c < b; c++) {
            stage_at[pc[c].fam] = sp;
            sp += pc[c].bytes;
        }
        a = b;
    }
    double t2 = MPI_Wtime();
    s->t_data = t2 - t1;
    /* copy every interval of every family I own to its place in the tile */
    for (uint64_t i = 0; i < fams; i++) {
        const unsigned char *f = fam + 40 * i;
        uint32_t home = le32(f + 32);
        if (!mine[le32(f + 36)])
            continue;
        uint64_t start = le64(f), len = le64(f + 8), stride = le64(f + 16), count = le64(f + 24);
        uint64_t src = home == (uint32_t)g_rank ? phys[i] - my_off : stage_at[i];
        for (uint64_t k = 0; k < count; k++)
            place(o, g, tile, start + k * stride, len, stage + src + k * len, &s->copied);
    }
    s->t_copy = MPI_Wtime() - t2;
    if (s->copied != g->tile_bytes) {
        char m[160];
        snprintf(m, sizeof m, "copied %" PRId64 " bytes into a tile of %" PRId64, s->copied,
                 g->tile_bytes);
        fail(m);
    }
    CHECK(MPI_File_close(&fh));
    free(meta);
    free(mine);
    free(phys);
    free(cursor);
    free(pc);
    free(stage);
    free(stage_at);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    bu_prog = "tile_read";
    bu_rank = g_rank;
    opts_t o;
    parse(argc, argv, &o);
    geom_t g = geometry(&o, g_rank);
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 0; i < o.nhints; i++)
        MPI_Info_set(info, o.hint_key[i], o.hint_val[i]);
    unsigned char *buf = malloc((size_t)g.tile_bytes);
    if (!buf)
        fail("out of memory (tile)");

    double t = 0, mx[5] = {0}, mine[5] = {0};
    ival_stats_t s = {0};
    if (o.path) {
        read_flat(&o, &g, o.path, o.atomic, o.collective, info, buf, &t);
        mine[0] = t;
    } else {
        read_ival(&o, &g, buf, &s);
        mine[0] = s.t_meta + s.t_data + s.t_copy;
        mine[1] = s.t_meta;
        mine[2] = s.t_data;
        mine[3] = s.t_copy;
    }
    MPI_Request rq;
    MPI_Iallreduce(mine, mx, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rq);
    relaxed_wait(&rq);
    int64_t loc[4] = {s.homed_bytes, s.foreign_bytes, s.calls, 0}, sum[4] = {0};
    MPI_Iallreduce(loc, sum, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &rq);
    relaxed_wait(&rq);

    /* --verify-flat: the same tile read from the flat file, compared byte by byte */
    const char *verdict = "skipped";
    long long diff_total = 0;
    if (o.ival && o.verify_flat) {
        unsigned char *ref = malloc((size_t)g.tile_bytes);
        if (!ref)
            fail("out of memory (verify)");
        read_flat(&o, &g, o.verify_flat, 0, 0, info, ref, NULL);
        long long diff = 0;
        for (int64_t i = 0; i < g.tile_bytes; i++)
            diff += buf[i] != ref[i];
        MPI_Iallreduce(&diff, &diff_total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD, &rq);
        relaxed_wait(&rq);
        verdict = diff_total ? "mismatch" : "identical";
        free(ref);
    }

    if (g_rank == 0) {
        char libj[256], pathj[1024], labelj[256];
        bu_library(libj, sizeof libj);
        json_str(o.path ? o.path : o.ival, pathj, sizeof pathj);
        json_str(o.label, labelj, sizeof labelj);
        double bytes = (double)g.tile_bytes * g_size;
        printf("{\"bench\":\"tile_read\",\"label\":\"%s\",\"mpi_library\":\"%s\",\"ranks\":%d,"
               "\"mode\":\"%s\",\"path\":\"%s\",\"tiles_x\":%d,\"tiles_y\":%d,"
               "\"tile_x\":%" PRId64 ",\"tile_y\":%" PRId64 ",\"element_bytes\":%" PRId64
               ",\"overlap_x\":%" PRId64 ",\"overlap_y\":%" PRId64 ",\"dataset_x\":%" PRId64
               ",\"dataset_y\":%" PRId64 ",\"atomic\":%s,\"collective\":%s,\"bytes\":%.0f,"
               "\"seconds\":%.6f,\"mib_per_s\":%.3f",
               labelj, libj, g_size, o.path ? "flat" : "interval", pathj, o.tiles_x, o.tiles_y,
               o.tile_x, o.tile_y, o.elem, o.ov_x, o.ov_y, g.dim_x, g.dim_y,
               o.atomic ? "true" : "false", o.collective ? "true" : "false", bytes, mx[0],
               mx[0] > 0 ? bytes / (1 << 20) / mx[0] : 0.0);
        if (o.ival)
            printf(",\"meta_seconds\":%.6f,\"data_seconds\":%.6f,\"copy_seconds\":%.6f,"
                   "\"homed_bytes\":%" PRId64 ",\"foreign_shared_bytes\":%" PRId64
                   ",\"read_calls\":%" PRId64 ",\"verify\":\"%s\",\"differing_bytes\":%lld",
                   mx[1], mx[2], mx[3], sum[0], sum[1], sum[2], verdict, diff_total);
        printf("}\n");
        fflush(stdout);
    }
    free(buf);
    for (int i = 0; i < o.nhints; i++) {
        free(o.hint_key[i]);
        free(o.hint_val[i]);
    }
    MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
