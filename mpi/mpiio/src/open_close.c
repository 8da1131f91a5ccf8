/*
 * open_close.c -- MPI_File_open, MPI_File_close, MPI_File_delete for the files atomio takes.
 *
 * Open (collective over comm), for a taken file:
 *   1. the ranks check they chose the same strategy;
 *   2. PMPI_File_open opens the ordinary file at the path (prefix removed) with the
 *      program's amode and info. That gives MPI's own amode semantics (CREATE, EXCL,
 *      RDONLY on a missing file, permissions: same error classes as without atomio) and
 *      the genuine MPI_File handle the program gets back;
 *   2b. strategy auto, direct placement: if the file system's clients cache privately (NFS,
 *      FUSE: atomio_fs_caches) and the ranks reach the file through more than one client
 *      (hosts, or mounts: st_dev), the file is *forwarded*: servers placement with
 *      FORWARD_STRATEGY, so that small pieces reach the file system in large requests and
 *      every page of the file is written by exactly one client (at sync and close, each rank
 *      writes what was written in its own 1 MiB-aligned domains: amio_base_export);
 *   3. rank 0's canonical path (realpath) names the file on the servers for every rank,
 *      and rank 0's nonce names the shared file pointer's hidden file (shared_fp.c);
 *   4. strategy rma: the data descriptor and the lock (rma.c). Direct placement (the
 *      default, ATOMIO_DATA=direct): every rank opens the ordinary file itself through
 *      atomio_open_direct — the servers hold only its locks, nothing is copied. Servers
 *      placement (ATOMIO_DATA=servers): rank 0 enters the file's session (session.c: the
 *      first open makes the copy, sized as the ordinary file, nothing copied), then every
 *      rank opens the server copy and the ordinary file under it (base.c);
 *   5. MPI_MODE_APPEND puts the file pointers at the end; the shared file pointer is named
 *      (nothing is created until a rank uses it); the table gets the handle.
 * Every step that can fail on some ranks only is followed by an agreement (allreduce)
 * before the next collective, so all ranks succeed or all undo what they did and fail.
 * Direct placement has no collective between steps 3 and 5, so it agrees once, at the
 * end: on this 2-core machine each collective of a 4-rank open costs milliseconds.
 *
 * Close (collective): direct placement has nothing to copy (a write that returned is in the
 * file; a rank killed later loses nothing it was told was written) — except with strategy
 * versioning, whose writes are snapshots on the servers: the ranks agree they are done and
 * rank 0 materializes the newest snapshot into the file (versioning.c). Servers placement:
 * agree that every rank is done ("dirty" = any rank wrote), the ranks export what was
 * written since the last export into the ordinary file (base.c; not with
 * MPI_MODE_DELETE_ON_CLOSE) and rank 0 leaves the session (the last one removes the copy).
 * Then PMPI_File_close closes the genuine handle (and deletes the file for DELETE_ON_CLOSE).
 *
 * Invariants: the handle is in the table exactly while it is open; a failed open leaves
 * nothing behind (no table entry, no lock, no descriptor, no genuine handle); a failed
 * close still closes and frees everything, and reports the first error through the file's
 * handler before the handle disappears.
 */
#define _GNU_SOURCE
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What auto runs a forwarded file with: fine-grained locks on the servers, deadlock-free. */
#define FORWARD_STRATEGY "ching:datatype:one-try"

/* How the file system's clients cache: the hint atomio_fs_caches, else ATOMIO_FS_CACHES,
 * else detected when the file is opened. A malformed hint is ignored with a warning. */
static void caches_hint(amio_file *f, MPI_Info info)
{
    const char *v = amio_cfg.fs_caches ? amio_cfg.fs_caches : "";
    char h[32] = "";
    int flag = 0;
    if (info != MPI_INFO_NULL &&
        PMPI_Info_get(info, "atomio_fs_caches", (int)sizeof h - 1, h, &flag) == MPI_SUCCESS &&
        flag) {
        if (strcmp(h, "shared") == 0 || strcmp(h, "coherent") == 0 || strcmp(h, "private") == 0)
            v = h;
        else
            amio_warn("ignoring the hint atomio_fs_caches=%s (shared|coherent|private)", h);
    }
    snprintf(f->caches, sizeof f->caches, "%s", v);
}

