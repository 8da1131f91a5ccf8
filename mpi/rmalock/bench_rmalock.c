/*
 * bench_rmalock.c -- micro-benchmark after section 4 of Thakur/Ross/Latham
 * 2005: microseconds per acquire+release pair, conflicting (every rank locks
 * the same range) and non-conflicting (disjoint ranges), for PAPER,
 * DIRECT_GRANT and fcntl(F_SETLKW) locks on a file, all in ONE mpiexec run.
 *
 *   mpiexec -n 8 ./bench_rmalock [--ranks 2,4,8] [--reps 7] [--total 800]
 *            [--dir /tmp] [--json FILE] [--impls paper,direct-grant,dg-epoch,fcntl]
 *
 * "dg-epoch" is DIRECT_GRANT with RMALOCK_DG_SYNC=epoch (the same MPI
 * exclusive epochs as PAPER): an ablation that separates the protocol's gain
 * from the table mutex's.  Its JSON lines say "impl":"direct-grant",
 * "dg_sync":"epoch".
 *
 * Invariants of the method:
 *   - Metric (the paper's): ranks start together; the time until the LAST
 *     rank finished its `pairs` acquire+release pairs, divided by
 *     ranks * pairs.
 *   - pairs per rank: at most total/ranks, fewer if the untimed warm-up run
 *     predicts a run longer than --target-sec (the slow configurations on an
 *     oversubscribed node would otherwise take minutes), at least --min-pairs.
 *     Fixed per configuration after warm-up; reported as "pairs".
 *   - Each rank count k uses the first k ranks of MPI_COMM_WORLD (a split
 *     communicator); the other ranks sleep in a nonblocking barrier and use
 *     no CPU to speak of.
 *   - Repetitions are interleaved (rep -> impl -> case) so drifting machine
 *     load hits every implementation alike; medians are reported.  One
 *     untimed warm-up run precedes the timed ones for every configuration.
 *   - Same ranges, same pairs, same barriers for every implementation.
 * Output: one JSON line per (impl, case, ranks) on stdout (and --json FILE),
 * then a table.
 */
#define _POSIX_C_SOURCE 200809L

#include "rmalock.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

/* IMPL_DG uses the default table sync (mutex); IMPL_DGE is the ablation with
 * MPI exclusive epochs.  Both report "impl":"direct-grant" and differ in
 * "dg_sync". */
enum { IMPL_PAPER, IMPL_DG, IMPL_DGE, IMPL_FCNTL, NIMPL };
enum { CASE_CONFLICT, CASE_DISJOINT, NCASE };
enum { MAXSIZES = 8, MAXREPS = 64 };

static const char *IMPL_NAME[NIMPL] = {"paper", "direct-grant", "dg-epoch", "fcntl"};
static const char *IMPL_JSON[NIMPL] = {"paper", "direct-grant", "direct-grant", "fcntl"};
static const char *IMPL_SYNC[NIMPL] = {"epoch", "mutex", "epoch", "-"};
static const char *CASE_NAME[NCASE] = {"conflicting", "nonconflicting"};
static const int64_t SPAN = 1 << 20; /* bytes per locked range */

typedef struct {
    int sizes[MAXSIZES], nsizes;
    int reps, total, min_pairs;
    double target_sec;
    int impl_on[NIMPL];
    const char *dir, *json;
} opts_t;

typedef struct {
    double us[MAXREPS];
    double epochs, tries, msgs, bytes; /* summed over timed runs */
    long pairs_done;
    int pairs; /* per rank per timed run */
} result_t;

static int g_rank, g_wsize;

