/*
 * chain.c -- the library's place among other PMPI tools: it defines both the MPI_ and the
 * PMPI_ name of every entry point in chain.h, and reaches the MPI library through the
 * genuine PMPI_ functions found with dlsym(RTLD_NEXT) (resolved once, under pthread_once).
 * The sources implementing the entry points are compiled with chain_rename.h, so what they
 * define as MPI_NAME is amio_impl_MPI_NAME (called from here) and what they call as
 * PMPI_NAME is amio_next_PMPI_NAME (defined here: the genuine function, never ours).
 *
 * Symbol resolution with LD_PRELOAD="A:B" looks in the program, then A, then B, then the
 * MPI library; a PMPI tool defines MPI_NAME and calls PMPI_NAME (by its global symbol).
 *   - PMPI_NAME (ours) is the implementation: atomio serves taken files, and passes other
 *     handles to the genuine PMPI_NAME. A tool preloaded BEFORE this library (or linked
 *     into the program) is called first, calls PMPI_NAME and lands here; a program that
 *     calls PMPI_NAME itself lands here too.
 *   - MPI_NAME (ours) is reached when no tool comes before this library. If the next
 *     MPI_NAME after us (RTLD_NEXT) lives in another object than the next PMPI_NAME, a tool
 *     was preloaded AFTER us: we call its MPI_NAME, it calls PMPI_NAME, whose first
 *     definition is ours, so the tool sees the call and atomio still does the I/O. If both
 *     live in one object (the MPI library: in MPICH MPI_NAME is a weak alias of PMPI_NAME),
 *     there is no tool and MPI_NAME is the implementation.
 *   - A tool after us that finds PMPI_NAME itself with dlsym(RTLD_NEXT) gets the MPI
 *     library's and goes around atomio: we notice (our PMPI_NAME was not entered during
 *     its MPI_NAME) and warn once; such a tool must be preloaded before this library.
 * Invariant: nothing in this library calls its own MPI_/PMPI_ entry points (the renames
 * make every internal call go to amio_impl_ or to the genuine function).
 */
#define _GNU_SOURCE
#include "chain.h"
#include "internal.h"
#include "span.h"
#include <dlfcn.h>
#include <stdio.h>

enum {
#define AMIO_CH_INDEX(N, P, A) AMIO_CH_##N,
    AMIO_CHAIN_LIST(AMIO_CH_INDEX)
#if MPI_VERSION >= 4
    AMIO_CHAIN_LIST_C(AMIO_CH_INDEX)
#endif
    AMIO_CH_COUNT
};

static const char *const ch_names[AMIO_CH_COUNT] = {
#define AMIO_CH_NAME(N, P, A) #N,
    AMIO_CHAIN_LIST(AMIO_CH_NAME)
#if MPI_VERSION >= 4
    AMIO_CHAIN_LIST_C(AMIO_CH_NAME)
#endif
};

static struct {
    void *next_mpi;  /* the MPI_NAME after this library (a tool's, or the MPI library's) */
    void *next_pmpi; /* the genuine PMPI_NAME */
    int tool_after;  /* next_mpi belongs to a tool preloaded after this library */
} ch[AMIO_CH_COUNT];

static pthread_once_t ch_once = PTHREAD_ONCE_INIT;
/* PMPI_ entry points of this library entered by this thread (see warn_bypass). */
static __thread unsigned long pmpi_entries;