/* Collective: whether the file at path lives on a file system whose clients cache privately
 * and the ranks reach it through more than one client (a client = host name and device). */
static int spans_private_clients(amio_file *f, const char *path, int *spans)
{
    *spans = 0;
    int code = MPI_SUCCESS, priv = 0;
    unsigned long long key = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        code = amio_error(MPI_ERR_IO, "opening %s: %s", path, strerror(errno));
    } else {
        int caches = ATOMIO_FS_PRIVATE;
        char fs[64] = "";
        struct stat st;
        int rc = atomio_fs_caches(fd, f->caches[0] ? f->caches : NULL, &caches, fs, sizeof fs);
        if (rc != ATOMIO_OK)
            code = amio_error_atomio(rc, "finding what the file lives on");
        else if (fstat(fd, &st) < 0)
            code = amio_error(MPI_ERR_IO, "stat %s: %s", path, strerror(errno));
        else {
            char host[256] = "";
            gethostname(host, sizeof host - 1);
            key = 1469598103934665603ULL;
            for (const char *p = host; *p; p++)
                key = (key ^ (unsigned char)*p) * 1099511628211ULL;
            key ^= (unsigned long long)st.st_dev * 0x9E3779B97F4A7C15ULL;
            priv = caches == ATOMIO_FS_PRIVATE;
            amio_log(2, "%s: on %s, %s client caches", path, fs,
                     caches == ATOMIO_FS_SHARED     ? "shared"
                     : caches == ATOMIO_FS_COHERENT ? "coherent"
                                                    : "private");
        }
        close(fd);
    }
    /* max(private), max(key), max(~key) = ~min(key): one allreduce, even after a failure */
    unsigned long long v[3] = {(unsigned long long)priv, key, ~key};
    int rc = PMPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_UNSIGNED_LONG_LONG, MPI_MAX, f->comm);
    if (rc != MPI_SUCCESS && code == MPI_SUCCESS)
        code = rc;
    *spans = v[0] && v[1] != ~v[2];
    return code;
}

uint32_t amio_caches_flag(const amio_file *f)
{
    if (strcmp(f->caches, "private") == 0)
        return ATOMIO_CACHES_PRIVATE;
    if (strcmp(f->caches, "coherent") == 0)
        return ATOMIO_CACHES_COHERENT;
    if (strcmp(f->caches, "shared") == 0)
        return ATOMIO_CACHES_SHARED;
    return 0;
}

static uint32_t hash32(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h & 0x3fffffff;
}

/* Whether every rank of `comm` (of `size` ranks) shares one host's memory (collective). */
static int one_host(MPI_Comm comm, int size)
{
    MPI_Comm node;
    int n = 0;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return 0;
    PMPI_Comm_size(node, &n);
    PMPI_Comm_free(&node);
    return n == size;
}

/* ATOMIO_LOCKS=auto (collective over the file's ranks, one allreduce): whether the direct
 * file at `path` takes its locks in the host's table — the whole job on one host (found at
 * MPI_Init: amio_rt.one_host, so that opens on MPI_COMM_SELF anywhere in the job decide
 * alike) and the file on a file system with one page cache for the host (shared caches:
 * what one rank stores every other reads). Any rank that cannot tell (an error opening or
 * classifying the file) votes for the lock servers. A lock server costs a round trip per
 * call — on 2 cores with 4 ranks 150-170 us, where ROMIO's whole atomic read of
 * noncontig's 2,500 ints costs 70-95 us — and a host table next to nothing. */
static int host_locks_pay(amio_file *f, const char *path)
{
    if (!amio_rt.one_host)
        return 0;
    int no = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        no = 1;
    } else {
        int caches = ATOMIO_FS_PRIVATE;
        char fs[64] = "";
        if (atomio_fs_caches(fd, f->caches[0] ? f->caches : NULL, &caches, fs, sizeof fs) !=
                ATOMIO_OK ||
            caches != ATOMIO_FS_SHARED)
            no = 1;
        close(fd);
    }
    if (amio_allreduce_int(&no, 1, MPI_MAX, f->comm) != MPI_SUCCESS)
        return 0;
    return !no;
}

