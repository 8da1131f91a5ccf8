/*
 * rmalock.c -- byte-range locks on MPI passive-target RMA (see rmalock.h and
 * README.md, which has the full correctness arguments).
 *
 * All state lives in one window on the home rank.  Every read-modify-write
 * of that state happens inside a table critical section at the home: an
 * MPI_LOCK_EXCLUSIVE epoch (PAPER; DIRECT_GRANT with RMALOCK_DG_SYNC=epoch)
 * or an atomic test-and-set mutex (DIRECT_GRANT default).  Critical sections
 * never overlap, so they are totally ordered; the arguments use that order.
 *
 * PAPER mode (Thakur/Ross/Latham 2005, Figs. 3 and 4).  Window: one slot of
 * five int64 per rank, {flag, seq, start, end, rel} (seq = tries, rel =
 * releases: our additions).
 *   try:      one epoch: put own slot {1, ++seq, start, end, rel}, get the other
 *             slots with an indexed datatype (put and get touch disjoint
 *             words: no same-location put/get in one epoch, as the paper
 *             requires).  Acquired iff no other slot has flag 1 and an
 *             overlapping range ("blockers" otherwise).
 *   back off: one epoch: put own flag = 0 (range stays posted), get the
 *             other slots again; then wait for a WAKE message; then retry.
 *   release:  one epoch: put {0, seq, -1, -1, ++rel}, get the others; WAKE every
 *             rank whose posted range overlaps, flag ignored, in the order
 *             rank+1, ..., size-1, 0, ..., rank-1.
 *   Invariant (mutual exclusion): a holder's flag is 1 from its successful
 *     try to its release; of two overlapping holders the later try would
 *     have seen the earlier one's flag.
 *   The published version can deadlock (Pervez et al. found one by model
 *   checking): a try may fail only on *transient* flags (tries that are about
 *   to back off), and transients never send WAKEs.  3-rank trace, tested:
 *     R holds [12,20).  B [5,15) fails on R.  A [0,10) fails on B's transient
 *     flag.  B backs off.  R releases, wakes only B (A does not overlap R).
 *     B retries, fails on A's still-set flag.  Both back off and wait
 *     forever; nothing is held.
 *   Fixes (all on by default; rmalock_testing.h can turn them off):
 *   F1 A rank P is "steady" for us if its flag was 1 with the same seq at our
 *      try and at our back-off: it was 1 throughout.  After backing off we
 *      wait only if a WAKE is owed to us: some blocker is steady, or some
 *      blocker's rel moved (it released after our try; that release saw our
 *      posted, overlapping range and woke us).
 *   F2 At back-off we WAKE every rank W whose range overlaps ours, whose seq
 *      moved since our try (W tried while our flag was 1) and whose flag is
 *      now 0 (W already backed off, so it may be waiting on us) -- unless
 *      some other steady rank overlaps W (that rank will wake W).
 *      Lemma: if W waits, relying on a steady blocker P, P later sends W a
 *      WAKE: by release (W's range is still posted), or by its back-off (W's
 *      seq moved, W's flag is 0) unless covered by a steadier rank, whose
 *      window strictly contains P's -- induction on try order.
 *   F3 If no WAKE is owed (all blockers merely backed off): retry after a random
 *      delay, uniform in [0, 2*avg_epoch*2^k), k = consecutive delays (<= 6).
 *      Without it 8 ranks on 2 cores livelocked (1 success in 160 tries).
 *   F4 Before each try, consume WAKEs already delivered (that try satisfies
 *      them); otherwise stale WAKEs pile up and end later waits for nothing.
 *   Not FIFO: retries race; a releaser may re-acquire first (barging).
 *
 * DIRECT_GRANT mode.  Window: word 0 = table mutex, word 1 = count, then a
 *   dense array of `count` active entries {start, end, rank, state}, state
 *   HELD or WAITING, in arrival order (removal shifts down).
 *   Each operation is one table critical section doing a read-modify-write:
 *   get count + the first k entries, flush, get the rest if count > k, flush,
 *   compute locally, put the new count + entries.  Flush completes the gets
 *   before any put is issued, so no put is concurrent with a get of the same
 *   words; the critical section keeps every other rank out in between.
 *   Critical section: EPOCH = MPI exclusive lock epoch (MPI: "only the
 *     windows ... can be accessed by those processes (and by no other
 *     processes) during that epoch").  MUTEX = inside one lifetime
 *     MPI_Win_lock_all epoch, test-and-set MPI_Fetch_and_op(MPI_REPLACE, 1)
 *     on word 0 with randomized exponential back-off; release: flush (our
 *     table puts complete at the home), then Fetch_and_op(MPI_REPLACE, 0),
 *     flush.  Word 0 is touched only by MPI_REPLACE atomics (window info
 *     accumulate_ops=same_op), never by a plain get/put.  A rank entering
 *     after us saw 0 only after our release completed, and issues its gets
 *     only after that, so it reads our completed puts.
 *   acquire:  append own entry: HELD if it overlaps no active entry (held OR
 *             waiting), else WAITING and block for a GRANT message.
 *   release:  remove own entry; in arrival order mark HELD every waiter that
 *             overlaps no HELD entry (including those granted in this pass)
 *             and no earlier entry still WAITING; store; leave the critical
 *             section; send GRANT to the newly granted ranks.
 *   Invariant M: HELD entries are pairwise disjoint, and a rank believes it
 *     holds only while its entry is HELD (its own critical section set it, or
 *     a GRANT arrived, sent after the granting critical section ended).
 *   Invariant W: after each critical section every WAITING entry overlaps a
 *     HELD entry or an earlier WAITING entry.  So the earliest waiter overlaps
 *     only HELD entries and is granted by the release of the last of them;
 *     by induction every waiter is granted: no deadlock, no starvation,
 *     overlapping requests served in arrival order, exactly one GRANT per
 *     WAITING entry (no stale messages), and waiters never retry.
 *   Fetch cost is O(active entries) (k adapts to the last count seen), not
 *     one slot per rank as in PAPER.
 *
 * Messages use a private duplicate of the user's communicator and MPI_Isend,
 * so a releaser never blocks on a rank that is not receiving.
 */
