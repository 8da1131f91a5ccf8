/*
 * t_intervals.c -- test 13: interval I/O at MPI_File_set_view. Needs 4
 * ranks. The library's stats (ATOMIO_STATS, set here to a file in T_DIR before MPI_Init)
 * are read back and checked.
 *
 * Part 1, strategy `auto`, atomic mode: strided disjoint views (as mpi/bench/strided_io:
 * rank r owns every P-th block of B bytes; displacement r*B, B bytes resized to P*B), each
 * rank writes its blocks with CALLS MPI_File_write_at calls and one MPI_File_write_at_all.
 * Then: the file holds exactly every rank's bytes; the analysis found no shared byte; auto
 * chose `interval`; and no rank made a single lock request (every call lock-free, no
 * fallback).
 *
 * Part 2, strategy `interval`, atomic mode: overlapping views. Rank r sees W bytes every
 * P*W from r*W, except rank 0, whose W + OV bytes run OV bytes into rank 1's: ranks 0 and
 * 1 share an OV-byte strip per period, everything else is private. Every rank writes its
 * whole view (PERIODS periods, atomio_tag_view data) again and again for a bounded time;
 * atomio's verifier must find the file the result of the writes applied atomically in some
 * order, and the stats must show locks only where views overlap: the analysis's shared
 * bytes are the strips, every call of ranks 2 and 3 was lock-free, ranks 0 and 1 locked
 * (their calls touch the strip), and no call fell back.
 *
 * Part 3, strategy `interval` with the hint atomio_format=interval: the strided views of
 * part 1 (every byte private); after the set_view the file is an interval file. Each rank
 * writes its blocks, syncs, reads them back through the handle (equal), and a second
 * MPI_File_set_view is refused. Rank 0 checks the file on disk is not the flat layout and
 * writes the flat bytes expected to t_intervals_ifile.expect beside it; run.sh then
 * translates the interval file to flat with `atomio interval translate` and compares.
 */
#define _GNU_SOURCE
#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { P = 4, B = 4096, BLOCKS = 64, CALLS = 4 };
enum { W = 8192, OV = 1024, PERIODS = 16, MIN_OPS = 3, MAX_OPS = 300 };

static char stats_path[4096];

/* The value of `key` in the last stats line of `kind` ("atomio-stats", "atomio-intervals")
 * naming a file that ends in `name`; -1 when absent. */
static long long stat_of(const char *kind, const char *name, const char *key)
{
    size_t len = 0;
    unsigned char *all = t_read_file(stats_path, &len);
    T_ASSERT(all, "no stats file %s (ATOMIO_STATS)", stats_path);
    char *text = realloc(all, len + 1);
    T_ASSERT(text, "out of memory");
    text[len] = 0;
    long long v = -1;
    char want[512], k[128];
    snprintf(want, sizeof want, "%s file=", kind);
    snprintf(k, sizeof k, " %s=", key);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, want, strlen(want)) != 0)
            continue;
        char *sp = strchr(line + strlen(want), ' ');
        if (!sp || (size_t)(sp - line) < strlen(name) ||
            strncmp(sp - strlen(name), name, strlen(name)) != 0)
            continue;
        char *at = strstr(line, k);
        if (at)
            v = strtoll(at + strlen(k), NULL, 10);
    }
    free(text);
    return v;
}

/* Whether the last line of `kind` for `name` contains `needle`. */
static int line_has(const char *kind, const char *name, const char *needle)
{
    size_t len = 0;
    unsigned char *all = t_read_file(stats_path, &len);
    T_ASSERT(all, "no stats file");
    char *text = realloc(all, len + 1);
    T_ASSERT(text, "out of memory");
    text[len] = 0;
    int found = 0;
    char want[512];
    snprintf(want, sizeof want, "%s file=", kind);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, want, strlen(want)) == 0 && strstr(line, name))
            found = strstr(line, needle) != NULL;
    free(text);
    return found;
}

static MPI_File open_hinted(const char *path, const char *strategy, const char *format)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", strategy);
    if (format) {
        MPI_Info_set(info, "atomio_format", format);
        char reach[32];
        snprintf(reach, sizeof reach, "%d", P * BLOCKS * B); /* what the views cover */
        MPI_Info_set(info, "atomio_interval_reach", reach);
    }
    MPI_File fh;
    T_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    T_MPI(MPI_File_set_atomicity(fh, 1));
    return fh;
}