static void canonical(const char *path, char *out, size_t cap)
{
    char buf[PATH_MAX], cwd[PATH_MAX];
    int n;
    if (realpath(path, buf))
        n = snprintf(out, cap, "%s", buf);
    else if (path[0] == '/')
        n = snprintf(out, cap, "%s", path);
    else
        n = snprintf(out, cap, "%s/%s", getcwd(cwd, sizeof cwd) ? cwd : ".", path);
    if (n < 0 || (size_t)n >= cap)
        snprintf(out, cap, "%s", path); /* too long: the name as given (truncated) */
}

static void destroy(amio_file *f)
{
    amio_base_close(f);
    amio_view_free(f);
    amio_intervals_free(f);
    if (f->comm != MPI_COMM_NULL)
        PMPI_Comm_free(&f->comm);
    pthread_mutex_destroy(&f->mu);
    free(f->path);
    free(f);
}

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    char path[PATH_MAX], strategy[96];
    if (!filename || !fh ||
        !amio_select(filename, info, path, sizeof path, strategy, sizeof strategy))
        return PMPI_File_open(comm, filename, amode, info, fh);

    amio_file *f = calloc(1, sizeof *f);
    if (!f)
        return amio_raise(MPI_FILE_NULL, amio_error(MPI_ERR_NO_MEM, "out of memory"));
    pthread_mutex_init(&f->mu, NULL);
    f->fh = MPI_FILE_NULL;
    f->comm = MPI_COMM_NULL;
    f->lock_fd = f->data_fd = -1;
    f->user_fd = f->base_fd = -1;
    f->sfp_fd = -1;
    f->amode = amode;
    snprintf(f->strategy, sizeof f->strategy, "%s", strategy);
    f->is_rma = strcmp(strategy, "rma") == 0;
    f->versioning = strcmp(strategy, "versioning") == 0;
    /* Strategies that run only on atomio's data servers (the cached-lock DLMs) take
       servers placement whatever ATOMIO_DATA says. */
    int runs_direct = 1;
    if (!f->is_rma && atomio_strategy_direct(strategy, &runs_direct) != ATOMIO_OK)
        runs_direct = 1; /* unknown names fail later, at atomio_set_atomic, with the reason */
    f->direct = !f->is_rma && !amio_cfg.data_servers && runs_direct;
    amio_view_default(f);
    f->intervals = !f->is_rma && amio_intervals_wanted(strategy);
    amio_intervals_hint(f, info);
    caches_hint(f, info);
    int rc = amio_comm_dup(comm, &f->comm);
    if (rc != MPI_SUCCESS) {
        f->comm = MPI_COMM_NULL;
        destroy(f);
        return amio_raise(MPI_FILE_NULL, rc);
    }
    PMPI_Comm_rank(f->comm, &f->rank);
    PMPI_Comm_size(f->comm, &f->size);

    /* 1. one strategy for all */
    int h[2] = {(int)hash32(strategy), -(int)hash32(strategy)};
    rc = amio_allreduce_int(h, 2, MPI_MAX, f->comm);
    int code = rc;
    if (rc == MPI_SUCCESS && h[0] != -h[1])
        code = amio_error(MPI_ERR_ARG, "%s: the ranks chose different atomio strategies "
                                       "(this rank: %s)",
                          path, strategy);
    if (code != MPI_SUCCESS) {
        destroy(f);
        return amio_raise(MPI_FILE_NULL, code);
    }

    /* 2. the genuine handle */
    rc = PMPI_File_open(comm, path, amode, info, &f->fh);
    if (rc != MPI_SUCCESS) {
        destroy(f);
        return rc; /* PMPI raised it on MPI_FILE_NULL already */
    }

    /* 2b. forwarding (see the top of this file) */
    if (f->direct && strcmp(strategy, "auto") == 0 && !amio_cfg.data_direct) {
        int spans = 0;
        code = amio_agree(spans_private_clients(f, path, &spans), f->comm, "MPI_File_open");
        if (code == MPI_SUCCESS && spans) {
            f->direct = 0;
            f->forwarded = 1;
            f->intervals = 0;
            snprintf(strategy, sizeof strategy, "%s", FORWARD_STRATEGY);
            snprintf(f->strategy, sizeof f->strategy, "%s", FORWARD_STRATEGY);
            if (f->rank == 0)
                amio_log(1, "%s: the file system's clients cache privately and the ranks use "
                            "more than one client: auto forwards the bytes through atomio's "
                            "servers (%s), each rank writing its own domain of the file at "
                            "sync and close",
                         path, FORWARD_STRATEGY);
        }
        if (code != MPI_SUCCESS) {
            PMPI_File_close(&f->fh);
            destroy(f);
            return amio_raise(MPI_FILE_NULL, code);
        }
    }

    /* 2c. where the locks live: ATOMIO_LOCKS=host, or auto's choice (see host_locks_pay);
     * versioning keeps its servers (its snapshots live there). Every rank of a direct file
     * reaches this collective alike (f->direct, the strategy and the setting are the same
     * on all ranks; forwarding decided the same everywhere above). */
    f->host_locks = f->direct && amio_cfg.host_locks;
    if (code == MPI_SUCCESS && f->direct && !f->host_locks && amio_cfg.locks_auto &&
        !f->versioning) {
        f->host_locks = host_locks_pay(f, path);
        if (f->host_locks && f->rank == 0)
            amio_log(1, "%s: every rank on one host and one page cache: the locks are in the "
                        "host's table (ATOMIO_LOCKS=servers: on the lock servers)",
                     path);
    }

    /* 3. the name on the servers, and the nonce naming the shared pointer's hidden file */
    struct {
        char canon[PATH_MAX];
        uint64_t nonce;
    } named = {"", 0};
    if (f->rank == 0) {
        canonical(path, named.canon, sizeof named.canon);
        named.nonce = amio_sfp_nonce();
    }
    code = amio_bcast(&named, (int)sizeof named, MPI_BYTE, 0, f->comm);
    named.canon[PATH_MAX - 1] = 0;
    f->path = strdup(named.canon);
    if (code == MPI_SUCCESS && !f->path)
        code = amio_error(MPI_ERR_NO_MEM, "out of memory");
    /* Direct placement agrees once at the end of step 5 (every collective of an open costs
     * milliseconds on a busy node); the other placements have collectives of their own in
     * step 4 and must not start them after a failure here. */
    if (!f->direct)
        code = amio_agree(code, f->comm, "MPI_File_open");

    /* Host locks live in one host's shared memory: every rank must be on that host. Every
     * rank of a direct file reaches this collective (f->direct is the same on all ranks). */
    if (f->direct && amio_cfg.host_locks) {
        int one = one_host(f->comm, f->size);
        if (code == MPI_SUCCESS && !one)
            code = amio_error(MPI_ERR_UNSUPPORTED_OPERATION,
                              "ATOMIO_LOCKS=host: the ranks of %s run on more than one host, and "
                              "host locks live in one host's shared memory (unset ATOMIO_LOCKS "
                              "to take the locks on lock servers)",
                              f->path ? f->path : filename);
    }

    /* 4. the data */
    atomio_client *c = NULL;
    int entered = 0;
    if (code == MPI_SUCCESS && f->is_rma) {
        code = amio_agree(amio_rma_open(f), f->comm, "MPI_File_open (rma)");
    } else if (f->direct) {
        /* Direct placement: the ordinary file (opened or created by PMPI above) holds the
         * bytes; the servers hold only its locks, named by the canonical path. No
         * collective here: step 5's agreement covers this step. */
        /* Host locks need no lock server (versioning still needs its servers). */
        if (code == MPI_SUCCESS && !(amio_cfg.host_locks && !f->versioning))
            code = amio_client(&c);
        if (code == MPI_SUCCESS) {
            uint32_t flags = (amode & MPI_MODE_RDONLY) ? ATOMIO_RDONLY : 0;
            flags |= amio_caches_flag(f);
            if (f->host_locks)
                flags |= ATOMIO_HOST_LOCKS;
            rc = atomio_open_direct(c, f->path, flags, &f->af);
            if (rc != ATOMIO_OK) {
                f->af = NULL;
                code = amio_error_atomio(rc, "opening the file");
            }
        }
        if (code == MPI_SUCCESS) {
            char what[160];
            snprintf(what, sizeof what, "atomio strategy \"%s\"", strategy);
            rc = atomio_set_atomic(f->af, strategy);
            if (rc != ATOMIO_OK)
                code = amio_error_atomio(rc, what);
        }
    } else if (code == MPI_SUCCESS) {
        code = amio_client(&c);
        if (code == MPI_SUCCESS && f->rank == 0) {
            code = amio_session_enter(f, c);
            entered = code == MPI_SUCCESS;
        }
        code = amio_agree(code, f->comm, "MPI_File_open");
        if (code == MPI_SUCCESS) {
            rc = atomio_open(c, f->path, 0, 0, 0, &f->af);
            if (rc != ATOMIO_OK) {
                f->af = NULL;
                code = amio_error_atomio(rc, "opening the server copy");
            }
        }
        /* the ordinary file under the copy: read block by block when touched (base.c) */
        if (code == MPI_SUCCESS)
            code = amio_base_open(f);
        /* a forwarded copy counts only once exported, which a job that lost a rank never
         * reaches: its writes need no staging (File::set_all_or_nothing) */
        if (code == MPI_SUCCESS && f->forwarded &&
            atomio_set_all_or_nothing(f->af, 0) != ATOMIO_OK)
            code = amio_error_atomio(ATOMIO_EINTERNAL, "forwarded writes");
        if (code == MPI_SUCCESS) {
            char what[160];
            snprintf(what, sizeof what, "atomio strategy \"%s\"", strategy);
            rc = atomio_set_atomic(f->af, strategy);
            if (rc != ATOMIO_OK)
                code = amio_error_atomio(rc, what); /* carries atomio's message */
        }
        code = amio_agree(code, f->comm, "MPI_File_open");
    }
    f->atomic = amio_cfg.force_atomic;
    /* versioning stays on with atomic mode off (versioning.c) */
    if (code == MPI_SUCCESS && !f->is_rma && !f->atomic && !f->versioning &&
        atomio_set_atomic(f->af, NULL) != ATOMIO_OK)
        code = amio_error_atomio(ATOMIO_EINTERNAL, "atomic mode off");

    /* 5. the shared pointer and the table */
    if (code == MPI_SUCCESS && (amode & MPI_MODE_APPEND))
        code = amio_eof_etypes(f, &f->pos);
    if (code == MPI_SUCCESS)
        code = amio_sfp_open(f, named.nonce);
    if (code == MPI_SUCCESS && amio_table_add(f))
        code = amio_error(MPI_ERR_NO_MEM, "out of memory");
    code = amio_agree(code, f->comm, "MPI_File_open");
    /* 6. interval I/O: the default view's interval set (collective, intervals.c) */
    if (code == MPI_SUCCESS && !f->is_rma)
        amio_intervals_note(f);
    if (code == MPI_SUCCESS && f->intervals)
        code = amio_agree(amio_intervals_update(f, "MPI_File_open"), f->comm, "MPI_File_open");
    if (code == MPI_SUCCESS) {
        *fh = f->fh;
        amio_log(2, "opened %s (strategy %s%s)", f->path, strategy,
                 f->atomic ? ", atomic mode forced" : "");
        return MPI_SUCCESS;
    }

    /* undo, on every rank alike */
    amio_table_remove(f);
    amio_sfp_close(f, 0);
    if (f->af)
        atomio_close(f->af);
    f->af = NULL;
    if (entered)
        amio_session_leave(f, c);
    if (f->is_rma)
        amio_rma_close(f);
    PMPI_File_close(&f->fh);
    destroy(f);
    return amio_raise(MPI_FILE_NULL, code);
}