#define _POSIX_C_SOURCE 200809L

#include "rmalock.h"
#include "rmalock_testing.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { TAG_WAKE = 1, TAG_GRANT = 2 };
enum { WAIT_SPIN = 0, WAIT_YIELD = 1, WAIT_SLEEP = 2 };

/* PAPER slot layout, in int64 words. */
enum { P_FLAG = 0, P_SEQ = 1, P_START = 2, P_END = 3, P_REL = 4, P_SLOT = 5 };
/* DIRECT_GRANT layout, in int64 words. */
enum { D_MUTEX = 0, D_COUNT = 1, D_HDR = 2 };
/* How DIRECT_GRANT makes its read-modify-write of the table atomic. */
enum { DG_SYNC_MUTEX = 1, DG_SYNC_EPOCH = 2 };
enum { E_START = 0, E_END = 1, E_RANK = 2, E_STATE = 3, E_SIZE = 4 };
enum { ST_HELD = 1, ST_WAITING = 2 };

struct rmalock {
    MPI_Comm comm; /* private duplicate, MPI_ERRORS_RETURN */
    MPI_Win win;
    int64_t *base; /* window memory (non-empty on home only) */
    int rank, size, home;
    rmalock_mode_t mode;

    int holding;
    int64_t hstart, hend;

    /* PAPER */
    int64_t seq;              /* own attempt counter */
    int64_t *others;          /* (size-1) slots fetched from the home */
    int64_t *snap_seq;        /* seq of each rank seen by our last try */
    int64_t *snap_flag;       /* flag of each rank seen by our last try */
    int64_t *snap_rel;        /* release count of each rank at our last try */
    int64_t rel;              /* own release counter */
    char *blocker;            /* 1: rank blocked our last try */
    int backoffs;             /* consecutive randomized back-offs */
    MPI_Datatype others_type; /* all slots but ours */

    /* DIRECT_GRANT */
    int64_t *table; /* local copy: header + size entries */
    int spec;       /* entries fetched speculatively with the header */
    int *granted;   /* ranks granted by one release */

    /* messages */
    MPI_Request *sreq;
    int nsreq, capsreq;
    int64_t *sent; /* messages sent, per destination */
    int64_t received;

    int wait_policy;
    double epoch_avg; /* moving average of critical-section time (s) */
    uint64_t rng;     /* xorshift state for back-off jitter */
    rmalock_stats_t st;
    double t_epoch0; /* MPI_Wtime at epoch_begin */
    int dg_sync;     /* DG_SYNC_MUTEX or DG_SYNC_EPOCH */
    int lock_all;    /* 1 while our MPI_Win_lock_all epoch is open */

    /* test-only */
    int t_disable, t_unfixed;
    double t_timeout;
    rmalock_hook_fn t_hook;
    void *t_arg;
};

#define MPI_TRY(call)                                                         \
    do {                                                                      \
        if ((call) != MPI_SUCCESS)                                            \
            return RMALOCK_ERR_MPI;                                           \
    } while (0)

/* ---- small helpers ---------------------------------------------------- */

/* RMALOCK_TRACE=1: PAPER-mode events on stderr (debugging only). */
static int g_trace = -1;
static void trace(rmalock_t *lk, const char *fmt, ...)
{
    if (g_trace < 0)
        g_trace = getenv("RMALOCK_TRACE") != NULL;
    if (!g_trace)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(buf, sizeof buf, "%.6f r%d ", MPI_Wtime(), lk->rank);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", buf);
}

static int overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1)
{
    /* half-open; the "no range" marker [-1,-1) overlaps nothing */
    return a0 < b1 && b0 < a1;
}

static int check_range(int64_t start, int64_t end)
{
    if (start < 0 || end < start)
        return RMALOCK_ERR_RANGE;
    if (end == start)
        return RMALOCK_ERR_EMPTY;
    return RMALOCK_OK;
}

static void hook(rmalock_t *lk, rmalock_hook_point_t point)
{
    if (lk->t_hook)
        lk->t_hook(lk, point, lk->t_arg);
}

static void relax(int policy)
{
    if (policy == WAIT_YIELD) {
        sched_yield();
    } else if (policy == WAIT_SLEEP) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

static int epoch_begin(rmalock_t *lk)
{
    lk->st.epochs++;
    lk->t_epoch0 = MPI_Wtime();
    MPI_TRY(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, lk->home, 0, lk->win));
    return RMALOCK_OK;
}

static int epoch_end(rmalock_t *lk)
{
    MPI_TRY(MPI_Win_unlock(lk->home, lk->win));
    double dt = MPI_Wtime() - lk->t_epoch0;
    lk->st.epoch_seconds += dt;
    lk->epoch_avg = lk->epoch_avg > 0 ? 0.9 * lk->epoch_avg + 0.1 * dt : dt;
    return RMALOCK_OK;
}

/* ---- messages ----------------------------------------------------------- */