static MPI_File open_with(const char *path, const char *strategy)
{
    return open_hinted(path, strategy, NULL);
}

static unsigned char byte_at(uint64_t off) { return (unsigned char)(off * 131 + (off >> 12) + 7); }

static void strided_auto(void)
{
    char name[] = "t_intervals_strided.dat";
    const char *plain = t_fresh_path(name);
    MPI_File fh = open_with(plain, "auto");
    MPI_Datatype piece, ft;
    MPI_Type_contiguous(B, MPI_BYTE, &piece);
    MPI_Type_create_resized(piece, 0, (MPI_Aint)B * P, &ft);
    MPI_Type_commit(&ft);
    T_MPI(MPI_File_set_view(fh, (MPI_Offset)t_rank * B, MPI_BYTE, ft, "native", MPI_INFO_NULL));

    /* block j of this rank is at file offset (j*P + r)*B */
    size_t n = (size_t)BLOCKS * B;
    unsigned char *buf = malloc(n);
    T_ASSERT(buf, "out of memory");
    for (size_t j = 0; j < BLOCKS; j++)
        for (size_t i = 0; i < B; i++)
            buf[j * B + i] = byte_at((j * P + (size_t)t_rank) * B + i);
    /* CALLS independent calls over the first half, one collective call for the rest */
    size_t half = n / 2, per = half / CALLS;
    MPI_Status st;
    for (int c = 0; c < CALLS; c++)
        T_MPI(MPI_File_write_at(fh, (MPI_Offset)(c * per), buf + c * per, (int)per, MPI_BYTE,
                                &st));
    T_MPI(MPI_File_write_at_all(fh, (MPI_Offset)half, buf + half, (int)(n - half), MPI_BYTE,
                                &st));
    free(buf);
    T_MPI(MPI_File_close(&fh));
    MPI_Type_free(&ft);
    MPI_Type_free(&piece);
    t_barrier(MPI_COMM_WORLD);

    if (t_rank == 0) {
        size_t len = 0;
        unsigned char *got = t_read_file(plain, &len);
        T_ASSERT(got && len == (size_t)P * BLOCKS * B, "strided file: %zu bytes, expected %d",
                 len, P * BLOCKS * B);
        for (size_t off = 0; off < len; off++)
            T_ASSERT(got[off] == byte_at(off), "strided file: byte %zu is %d, expected %d", off,
                     got[off], byte_at(off));
        free(got);
        const char *f = "t_intervals_strided.dat";
        T_ASSERT(stat_of("atomio-intervals", f, "shared_bytes") == 0,
                 "the strided views share bytes?");
        T_ASSERT(stat_of("atomio-intervals", f, "view") == 2, "two analyses (open, set_view)");
        T_ASSERT(line_has("atomio-intervals", f, "strategy=interval choice=\"interval: "),
                 "auto did not choose interval for disjoint views");
        long long calls = stat_of("atomio-stats", f, "calls");
        T_ASSERT(calls == P * (CALLS + 1), "calls %lld, expected %d", calls, P * (CALLS + 1));
        T_ASSERT(stat_of("atomio-stats", f, "lock_requests") == 0, "lock requests were made");
        T_ASSERT(stat_of("atomio-stats", f, "lock_free_calls") == calls,
                 "not every call was lock-free");
        T_ASSERT(stat_of("atomio-stats", f, "interval_fallbacks") == 0, "a call fell back");
        printf("strided views, auto: file correct, %lld calls, 0 lock requests, all lock-free\n",
               calls);
        fflush(stdout);
        remove(plain);
    }
}

