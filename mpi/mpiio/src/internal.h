/*
 * internal.h -- shared state and helpers of libatomio_mpiio (the MPI-IO front of atomio).
 *
 * The library intercepts MPI-IO through the PMPI profiling interface. A file atomio takes
 * (see select.c) is an `amio_file` in a table (handles.c) keyed by the genuine MPI_File
 * handle that PMPI_File_open returned for the ordinary file at the same path; every
 * intercepted call on a handle that is not in the table goes to PMPI untouched.
 *
 * Invariants (every file of this directory keeps them):
 *   - Only PMPI_* entry points are called from inside the library (so tools stacked on the
 *     profiling interface see only the program's calls), except rmalock, which is a
 *     library of its own and calls MPI_* functions that are not intercepted here.
 *   - Nothing aborts or raises: every failure becomes an MPI error code (errors.c) that is
 *     passed through the file's error handler by the entry point that detected it.
 *   - Collective entry points agree on success or failure on every rank of the file's
 *     communicator before any further collective step, so a failure on one rank can never
 *     leave the others waiting in a collective.
 *   - Offsets are MPI_Offset (int64) at the interface and uint64 inside atomio; every
 *     conversion and product is checked.
 */
#ifndef AMIO_INTERNAL_H
#define AMIO_INTERNAL_H

#include "atomio.h"
#include "rmalock.h"
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ----- configuration (config.c): environment variables, read once -------------------- */

typedef struct {
    int verbose;               /* ATOMIO_VERBOSE: 0 quiet, 1 errors, 2 decisions too */
    int force_atomic;          /* ATOMIO_FORCE_ATOMIC=1 */
    const char *files;         /* ATOMIO_FILES: ':'-separated globs, or NULL */
    const char *strategy;      /* ATOMIO_STRATEGY, or the default */
    const char *servers;       /* ATOMIO_SERVERS: NULL (in-job), "none", list or file */
    int servers_per_node;      /* ATOMIO_SERVERS_PER_NODE (in-job servers), default 1 */
    const char *listen_host;   /* ATOMIO_LISTEN_HOST, or NULL (decided at init) */
    const char *data_dir;      /* ATOMIO_DATA_DIR, or NULL ($TMPDIR or /tmp) */
    uint64_t stripe_size;      /* ATOMIO_STRIPE_SIZE, 0 = atomio's default (64 KiB) */
    uint32_t stripe_count;     /* ATOMIO_STRIPE_COUNT, 0 = every server */
    int export_on_sync;        /* ATOMIO_EXPORT_ON_SYNC, default 1 (servers placement) */
    int data_servers;          /* ATOMIO_DATA=servers: bytes in atomio's servers, copied in
                                  at open and out at close/sync; default direct: the
                                  ordinary file holds the bytes, servers hold only locks */
    int data_direct;           /* ATOMIO_DATA=direct: never forwarded (see amio_file.forwarded) */
    rmalock_mode_t rma_mode;   /* ATOMIO_RMA_MODE=direct-grant (default) | paper */
    int rma_world;             /* ATOMIO_RMA_SCOPE=world: one job-wide lock for rma files */
    uint64_t cb_max;           /* ATOMIO_CB_MAX: largest collective write aggregated on one
                                  rank (bytes, all ranks together); 0 = never aggregate */
    const char *stats;         /* ATOMIO_STATS: NULL (off), "1" (stderr) or a file to append
                                  to (stats.c) */
    const char *fs_caches;     /* ATOMIO_FS_CACHES=shared|coherent|private, or NULL:
                                  detected per file (atomio_fs_caches); the hint
                                  atomio_fs_caches wins over it */
    int host_locks;            /* ATOMIO_LOCKS=host: direct placement takes its locks in the
                                  host's shared lock table (atomio_open_direct's
                                  ATOMIO_HOST_LOCKS), not on lock servers: for jobs whose
                                  ranks all run on one host (checked at open) */
    int locks_auto;            /* ATOMIO_LOCKS=auto (the default) with in-job servers: a
                                  direct file whose ranks all share one host's memory and
                                  one page cache (a local file system) takes its locks in
                                  the host's table, any other on the lock servers (decided
                                  at open, the same on every rank) */
} amio_config;

extern amio_config amio_cfg;
void amio_config_load(void);