static void reap_sends(rmalock_t *lk)
{
    int kept = 0;
    for (int i = 0; i < lk->nsreq; i++) {
        int done = 0;
        if (MPI_Test(&lk->sreq[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            done = 0; /* keep it; rmalock_free waits for it */
        if (!done)
            lk->sreq[kept++] = lk->sreq[i];
    }
    lk->nsreq = kept;
}

static int send_msg(rmalock_t *lk, int dest, int tag)
{
    reap_sends(lk);
    if (lk->nsreq == lk->capsreq) {
        int cap = lk->capsreq ? 2 * lk->capsreq : 16;
        MPI_Request *r = realloc(lk->sreq, (size_t)cap * sizeof *r);
        if (!r)
            return RMALOCK_ERR_NOMEM;
        lk->sreq = r;
        lk->capsreq = cap;
    }
    MPI_TRY(MPI_Isend(NULL, 0, MPI_BYTE, dest, tag, lk->comm,
                      &lk->sreq[lk->nsreq]));
    lk->nsreq++;
    lk->sent[dest]++;
    lk->st.msgs_sent++;
    return RMALOCK_OK;
}

/* Complete request r, polling as `policy` says (see parse_wait_policy).
 * timeout > 0: cancel after that many seconds and return RMALOCK_ERR_TIMEOUT
 * if nothing matched. */
static int wait_poll(int policy, MPI_Request *r, double timeout)
{
    MPI_Status s;
    int done = 0;
    if (policy == WAIT_SPIN && timeout <= 0) {
        MPI_TRY(MPI_Wait(r, MPI_STATUS_IGNORE));
        return RMALOCK_OK;
    }
    double t0 = MPI_Wtime();
    for (;;) {
        MPI_TRY(MPI_Test(r, &done, MPI_STATUS_IGNORE));
        if (done)
            return RMALOCK_OK;
        if (timeout > 0 && MPI_Wtime() - t0 > timeout) {
            int cancelled = 0;
            MPI_TRY(MPI_Cancel(r));
            MPI_TRY(MPI_Wait(r, &s));
            MPI_TRY(MPI_Test_cancelled(&s, &cancelled));
            return cancelled ? RMALOCK_ERR_TIMEOUT : RMALOCK_OK;
        }
        relax(policy);
    }
}

/* Block for one message with `tag` from any rank (see wait_poll). */
static int wait_msg(rmalock_t *lk, int tag, double timeout)
{
    MPI_Request r;
    double t0 = MPI_Wtime();
    lk->st.waits++;
    MPI_TRY(MPI_Irecv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, tag, lk->comm, &r));
    trace(lk, "wait tag=%d", tag);
    int rc = wait_poll(lk->wait_policy, &r, timeout);
    trace(lk, "woken rc=%d", rc);
    lk->st.wait_seconds += MPI_Wtime() - t0;
    if (rc == RMALOCK_OK)
        lk->received++;
    return rc;
}

/* Absorb every message still addressed to this rank (collective). */
static int drain_messages(rmalock_t *lk)
{
    int64_t incoming = 0;
    MPI_Request r;
    MPI_TRY(MPI_Ireduce_scatter_block(lk->sent, &incoming, 1, MPI_INT64_T,
                                      MPI_SUM, lk->comm, &r));
    int rc = wait_poll(lk->wait_policy, &r, 0);
    if (rc)
        return rc;
    while (lk->received < incoming) {
        MPI_TRY(MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                         lk->comm, MPI_STATUS_IGNORE));
        lk->received++;
    }
    /* one by one: GCC 12 misreads MPICH's MPI_STATUSES_IGNORE in Waitall */
    for (int i = 0; i < lk->nsreq; i++)
        MPI_TRY(MPI_Wait(&lk->sreq[i], MPI_STATUS_IGNORE));
    lk->nsreq = 0;
    return RMALOCK_OK;
}

/* ---- PAPER mode --------------------------------------------------------- */

static int64_t *other_slot(rmalock_t *lk, int j)
{
    return lk->others + (size_t)P_SLOT * (size_t)(j < lk->rank ? j : j - 1);
}

/* Put `count` words of our slot starting at `word`; optionally get the other
 * slots in the same epoch (disjoint locations). */
static int paper_epoch(rmalock_t *lk, const int64_t *val, int word, int count,
                       int get_others)
{
    int rc = epoch_begin(lk);
    if (rc)
        return rc;
    MPI_Aint disp = (MPI_Aint)P_SLOT * lk->rank + word;
    if (MPI_Put(val, count, MPI_INT64_T, lk->home, disp, count, MPI_INT64_T,
                lk->win) != MPI_SUCCESS)
        rc = RMALOCK_ERR_MPI;
    if (!rc && get_others && lk->size > 1) {
        if (MPI_Get(lk->others, P_SLOT * (lk->size - 1), MPI_INT64_T, lk->home,
                    0, 1, lk->others_type, lk->win) != MPI_SUCCESS)
            rc = RMALOCK_ERR_MPI;
        lk->st.bytes_fetched += (uint64_t)P_SLOT * 8u * (uint64_t)(lk->size - 1);
    }
    int rc2 = epoch_end(lk);
    return rc ? rc : rc2;
}

/* Fig. 3 body: returns 1 in *conflict if the attempt failed. */
static int paper_try(rmalock_t *lk, int64_t start, int64_t end, int *conflict)
{
    int64_t val[P_SLOT] = {1, ++lk->seq, start, end, lk->rel};
    int rc = paper_epoch(lk, val, 0, P_SLOT, 1);
    if (rc)
        return rc;
    *conflict = 0;
    for (int j = 0; j < lk->size; j++) {
        if (j == lk->rank)
            continue;
        const int64_t *o = other_slot(lk, j);
        lk->snap_seq[j] = o[P_SEQ];
        lk->snap_flag[j] = o[P_FLAG];
        lk->snap_rel[j] = o[P_REL];
        lk->blocker[j] = o[P_FLAG] == 1 && overlap(o[P_START], o[P_END], start, end);
        *conflict |= lk->blocker[j];
        trace(lk, "  try-snap j=%d flag=%lld seq=%lld [%lld,%lld)", j,
              (long long)o[P_FLAG], (long long)o[P_SEQ], (long long)o[P_START],
              (long long)o[P_END]);
    }
    trace(lk, "try seq=%lld [%lld,%lld) conflict=%d", (long long)lk->seq,
          (long long)start, (long long)end, *conflict);
    return RMALOCK_OK;
}

/* Back-off helper: was rank p's flag 1 with one and the same seq both at our
 * try and now?  Then it was 1 throughout our flag-1 window. */
static int paper_flag_steady(rmalock_t *lk, int p)
{
    const int64_t *o = other_slot(lk, p);
    return lk->snap_flag[p] == 1 && o[P_FLAG] == 1 && o[P_SEQ] == lk->snap_seq[p];
}

/* Back-off helper: W tried during our window; if some other rank P had its
 * flag steadily 1 over our window and overlaps W, P was also blocking W and
 * P's own release or back-off will wake W, so we need not. */
static int paper_covered(rmalock_t *lk, int w)
{
    const int64_t *ow = other_slot(lk, w);
    for (int p = 0; p < lk->size; p++) {
        if (p == lk->rank || p == w || !paper_flag_steady(lk, p))
            continue;
        const int64_t *op = other_slot(lk, p);
        if (overlap(op[P_START], op[P_END], ow[P_START], ow[P_END]))
            return 1;
    }
    return 0;
}

/* Wake, in the paper's fair order, ranks whose posted range overlaps ours.
 * backoff: only ranks that tried during our flag-1 window (seq moved since
 * our try), have already backed off (flag 0: they may be waiting on us), and
 * are not covered by a steadier blocker. */
static int paper_wake(rmalock_t *lk, int64_t start, int64_t end, int backoff)
{
    for (int d = 1; d < lk->size; d++) {
        int j = (lk->rank + d) % lk->size;
        const int64_t *o = other_slot(lk, j);
        if (!overlap(o[P_START], o[P_END], start, end))
            continue;
        if (backoff && (o[P_SEQ] == lk->snap_seq[j] || o[P_FLAG] != 0 ||
                        paper_covered(lk, j)))
            continue;
        trace(lk, "wake %d (%s)", j, backoff ? "backoff" : "release");
        int rc = send_msg(lk, j, TAG_WAKE);
        if (rc)
            return rc;
    }
    return RMALOCK_OK;
}

/* Back-off epoch.  *wait = 1 iff a WAKE is owed to us: some blocker is
 * still steadily flagged (it will release or back off and wake us, lemma F2)
 * or has released since our try (its release saw our posted range).
 * Otherwise every blocker merely backed off and may never wake us. */
static int paper_backoff(rmalock_t *lk, int64_t start, int64_t end, int *wait)
{
    static const int64_t zero = 0;
    int fix = !lk->t_unfixed;
    int rc = paper_epoch(lk, &zero, P_FLAG, 1, fix);
    *wait = 1;
    if (rc || !fix)
        return rc;
    rc = paper_wake(lk, start, end, 1);
    *wait = 0;
    for (int j = 0; j < lk->size && !*wait; j++)
        *wait = j != lk->rank && lk->blocker[j] &&
                (paper_flag_steady(lk, j) ||
                 other_slot(lk, j)[P_REL] != lk->snap_rel[j]);
    return rc;
}

/* Test-only: after a timed-out wait, withdraw the posted range. */
static int paper_withdraw(rmalock_t *lk)
{
    int64_t val[P_SLOT] = {0, lk->seq, -1, -1, lk->rel};
    return paper_epoch(lk, val, 0, P_SLOT, 0);
}

/* Consume wake-ups already delivered: the try that follows satisfies them,
 * and left in the queue they would end a later wait for no reason. */
static int paper_drain_wakes(rmalock_t *lk)
{
    for (;;) {
        int flag = 0;
        MPI_TRY(MPI_Iprobe(MPI_ANY_SOURCE, TAG_WAKE, lk->comm, &flag,
                           MPI_STATUS_IGNORE));
        if (!flag)
            return RMALOCK_OK;
        MPI_TRY(MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, TAG_WAKE, lk->comm,
                         MPI_STATUS_IGNORE));
        lk->received++;
    }
}