static void interval_file(void)
{
    char name[] = "t_intervals_ifile.dat";
    const char *plain = t_fresh_path(name);
    MPI_File fh = open_hinted(plain, "interval", "interval");
    MPI_Datatype piece, ft;
    MPI_Type_contiguous(B, MPI_BYTE, &piece);
    MPI_Type_create_resized(piece, 0, (MPI_Aint)B * P, &ft);
    MPI_Type_commit(&ft);
    T_MPI(MPI_File_set_view(fh, (MPI_Offset)t_rank * B, MPI_BYTE, ft, "native", MPI_INFO_NULL));

    size_t n = (size_t)BLOCKS * B;
    unsigned char *buf = malloc(n), *back = malloc(n);
    T_ASSERT(buf && back, "out of memory");
    for (size_t j = 0; j < BLOCKS; j++)
        for (size_t i = 0; i < B; i++)
            buf[j * B + i] = byte_at((j * P + (size_t)t_rank) * B + i);
    size_t per = n / CALLS;
    MPI_Status st;
    for (int c = 0; c < CALLS; c++)
        T_MPI(MPI_File_write_at(fh, (MPI_Offset)(c * per), buf + c * per, (int)per, MPI_BYTE,
                                &st));
    T_MPI(MPI_File_sync(fh));
    memset(back, 0, n);
    T_MPI(MPI_File_read_at(fh, 0, back, (int)n, MPI_BYTE, &st));
    T_ASSERT(memcmp(buf, back, n) == 0, "interval file: rank %d read back other bytes", t_rank);
    /* the layout follows the first view only */
    MPI_Errhandler old;
    MPI_File_get_errhandler(fh, &old);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    int rc = MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    T_ASSERT(cls == MPI_ERR_UNSUPPORTED_OPERATION,
             "a second view of an interval file: class %d, expected "
             "MPI_ERR_UNSUPPORTED_OPERATION", cls);
    MPI_File_set_errhandler(fh, old);
    MPI_Errhandler_free(&old);
    free(buf);
    free(back);
    T_MPI(MPI_File_close(&fh));
    MPI_Type_free(&ft);
    MPI_Type_free(&piece);
    t_barrier(MPI_COMM_WORLD);

    if (t_rank == 0) {
        size_t len = 0, flat = (size_t)P * BLOCKS * B;
        unsigned char *got = t_read_file(plain, &len);
        T_ASSERT(got && len > 0, "no interval file");
        int same = len >= flat;
        for (size_t off = 0; same && off < flat; off++)
            same = got[off] == byte_at(off);
        T_ASSERT(!same, "the file holds the flat layout: the hint was not taken");
        free(got);
        unsigned char *want = malloc(flat);
        T_ASSERT(want, "out of memory");
        for (size_t off = 0; off < flat; off++)
            want[off] = byte_at(off);
        char expect[4096];
        snprintf(expect, sizeof expect, "%s/t_intervals_ifile.expect", t_dir());
        FILE *e = fopen(expect, "wb");
        T_ASSERT(e && fwrite(want, 1, flat, e) == flat && fclose(e) == 0, "writing %s", expect);
        free(want);
        printf("interval file: %zu bytes on disk for %zu of data; read back equal; a second "
               "view refused\n",
               len, flat);
        fflush(stdout);
    }
}

/* Rank r's view: width bytes every P*W from disp. */
static void overlap_view(int r, uint64_t *disp, uint64_t *width)
{
    *disp = (uint64_t)r * W;
    *width = r == 0 ? W + OV : W;
}

