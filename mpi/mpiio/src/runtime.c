/*
 * runtime.c -- the job's atomio servers and this process's client, set up in MPI_Init /
 * MPI_Init_thread and torn down in MPI_Finalize (both intercepted).
 *
 * Servers: with ATOMIO_SERVERS unset, the first ATOMIO_SERVERS_PER_NODE ranks of every node
 * start a server thread (atomio_server_start) listening on loopback (one-node jobs) or on
 * ATOMIO_LISTEN_HOST / the node's host name, and all ranks learn every address with one
 * MPI_Allgather over MPI_COMM_WORLD. So every open in the job, collective or on
 * MPI_COMM_SELF, uses the same servers, and nothing has to be deployed. ATOMIO_SERVERS names
 * external servers instead ("host:port,host:port" or a cluster file), or "none".
 *
 * Invariants:
 *   - every rank ends MPI_Init with the same server list, or with `broken` set on every
 *     rank (the exchange carries failures too), and programs that never touch an atomio
 *     file run exactly as without the library either way;
 *   - servers stop only after every rank dropped its client (a barrier in MPI_Finalize);
 *   - the relaxed collectives complete exactly like the blocking ones; they only poll
 *     with MPI_Test and sleep instead of spinning.
 */
#define _GNU_SOURCE
#include "internal.h"
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

amio_runtime amio_rt = {.world_lock_mu = PTHREAD_MUTEX_INITIALIZER};
static atomio_server *server;
static char server_dir[4096];
static pthread_mutex_t client_mu = PTHREAD_MUTEX_INITIALIZER;

#define ADDR_LEN 128

/* ----- relaxed collectives ------------------------------------------------------------ */

int amio_wait(MPI_Request *req)
{
    for (int spins = 0;; spins++) {
        int done = 0;
        int rc = PMPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done)
            return rc;
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

int amio_allreduce_int(int *vals, int n, MPI_Op op, MPI_Comm comm)
{
    MPI_Request r;
    int rc = PMPI_Iallreduce(MPI_IN_PLACE, vals, n, MPI_INT, op, comm, &r);
    return rc == MPI_SUCCESS ? amio_wait(&r) : rc;
}

int amio_agree(int code, MPI_Comm comm, const char *what)
{
    int bad = code != MPI_SUCCESS;
    int rc = amio_allreduce_int(&bad, 1, MPI_MAX, comm);
    if (code != MPI_SUCCESS)
        return code;
    if (rc != MPI_SUCCESS)
        return rc;
    return bad ? amio_error(MPI_ERR_IO, "%s failed on another rank", what) : MPI_SUCCESS;
}

int amio_bcast(void *buf, int n, MPI_Datatype t, int root, MPI_Comm comm)
{
    MPI_Request r;
    int rc = PMPI_Ibcast(buf, n, t, root, comm, &r);
    return rc == MPI_SUCCESS ? amio_wait(&r) : rc;
}

int amio_comm_dup(MPI_Comm comm, MPI_Comm *out)
{
    MPI_Request r;
    int rc = PMPI_Comm_idup(comm, out, &r);
    return rc == MPI_SUCCESS ? amio_wait(&r) : rc;
}

int amio_barrier(MPI_Comm comm)
{
    MPI_Request r;
    int rc = PMPI_Ibarrier(comm, &r);
    return rc == MPI_SUCCESS ? amio_wait(&r) : rc;
}

/* ----- servers ------------------------------------------------------------------------ */

static void set_broken(const char *fmt, const char *arg)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg);
    free(amio_rt.broken);
    amio_rt.broken = strdup(msg);
    amio_log(1, "%s", msg);
}

static void add_addr(const char *a, size_t len)
{
    while (len && (*a == ' ' || *a == '\t')) {
        a++;
        len--;
    }
    while (len && (a[len - 1] == ' ' || a[len - 1] == '\t' || a[len - 1] == '\n'))
        len--;
    if (!len)
        return;
    char **n = realloc(amio_rt.addrs, (amio_rt.n_addrs + 1) * sizeof *n);
    if (!n)
        return;
    amio_rt.addrs = n;
    amio_rt.addrs[amio_rt.n_addrs++] = strndup(a, len);
}

/* ATOMIO_SERVERS: "host:port,host:port" or a cluster file (lines `address = "host:port"`,
 * the format `atomio server --cluster` reads). */
static void external_servers(const char *spec)
{
    struct stat st;
    if (strchr(spec, '/') && stat(spec, &st) == 0) {
        FILE *fp = fopen(spec, "r");
        if (!fp) {
            set_broken("cannot read cluster file %s", spec);
            return;
        }
        char line[1024];
        while (fgets(line, sizeof line, fp)) {
            char *p = line;
            while (*p == ' ' || *p == '\t')
                p++;
            if (strncmp(p, "address", 7) != 0)
                continue;
            char *q1 = strchr(p, '"');
            char *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
            if (q1 && q2)
                add_addr(q1 + 1, (size_t)(q2 - q1 - 1));
        }
        fclose(fp);
    } else {
        for (const char *p = spec; *p;) {
            const char *c = strchr(p, ',');
            size_t len = c ? (size_t)(c - p) : strlen(p);
            add_addr(p, len);
            p += len + (c ? 1 : 0);
        }
    }
    if (amio_rt.n_addrs == 0)
        set_broken("ATOMIO_SERVERS=%s names no server", spec);
}