/* All our blockers are gone, so no wake-up is owed to us: retry after a
 * randomized, exponentially growing delay (in units of recent epoch time) so
 * that ranks stuck only on each other's transient flags stop colliding. */
static double rng_unit(rmalock_t *lk);
static int progress_delay(rmalock_t *lk, double seconds);

static int paper_random_delay(rmalock_t *lk)
{
    double base = 2.0 * (lk->epoch_avg > 10e-6 ? lk->epoch_avg : 10e-6);
    int k = lk->backoffs < 6 ? lk->backoffs : 6;
    lk->backoffs++;
    return progress_delay(lk, rng_unit(lk) * base * (double)(1 << k));
}

static int paper_acquire(rmalock_t *lk, int64_t start, int64_t end)
{
    int fix = !lk->t_unfixed;
    lk->backoffs = 0;
    for (;;) {
        int conflict = 0, wait = 1;
        int rc = fix ? paper_drain_wakes(lk) : RMALOCK_OK;
        if (!rc)
            rc = paper_try(lk, start, end, &conflict);
        if (rc || !conflict)
            return rc;
        lk->st.failed_tries++;
        hook(lk, RMALOCK_HOOK_TRY_FAILED);
        rc = paper_backoff(lk, start, end, &wait);
        if (rc)
            return rc;
        if (!wait) {
            rc = paper_random_delay(lk);
            if (rc)
                return rc;
            continue;
        }
        hook(lk, RMALOCK_HOOK_BEFORE_WAIT);
        rc = wait_msg(lk, TAG_WAKE, lk->t_timeout);
        if (rc == RMALOCK_ERR_TIMEOUT) {
            int rc2 = paper_withdraw(lk);
            return rc2 ? rc2 : rc;
        }
        if (rc)
            return rc;
    }
}