static void ch_resolve(void)
{
    for (int i = 0; i < AMIO_CH_COUNT; i++) {
        char name[96];
        snprintf(name, sizeof name, "MPI_%s", ch_names[i]);
        ch[i].next_mpi = dlsym(RTLD_NEXT, name);
        snprintf(name, sizeof name, "PMPI_%s", ch_names[i]);
        ch[i].next_pmpi = dlsym(RTLD_NEXT, name);
        Dl_info a = {0}, b = {0};
        ch[i].tool_after = ch[i].next_mpi && ch[i].next_pmpi && ch[i].next_mpi != ch[i].next_pmpi &&
                           dladdr(ch[i].next_mpi, &a) && dladdr(ch[i].next_pmpi, &b) &&
                           a.dli_fbase != b.dli_fbase;
        if (ch[i].tool_after && getenv("ATOMIO_VERBOSE") && atoi(getenv("ATOMIO_VERBOSE")) >= 2)
            fprintf(stderr, "atomio-mpiio: MPI_%s: a PMPI tool preloaded after "
                            "libatomio_mpiio.so (%s) is called first\n",
                    ch_names[i], a.dli_fname ? a.dli_fname : "?");
    }
}

static void *ch_next_pmpi(int i)
{
    pthread_once(&ch_once, ch_resolve);
    if (!ch[i].next_pmpi) {
        fprintf(stderr, "atomio-mpiio: PMPI_%s not found in the MPI library (dlsym: %s)\n",
                ch_names[i], dlerror());
        return NULL;
    }
    return ch[i].next_pmpi;
}

static void warn_bypass(int i)
{
    static int warned;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        return;
    amio_warn("the PMPI tool preloaded after libatomio_mpiio.so did not call PMPI_%s through "
              "its global symbol (dlsym(RTLD_NEXT)?): the call went around atomio. Preload "
              "the tool before libatomio_mpiio.so",
              ch_names[i]);
}

/* int amio_impl_MPI_NAME(...): the implementations (renamed MPI_NAME of the other sources) */
#define AMIO_CH_DECL(N, P, A) int amio_impl_MPI_##N P; int amio_next_PMPI_##N P;
AMIO_CHAIN_LIST(AMIO_CH_DECL)
#if MPI_VERSION >= 4
AMIO_CHAIN_LIST_C(AMIO_CH_DECL)
#endif

/* Inside an H5Dwrite (hdf5_span.c) every entry point but the independent explicit-offset
 * writes, which the span collects, first writes what the span collected (program order). */
#if MPI_VERSION >= 4
#define SPAN_COLLECTS(I) ((I) == AMIO_CH_File_write_at || (I) == AMIO_CH_File_write_at_c)
#else
#define SPAN_COLLECTS(I) ((I) == AMIO_CH_File_write_at)
#endif
#define SPAN_BARRIER(I)                                                                   \
    do {                                                                                  \
        if (__builtin_expect(amio_span_depth != 0, 0) && !SPAN_COLLECTS(I))               \
            amio_span_barrier();                                                          \
    } while (0)

#define AMIO_CH_DEFINE(N, P, A)                                                           \
    int amio_next_PMPI_##N P                                                              \
    {                                                                                     \
        int (*genuine) P = (int (*) P)ch_next_pmpi(AMIO_CH_##N);                          \
        return genuine ? genuine A : MPI_ERR_INTERN;                                      \
    }                                                                                     \
    int PMPI_##N P                                                                        \
    {                                                                                     \
        pmpi_entries++;                                                                   \
        SPAN_BARRIER(AMIO_CH_##N);                                                        \
        return amio_impl_MPI_##N A;                                                       \
    }                                                                                     \
    int MPI_##N P                                                                         \
    {                                                                                     \
        pthread_once(&ch_once, ch_resolve);                                               \
        if (ch[AMIO_CH_##N].tool_after) {                                                 \
            unsigned long before = pmpi_entries;                                          \
            int rc = ((int (*) P)ch[AMIO_CH_##N].next_mpi)A;                              \
            if (pmpi_entries == before)                                                   \
                warn_bypass(AMIO_CH_##N);                                                 \
            return rc;                                                                    \
        }                                                                                 \
        SPAN_BARRIER(AMIO_CH_##N);                                                        \
        return amio_impl_MPI_##N A;                                                       \
    }

AMIO_CHAIN_LIST(AMIO_CH_DEFINE)
#if MPI_VERSION >= 4
AMIO_CHAIN_LIST_C(AMIO_CH_DEFINE)
#endif
