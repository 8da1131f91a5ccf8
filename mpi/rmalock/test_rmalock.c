/*
 * test_rmalock.c -- tests for rmalock under mpiexec (any number of ranks;
 * the Makefile runs 2, 4 and 8).  Every test runs for both modes.
 *
 * Invariants the tests check:
 *   - mutual exclusion: a non-atomic read-sleep-write of counters in a shared
 *     file, done only while holding an overlapping range, loses no update
 *     (single counter, and 16 counters under random partial overlaps);
 *   - the same test with locking disabled DOES lose updates (negative
 *     control: the test can fail);
 *   - disjoint ranges (adjacent, half-open) are held by all ranks at once;
 *   - a conflicting acquire returns only after the holder released;
 *   - bad input returns the documented error and the lock stays usable;
 *   - under full contention every rank completes; DIRECT_GRANT also never
 *     lets a request overtake an overlapping one that was queued before it
 *     began (FIFO), and never retries;
 *   - the published PAPER algorithm deadlocks on the 3-rank trace from the
 *     header of rmalock.c, and the fixed PAPER mode does not (needs >= 3).
 * A watchdog (alarm) turns a hang into a failure: RMALOCK_TEST_TIMEOUT
 * seconds, default 28.
 *
 * The closing line is "test_rmalock n=N: P passed, F failed, S skipped".
 */
#define _POSIX_C_SOURCE 200809L

#include "rmalock.h"
#include "rmalock_testing.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank, g_size;
static int g_pass, g_fail, g_skip;
static int g_fd = -1;
static char g_path[256];

/* file layout (byte offsets) */
enum { OFF_COUNTER = 4096, OFF_MARKER = 8192, OFF_LOG = 16384 };
enum { NCOUNTERS = 16 };

static const rmalock_mode_t MODES[2] = {RMALOCK_PAPER, RMALOCK_DIRECT_GRANT};

/* ---- utilities ---------------------------------------------------------- */

/* what this rank is doing, for the watchdog message */
static const char *volatile g_test = "startup";
static volatile int g_iter = -1;

static void on_alarm(int sig)
{
    (void)sig;
    char msg[160];
    int n = snprintf(msg, sizeof msg,
                     "test_rmalock: WATCHDOG TIMEOUT rank %d in %s iter %d\n",
                     g_rank, (const char *)g_test, g_iter);
    ssize_t w = write(2, msg, n > 0 ? (size_t)n : 0);
    (void)w;
    _exit(3);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Collectives without busy-polling: with more ranks than cores MPICH's
 * blocking collectives spin and starve the ranks doing real work.  Rank 0 is
 * the home of every test lock and keeps yielding so RMA progress stays hot. */
static void relax_wait(MPI_Request *r)
{
    int done = 0;
    for (;;) {
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        if (g_rank == 0)
            sched_yield();
        else
            sleep_us(50);
    }
}

static void barrier(void)
{
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    relax_wait(&r);
}

static void allreduce(const void *in, void *out, int n, MPI_Datatype t, MPI_Op op)
{
    MPI_Request r;
    MPI_Iallreduce(in, out, n, t, op, MPI_COMM_WORLD, &r);
    relax_wait(&r);
}

static int64_t rd(int64_t off)
{
    int64_t v = 0;
    if (pread(g_fd, &v, sizeof v, off) != (ssize_t)sizeof v)
        return -1;
    return v;
}

static void wr(int64_t off, int64_t v)
{
    if (pwrite(g_fd, &v, sizeof v, off) != (ssize_t)sizeof v)
        fprintf(stderr, "pwrite failed\n");
}

/* Zero the first `bytes` of the shared file (rank 0) and synchronise. */
static void reset_file(int64_t bytes)
{
    if (g_rank == 0) {
        char *z = calloc(1, (size_t)bytes);
        if (!z || pwrite(g_fd, z, (size_t)bytes, 0) != (ssize_t)bytes)
            fprintf(stderr, "reset_file failed\n");
        free(z);
    }
    barrier();
}

/* Every rank calls this with its local failure count. */
static void report(const char *name, rmalock_mode_t mode, int local_fail,
                   double t0, const char *fmt, ...)
{
    int any = 0;
    allreduce(&local_fail, &any, 1, MPI_INT, MPI_MAX);
    if (any)
        g_fail++;
    else
        g_pass++;
    if (g_rank != 0)
        return;
    printf("%s %s[%s] n=%d %.2fs", any ? "FAIL" : "PASS", name,
           rmalock_mode_name(mode), g_size, now() - t0);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        printf("  ");
        vprintf(fmt, ap);
        va_end(ap);
    }
    printf("\n");
    fflush(stdout);
}