static int paper_release(rmalock_t *lk)
{
    int64_t val[P_SLOT] = {0, lk->seq, -1, -1, ++lk->rel};
    int rc = paper_epoch(lk, val, 0, P_SLOT, 1);
    if (rc)
        return rc;
    return paper_wake(lk, lk->hstart, lk->hend, 0);
}

/* ---- DIRECT_GRANT mode -------------------------------------------------- */

static int64_t *entry(rmalock_t *lk, int i)
{
    return lk->table + D_HDR + (size_t)E_SIZE * (size_t)i;
}

/* Table access never touches the mutex word with a plain get/put: in the
 * mutex variant that word is only ever accessed by MPI_REPLACE atomics. */

/* Inside the table critical section: read the count and all active entries
 * into lk->table (fetching k entries speculatively with the count). */
static int dg_fetch(rmalock_t *lk, int *count)
{
    int k = lk->spec;
    int words = (D_HDR - D_COUNT) + E_SIZE * k;
    MPI_TRY(MPI_Get(lk->table + D_COUNT, words, MPI_INT64_T, lk->home, D_COUNT,
                    words, MPI_INT64_T, lk->win));
    MPI_TRY(MPI_Win_flush(lk->home, lk->win));
    int64_t n = lk->table[D_COUNT];
    if (n < 0 || n > lk->size)
        return RMALOCK_ERR_INTERNAL;
    if (n > k) {
        int more = E_SIZE * (int)(n - k);
        MPI_TRY(MPI_Get(entry(lk, k), more, MPI_INT64_T, lk->home,
                        D_HDR + E_SIZE * k, more, MPI_INT64_T, lk->win));
        MPI_TRY(MPI_Win_flush(lk->home, lk->win));
        words += more;
    }
    lk->st.bytes_fetched += 8u * (uint64_t)words;
    /* next time fetch what we saw plus slack, at least 4, at most all */
    int next = (int)n + 2;
    if (next < 4)
        next = 4;
    lk->spec = next < lk->size ? next : lk->size;
    *count = (int)n;
    return RMALOCK_OK;
}

/* Inside the table critical section: write back count and entries. */
static int dg_store(rmalock_t *lk, int count)
{
    lk->table[D_COUNT] = count;
    int words = (D_HDR - D_COUNT) + E_SIZE * count;
    MPI_TRY(MPI_Put(lk->table + D_COUNT, words, MPI_INT64_T, lk->home, D_COUNT,
                    words, MPI_INT64_T, lk->win));
    return RMALOCK_OK;
}

/* Wait about `seconds` while keeping MPI progress going (the home rank must
 * keep serving other ranks' RMA), polling as the wait policy says. */
static int progress_delay(rmalock_t *lk, double seconds)
{
    double until = MPI_Wtime() + seconds;
    int policy = lk->wait_policy == WAIT_SPIN ? WAIT_YIELD : lk->wait_policy;
    do {
        int flag = 0;
        MPI_TRY(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, lk->comm, &flag,
                           MPI_STATUS_IGNORE));
        relax(policy);
    } while (MPI_Wtime() < until);
    return RMALOCK_OK;
}

/* Uniform random number in [0, 1). */
static double rng_unit(rmalock_t *lk)
{
    lk->rng ^= lk->rng << 13;
    lk->rng ^= lk->rng >> 7;
    lk->rng ^= lk->rng << 17;
    return (double)(lk->rng >> 11) / 9007199254740992.0;
}

/* Enter the table critical section.  EPOCH: an MPI exclusive lock epoch.
 * MUTEX: test-and-set on the mutex word with MPI_Fetch_and_op(MPI_REPLACE)
 * inside our lifetime MPI_Win_lock_all epoch, with randomized exponential
 * back-off.  Unlike MPI's lock queue, the mutex goes to a rank that is
 * running when it asks, so no hand-off waits for a descheduled rank. */
static int dg_lock_table(rmalock_t *lk)
{
    if (lk->dg_sync == DG_SYNC_EPOCH)
        return epoch_begin(lk);
    static const int64_t one = 1;
    lk->st.epochs++;
    lk->t_epoch0 = MPI_Wtime();
    for (int k = 0;; k++) {
        int64_t old = -1;
        MPI_TRY(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, lk->home, D_MUTEX,
                                 MPI_REPLACE, lk->win));
        MPI_TRY(MPI_Win_flush(lk->home, lk->win));
        if (old == 0)
            return RMALOCK_OK;
        lk->st.lock_spins++;
        double base = lk->epoch_avg > 5e-6 ? lk->epoch_avg : 5e-6;
        int rc = progress_delay(lk, rng_unit(lk) * base * (double)(1 << (k < 5 ? k : 5)));
        if (rc)
            return rc;
    }
}

/* Leave the table critical section.  MUTEX: the flush completes our table
 * puts at the home before the release can be seen by anyone. */
static int dg_unlock_table(rmalock_t *lk)
{
    if (lk->dg_sync == DG_SYNC_EPOCH)
        return epoch_end(lk);
    static const int64_t zero = 0;
    int64_t old = 0;
    MPI_TRY(MPI_Win_flush(lk->home, lk->win));
    MPI_TRY(MPI_Fetch_and_op(&zero, &old, MPI_INT64_T, lk->home, D_MUTEX,
                             MPI_REPLACE, lk->win));
    MPI_TRY(MPI_Win_flush(lk->home, lk->win));
    double dt = MPI_Wtime() - lk->t_epoch0;
    lk->st.epoch_seconds += dt;
    lk->epoch_avg = lk->epoch_avg > 0 ? 0.9 * lk->epoch_avg + 0.1 * dt : dt;
    return old == 1 ? RMALOCK_OK : RMALOCK_ERR_INTERNAL;
}

static int dg_find(rmalock_t *lk, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (entry(lk, i)[E_RANK] == rank)
            return i;
    return -1;
}

