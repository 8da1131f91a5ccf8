/*
 * config.c -- the environment variables of libatomio_mpiio, read once at MPI_Init (or at
 * the first open when MPI_Init did not go through this library), and the log. The
 * ATOMIO_HINTS file fills the variables left unset first (hints_file.c).
 *
 * Invariants: a malformed value never aborts; it falls back to the default and says so
 * when ATOMIO_VERBOSE >= 1. Strings point into the environment (never freed).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "hints.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

amio_config amio_cfg;
static int loaded;

static long long env_num(const char *name, long long dflt, long long lo, long long hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end = NULL;
    long long x = strtoll(v, &end, 0);
    if (end && (*end == 'k' || *end == 'K')) {
        x *= 1024;
        end++;
    } else if (end && (*end == 'm' || *end == 'M')) {
        x *= 1024 * 1024;
        end++;
    }
    if (!end || *end || x < lo || x > hi) {
        fprintf(stderr, "atomio-mpiio: warning: ignoring %s=%s (want %lld..%lld)\n", name, v, lo, hi);
        return dflt;
    }
    return x;
}

static const char *env_str(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void amio_config_load(void)
{
    if (loaded)
        return;
    loaded = 1;
    amio_hints_load(); /* ATOMIO_HINTS: the site-wide file, under the environment */
    amio_cfg.verbose = (int)env_num("ATOMIO_VERBOSE", 0, 0, 9);
    amio_cfg.force_atomic = (int)env_num("ATOMIO_FORCE_ATOMIC", 0, 0, 1);
    amio_cfg.files = env_str("ATOMIO_FILES");
    amio_cfg.strategy = env_str("ATOMIO_STRATEGY");
    if (!amio_cfg.strategy)
        amio_cfg.strategy = AMIO_DEFAULT_STRATEGY;
    amio_cfg.servers = env_str("ATOMIO_SERVERS");
    amio_cfg.servers_per_node = (int)env_num("ATOMIO_SERVERS_PER_NODE", 1, 1, 64);
    amio_cfg.listen_host = env_str("ATOMIO_LISTEN_HOST");
    amio_cfg.data_dir = env_str("ATOMIO_DATA_DIR");
    amio_cfg.stripe_size = (uint64_t)env_num("ATOMIO_STRIPE_SIZE", 0, 0, 1LL << 40);
    amio_cfg.stripe_count = (uint32_t)env_num("ATOMIO_STRIPE_COUNT", 0, 0, 1 << 20);
    amio_cfg.export_on_sync = (int)env_num("ATOMIO_EXPORT_ON_SYNC", 1, 0, 1);
    amio_cfg.cb_max = (uint64_t)env_num("ATOMIO_CB_MAX", 1LL << 30, 0, 1LL << 40);
    amio_cfg.fs_caches = env_str("ATOMIO_FS_CACHES");
    if (amio_cfg.fs_caches && strcmp(amio_cfg.fs_caches, "shared") != 0 &&
        strcmp(amio_cfg.fs_caches, "coherent") != 0 && strcmp(amio_cfg.fs_caches, "private") != 0) {
        fprintf(stderr, "atomio-mpiio: warning: ignoring ATOMIO_FS_CACHES=%s "
                        "(shared|coherent|private); detecting the file system\n",
                amio_cfg.fs_caches);
        amio_cfg.fs_caches = NULL;
    }
    const char *locks = env_str("ATOMIO_LOCKS");
    amio_cfg.host_locks = locks && strcmp(locks, "host") == 0;
    int auto_locks = !locks || strcmp(locks, "auto") == 0;
    if (locks && !amio_cfg.host_locks && !auto_locks && strcmp(locks, "servers") != 0) {
        fprintf(stderr, "atomio-mpiio: warning: ignoring ATOMIO_LOCKS=%s (auto|servers|host)\n",
                locks);
        auto_locks = 1;
    }
    /* External servers may be shared with other jobs, whose locks a host table would not
     * see: only in-job servers (which no one outside the job reaches) are replaced. */
    amio_cfg.locks_auto = auto_locks && !amio_cfg.servers;
    amio_cfg.stats = env_str("ATOMIO_STATS");
    if (amio_cfg.stats && strcmp(amio_cfg.stats, "0") == 0)
        amio_cfg.stats = NULL;
    const char *d = env_str("ATOMIO_DATA");
    amio_cfg.data_servers = d && strcmp(d, "servers") == 0;
    amio_cfg.data_direct = d && strcmp(d, "direct") == 0;
    if (d && !amio_cfg.data_servers && strcmp(d, "direct") != 0)
        fprintf(stderr, "atomio-mpiio: warning: ignoring ATOMIO_DATA=%s (direct|servers)\n", d);
    amio_cfg.rma_mode = RMALOCK_DIRECT_GRANT;
    const char *m = env_str("ATOMIO_RMA_MODE");
    if (m && strcmp(m, "paper") == 0)
        amio_cfg.rma_mode = RMALOCK_PAPER;
    else if (m && strcmp(m, "direct-grant") != 0)
        fprintf(stderr, "atomio-mpiio: warning: ignoring ATOMIO_RMA_MODE=%s (paper|direct-grant)\n", m);
    const char *s = env_str("ATOMIO_RMA_SCOPE");
    /* Forced atomic mode promises atomicity across independent opens (each rank on
     * MPI_COMM_SELF): only the job-wide lock gives that with rma, so it is the default then. */
    amio_cfg.rma_world = s ? strcmp(s, "world") == 0 : amio_cfg.force_atomic;
    if (s && !amio_cfg.rma_world && strcmp(s, "file") != 0)
        fprintf(stderr, "atomio-mpiio: warning: ignoring ATOMIO_RMA_SCOPE=%s (file|world)\n", s);
    amio_hints_report();
}

/* Every line names its level: "info" at ATOMIO_VERBOSE=1, "debug" above. */
void amio_log(int level, const char *fmt, ...)
{
    if (amio_cfg.verbose < level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "atomio-mpiio[%d] %s: %s\n", amio_rt.world_rank, level <= 1 ? "info" : "debug",
            msg);
}

void amio_warn(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "atomio-mpiio[%d] warning: %s\n", amio_rt.world_rank, msg);
}