static int expect(int got, int want, const char *what)
{
    if (got == want)
        return 0;
    fprintf(stderr, "rank %d: %s: got %d (%s), want %d (%s)\n", g_rank, what,
            got, rmalock_strerror(got), want, rmalock_strerror(want));
    return 1;
}

static rmalock_t *make(rmalock_mode_t mode)
{
    rmalock_t *lk = NULL;
    g_iter = -2; /* -2: inside rmalock_create */
    int rc = rmalock_create(MPI_COMM_WORLD, mode, 0, &lk);
    if (rc) {
        fprintf(stderr, "rank %d: create: %s\n", g_rank, rmalock_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (getenv("RMALOCK_TEST_UNFIXED")) /* debugging experiments only */
        rmalock_test_paper_unfixed(lk, 1);
    return lk;
}

/* Sum a stats field over ranks (for the informational part of a line). */
static double sum_stat(uint64_t v)
{
    double d = (double)v, s = 0;
    allreduce(&d, &s, 1, MPI_DOUBLE, MPI_SUM);
    return s;
}

/* Loop control for the contention tests.  On 2 shared cores a lock hand-off
 * between oversubscribed ranks costs scheduler time slices, so the work is
 * bounded by time, not by count: at least `min` iterations per rank, then
 * more until `budget` seconds (RMALOCK_TEST_BUDGET scales it) or `max`.
 * Expected results are computed from the counts actually done. */
static int keep_going(int i, int min, int max, double t0, double budget)
{
    const char *b = getenv("RMALOCK_TEST_BUDGET");
    double scale = b ? atof(b) : 1.0;
    return i < min || (i < max && now() - t0 < budget * scale);
}

static int64_t sum_i64(int64_t v)
{
    int64_t s = 0;
    allreduce(&v, &s, 1, MPI_INT64_T, MPI_SUM);
    return s;
}

/* ---- tests ---------------------------------------------------------------- */

static void test_bad_input(rmalock_mode_t mode)
{
    double t0 = now();
    int f = 0;
    rmalock_t *lk = make(mode);
    f += expect(rmalock_acquire(lk, 10, 5), RMALOCK_ERR_RANGE, "end<start");
    f += expect(rmalock_acquire(lk, -1, 5), RMALOCK_ERR_RANGE, "start<0");
    f += expect(rmalock_acquire(lk, 7, 7), RMALOCK_ERR_EMPTY, "zero length");
    f += expect(rmalock_acquire_len(lk, INT64_MAX - 5, 10), RMALOCK_ERR_OVERFLOW,
                "offset+len overflow");
    f += expect(rmalock_acquire_len(lk, 0, -1), RMALOCK_ERR_RANGE, "len<0");
    f += expect(rmalock_acquire_len(lk, 5, 0), RMALOCK_ERR_EMPTY, "len 0");
    f += expect(rmalock_acquire(NULL, 0, 1), RMALOCK_ERR_ARG, "NULL lock");
    f += expect(rmalock_release(lk), RMALOCK_ERR_NOT_HELD, "release unheld");
    f += expect(rmalock_release(NULL), RMALOCK_ERR_ARG, "release NULL");
    /* still usable: disjoint, then double acquire, then whole-file ranges */
    int64_t s = 100 * (int64_t)g_rank;
    f += expect(rmalock_acquire(lk, s, s + 100), RMALOCK_OK, "acquire");
    f += expect(rmalock_acquire(lk, s, s + 100), RMALOCK_ERR_HELD, "double acquire");
    f += expect(rmalock_release(lk), RMALOCK_OK, "release");
    f += expect(rmalock_release(lk), RMALOCK_ERR_NOT_HELD, "double release");
    f += expect(rmalock_acquire(lk, 0, RMALOCK_EOF), RMALOCK_OK, "[0,EOF)");
    f += expect(rmalock_release(lk), RMALOCK_OK, "release [0,EOF)");
    f += expect(rmalock_acquire_len(lk, INT64_MAX - 10, 10), RMALOCK_OK,
                "range ending at INT64_MAX");
    f += expect(rmalock_release(lk), RMALOCK_OK, "release tail range");
    f += expect(rmalock_free(&lk), RMALOCK_OK, "free");
    f += expect(lk == NULL, 1, "free clears handle");
    f += expect(rmalock_free(&lk), RMALOCK_ERR_ARG, "free NULL");
    /* bad collective arguments: every rank gets ERR_ARG, nothing created */
    rmalock_t *bad = NULL;
    f += expect(rmalock_create(MPI_COMM_WORLD, (rmalock_mode_t)99, 0, &bad),
                RMALOCK_ERR_ARG, "bad mode");
    f += expect(rmalock_create(MPI_COMM_WORLD, mode, g_size, &bad),
                RMALOCK_ERR_ARG, "home out of range");
    rmalock_mode_t mixed = g_rank == 0 ? RMALOCK_PAPER : RMALOCK_DIRECT_GRANT;
    f += expect(rmalock_create(MPI_COMM_WORLD, mixed, 0, &bad),
                g_size > 1 ? RMALOCK_ERR_ARG : RMALOCK_OK, "modes differ");
    if (bad)
        rmalock_free(&bad);
    f += expect(rmalock_create(MPI_COMM_WORLD, mode, 0, NULL), RMALOCK_ERR_ARG,
                "NULL out");
    f += expect(bad == NULL, 1, "no handle on error");
    report("bad_input", mode, f, t0, NULL);
}

/* Single counter; every range contains it, ranges differ.  disable=1 is the
 * negative control, which must observe lost updates. */
static void test_counter(rmalock_mode_t mode, int disable)
{
    reset_file(OFF_LOG);
    double t0 = now();
    rmalock_t *lk = make(mode);
    rmalock_test_disable_locking(lk, disable);
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)(g_rank + 1) * 7919u;
    int f = 0, i = 0;
    barrier();
    double tl = now();
    g_test = disable ? "negative_control" : "mutex_counter";
    for (i = 0; keep_going(i, 3, 400, tl, disable ? 0.3 : 1.0); i++) {
        g_iter = i;
        int64_t s = OFF_COUNTER - (int64_t)(rng_next(&seed) % 4096);
        int64_t e = OFF_COUNTER + 8 + (int64_t)(rng_next(&seed) % 4096);
        f += expect(rmalock_acquire(lk, s, e), RMALOCK_OK, "acquire");
        int64_t v = rd(OFF_COUNTER);
        sleep_us(100); /* widen the race window */
        wr(OFF_COUNTER, v + 1);
        f += expect(rmalock_release(lk), RMALOCK_OK, "release");
    }
    barrier();
    int64_t want = sum_i64(i), got = rd(OFF_COUNTER);
    if (g_rank == 0)
        f += disable ? (got >= want) : (got != want);
    rmalock_stats_t st;
    rmalock_get_stats(lk, &st);
    double tries = sum_stat(st.failed_tries), ep = sum_stat(st.epochs);
    double tep = sum_stat((uint64_t)(st.epoch_seconds * 1e6)) / 1e6;
    double twt = sum_stat((uint64_t)(st.wait_seconds * 1e6)) / 1e6;
    if (!disable && mode == RMALOCK_DIRECT_GRANT && st.failed_tries)
        f++; /* direct grant never retries */
    rmalock_free(&lk);
    double acq = (double)want;
    report(disable ? "negative_control_no_lock" : "mutex_counter", mode, f, t0,
           "final=%lld expected=%lld%s epochs/acq=%.2f failed_tries/acq=%.2f "
           "ms/acq: in-epochs=%.2f waiting=%.2f",
           (long long)got, (long long)want,
           disable ? (got < want ? " (lost updates detected)" : " (NO LOSS SEEN)")
                   : "",
           ep / acq, tries / acq, 1e3 * tep / acq, 1e3 * twt / acq);
}

/* 16 counters; each acquire covers a random run of them, so overlaps are
 * partial and not transitive. */
static void test_multi(rmalock_mode_t mode)
{
    reset_file(OFF_LOG);
    double t0 = now();
    rmalock_t *lk = make(mode);
    uint64_t seed = 0xD1B54A32D192ED03ull ^ (uint64_t)(g_rank + 3) * 104729u;
    int64_t mine[NCOUNTERS] = {0}, all[NCOUNTERS];
    int f = 0;
    barrier();
    double tl = now();
    g_test = "partial_overlaps";
    for (int it = 0; keep_going(it, 3, 400, tl, 1.0); it++) {
        g_iter = it;
        int a = (int)(rng_next(&seed) % NCOUNTERS);
        int b = a + 1 + (int)(rng_next(&seed) % 4);
        if (b > NCOUNTERS)
            b = NCOUNTERS;
        int64_t buf[NCOUNTERS];
        size_t len = (size_t)(b - a) * sizeof(int64_t);
        f += expect(rmalock_acquire(lk, 8 * a, 8 * b), RMALOCK_OK, "acquire");
        if (pread(g_fd, buf, len, 8 * a) != (ssize_t)len)
            f++;
        sleep_us(50);
        for (int i = 0; i < b - a; i++)
            buf[i]++;
        if (pwrite(g_fd, buf, len, 8 * a) != (ssize_t)len)
            f++;
        f += expect(rmalock_release(lk), RMALOCK_OK, "release");
        for (int i = a; i < b; i++)
            mine[i]++;
    }
    allreduce(mine, all, NCOUNTERS, MPI_INT64_T, MPI_SUM);
    barrier();
    int bad = 0;
    if (g_rank == 0)
        for (int i = 0; i < NCOUNTERS; i++)
            bad += rd(8 * i) != all[i];
    f += bad;
    rmalock_free(&lk);
    report("mutex_partial_overlaps", mode, f, t0, "%d of %d counters wrong", bad,
           NCOUNTERS);
}

/* Wait for a nonblocking barrier for at most `secs`; 1 if it completed. */
static int ibarrier_within(double secs)
{
    MPI_Request r;
    int done = 0;
    double t0 = now();
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    while (!done && now() - t0 < secs) {
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (!done)
            sleep_us(100);
    }
    if (!done) /* cannot cancel a barrier: report and let the watchdog end it */
        fprintf(stderr, "rank %d: ranks with disjoint ranges did not all hold "
                        "at once\n", g_rank);
    return done;
}

static void test_disjoint(rmalock_mode_t mode)
{
    double t0 = now();
    rmalock_t *lk = make(mode);
    int f = 0;
    for (int round = 0; round < 3; round++) {
        int64_t s = 100 * (int64_t)g_rank; /* adjacent: [0,100) [100,200) ... */
        f += expect(rmalock_acquire(lk, s, s + 100), RMALOCK_OK, "acquire");
        f += !ibarrier_within(10.0); /* everyone holds at the same time */
        f += expect(rmalock_release(lk), RMALOCK_OK, "release");
    }
    rmalock_free(&lk);
    report("disjoint_held_concurrently", mode, f, t0, "%d ranks held adjacent "
           "ranges at once, 3 rounds", g_size);
}

static void test_blocks(rmalock_mode_t mode)
{
    reset_file(OFF_LOG);
    double t0 = now();
    rmalock_t *lk = make(mode);
    int f = 0;
    if (g_rank == 0)
        f += expect(rmalock_acquire(lk, 0, 100), RMALOCK_OK, "holder acquire");
    barrier();
    if (g_rank == 0) {
        sleep_us(100000);
        wr(OFF_MARKER, 1);
        f += expect(rmalock_release(lk), RMALOCK_OK, "holder release");
    } else {
        f += expect(rmalock_acquire(lk, 50, 60), RMALOCK_OK, "waiter acquire");
        if (rd(OFF_MARKER) != 1) {
            fprintf(stderr, "rank %d acquired before the holder released\n",
                    g_rank);
            f++;
        }
        f += expect(rmalock_release(lk), RMALOCK_OK, "waiter release");
    }
    rmalock_free(&lk);
    report("conflict_blocks_until_release", mode, f, t0, NULL);
}

/* ---- fairness: log (rank, t_request, t_enqueued) of every acquisition ---- */

static int64_t g_t_enq;
static void fair_hook(rmalock_t *lk, rmalock_hook_point_t pt, void *arg)
{
    (void)lk;
    (void)arg;
    if (pt == RMALOCK_HOOK_BEFORE_WAIT)
        g_t_enq = now_ns(); /* our request is in the queue by now (DG) */
}

/* Count pairs where x was logged before y although y's request was queued
 * (t_enq) before x's request began (t_req): FIFO violations. */
static long count_overtakes(const int64_t *log, int64_t n)
{
    long v = 0;
    for (int64_t x = 0; x < n; x++)
        for (int64_t y = x + 1; y < n; y++)
            if (log[3 * y + 2] < log[3 * x + 1])
                v++;
    return v;
}

static void test_fairness(rmalock_mode_t mode)
{
    reset_file(OFF_LOG + 8 + 3 * 8 * 4096);
    double t0 = now();
    rmalock_t *lk = make(mode);
    rmalock_test_set_hook(lk, fair_hook, NULL);
    int f = 0, i = 0;
    barrier();
    double tl = now();
    g_test = "fairness";
    for (i = 0; keep_going(i, 3, 400, tl, 1.0); i++) {
        g_iter = i;
        int64_t t_req = now_ns();
        g_t_enq = 0;
        f += expect(rmalock_acquire(lk, 0, 64), RMALOCK_OK, "acquire");
        int64_t t_enq = g_t_enq ? g_t_enq : now_ns();
        int64_t idx = rd(OFF_LOG);
        int64_t rec[3] = {g_rank, t_req, t_enq};
        if (pwrite(g_fd, rec, sizeof rec, OFF_LOG + 8 + 24 * idx) != sizeof rec)
            f++;
        wr(OFF_LOG, idx + 1);
        f += expect(rmalock_release(lk), RMALOCK_OK, "release");
    }
    int64_t *done = calloc((size_t)g_size, sizeof *done), mine = i;
    MPI_Request gr;
    MPI_Igather(&mine, 1, MPI_INT64_T, done, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &gr);
    relax_wait(&gr);
    barrier();
    long over = 0;
    int64_t n = rd(OFF_LOG);
    if (g_rank == 0) {
        int64_t *log = malloc((size_t)n * 24);
        int64_t *cnt = calloc((size_t)g_size, sizeof *cnt);
        if (!log || !cnt || pread(g_fd, log, (size_t)n * 24, OFF_LOG + 8) != n * 24)
            f++;
        else {
            for (int64_t k = 0; k < n; k++)
                if (log[3 * k] >= 0 && log[3 * k] < g_size)
                    cnt[log[3 * k]]++;
            for (int r = 0; r < g_size; r++)
                f += cnt[r] != done[r]; /* every acquisition is logged */
            over = count_overtakes(log, n);
            if (mode == RMALOCK_DIRECT_GRANT && over)
                f++; /* DG promises FIFO among overlapping requests */
        }
        free(log);
        free(cnt);
    }
    free(done);
    rmalock_free(&lk);
    report("fairness_full_contention", mode, f, t0,
           "%lld acquisitions, all %d ranks completed, FIFO overtakes=%ld%s",
           (long long)n, g_size, over,
           mode == RMALOCK_PAPER ? " (informational: PAPER is not FIFO)" : "");
}

/* ---- the published PAPER algorithm's lost wake-up (needs 3 ranks) -------- */

enum { ROLE_R = 0, ROLE_A = 1, ROLE_B = 2 };
enum { T_GO = 11, T_ATRIED, T_BRETRIED, T_RELEASE };
struct dl {
    int fails, waits;
};

static void sig(int to, int tag)
{
    int tok = 0;
    MPI_Send(&tok, 1, MPI_INT, to, tag, MPI_COMM_WORLD);
}

static void await(int from, int tag)
{
    int tok = 0;
    MPI_Recv(&tok, 1, MPI_INT, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Forces: B fails on R; A fails on B's transient flag; R wakes only B; B
 * fails again on A's transient flag; then both back off. */
static void dl_hook(rmalock_t *lk, rmalock_hook_point_t pt, void *arg)
{
    (void)lk;
    struct dl *d = arg;
    if (g_rank == ROLE_B && pt == RMALOCK_HOOK_TRY_FAILED) {
        if (++d->fails == 1) {
            sig(ROLE_A, T_GO);
            await(ROLE_A, T_ATRIED);
        } else if (d->fails == 2) {
            sig(ROLE_A, T_BRETRIED);
        }
    } else if (g_rank == ROLE_B && pt == RMALOCK_HOOK_BEFORE_WAIT) {
        if (++d->waits == 1)
            sig(ROLE_R, T_RELEASE);
    } else if (g_rank == ROLE_A && pt == RMALOCK_HOOK_TRY_FAILED) {
        if (++d->fails == 1) {
            sig(ROLE_B, T_ATRIED);
            await(ROLE_B, T_BRETRIED);
        }
    }
}

static void test_paper_deadlock(int unfixed)
{
    const char *name = unfixed ? "published_paper_deadlocks" : "fixed_paper_no_deadlock";
    if (g_size < 3) {
        if (g_rank == 0)
            printf("SKIP %s[paper] n=%d (needs 3 ranks)\n", name, g_size);
        g_skip++;
        return;
    }
    double t0 = now();
    g_test = name;
    g_iter = -1;
    rmalock_t *lk = make(RMALOCK_PAPER);
    struct dl d = {0, 0};
    rmalock_test_paper_unfixed(lk, unfixed);
    rmalock_test_set_wait_timeout(lk, 1.5);
    rmalock_test_set_hook(lk, dl_hook, &d);
    int f = 0, rc = RMALOCK_OK;
    if (g_rank == ROLE_R)
        f += expect(rmalock_acquire(lk, 12, 20), RMALOCK_OK, "R acquire");
    barrier();
    if (g_rank == ROLE_R) {
        await(ROLE_B, T_RELEASE);
        f += expect(rmalock_release(lk), RMALOCK_OK, "R release");
    } else if (g_rank == ROLE_A || g_rank == ROLE_B) {
        if (g_rank == ROLE_A)
            await(ROLE_B, T_GO);
        rc = g_rank == ROLE_A ? rmalock_acquire(lk, 0, 10)
                              : rmalock_acquire(lk, 5, 15);
        f += expect(rc, unfixed ? RMALOCK_ERR_TIMEOUT : RMALOCK_OK,
                    g_rank == ROLE_A ? "A acquire" : "B acquire");
        if (rc == RMALOCK_OK)
            rmalock_release(lk);
    }
    rmalock_free(&lk);
    report(name, RMALOCK_PAPER, f, t0,
           unfixed ? "both waiters stuck with nothing held (as predicted)"
                   : "both waiters acquired");
}

/* RMALOCK_TEST_ONLY=substring and RMALOCK_TEST_MODE=paper|direct-grant
 * select a subset (for debugging); by default everything runs. */
static int want(const char *name)
{
    const char *only = getenv("RMALOCK_TEST_ONLY");
    return !only || strstr(name, only) != NULL;
}

static int want_mode(rmalock_mode_t mode)
{
    const char *m = getenv("RMALOCK_TEST_MODE");
    return !m || strcmp(m, rmalock_mode_name(mode)) == 0;
}

/* ---- main ----------------------------------------------------------------- */

static void open_shared_file(void)
{
    if (g_rank == 0) {
        const char *dir = getenv("RMALOCK_TEST_DIR");
        snprintf(g_path, sizeof g_path, "%s/rmalock_test_XXXXXX", dir ? dir : "/tmp");
        int fd = mkstemp(g_path);
        if (fd < 0) {
            perror("mkstemp");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        close(fd);
    }
    MPI_Bcast(g_path, sizeof g_path, MPI_CHAR, 0, MPI_COMM_WORLD);
    g_fd = open(g_path, O_RDWR);
    if (g_fd < 0) {
        perror("open");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const char *to = getenv("RMALOCK_TEST_TIMEOUT");
    signal(SIGALRM, on_alarm);
    alarm((unsigned)(to ? atoi(to) : 28));
    open_shared_file();
    double t0 = now();

    for (int m = 0; m < 2; m++) {
        if (!want_mode(MODES[m]))
            continue;
        if (want("bad_input"))
            test_bad_input(MODES[m]);
        if (want("disjoint"))
            test_disjoint(MODES[m]);
        if (want("blocks"))
            test_blocks(MODES[m]);
        if (want("mutex_counter"))
            test_counter(MODES[m], 0);
        if (want("negative_control"))
            test_counter(MODES[m], 1);
        if (want("partial"))
            test_multi(MODES[m]);
        if (want("fairness"))
            test_fairness(MODES[m]);
    }
    if (want_mode(RMALOCK_PAPER) && want("deadlock")) {
        test_paper_deadlock(1);
        test_paper_deadlock(0);
    }

    close(g_fd);
    barrier();
    if (g_rank == 0) {
        unlink(g_path);
        printf("test_rmalock n=%d (%.1fs): %d passed, %d failed, %d skipped\n",
               g_size, now() - t0, g_pass, g_fail, g_skip);
    }
    MPI_Finalize();
    return g_fail ? 1 : 0;
}