static int dg_enqueue(rmalock_t *lk, int64_t start, int64_t end, int *wait)
{
    int n = 0;
    int rc = dg_fetch(lk, &n);
    if (rc)
        return rc;
    if (n >= lk->size || dg_find(lk, n, lk->rank) >= 0)
        return RMALOCK_ERR_INTERNAL;
    *wait = 0;
    for (int i = 0; i < n && !*wait; i++)
        *wait = overlap(entry(lk, i)[E_START], entry(lk, i)[E_END], start, end);
    int64_t *e = entry(lk, n);
    e[E_START] = start;
    e[E_END] = end;
    e[E_RANK] = lk->rank;
    e[E_STATE] = *wait ? ST_WAITING : ST_HELD;
    return dg_store(lk, n + 1);
}

/* May waiter i be granted?  Not if it overlaps a HELD entry or an earlier
 * entry that is still WAITING (FIFO among overlapping requests). */
static int dg_grantable(rmalock_t *lk, int n, int i)
{
    const int64_t *w = entry(lk, i);
    for (int j = 0; j < n; j++) {
        const int64_t *o = entry(lk, j);
        if (j == i || !overlap(o[E_START], o[E_END], w[E_START], w[E_END]))
            continue;
        if (o[E_STATE] == ST_HELD || j < i)
            return 0;
    }
    return 1;
}

static int dg_dequeue(rmalock_t *lk, int *ngranted)
{
    int n = 0;
    int rc = dg_fetch(lk, &n);
    if (rc)
        return rc;
    int me = dg_find(lk, n, lk->rank);
    if (me < 0 || entry(lk, me)[E_STATE] != ST_HELD)
        return RMALOCK_ERR_INTERNAL;
    memmove(entry(lk, me), entry(lk, me + 1),
            (size_t)(n - me - 1) * E_SIZE * sizeof(int64_t));
    n--;
    *ngranted = 0;
    for (int i = 0; i < n; i++) {
        int64_t *w = entry(lk, i);
        if (w[E_STATE] == ST_WAITING && dg_grantable(lk, n, i)) {
            w[E_STATE] = ST_HELD;
            lk->granted[(*ngranted)++] = (int)w[E_RANK];
        }
    }
    return dg_store(lk, n);
}

static int dg_acquire(rmalock_t *lk, int64_t start, int64_t end)
{
    int wait = 0;
    int rc = dg_lock_table(lk);
    if (rc)
        return rc;
    rc = dg_enqueue(lk, start, end, &wait);
    int rc2 = dg_unlock_table(lk);
    if (rc || rc2)
        return rc ? rc : rc2;
    if (!wait)
        return RMALOCK_OK;
    hook(lk, RMALOCK_HOOK_BEFORE_WAIT);
    return wait_msg(lk, TAG_GRANT, 0); /* our entry is HELD when this returns */
}

static int dg_release(rmalock_t *lk)
{
    int ngranted = 0;
    int rc = dg_lock_table(lk);
    if (rc)
        return rc;
    rc = dg_dequeue(lk, &ngranted);
    int rc2 = dg_unlock_table(lk);
    if (rc || rc2)
        return rc ? rc : rc2;
    for (int i = 0; i < ngranted; i++) {
        rc = send_msg(lk, lk->granted[i], TAG_GRANT);
        if (rc)
            return rc;
    }
    return RMALOCK_OK;
}

/* ---- public API ----------------------------------------------------------- */

int rmalock_acquire(rmalock_t *lk, int64_t start, int64_t end)
{
    if (!lk)
        return RMALOCK_ERR_ARG;
    int rc = check_range(start, end);
    if (rc)
        return rc;
    if (lk->holding)
        return RMALOCK_ERR_HELD;
    if (!lk->t_disable) {
        rc = lk->mode == RMALOCK_PAPER ? paper_acquire(lk, start, end)
                                       : dg_acquire(lk, start, end);
        if (rc)
            return rc;
    }
    lk->holding = 1;
    lk->hstart = start;
    lk->hend = end;
    lk->st.acquires++;
    return RMALOCK_OK;
}

int rmalock_acquire_len(rmalock_t *lk, int64_t offset, int64_t len)
{
    if (!lk)
        return RMALOCK_ERR_ARG;
    if (offset < 0 || len < 0)
        return RMALOCK_ERR_RANGE;
    if (len == 0)
        return RMALOCK_ERR_EMPTY;
    if (offset > INT64_MAX - len)
        return RMALOCK_ERR_OVERFLOW;
    return rmalock_acquire(lk, offset, offset + len);
}

int rmalock_release(rmalock_t *lk)
{
    if (!lk)
        return RMALOCK_ERR_ARG;
    if (!lk->holding)
        return RMALOCK_ERR_NOT_HELD;
    if (!lk->t_disable) {
        int rc = lk->mode == RMALOCK_PAPER ? paper_release(lk) : dg_release(lk);
        if (rc)
            return rc;
    }
    lk->holding = 0;
    lk->st.releases++;
    return RMALOCK_OK;
}

static void destroy_local(rmalock_t *lk)
{
    if (!lk)
        return;
    free(lk->others);
    free(lk->snap_seq);
    free(lk->snap_flag);
    free(lk->snap_rel);
    free(lk->blocker);
    free(lk->table);
    free(lk->granted);
    free(lk->sreq);
    free(lk->sent);
    free(lk);
}

/* How a rank polls while it waits for a wake-up or grant (RMALOCK_WAIT):
 *   spin   MPI_Wait (MPICH busy-polls; best with a core per rank)
 *   yield  MPI_Test + sched_yield()
 *   sleep  MPI_Test + nanosleep(20 us)
 *   auto   (default) with at most one rank per online core on this node,
 *          everyone yields (a sleeping waiter would add ~50-70 us of timer
 *          latency to every hand-off).  With more ranks than cores, the home
 *          yields and the others sleep: passive-target RMA on MPICH needs the
 *          home's progress engine, so the home must stay runnable, while other
 *          waiters need no CPU until their message arrives.
 * `crowded`: ranks on this node exceed its online cores (see create_mpi). */