/* Prints "atomio-mpiio[rank]: ..." to stderr when ATOMIO_VERBOSE >= level. */
void amio_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "atomio-mpiio[rank] warning: ..." to stderr, always. */
void amio_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define AMIO_DEFAULT_STRATEGY "auto"

/* ----- errors (errors.c) ------------------------------------------------------------- */

/* Records a message and returns an MPI error code of `mpi_class` carrying it where the MPI
 * library can (see errors.c). */
int amio_error(int mpi_class, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The code for a failed atomio call (`rc` = ATOMIO_E*), with atomio_last_error(). */
int amio_error_atomio(int rc, const char *what);
/* Passes `code` through the error handler of `fh` (MPI_FILE_NULL before a handle exists)
 * and returns it; MPI_SUCCESS passes silently. */
int amio_raise(MPI_File fh, int code);
void amio_errors_init(void);

/* ----- runtime (runtime.c): servers, the client, the job-wide rma lock --------------- */

typedef struct {
    int started;               /* MPI_Init went through this library */
    int world_rank, world_size;
    char **addrs;              /* server addresses, n_addrs of them */
    size_t n_addrs;
    char *broken;              /* why atomio servers are unusable (message), or NULL */
    atomio_client *client;     /* connected lazily at the first open */
    rmalock_t *world_lock;     /* ATOMIO_RMA_SCOPE=world */
    pthread_mutex_t world_lock_mu;
    int one_host;              /* every rank of MPI_COMM_WORLD shares this host's memory,
                                  /dev/shm and pid namespace (in-job servers only) */
} amio_runtime;

extern amio_runtime amio_rt;
/* The connected client, connecting on first use; 0 or an MPI error code. */
int amio_client(atomio_client **out);

/* Collectives that do not busy-poll: MPICH's ch4 spins in blocking collectives, which on an
 * oversubscribed node steals the CPU from the ranks and server threads doing the work. */
int amio_allreduce_int(int *vals, int n, MPI_Op op, MPI_Comm comm);
/* All ranks of comm learn whether any failed: returns this rank's own error, else an
 * MPI_ERR_IO "<what> failed on another rank" when some other rank failed. Collective. */
int amio_agree(int code, MPI_Comm comm, const char *what);
int amio_bcast(void *buf, int n, MPI_Datatype t, int root, MPI_Comm comm);
int amio_barrier(MPI_Comm comm);
/* Waits for a request without spinning the CPU away from the writers. */
int amio_wait(MPI_Request *req);
int amio_comm_dup(MPI_Comm comm, MPI_Comm *out);

/* ----- datatypes (datatype.c) -------------------------------------------------------- */

/* An MPI datatype as an atomio pattern. The data of one instance placed at origin x is the
 * data of `p` placed at x + off (p's displacements are all >= 0); repetitions are `extent`
 * apart (the MPI extent). */
typedef struct amio_dtype {
    atomio_pattern *p;
    int64_t off;
    int64_t lb, extent;        /* MPI lower bound and extent */
    int64_t size;              /* MPI size in bytes */
    int dense;                 /* p is `size` contiguous bytes and extent == size */
    int refs;
} amio_dtype;

/* MPI_SUCCESS when `t` is a valid handle of a committed datatype, else an MPI_ERR_TYPE
 * error naming `what`. Without it an invalid handle aborts the job inside MPICH's
 * MPI_Type_* calls (their errors go to MPI_COMM_WORLD, fatal by default) and an
 * uncommitted one is silently used. */
int amio_type_check(MPI_Datatype t, const char *what);
/* Decodes `t` (cached on derived types as an attribute); on failure returns an MPI error
 * code of class MPI_ERR_TYPE whose message says why. Release with amio_dtype_release. */
int amio_dtype_acquire(MPI_Datatype t, amio_dtype **out);
/* Same without raising an error: -1 and the reason in `why`. */
int amio_dtype_try(MPI_Datatype t, amio_dtype **out, char *why, size_t cap);
void amio_dtype_release(amio_dtype *d);
/* `d` as an element repeated every MPI extent: d->p itself or a resized copy (*owned = 1). */
int amio_dtype_elem(const amio_dtype *d, atomio_pattern **out, int *owned);
int amio_type_is_named(MPI_Datatype t);
void amio_datatype_init(void);

/* ----- files (handles.c) ------------------------------------------------------------- */

typedef struct amio_file {
    MPI_File fh;               /* genuine handle (PMPI_File_open of the ordinary file) */
    MPI_Comm comm;             /* private duplicate of the open communicator */
    int rank, size;
    int amode;
    char *path;                /* canonical path of the ordinary file (= name on servers) */
    char strategy[96];
    int is_rma;
    char caches[16];           /* the hint atomio_fs_caches, else ATOMIO_FS_CACHES, else ""
                                  (detect): how the file system's clients cache */
    int forwarded;             /* servers placement chosen by auto because the file system's
                                  clients cache privately and the ranks use more than one
                                  client: the bytes live on the servers while the file is
                                  open, and at sync and close every rank writes the
                                  written bytes of its own 1 MiB-aligned domains of the
                                  file (amio_base_export) */
    int host_locks;            /* direct placement: the locks are in the host's table
                                  (ATOMIO_LOCKS=host, or auto's choice at open) */
    int private_caches;        /* rma: the file system's clients cache without coherence, so
                                  a lock's bytes are flushed before release and their cached
                                  pages dropped after acquire (set by amio_rma_open) */

    /* server strategies */
    atomio_file *af;
    int direct;                /* af is the ordinary file itself (direct placement) */
    int lock_fd;               /* rank 0 only: session locks (session.c), else -1 */
    int lock_rw;               /* lock_fd is writable (MUTEX can be exclusive) */
    int dirty;                 /* written since the last export (or materialization) */
    /* servers placement: the ordinary file as the copy's base (base.c) */
    int user_fd;               /* this rank's descriptor of the ordinary file, or -1 */
    int base_fd;               /* the session's fill map, or -1 (nothing to fill) */
    int base_private;          /* user_fd's file system caches privately */
    uint64_t base_size;        /* blocks below it are filled before they are touched */
    unsigned char *filled;     /* per block below base_size: this rank saw it filled */
    uint64_t *dirty_runs;      /* (offset, length) pairs written since the last export */
    size_t n_dirty, dirty_cap, dirty_merged;
    uint64_t base_read;        /* bytes read from the ordinary file to fill the copy */
    uint64_t exported;         /* bytes written into the ordinary file by exports */
    int versioning;            /* strategy versioning: writes are snapshots (versioning.c) */

    /* rma strategy */
    int data_fd;
    rmalock_t *rlock;          /* file-scope lock, or NULL with ATOMIO_RMA_SCOPE=world */

    uint64_t known_size;       /* a size the file had (reads below it need no size query) */

    /* MPI state */
    int atomic;                /* what MPI_File_set_atomicity asked */
    MPI_Offset disp;
    MPI_Datatype etype, filetype; /* stored copies (derived types are duplicates) */
    int etype_size;
    amio_dtype *ftd;           /* the filetype decoded */
    atomio_pattern *tile;      /* filetype data pattern tiled at view_base, or NULL: */
    int contig;                /* the view is contiguous bytes from view_base */
    uint64_t view_base;        /* disp + the filetype's data offset */
    uint64_t tile_size;        /* data bytes per filetype */
    MPI_Offset pos;            /* individual file pointer, in etypes */
    /* the shared file pointer (shared_fp.c): a hidden file beside the file, opened at the
     * first use; sfp_init is its value while the hidden file is still empty */
    char *sfp_path;
    int sfp_fd;
    int sfp_private;           /* the hidden file's clients cache privately: read it from the
                                  file system and flush it under its lock */
    int64_t sfp_init;

    int split_active;          /* split collective begun, not ended */
    MPI_Status split_status;
    int split_err;

    /* interval I/O (intervals.c): strategies interval and auto */
    int intervals;             /* the strategy reads the views' interval set */
    uint64_t reach;            /* bytes analyzed past the largest displacement (hint) */
    int reach_hinted;          /* reach came from the hint atomio_interval_reach */
    atomio_intervals *iv;      /* the set installed on af, or NULL */
    unsigned views;            /* analyses made (open = 1) */
    int want_ifile;            /* hint atomio_format=interval: an interval file */
    int ifile;                 /* the file is an interval file (from the first set_view) */
    char in_force[96];         /* the strategy atomio runs now ("" with atomic mode off) */
    char choice[512];          /* auto's last "strategy: reason", or "" */

    pthread_mutex_t mu;        /* serializes independent calls on this handle */
} amio_file;

/* The table entry of `fh`, or NULL when atomio does not handle it. */
amio_file *amio_lookup(MPI_File fh);
int amio_table_add(amio_file *f);
void amio_table_remove(amio_file *f);
/* Every open entry for the same path (to share a size change); calls fn on each. */
void amio_table_each_path(const char *path, void (*fn)(amio_file *, void *), void *arg);

/* ----- selection (select.c) ---------------------------------------------------------- */

/* Whether atomio takes `name`; fills the ordinary path (prefix removed, as PMPI should see
 * it) and the strategy (hint > ATOMIO_STRATEGY > default). */
int amio_select(const char *name, MPI_Info info, char *path, size_t path_cap,
                char *strategy, size_t strat_cap);

/* ----- sessions (session.c): ordinary file <-> server copy --------------------------- */

int amio_session_enter(amio_file *f, atomio_client *c);
/* Is some handle anywhere in a session on the ordinary file at `path`? */
int amio_session_busy(const char *path, int *busy);
int amio_session_leave(amio_file *f, atomio_client *c);
/* Rank 0: the session's MUTEX, held across an export. */
int amio_session_lock(amio_file *f);
void amio_session_unlock(amio_file *f);

/* ----- the ordinary file as the copy's base (base.c) --------------------------------- */

/* The fill map's path for the ordinary file at `path` (malloc'ed, or NULL). */
char *amio_base_map_path(const char *path);
/* First open of a session (rank 0, under MUTEX): the session's fill map (made, or a crashed
 * session's reset) for a base of `base_size` bytes (empty for 0: nothing to fill); *made = 0
 * when the directory or the map refuses it (then the caller imports the file whole). */
int amio_base_start(const char *path, uint64_t base_size, int *made);
/* Last close of a session (rank 0, under MUTEX), MPI_File_delete: the map unlinked. */
int amio_base_remove(const char *path);
/* Every rank, after the session is entered: its descriptors and the map's base size. */
int amio_base_open(amio_file *f);
void amio_base_close(amio_file *f);
/* Before a read or write of the n ranges reaches the copy: fills the blocks they touch;
 * a write's ranges become dirty. */
int amio_base_touch(amio_file *f, int is_write, size_t n, const uint64_t *offs,
                    const uint64_t *lens);
/* The same for the n bytes at data offset `skip` of the view. */
int amio_base_touch_view(amio_file *f, int is_write, uint64_t skip, size_t n);
/* Rank 0 of a resize to `size`: the ordinary file shortened to it (never grown) with the
 * map's base size; then every rank calls amio_base_resized. */
int amio_base_truncate(amio_file *f, uint64_t size);
void amio_base_resized(amio_file *f, uint64_t size);
/* Collective, every rank flushed: the dirty extents of every rank written into the
 * ordinary file, each rank its domains; the file grown to the copy's size. */
int amio_base_export(amio_file *f);

/* ----- strategy versioning (versioning.c) -------------------------------------------- */

/* Collective (sync, close of a direct file): every rank's writes returned; if any rank wrote
 * since the last time, rank 0 materializes the newest snapshot into the user's file and
 * makes it durable (not when `closing` a file opened MPI_MODE_DELETE_ON_CLOSE). Returns
 * `code` or the first error of this rank; the caller agrees. */
int amio_versioning_settle(amio_file *f, int code, int closing, const char *what);
/* Rank 0 of a resize to `size`: refused (MPI_ERR_UNSUPPORTED_OPERATION) when the file has a
 * snapshot and would shrink. */
int amio_versioning_check_shrink(amio_file *f, uint64_t size, const char *what);

/* ----- views and positions (view.c) -------------------------------------------------- */

int amio_view_default(amio_file *f);
void amio_view_free(amio_file *f);
/* Data bytes of the view below file offset `size`, i.e. the end of file in view bytes. */
int amio_view_bytes_before(const amio_file *f, uint64_t size, uint64_t *out);
/* The current file size (and refreshes known_size). */
int amio_file_size(amio_file *f, uint64_t *out);
/* The file has `size` bytes now: known_size of every handle of this path in the process
 * is at most that. */
void amio_note_size(amio_file *f, uint64_t size);
/* End of file in etypes relative to the view (MPI_SEEK_END, MPI_MODE_APPEND). */
int amio_eof_etypes(amio_file *f, MPI_Offset *out);

/* ----- data path (data_path.c) ------------------------------------------------------- */

/* One read or write of `count` `dt` at `offset` etypes (or the individual file pointer when
 * offset < 0 and `explicit_offset` is 0). Fills *bytes with the bytes moved. Returns 0 or
 * an MPI error code (not yet passed through the handler). */
int amio_io(amio_file *f, int is_write, int explicit_offset, MPI_Offset offset, void *buf,
            MPI_Count count, MPI_Datatype dt, MPI_Count *bytes);
void amio_status_set(MPI_Status *st, MPI_Count bytes);
/* The checks every data call makes (access mode, offset, count, type); *n = its bytes. */
int amio_check_call(amio_file *f, int is_write, int explicit_offset, MPI_Offset offset,
                    MPI_Count count, MPI_Datatype dt, size_t *n);
/* The n bytes a write call sends, contiguous: in place (*owned NULL) or packed into *owned
 * (free it). */
int amio_write_source(void *buf, MPI_Count count, MPI_Datatype dt, size_t n, const void **src,
                      void **owned);

/* ----- collective writes (collective.c) ---------------------------------------------- */

/* MPI_File_write_all / write_at_all: aggregated on one rank when it applies, else amio_io. */
int amio_write_all(amio_file *f, int explicit_offset, MPI_Offset offset, const void *buf,
                   MPI_Count count, MPI_Datatype dt, MPI_Count *bytes);

/* ----- rma strategy (rma.c) ---------------------------------------------------------- */

int amio_rma_open(amio_file *f);
int amio_rma_close(amio_file *f);
int amio_rma_lock(amio_file *f, uint64_t start, uint64_t end);
int amio_rma_unlock(amio_file *f);
/* The atomio_open_direct flag asking for f->caches (0: detect). */
uint32_t amio_caches_flag(const amio_file *f);
int amio_rma_after_acquire(amio_file *f, uint64_t start, uint64_t end);
int amio_rma_before_release(amio_file *f);

/* ----- shared file pointer (shared_fp.c) -------------------------------------------- */

/* Collective (open, close, set_view, seek_shared, ordered); the others are independent. */
int amio_sfp_open(amio_file *f, uint64_t nonce);
/* The nonce naming an open's hidden shared-pointer file (rank 0 draws it). */
uint64_t amio_sfp_nonce(void);
/* Closes this rank's descriptor; with `remove` (rank 0, after every rank closed) deletes
 * the hidden file. */
void amio_sfp_close(amio_file *f, int remove);
int amio_sfp_reset(amio_file *f);
int amio_sfp_seek(amio_file *f, MPI_Offset offset, int whence);
int amio_sfp_ordered(amio_file *f, int is_write, void *buf, MPI_Count count, MPI_Datatype dt,
                     MPI_Count *bytes);
int amio_sfp_access(amio_file *f, int is_write, void *buf, MPI_Count count, MPI_Datatype dt,
                    MPI_Count *bytes);
int amio_sfp_position(amio_file *f, MPI_Offset *out);

/* ----- interval I/O (intervals.c) and stats (stats.c) ------------------------------- */

/* Strategy `interval` or `auto`: the file's views are analyzed at open and set_view. */
int amio_intervals_wanted(const char *strategy);
/* The hint atomio_interval_reach of `info` (else the default, 1 TiB) into f->reach. */
void amio_intervals_hint(amio_file *f, MPI_Info info);
/* Collective: exchange the ranks' views, analyze, install the set (see intervals.c). */
int amio_intervals_update(amio_file *f, const char *what);
/* After the strategy changed (set_intervals, set_atomic): f->in_force, f->choice, and
 * f->versioning when auto chose versioning. The same on every rank. */
void amio_intervals_note(amio_file *f);
void amio_intervals_free(amio_file *f);
/* Rank 0 reports the analysis just made (ATOMIO_STATS); `failed` = why it failed, or NULL. */
void amio_stats_intervals(amio_file *f, const char *failed);
/* Collective (close): the ranks' counters summed, reported by rank 0 (ATOMIO_STATS). */
int amio_stats_close(amio_file *f);

/* ----- nonblocking (nonblocking.c) --------------------------------------------------- */

/* A generalized request, already complete, reporting `bytes` moved. */
int amio_grequest_done(MPI_Count bytes, MPI_Request *req);

#endif /* AMIO_INTERNAL_H */