/* ---- small helpers -------------------------------------------------------- */

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* Barrier that does not hog a core.  nap_ns == 0: yield between tests (keeps
 * MPI progress hot, needed on the lock's home rank); else sleep nap_ns. */
static void relaxed_wait(MPI_Request *r, long nap_ns)
{
    int done = 0;
    for (;;) {
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        if (nap_ns == 0)
            sched_yield();
        else
            nap(nap_ns);
    }
}

static void relaxed_barrier(MPI_Comm comm, long nap_ns)
{
    MPI_Request r;
    MPI_Ibarrier(comm, &r);
    relaxed_wait(&r, nap_ns);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double t[MAXREPS];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static const char *fs_name(const char *dir)
{
    struct statfs s;
    if (statfs(dir, &s) != 0)
        return "unknown";
    switch ((unsigned long)s.f_type) {
    case 0x01021994UL: return "tmpfs";
    case 0xEF53UL: return "ext4";
    case 0x794c7630UL: return "overlayfs";
    case 0x58465342UL: return "xfs";
    case 0x9123683EUL: return "btrfs";
    case 0x6969UL: return "nfs";
    default: return "other";
    }
}

/* ---- lock back ends --------------------------------------------------------- */

typedef struct {
    rmalock_t *lk[3]; /* PAPER, DG (mutex), DG (epoch) */
    int fd;
    MPI_Comm comm;
    int rank, size;
} ctx_t;

static int fcntl_lock(int fd, short type, int64_t start, int64_t len)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)start;
    fl.l_len = (off_t)len;
    while (fcntl(fd, F_SETLKW, &fl) != 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

static int one_pair(ctx_t *c, int impl, int64_t start)
{
    if (impl == IMPL_FCNTL) {
        if (fcntl_lock(c->fd, F_WRLCK, start, SPAN) ||
            fcntl_lock(c->fd, F_UNLCK, start, SPAN))
            return -1;
        return 0;
    }
    rmalock_t *lk = c->lk[impl];
    int rc = rmalock_acquire(lk, start, start + SPAN);
    if (rc == RMALOCK_OK)
        rc = rmalock_release(lk);
    if (rc)
        fprintf(stderr, "rank %d: %s\n", g_rank, rmalock_strerror(rc));
    return rc;
}

/* One timed run on the sub-communicator; returns us/pair on rank 0. */
static double run_once(ctx_t *c, int impl, int kase, int pairs, double st[4])
{
    int64_t start = kase == CASE_CONFLICT ? 0 : (int64_t)c->rank * SPAN;
    int home_yield = impl != IMPL_FCNTL && c->rank == 0;
    rmalock_stats_t s0 = {0}, s1 = {0};
    if (impl != IMPL_FCNTL)
        rmalock_get_stats(c->lk[impl], &s0);
    relaxed_barrier(c->comm, 0);
    double t0 = MPI_Wtime();
    for (int i = 0; i < pairs; i++)
        if (one_pair(c, impl, start))
            MPI_Abort(MPI_COMM_WORLD, 3);
    double mine = MPI_Wtime() - t0, worst = 0;
    relaxed_barrier(c->comm, home_yield ? 0 : 50000);
    MPI_Request rq;
    MPI_Ireduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, c->comm, &rq);
    relaxed_wait(&rq, 50000);
    if (impl != IMPL_FCNTL)
        rmalock_get_stats(c->lk[impl], &s1);
    double d[4] = {(double)(s1.epochs - s0.epochs),
                   (double)(s1.failed_tries - s0.failed_tries),
                   (double)(s1.msgs_sent - s0.msgs_sent),
                   (double)(s1.bytes_fetched - s0.bytes_fetched)};
    MPI_Ireduce(d, st, 4, MPI_DOUBLE, MPI_SUM, 0, c->comm, &rq);
    relaxed_wait(&rq, 50000);
    return 1e6 * worst / ((double)c->size * pairs);
}

/* Pairs per rank for the timed runs, decided on rank 0 from the warm-up's
 * us/pair and broadcast to the sub-communicator. */
static int choose_pairs(ctx_t *c, const opts_t *o, double warm_us)
{
    int k = c->size, p = o->total / k;
    if (c->rank == 0 && warm_us > 0) {
        double fit = o->target_sec * 1e6 / (warm_us * k);
        if (fit < p)
            p = (int)fit;
        if (p < o->min_pairs)
            p = o->min_pairs;
    }
    MPI_Request rq;
    MPI_Ibcast(&p, 1, MPI_INT, 0, c->comm, &rq);
    relaxed_wait(&rq, 50000);
    return p;
}

/* ---- setup ---------------------------------------------------------------- */

/* Is `tok` one of the comma-separated items of `list`? */
static int has_token(const char *list, const char *tok)
{
    size_t n = strlen(tok);
    for (const char *p = list; (p = strstr(p, tok)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr, "usage: bench_rmalock [--ranks 2,4,8] [--reps N] "
                        "[--total N] [--min-pairs N] [--target-sec S] "
                        "[--dir DIR] [--json FILE] "
                        "[--impls paper,direct-grant,dg-epoch,fcntl]\n");
    MPI_Finalize();
    exit(2);
}

static void parse(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 7;
    o->total = 800;
    o->min_pairs = 8;
    o->target_sec = 1.0;
    o->dir = "/tmp";
    for (int i = 0; i < NIMPL; i++)
        o->impl_on[i] = 1;
    const char *ranks = "2,4,8";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(a, "--ranks"))
            ranks = v;
        else if (!strcmp(a, "--reps"))
            o->reps = atoi(v);
        else if (!strcmp(a, "--total"))
            o->total = atoi(v);
        else if (!strcmp(a, "--min-pairs"))
            o->min_pairs = atoi(v);
        else if (!strcmp(a, "--target-sec"))
            o->target_sec = atof(v);
        else if (!strcmp(a, "--dir"))
            o->dir = v;
        else if (!strcmp(a, "--json"))
            o->json = v;
        else if (!strcmp(a, "--impls")) {
            for (int k = 0; k < NIMPL; k++)
                o->impl_on[k] = has_token(v, IMPL_NAME[k]);
        } else
            usage();
        i++;
    }
    if (o->reps < 1 || o->reps > MAXREPS || o->total < 1 || o->min_pairs < 1 ||
        o->target_sec <= 0)
        usage();
    char buf[64];
    snprintf(buf, sizeof buf, "%s", ranks);
    for (char *t = strtok(buf, ","); t && o->nsizes < MAXSIZES; t = strtok(NULL, ",")) {
        int k = atoi(t);
        if (k >= 1 && k <= g_wsize)
            o->sizes[o->nsizes++] = k;
        else if (g_rank == 0)
            fprintf(stderr, "skipping --ranks %d (world has %d)\n", k, g_wsize);
    }
    if (!o->nsizes)
        usage();
}

