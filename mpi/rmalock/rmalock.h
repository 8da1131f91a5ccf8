/*
 * rmalock.h -- byte-range locks built only on MPI one-sided communication.
 *
 * Thakur, Ross, Latham, "Implementing Byte-Range Locks Using MPI One-Sided
 * Communication" (EuroPVM/MPI 2005), plus the improvements that paper lists as
 * future work.  No lock server: the lock table lives in an MPI window on one
 * "home" rank, and every rank reaches it with passive-target RMA.
 *
 * Invariants and contract (the .c file argues why they hold):
 *   - Ranges are half-open [start, end) of 64-bit signed offsets
 *     (compatible with MPI_Offset).  Valid: 0 <= start < end.
 *     RMALOCK_EOF (INT64_MAX) as `end` means "to the end of any file".
 *   - Zero-length ranges (start == end) are rejected with RMALOCK_ERR_EMPTY:
 *     an access of zero bytes needs no lock, and a silent no-op would hide
 *     off-by-one bugs in the caller.
 *   - Mutual exclusion: at any time the ranges held by different ranks are
 *     pairwise disjoint.  Adjacent ranges ([0,10) and [10,20)) do not conflict.
 *   - Each rank holds at most one range at a time per lock object
 *     (RMALOCK_ERR_HELD otherwise), as in the paper (one slot per rank).
 *   - Bad input never aborts: it returns an error code and leaves the lock
 *     object usable.  RMALOCK_ERR_MPI means an MPI call failed; after it the
 *     only valid call is rmalock_free().
 *   - Threads: one thread per rank may use a given lock object at a time
 *     (MPI_THREAD_SERIALIZED-like), as in the paper.
 *   - Progress: passive-target RMA may need the home rank to enter MPI (it
 *     does on MPICH 4.0 ch4:ucx).  A home rank that computes for a long time
 *     outside MPI delays every other rank's lock operations.  See README.md.
 */
#ifndef RMALOCK_H
#define RMALOCK_H

#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest exclusive end offset: [start, RMALOCK_EOF) locks to end of file. */
#define RMALOCK_EOF INT64_MAX

typedef enum {
    /* The published algorithm (Figs. 3 and 4): try, back off, wait for a
     * wake-up, retry; release wakes every overlapping waiter.  Includes the
     * fixes it needs to stay live (README.md, F1-F4: the published version
     * can deadlock); that version is selectable only via rmalock_testing.h.
     * Deadlock-free, not FIFO. */
    RMALOCK_PAPER = 1,
    /* FIFO queue in the window, read-modify-written atomically inside one
     * table critical section (MPI-3 atomic test-and-set mutex by default,
     * or an exclusive epoch with RMALOCK_DG_SYNC=epoch; get, flush, put); a
     * releaser grants waiters directly, so waiters never retry.  Fetches
     * only the active entries, not one slot per rank.  Starvation-free. */
    RMALOCK_DIRECT_GRANT = 2
} rmalock_mode_t;

enum {
    RMALOCK_OK = 0,
    RMALOCK_ERR_ARG = -1,      /* NULL pointer, unknown mode, bad home rank,
                                  or arguments that differ between ranks */
    RMALOCK_ERR_RANGE = -2,    /* start < 0, end < start, or length < 0 */
    RMALOCK_ERR_EMPTY = -3,    /* zero-length range */
    RMALOCK_ERR_OVERFLOW = -4, /* offset + length does not fit in int64 */
    RMALOCK_ERR_HELD = -5,     /* acquire while this rank already holds */
    RMALOCK_ERR_NOT_HELD = -6, /* release without a held range */
    RMALOCK_ERR_MPI = -7,      /* an MPI call failed */
    RMALOCK_ERR_NOMEM = -8,
    RMALOCK_ERR_INTERNAL = -9, /* lock table inconsistent (a bug) */
    RMALOCK_ERR_TIMEOUT = -10  /* test-only wait deadline expired */
};

typedef struct rmalock rmalock_t;

/* Collective over `comm`: every rank must pass the same mode and home.
 * The table is allocated with MPI_Win_allocate on `home`.  The communicator is
 * duplicated, so lock traffic never matches the caller's messages.
 * On error *out is NULL and nothing is left allocated. */
int rmalock_create(MPI_Comm comm, rmalock_mode_t mode, int home,
                   rmalock_t **out);

/* Block until this rank holds [start, end). */
int rmalock_acquire(rmalock_t *lk, int64_t start, int64_t end);

/* Same as rmalock_acquire(lk, offset, offset + len), with overflow check. */
int rmalock_acquire_len(rmalock_t *lk, int64_t offset, int64_t len);

/* Release the range this rank holds. */
int rmalock_release(rmalock_t *lk);

/* Collective.  Releases this rank's range if it still holds one, absorbs any
 * wake-up messages still in flight, frees the window and sets *lk = NULL. */
int rmalock_free(rmalock_t **lk);

const char *rmalock_strerror(int err);
const char *rmalock_mode_name(rmalock_mode_t mode);

/* Per-rank counters, for benchmarks and diagnostics. */
typedef struct {
    uint64_t acquires;      /* successful acquires */
    uint64_t releases;
    uint64_t epochs;        /* table critical sections at the home rank
                               (MPI exclusive epochs, or DIRECT_GRANT's
                               atomic mutex) */
    uint64_t failed_tries;  /* PAPER: attempts that saw a conflict */
    uint64_t waits;         /* times this rank blocked for a message */
    uint64_t msgs_sent;     /* wake-ups (PAPER) or grants (DIRECT_GRANT) */
    uint64_t bytes_fetched; /* bytes read from the home window */
    uint64_t lock_spins;    /* DIRECT_GRANT: busy table-mutex attempts */
    double epoch_seconds;   /* wall time inside exclusive epochs */
    double wait_seconds;    /* wall time blocked for messages */
} rmalock_stats_t;

int rmalock_get_stats(const rmalock_t *lk, rmalock_stats_t *out);
int rmalock_reset_stats(rmalock_t *lk);

#ifdef __cplusplus
}
#endif
#endif /* RMALOCK_H */