/* The address other nodes reach this one at. */
static void listen_host(int one_node, char *out, size_t cap)
{
    if (amio_cfg.listen_host) {
        snprintf(out, cap, "%s", amio_cfg.listen_host);
        return;
    }
    snprintf(out, cap, "127.0.0.1");
    if (one_node)
        return;
    char host[256];
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (gethostname(host, sizeof host) == 0 && getaddrinfo(host, NULL, &hints, &res) == 0) {
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            char ip[INET_ADDRSTRLEN];
            const struct sockaddr_in *sin = (const struct sockaddr_in *)a->ai_addr;
            if (inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof ip) && strncmp(ip, "127.", 4)) {
                snprintf(out, cap, "%s", ip);
                break;
            }
        }
        freeaddrinfo(res);
    }
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Servers reachable beyond loopback admit only clients that prove a shared token (the
 * Rust side refuses to listen there without one). Unless the user gave one, rank 0 makes
 * one for this job and every rank puts it in its environment, where the servers and the
 * clients (and their lease keepers) read it. It travels only inside the MPI job. */
static void job_token(void)
{
    const char *t = getenv("ATOMIO_TOKEN"), *f = getenv("ATOMIO_TOKEN_FILE");
    int have = (t && *t) || (f && *f);
    PMPI_Bcast(&have, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (have)
        return;
    char token[49] = "";
    if (amio_rt.world_rank == 0) {
        unsigned char raw[24];
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
            set_broken("%s", "cannot draw a random job token (getrandom failed)");
            token[0] = 0;
        } else {
            for (size_t i = 0; i < sizeof raw; i++)
                snprintf(token + 2 * i, 3, "%02x", raw[i]);
        }
    }
    PMPI_Bcast(token, sizeof token, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (token[0])
        setenv("ATOMIO_TOKEN", token, 1);
}

/* FNV-1a of `len` bytes into `h`. */
static unsigned long long fnv(unsigned long long h, const void *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
    return h;
}

/* What names this rank's host for a lock table in its shared memory: the host name, the
 * kernel's boot id, /dev/shm's mount and the pid namespace (the table judges its users'
 * liveness by pid). 0 when one of them cannot be read. */
static unsigned long long host_key(void)
{
    char host[256] = "", boot[64] = "";
    gethostname(host, sizeof host - 1);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, boot, sizeof boot - 1) : -1;
    if (fd >= 0)
        close(fd);
    struct stat shm, ns;
    if (n <= 0 || stat("/dev/shm", &shm) != 0 || stat("/proc/self/ns/pid", &ns) != 0)
        return 0;
    unsigned long long h = fnv(1469598103934665603ULL, host, strlen(host));
    h = fnv(h, boot, (size_t)n);
    unsigned long long ids[4] = {(unsigned long long)shm.st_dev, (unsigned long long)shm.st_ino,
                                 (unsigned long long)ns.st_dev, (unsigned long long)ns.st_ino};
    h = fnv(h, ids, sizeof ids);
    return h ? h : 1;
}