static void open_file(ctx_t *c, const opts_t *o, char *path, size_t n)
{
    if (g_rank == 0) {
        snprintf(path, n, "%s/rmalock_bench_XXXXXX", o->dir);
        int fd = mkstemp(path);
        if (fd < 0) {
            perror("mkstemp");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        close(fd);
    }
    MPI_Bcast(path, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
    c->fd = open(path, O_RDWR);
    if (c->fd < 0) {
        perror("open");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void make_ctx(ctx_t *c, int k)
{
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < k ? 0 : MPI_UNDEFINED, g_rank, &c->comm);
    c->lk[0] = c->lk[1] = c->lk[2] = NULL;
    if (c->comm == MPI_COMM_NULL)
        return;
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    /* RMALOCK_DG_SYNC is read at create time, identically on every rank */
    int bad = rmalock_create(c->comm, RMALOCK_PAPER, 0, &c->lk[0]);
    setenv("RMALOCK_DG_SYNC", "mutex", 1);
    bad = bad || rmalock_create(c->comm, RMALOCK_DIRECT_GRANT, 0, &c->lk[1]);
    setenv("RMALOCK_DG_SYNC", "epoch", 1);
    bad = bad || rmalock_create(c->comm, RMALOCK_DIRECT_GRANT, 0, &c->lk[2]);
    unsetenv("RMALOCK_DG_SYNC");
    if (bad)
        MPI_Abort(MPI_COMM_WORLD, 2);
}

static void free_ctx(ctx_t *c)
{
    if (c->comm == MPI_COMM_NULL)
        return;
    for (int i = 0; i < 3; i++)
        rmalock_free(&c->lk[i]);
    MPI_Comm_free(&c->comm);
}

/* ---- reporting --------------------------------------------------------------- */

static void emit(FILE *jf, const opts_t *o, int impl, int kase, int k,
                 const result_t *r, const char *fs)
{
    char line[2048];
    int n = snprintf(line, sizeof line,
                     "{\"impl\":\"%s\",\"case\":\"%s\",\"ranks\":%d,\"pairs\":%d,"
                     "\"us_per_pair_median\":%.2f,\"us_per_pair_runs\":[",
                     IMPL_JSON[impl], CASE_NAME[kase], k, r->pairs,
                     median(r->us, o->reps));
    for (int i = 0; i < o->reps && n < (int)sizeof line - 64; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s%.2f", i ? "," : "",
                      r->us[i]);
    double pp = (double)r->pairs_done;
    if (impl == IMPL_FCNTL)
        snprintf(line + n, sizeof line - (size_t)n, "],\"fs\":\"%s\"}", fs);
    else
        snprintf(line + n, sizeof line - (size_t)n,
                 "],\"epochs_per_pair\":%.2f,\"failed_tries_per_pair\":%.2f,"
                 "\"msgs_per_pair\":%.2f,\"bytes_fetched_per_epoch\":%.1f,"
                 "\"wait\":\"%s\",\"dg_sync\":\"%s\"}",
                 r->epochs / pp, r->tries / pp, r->msgs / pp,
                 r->epochs > 0 ? r->bytes / r->epochs : 0.0,
                 getenv("RMALOCK_WAIT") ? getenv("RMALOCK_WAIT") : "auto",
                 IMPL_SYNC[impl]);
    printf("%s\n", line);
    if (jf)
        fprintf(jf, "%s\n", line);
}

static void table(const opts_t *o, result_t res[][NIMPL][NCASE])
{
    printf("\nus per acquire+release pair (median of %d; paper's metric: "
           "wall time / (ranks*pairs))\n", o->reps);
    printf("%-15s %5s %10s %13s %10s %9s %9s %10s\n", "case", "ranks", "paper",
           "direct-grant", "dg-epoch", "fcntl", "dg/paper", "dge/paper");
    for (int kase = 0; kase < NCASE; kase++)
        for (int s = 0; s < o->nsizes; s++) {
            double m[NIMPL];
            for (int i = 0; i < NIMPL; i++)
                m[i] = o->impl_on[i] ? median(res[s][i][kase].us, o->reps) : -1;
            printf("%-15s %5d", CASE_NAME[kase], o->sizes[s]);
            static const int w[NIMPL] = {10, 13, 10, 9};
            for (int i = 0; i < NIMPL; i++)
                if (m[i] >= 0)
                    printf(" %*.1f", w[i], m[i]);
                else
                    printf(" %*s", w[i], "-");
            for (int i = IMPL_DG; i <= IMPL_DGE; i++)
                if (m[0] > 0 && m[i] >= 0)
                    printf(" %*.2f", i == IMPL_DG ? 9 : 10, m[i] / m[0]);
                else
                    printf(" %*s", i == IMPL_DG ? 9 : 10, "-");
            printf("\n");
        }
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_wsize);
    opts_t o;
    parse(argc, argv, &o);
    static result_t res[MAXSIZES][NIMPL][NCASE];
    ctx_t ctx[MAXSIZES];
    char path[512];
    open_file(&ctx[0], &o, path, sizeof path);
    int fd = ctx[0].fd;
    for (int s = 0; s < o.nsizes; s++) {
        make_ctx(&ctx[s], o.sizes[s]);
        ctx[s].fd = fd;
    }
    const char *fs = fs_name(o.dir);
    if (g_rank == 0)
        printf("# bench_rmalock: world=%d reps=%d total<=%d pairs/run, "
               "target %.1fs/run, fcntl file %s (%s), RMALOCK_WAIT=%s\n",
               g_wsize, o.reps, o.total, o.target_sec, path, fs,
               getenv("RMALOCK_WAIT") ? getenv("RMALOCK_WAIT") : "auto");

    for (int rep = -1; rep < o.reps; rep++) /* rep -1: warm-up */
        for (int s = 0; s < o.nsizes; s++)
            for (int impl = 0; impl < NIMPL; impl++)
                for (int kase = 0; kase < NCASE; kase++) {
                    if (!o.impl_on[impl])
                        continue;
                    ctx_t *c = &ctx[s];
                    int k = o.sizes[s];
                    result_t *r = &res[s][impl][kase];
                    int pairs = rep < 0 ? (o.total / k + 9) / 10 : r->pairs;
                    if (pairs < 1)
                        pairs = 1;
                    if (c->comm != MPI_COMM_NULL) {
                        double st[4] = {0, 0, 0, 0};
                        double us = run_once(c, impl, kase, pairs, st);
                        if (rep < 0) /* size the timed runs from the warm-up */
                            r->pairs = choose_pairs(c, &o, us);
                        if (g_rank == 0 && getenv("BENCH_VERBOSE"))
                            fprintf(stderr, "rep %d k=%d %s %s pairs=%d: %.1f us/pair"
                                    " epochs=%.0f tries=%.0f\n", rep, k,
                                    IMPL_NAME[impl], CASE_NAME[kase], pairs, us,
                                    st[0], st[1]);
                        if (rep >= 0 && g_rank == 0) {
                            r->us[rep] = us;
                            r->epochs += st[0];
                            r->tries += st[1];
                            r->msgs += st[2];
                            r->bytes += st[3];
                            r->pairs_done += (long)pairs * k;
                        }
                    }
                    relaxed_barrier(MPI_COMM_WORLD, 1000000);
                }

    if (g_rank == 0) {
        FILE *jf = o.json ? fopen(o.json, "w") : NULL;
        for (int s = 0; s < o.nsizes; s++)
            for (int impl = 0; impl < NIMPL; impl++)
                for (int kase = 0; kase < NCASE; kase++)
                    if (o.impl_on[impl])
                        emit(jf, &o, impl, kase, o.sizes[s], &res[s][impl][kase], fs);
        if (jf)
            fclose(jf);
        table(&o, res);
    }
    for (int s = 0; s < o.nsizes; s++)
        free_ctx(&ctx[s]);
    close(fd);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0)
        unlink(path);
    MPI_Finalize();
    return 0;
}
