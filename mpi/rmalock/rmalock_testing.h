/*
 * rmalock_testing.h -- test-only switches for rmalock.  Not part of the API:
 * production code must not include this header.
 *
 * Invariant: with every switch at its default (off / NULL / 0) the library
 * behaves exactly as documented in rmalock.h.
 */
#ifndef RMALOCK_TESTING_H
#define RMALOCK_TESTING_H

#include "rmalock.h"

typedef enum {
    RMALOCK_HOOK_TRY_FAILED = 1, /* PAPER: after a conflicting attempt, before
                                    the back-off epoch (own flag is still 1) */
    RMALOCK_HOOK_BEFORE_WAIT = 2 /* before blocking for a wake-up / grant */
} rmalock_hook_point_t;

typedef void (*rmalock_hook_fn)(rmalock_t *lk, rmalock_hook_point_t point,
                                void *arg);

/* Negative control: acquire/release validate input and return OK without
 * locking anything. */
void rmalock_test_disable_locking(rmalock_t *lk, int disable);

/* PAPER mode exactly as published: the back-off epoch only resets the flag
 * and wakes nobody.  This version can deadlock (test_rmalock shows it). */
void rmalock_test_paper_unfixed(rmalock_t *lk, int unfixed);

/* Called at the points above, outside any RMA epoch, so it may use MPI. */
void rmalock_test_set_hook(rmalock_t *lk, rmalock_hook_fn fn, void *arg);

/* PAPER mode only: give up a wait after `seconds` (0 = wait forever); the
 * acquire then withdraws its request and returns RMALOCK_ERR_TIMEOUT. */
void rmalock_test_set_wait_timeout(rmalock_t *lk, double seconds);

#endif /* RMALOCK_TESTING_H */