static void in_job_servers(void)
{
    MPI_Comm node = MPI_COMM_NULL;
    int local_rank = 0, local_size = 1;
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        PMPI_Comm_rank(node, &local_rank);
        PMPI_Comm_size(node, &local_size);
        PMPI_Comm_free(&node);
    }
    int one_node = local_size == amio_rt.world_size;
    /* One host for ATOMIO_LOCKS=auto: one shared-memory node by MPI, and the same host
     * key (host name, boot, /dev/shm, pid namespace) on every rank. */
    {
        unsigned long long key = host_key(), v[2] = {key, ~key};
        MPI_Request kr;
        PMPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD, &kr);
        amio_wait(&kr);
        amio_rt.one_host = one_node && key != 0 && v[0] == ~v[1];
    }
    if (!one_node || amio_cfg.listen_host)
        job_token();
    int hosting = local_rank < amio_cfg.servers_per_node;
    int index = 0; /* this server's index: hosting ranks before this one */
    MPI_Request r;
    int mine = hosting;
    PMPI_Iexscan(&mine, &index, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    amio_wait(&r);
    if (amio_rt.world_rank == 0)
        index = 0;

    char my[ADDR_LEN] = "";
    if (hosting) {
        char host[96];
        listen_host(one_node, host, sizeof host);
        const char *base = amio_cfg.data_dir ? amio_cfg.data_dir : getenv("TMPDIR");
        snprintf(server_dir, sizeof server_dir, "%s/atomio-mpiio-XXXXXX",
                 base && *base ? base : "/tmp");
        char listen[128];
        snprintf(listen, sizeof listen, "%s:0", host);
        if (!mkdtemp(server_dir)) {
            snprintf(my, sizeof my, "!cannot create a data directory under %s",
                     base && *base ? base : "/tmp");
            server_dir[0] = 0;
        } else if (atomio_server_start(listen, server_dir, index, &server) != ATOMIO_OK) {
            snprintf(my, sizeof my, "!server on %.30s: %.70s", listen, atomio_last_error());
        } else {
            snprintf(my, sizeof my, "%s", atomio_server_address(server));
            amio_log(2, "server %d listening on %s, data in %s", index, my, server_dir);
        }
    }
    char *all = calloc((size_t)amio_rt.world_size, ADDR_LEN);
    if (!all) {
        set_broken("%s", "out of memory exchanging server addresses");
        return;
    }
    PMPI_Iallgather(my, ADDR_LEN, MPI_CHAR, all, ADDR_LEN, MPI_CHAR, MPI_COMM_WORLD, &r);
    amio_wait(&r);
    for (int i = 0; i < amio_rt.world_size; i++) {
        char *a = all + (size_t)i * ADDR_LEN;
        a[ADDR_LEN - 1] = 0;
        if (a[0] == '!')
            set_broken("atomio servers did not start: %s", a + 1);
        else if (a[0])
            add_addr(a, strlen(a));
    }
    free(all);
}

static void runtime_start(void)
{
    amio_config_load();
    PMPI_Comm_rank(MPI_COMM_WORLD, &amio_rt.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &amio_rt.world_size);
    amio_errors_init();
    amio_datatype_init();
    amio_rt.started = 1;
    if (amio_cfg.servers && strcmp(amio_cfg.servers, "none") == 0)
        set_broken("%s", "ATOMIO_SERVERS=none: only the rma strategy is available");
    else if (amio_cfg.servers)
        external_servers(amio_cfg.servers);
    else
        in_job_servers();
    if (amio_cfg.rma_world) {
        int rc = rmalock_create(MPI_COMM_WORLD, amio_cfg.rma_mode, 0, &amio_rt.world_lock);
        if (rc != RMALOCK_OK)
            amio_log(1, "ATOMIO_RMA_SCOPE=world: %s", rmalock_strerror(rc));
    }
}

static void runtime_stop(void)
{
    if (!amio_rt.started)
        return;
    if (amio_rt.world_lock)
        rmalock_free(&amio_rt.world_lock);
    pthread_mutex_lock(&client_mu);
    if (amio_rt.client)
        atomio_disconnect(amio_rt.client);
    amio_rt.client = NULL;
    pthread_mutex_unlock(&client_mu);
    /* Every rank has dropped its connections before any server stops. */
    amio_barrier(MPI_COMM_WORLD);
    if (server) {
        atomio_server_stop(server);
        server = NULL;
    }
    if (server_dir[0]) {
        nftw(server_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        server_dir[0] = 0;
    }
    for (size_t i = 0; i < amio_rt.n_addrs; i++)
        free(amio_rt.addrs[i]);
    free(amio_rt.addrs);
    amio_rt.addrs = NULL;
    amio_rt.n_addrs = 0;
    amio_rt.started = 0;
}

int amio_client(atomio_client **out)
{
    amio_config_load();
    pthread_mutex_lock(&client_mu);
    int code = MPI_SUCCESS;
    if (!amio_rt.client) {
        if (!amio_rt.started && amio_rt.n_addrs == 0 && amio_cfg.servers &&
            strcmp(amio_cfg.servers, "none") != 0)
            external_servers(amio_cfg.servers); /* MPI_Init did not come through here */
        if (amio_rt.n_addrs == 0) {
            code = amio_error(MPI_ERR_IO, "%s",
                              amio_rt.broken   ? amio_rt.broken
                              : amio_rt.started ? "no atomio servers"
                                                : "no atomio servers: MPI_Init did not go "
                                                  "through libatomio_mpiio and "
                                                  "ATOMIO_SERVERS is not set");
        } else {
            int rc = atomio_connect((const char *const *)amio_rt.addrs, amio_rt.n_addrs,
                                    &amio_rt.client);
            if (rc != ATOMIO_OK) {
                amio_rt.client = NULL;
                code = amio_error_atomio(rc, "connecting to the atomio servers");
            }
        }
    }
    *out = amio_rt.client;
    pthread_mutex_unlock(&client_mu);
    return code;
}

/* ----- MPI_Init / MPI_Finalize ---------------------------------------------------------- */

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        runtime_start();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        runtime_start();
    return rc;
}

int MPI_Finalize(void)
{
    runtime_stop();
    return PMPI_Finalize();
}