int MPI_File_close(MPI_File *fh)
{
    amio_file *f = fh ? amio_lookup(*fh) : NULL;
    if (!f)
        return PMPI_File_close(fh);
    int code = MPI_SUCCESS;
    if (!f->is_rma)
        amio_stats_close(f); /* ATOMIO_STATS: collective, changes nothing */
    if (f->is_rma) {
        code = amio_rma_close(f);
    } else if (f->direct) {
        /* nothing to copy: every acknowledged write is already in the file, except under
         * strategy versioning, whose snapshots rank 0 materializes once all ranks are done */
        if (f->versioning)
            code = amio_versioning_settle(f, code, 1, "MPI_File_close");
        /* an interval file: this rank's cached private bytes into its region */
        if (f->ifile && !(f->amode & MPI_MODE_RDONLY)) {
            int frc = atomio_flush(f->af);
            if (frc != ATOMIO_OK && code == MPI_SUCCESS)
                code = amio_error_atomio(frc, "writing the interval cache at MPI_File_close");
        }
        atomio_close(f->af);
        f->af = NULL;
        code = amio_agree(code, f->comm, "MPI_File_close");
    } else {
        /* A cached-lock DLM keeps written bytes in this rank's cache: they reach the servers
         * before the export (it reads without DLM locks). */
        int frc = (f->amode & MPI_MODE_RDONLY) ? ATOMIO_OK : atomio_flush(f->af);
        if (frc != ATOMIO_OK)
            code = amio_error_atomio(frc, "flushing cached writes at MPI_File_close");
        int dirty = f->dirty;
        int c1 = amio_allreduce_int(&dirty, 1, MPI_MAX, f->comm); /* everyone is done */
        if (code == MPI_SUCCESS)
            code = c1;
        if (dirty && !(f->amode & MPI_MODE_DELETE_ON_CLOSE)) {
            code = amio_agree(code, f->comm, "MPI_File_close");
            if (code == MPI_SUCCESS)
                code = amio_base_export(f); /* what was written since the last export */
        }
        if (f->rank == 0) {
            atomio_client *c = NULL;
            int c2 = amio_client(&c);
            if (c2 == MPI_SUCCESS)
                c2 = amio_session_leave(f, c);
            if (code == MPI_SUCCESS)
                code = c2;
        }
        amio_base_close(f);
        atomio_close(f->af);
        f->af = NULL;
        code = amio_agree(code, f->comm, "MPI_File_close");
    }
    /* every rank passed a collective above, so no rank uses the shared pointer any more */
    amio_sfp_close(f, f->rank == 0);
    if (code != MPI_SUCCESS)
        PMPI_File_call_errhandler(f->fh, code);
    amio_table_remove(f);
    int rc = PMPI_File_close(&f->fh);
    if (code == MPI_SUCCESS)
        code = rc;
    *fh = MPI_FILE_NULL;
    destroy(f);
    return code;
}

int MPI_File_delete(const char *filename, MPI_Info info)
{
    char path[PATH_MAX], strategy[96];
    if (!filename ||
        !amio_select(filename, info, path, sizeof path, strategy, sizeof strategy))
        return PMPI_File_delete(filename, info);
    char canon[PATH_MAX];
    canonical(path, canon, sizeof canon);
    int busy = 0;
    int code = amio_session_busy(canon, &busy);
    if (code == MPI_SUCCESS && busy)
        code = amio_error(MPI_ERR_FILE_IN_USE, "%s is open", canon);
    if (code != MPI_SUCCESS)
        return amio_raise(MPI_FILE_NULL, code);
    atomio_client *c = NULL;
    if (strcmp(strategy, "rma") != 0 && amio_rt.n_addrs > 0 && amio_client(&c) == MPI_SUCCESS)
        atomio_remove(c, canon); /* a stale copy, if any */
    amio_base_remove(canon);      /* and its fill map */
    return PMPI_File_delete(path, info);
}