static int parse_wait_policy(int is_home, int crowded)
{
    const char *w = getenv("RMALOCK_WAIT");
    if (w && strcmp(w, "spin") == 0)
        return WAIT_SPIN;
    if (w && strcmp(w, "yield") == 0)
        return WAIT_YIELD;
    if (w && strcmp(w, "sleep") == 0)
        return WAIT_SLEEP;
    return is_home || !crowded ? WAIT_YIELD : WAIT_SLEEP;
}

/* Collective over comm: more ranks on this node than online cores? */
static int node_crowded(MPI_Comm comm)
{
    MPI_Comm node;
    int local = 1;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && local > cores;
}

/* RMALOCK_DG_SYNC=mutex (default) | epoch: see dg_lock_table(). */
static int parse_dg_sync(void)
{
    const char *v = getenv("RMALOCK_DG_SYNC");
    return v && strcmp(v, "epoch") == 0 ? DG_SYNC_EPOCH : DG_SYNC_MUTEX;
}

static rmalock_t *alloc_local(int rank, int size, rmalock_mode_t mode, int home)
{
    rmalock_t *lk = calloc(1, sizeof *lk);
    if (!lk)
        return NULL;
    lk->rank = rank;
    lk->size = size;
    lk->home = home;
    lk->mode = mode;
    lk->comm = MPI_COMM_NULL;
    lk->win = MPI_WIN_NULL;
    lk->others_type = MPI_DATATYPE_NULL;
    lk->wait_policy = parse_wait_policy(rank == home, 1);
    lk->dg_sync = parse_dg_sync();
    size_t n = (size_t)size;
    lk->sent = calloc(n, sizeof *lk->sent);
    lk->snap_seq = calloc(n, sizeof *lk->snap_seq);
    lk->snap_flag = calloc(n, sizeof *lk->snap_flag);
    lk->snap_rel = calloc(n, sizeof *lk->snap_rel);
    lk->blocker = calloc(n, sizeof *lk->blocker);
    lk->others = calloc(n * P_SLOT, sizeof *lk->others);
    lk->table = calloc(D_HDR + n * E_SIZE, sizeof *lk->table);
    lk->granted = calloc(n, sizeof *lk->granted);
    lk->spec = size < 4 ? size : 4;
    lk->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)rank + 1) * 0xBF58476D1CE4E5B9ull;
    if (!lk->sent || !lk->snap_seq || !lk->snap_flag || !lk->snap_rel || !lk->blocker ||
        !lk->others || !lk->table || !lk->granted) {
        destroy_local(lk);
        return NULL;
    }
    return lk;
}

static int make_others_type(rmalock_t *lk)
{
    int len[2] = {P_SLOT * lk->rank, P_SLOT * (lk->size - 1 - lk->rank)};
    int disp[2] = {0, P_SLOT * (lk->rank + 1)};
    MPI_TRY(MPI_Type_indexed(2, len, disp, MPI_INT64_T, &lk->others_type));
    MPI_TRY(MPI_Type_commit(&lk->others_type));
    return RMALOCK_OK;
}

/* Home initialises its own window memory inside an epoch; the barrier then
 * orders it before any other rank's first epoch. */
static int init_window(rmalock_t *lk, MPI_Aint words)
{
    if (lk->rank == lk->home) {
        MPI_TRY(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, lk->home, 0, lk->win));
        for (MPI_Aint i = 0; i < words; i++)
            lk->base[i] = 0;
        if (lk->mode == RMALOCK_PAPER)
            for (int j = 0; j < lk->size; j++)
                lk->base[P_SLOT * j + P_START] = lk->base[P_SLOT * j + P_END] = -1;
        MPI_TRY(MPI_Win_unlock(lk->home, lk->win));
    }
    MPI_Request r;
    MPI_TRY(MPI_Ibarrier(lk->comm, &r));
    return wait_poll(lk->wait_policy, &r, 0);
}

static int allocate_window(rmalock_t *lk, MPI_Aint words)
{
    MPI_Aint bytes = lk->rank == lk->home ? words * (MPI_Aint)sizeof(int64_t) : 0;
    MPI_Info info = MPI_INFO_NULL;
    if (lk->mode == RMALOCK_DIRECT_GRANT) {
        /* the mutex word only ever sees MPI_REPLACE atomics */
        MPI_TRY(MPI_Info_create(&info));
        MPI_TRY(MPI_Info_set(info, "accumulate_ops", "same_op"));
    }
    int err = MPI_Win_allocate(bytes, (int)sizeof(int64_t), info, lk->comm,
                               &lk->base, &lk->win);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    return err == MPI_SUCCESS ? RMALOCK_OK : RMALOCK_ERR_MPI;
}

static int create_mpi(rmalock_t *lk, MPI_Comm comm)
{
    MPI_Request r;
    MPI_TRY(MPI_Comm_idup(comm, &lk->comm, &r));
    int rc = wait_poll(lk->wait_policy, &r, 0);
    if (rc)
        return rc;
    MPI_TRY(MPI_Comm_set_errhandler(lk->comm, MPI_ERRORS_RETURN));
    lk->wait_policy = parse_wait_policy(lk->rank == lk->home, node_crowded(lk->comm));
    MPI_Aint words = lk->mode == RMALOCK_PAPER
                         ? (MPI_Aint)P_SLOT * lk->size
                         : (MPI_Aint)D_HDR + (MPI_Aint)E_SIZE * lk->size;
    rc = allocate_window(lk, words);
    if (rc)
        return rc;
    MPI_TRY(MPI_Win_set_errhandler(lk->win, MPI_ERRORS_RETURN));
    if (lk->mode == RMALOCK_PAPER) {
        rc = make_others_type(lk);
        if (rc)
            return rc;
    }
    rc = init_window(lk, words);
    if (rc || lk->mode != RMALOCK_DIRECT_GRANT || lk->dg_sync != DG_SYNC_MUTEX)
        return rc;
    /* one passive-target epoch to every rank for the object's lifetime */
    MPI_TRY(MPI_Win_lock_all(MPI_MODE_NOCHECK, lk->win));
    lk->lock_all = 1;
    return RMALOCK_OK;
}