static void overlapping_interval(double seconds)
{
    char name[] = "t_intervals_overlap.dat";
    const char *plain = t_fresh_path(name);
    MPI_File fh = open_with(plain, "interval");
    uint64_t disp, width;
    overlap_view(t_rank, &disp, &width);
    MPI_Datatype piece, ft;
    MPI_Type_contiguous((int)width, MPI_BYTE, &piece);
    MPI_Type_create_resized(piece, 0, (MPI_Aint)W * P, &ft);
    MPI_Type_commit(&ft);
    T_MPI(MPI_File_set_view(fh, (MPI_Offset)disp, MPI_BYTE, ft, "native", MPI_INFO_NULL));

    atomio_pattern *one = NULL, *pat = NULL;
    T_ATOMIO(atomio_pattern_bytes(width, &one));
    T_ATOMIO(atomio_pattern_resized((uint64_t)W * P, one, &pat));
    size_t len = (size_t)width * PERIODS;
    unsigned char *buf = malloc(len);
    T_ASSERT(buf, "out of memory");
    t_barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int ops = 0;
    while (ops < MAX_OPS && (ops < MIN_OPS || MPI_Wtime() - t0 < seconds)) {
        T_ORACLE(atomio_tag_view((uint32_t)t_rank, (uint64_t)ops, disp, pat, 0, buf, len));
        MPI_Status st;
        T_MPI(MPI_File_write_at(fh, 0, buf, (int)len, MPI_BYTE, &st));
        ops++;
    }
    free(buf);
    t_barrier(MPI_COMM_WORLD);
    T_MPI(MPI_File_close(&fh));
    MPI_Type_free(&ft);
    MPI_Type_free(&piece);

    int all_ops[P];
    MPI_Gather(&ops, 1, MPI_INT, all_ops, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (t_rank == 0) {
        atomio_verifier *v = NULL;
        T_ORACLE(atomio_verifier_new(&v));
        int total = 0;
        for (int r = 0; r < P; r++) {
            uint64_t d, w;
            overlap_view(r, &d, &w);
            atomio_pattern *o = NULL, *p = NULL;
            T_ATOMIO(atomio_pattern_bytes(w, &o));
            T_ATOMIO(atomio_pattern_resized((uint64_t)W * P, o, &p));
            for (int k = 0; k < all_ops[r]; k++, total++)
                T_ORACLE(atomio_verifier_add_write(v, (uint32_t)r, (uint64_t)k, d, p, 0,
                                                   (size_t)w * PERIODS));
            atomio_pattern_free(p);
            atomio_pattern_free(o);
        }
        int verdict = -1;
        char report[4096];
        T_ORACLE(atomio_verifier_check(v, plain, &verdict, report, sizeof report));
        atomio_verifier_free(v);
        T_ASSERT(verdict == 1, "overlapping views, interval: %d writes: %s: %.600s", total,
                 verdict == 0 ? "VIOLATED" : "inconclusive", report);
        const char *f = "t_intervals_overlap.dat";
        long long shared = stat_of("atomio-intervals", f, "shared_bytes");
        long long bound = stat_of("atomio-intervals", f, "bound");
        /* one OV strip per period below the bound */
        long long strips = bound / (W * P);
        T_ASSERT(shared >= strips * OV && shared <= (strips + 1) * OV,
                 "shared bytes %lld, expected %lld strips of %d (bound %lld)", shared, strips,
                 OV, bound);
        long long calls = stat_of("atomio-stats", f, "calls");
        long long free_calls = stat_of("atomio-stats", f, "lock_free_calls");
        long long locks = stat_of("atomio-stats", f, "lock_requests");
        T_ASSERT(calls == total, "calls %lld, writes %d", calls, total);
        T_ASSERT(free_calls == all_ops[2] + all_ops[3],
                 "lock-free calls %lld: expected exactly ranks 2 and 3's %d", free_calls,
                 all_ops[2] + all_ops[3]);
        T_ASSERT(locks > 0, "the shared strips were written without locks");
        T_ASSERT(stat_of("atomio-stats", f, "interval_fallbacks") == 0, "a call fell back");
        printf("overlapping views, interval: %d writes atomic; shared %lld bytes; %lld of %lld "
               "calls lock-free (ranks 2, 3), %lld lock requests (ranks 0, 1)\n",
               total, shared, free_calls, calls, locks);
        fflush(stdout);
        remove(plain);
    }
    atomio_pattern_free(pat);
    atomio_pattern_free(one);
}

int main(int argc, char **argv)
{
    /* the library reads ATOMIO_STATS once, in MPI_Init: the same value on every rank */
    snprintf(stats_path, sizeof stats_path, "%s/t_intervals.stats", t_dir());
    setenv("ATOMIO_STATS", stats_path, 1);
    t_init(&argc, &argv);
    T_ASSERT(t_size == P, "t_intervals needs %d ranks", P);
    if (t_rank == 0)
        remove(stats_path);
    t_barrier(MPI_COMM_WORLD);
    double seconds = getenv("T_SECONDS") ? atof(getenv("T_SECONDS")) : 0.6;
    strided_auto();
    overlapping_interval(seconds);
    interval_file();
    if (t_rank == 0)
        remove(stats_path);
    t_finalize();
    return 0;
}