static void destroy_mpi(rmalock_t *lk)
{
    if (lk->others_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&lk->others_type);
    if (lk->lock_all)
        MPI_Win_unlock_all(lk->win);
    lk->lock_all = 0;
    if (lk->win != MPI_WIN_NULL)
        MPI_Win_free(&lk->win);
    if (lk->comm != MPI_COMM_NULL)
        MPI_Comm_free(&lk->comm);
}

int rmalock_create(MPI_Comm comm, rmalock_mode_t mode, int home, rmalock_t **out)
{
    int rank = 0, size = 0;
    if (out)
        *out = NULL;
    if (comm == MPI_COMM_NULL)
        return RMALOCK_ERR_ARG;
    MPI_TRY(MPI_Comm_rank(comm, &rank));
    MPI_TRY(MPI_Comm_size(comm, &size));
    int valid = out && (mode == RMALOCK_PAPER || mode == RMALOCK_DIRECT_GRANT) &&
                home >= 0 && home < size;
    rmalock_t *lk = valid ? alloc_local(rank, size, mode, home) : NULL;
    /* agree on validity, mode and home before any collective allocation:
     * max(x) == -max(-x) iff every rank passed the same x */
    int sync = parse_dg_sync();
    int v[8] = {valid ? 0 : 1, (valid && !lk) ? 1 : 0, (int)mode, -(int)mode,
                home, -home, sync, -sync};
    int mx[8];
    MPI_Request r;
    MPI_TRY(MPI_Iallreduce(v, mx, 8, MPI_INT, MPI_MAX, comm, &r));
    int rc = wait_poll(parse_wait_policy(rank == home, 1), &r, 0);
    if (rc) {
        destroy_local(lk);
        return rc;
    }
    if (mx[0] || mx[2] != -mx[3] || mx[4] != -mx[5] || mx[6] != -mx[7]) {
        destroy_local(lk);
        return RMALOCK_ERR_ARG;
    }
    if (mx[1]) {
        destroy_local(lk);
        return RMALOCK_ERR_NOMEM;
    }
    rc = create_mpi(lk, comm);
    if (rc) {
        destroy_mpi(lk);
        destroy_local(lk);
        return rc;
    }
    *out = lk;
    return RMALOCK_OK;
}

int rmalock_free(rmalock_t **plk)
{
    if (!plk || !*plk)
        return RMALOCK_ERR_ARG;
    rmalock_t *lk = *plk;
    int rc = RMALOCK_OK;
    if (lk->holding)
        rc = rmalock_release(lk);
    int rc2 = drain_messages(lk);
    if (!rc2) { /* arrive together: MPI_Win_free's own barrier busy-polls */
        MPI_Request r;
        rc2 = MPI_Ibarrier(lk->comm, &r) == MPI_SUCCESS
                  ? wait_poll(lk->wait_policy, &r, 0)
                  : RMALOCK_ERR_MPI;
    }
    destroy_mpi(lk);
    destroy_local(lk);
    *plk = NULL;
    return rc ? rc : rc2;
}

const char *rmalock_strerror(int err)
{
    switch (err) {
    case RMALOCK_OK: return "success";
    case RMALOCK_ERR_ARG: return "invalid argument";
    case RMALOCK_ERR_RANGE: return "invalid range (start < 0 or end < start)";
    case RMALOCK_ERR_EMPTY: return "zero-length range";
    case RMALOCK_ERR_OVERFLOW: return "offset + length overflows int64";
    case RMALOCK_ERR_HELD: return "this rank already holds a range";
    case RMALOCK_ERR_NOT_HELD: return "this rank holds no range";
    case RMALOCK_ERR_MPI: return "MPI call failed";
    case RMALOCK_ERR_NOMEM: return "out of memory";
    case RMALOCK_ERR_INTERNAL: return "internal inconsistency";
    case RMALOCK_ERR_TIMEOUT: return "wait timed out (test mode)";
    default: return "unknown error";
    }
}

const char *rmalock_mode_name(rmalock_mode_t mode)
{
    switch (mode) {
    case RMALOCK_PAPER: return "paper";
    case RMALOCK_DIRECT_GRANT: return "direct-grant";
    default: return "unknown";
    }
}

int rmalock_get_stats(const rmalock_t *lk, rmalock_stats_t *out)
{
    if (!lk || !out)
        return RMALOCK_ERR_ARG;
    *out = lk->st;
    return RMALOCK_OK;
}

int rmalock_reset_stats(rmalock_t *lk)
{
    if (!lk)
        return RMALOCK_ERR_ARG;
    memset(&lk->st, 0, sizeof lk->st);
    return RMALOCK_OK;
}

/* ---- test-only switches ---------------------------------------------------- */

void rmalock_test_disable_locking(rmalock_t *lk, int disable)
{
    if (lk)
        lk->t_disable = disable;
}

void rmalock_test_paper_unfixed(rmalock_t *lk, int unfixed)
{
    if (lk)
        lk->t_unfixed = unfixed;
}

void rmalock_test_set_hook(rmalock_t *lk, rmalock_hook_fn fn, void *arg)
{
    if (lk) {
        lk->t_hook = fn;
        lk->t_arg = arg;
    }
}

void rmalock_test_set_wait_timeout(rmalock_t *lk, double seconds)
{
    if (lk)
        lk->t_timeout = seconds;
}
