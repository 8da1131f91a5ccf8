/*
 * hints_file.c -- configuration the ROMIO way. Every setting a user may change is in one
 * table (settings[] below, documented in mpi/mpiio/README.md "Settings"), under one name:
 * the hint `atomio_NAME`, the environment variable `ATOMIO_NAME`.
 *
 * Where a value comes from, first match wins:
 *   1. the open's MPI_Info hint, for the settings that are per file (`per_file` below:
 *      atomio_strategy, atomio_fs_caches, atomio_hdf5_span, atomio_interval_reach,
 *      atomio_format);
 *   2. the environment variable ATOMIO_NAME (overrides, as before);
 *   3. the site-wide hints file named by ATOMIO_HINTS (like ROMIO_HINTS): `key value` lines,
 *      key `atomio_NAME` (or `ATOMIO_NAME`), the value the rest of the line; `#` starts a
 *      comment line; blank lines are ignored;
 *   4. the default.
 * The file is applied by setting ATOMIO_NAME in this process's environment where it is unset
 * (amio_hints_load, at the first amio_config_load, before any setting is read and before
 * libatomio's threads start), so every reader -- config.c, runtime.c and the Rust core's
 * own variables (ATOMIO_MMAP, ATOMIO_LEASE_MS, ...) -- sees one value by one rule. In the
 * file, a per-file setting is the default of every open (atomio_strategy there is the
 * strategy of taken files, like ATOMIO_STRATEGY: it does not take files as the hint does);
 * atomio_interval_reach and atomio_format have no variable and are per open only.
 *
 * Unknown keys are warned about (amio_warn): in the file (with file:line), and "atomio_"
 * keys of an open's info that are unknown or are job-wide (read once at MPI_Init; an open
 * cannot change them), once per key and process. ATOMIO_VERBOSE=1 prints every setting's
 * effective value and origin from world rank 0 at MPI_Init (amio_hints_report).
 *
 * Invariants: nothing here aborts or fails an MPI call; the environment always wins over the
 * file; a value from the file is at most 4095 bytes; the table is the only list of settings.
 */
#define _GNU_SOURCE
#include "hints.h"
#include "internal.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *name;  /* NAME: hint atomio_NAME, variable ATOMIO_NAME */
    const char *dflt;  /* default, as shown */
    int per_file;      /* 1: an open's info hint sets it for that file; 2: hint only */
} setting;

static const setting settings[] = {
    {"strategy", "auto", 1},
    {"files", "(none)", 0},
    {"force_atomic", "0", 0},
    {"data", "direct", 0},
    {"mmap", "1", 0},
    {"mmap_huge", "1", 0},
    {"locks", "auto", 0},
    {"cb_max", "1073741824", 0},
    {"hdf5_span", "1", 1},
    {"hdf5_span_max", "1073741824", 0},
    {"fs_caches", "(detected per file)", 1},
    {"interval_reach", "1099511627776", 2},
    {"format", "(flat)", 2},
    {"lease_ms", "5000", 0},
    {"token_file", "(a fresh token per job)", 0},
    {"servers", "(in-job)", 0},
    {"servers_per_node", "1", 0},
    {"listen_host", "(host name)", 0},
    {"data_dir", "($TMPDIR or /tmp)", 0},
    {"stripe_size", "65536", 0},
    {"stripe_count", "(every server)", 0},
    {"export_on_sync", "1", 0},
    {"local_bypass", "1", 0},
    {"staged_writes", "1", 0},
    {"rma_mode", "direct-grant", 0},
    {"rma_scope", "file", 0},
    {"tls_ca", "(none)", 0},
    {"tls_cert", "(none)", 0},
    {"tls_key", "(none)", 0},
    {"stats", "0", 0},
    {"verbose", "0", 0},
};
#define N_SETTINGS (sizeof settings / sizeof settings[0])

/* Where each setting's value came from: 0 default, 1 environment, 2 file (origin_line). */
static int origin[N_SETTINGS];
static int origin_line[N_SETTINGS];
static char hints_path[1024];
static int loaded;

static void var_name(const setting *s, char *out, size_t cap)
{
    snprintf(out, cap, "ATOMIO_%s", s->name);
    for (char *p = out; *p; p++)
        *p = (char)toupper((unsigned char)*p);
}

/* The setting a key names ("atomio_strategy", "ATOMIO_STRATEGY"), or -1. */
static int find(const char *key)
{
    if (strncasecmp(key, "atomio_", 7) != 0)
        return -1;
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (strcasecmp(key + 7, settings[i].name) == 0)
            return (int)i;
    return -1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Problems of the file are told once, by world rank 0 (every rank reads the same file). */
static int rank0(void)
{
    int init = 0, rank = 0;
    if (PMPI_Initialized(&init) == MPI_SUCCESS && init)
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == 0;
}
#define file_warn(...)                                                                      \
    do {                                                                                   \
        if (rank0())                                                                       \
            amio_warn(__VA_ARGS__);                                                        \
    } while (0)

void amio_hints_load(void)
{
    if (loaded)
        return;
    loaded = 1;
    char var[64];
    for (size_t i = 0; i < N_SETTINGS; i++) {
        var_name(&settings[i], var, sizeof var);
        const char *v = getenv(var);
        origin[i] = v && *v ? 1 : 0;
    }
    const char *path = getenv("ATOMIO_HINTS");
    if (!path || !*path)
        return;
    snprintf(hints_path, sizeof hints_path, "%s", path);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        file_warn("ATOMIO_HINTS=%s: cannot read it (%s); no site-wide settings", path, strerror(errno));
        return;
    }
    char line[4200];
    int n = 0;
    while (fgets(line, sizeof line, fp)) {
        n++;
        if (!strchr(line, '\n') && !feof(fp)) {
            file_warn("%s:%d: line longer than 4095 bytes, ignored", path, n);
            int c;
            while ((c = fgetc(fp)) != EOF && c != '\n') {
            }
            continue;
        }
        char *s = trim(line);
        if (!*s || *s == '#')
            continue;
        char *v = s;
        while (*v && !isspace((unsigned char)*v))
            v++;
        if (*v)
            *v++ = '\0';
        v = trim(v);
        int i = find(s);
        if (i < 0) {
            file_warn("%s:%d: unknown key %s (ignored; the keys are in mpi/mpiio/README.md, "
                      "\"Settings\")", path, n, s);
            continue;
        }
        if (settings[i].per_file == 2) {
            file_warn("%s:%d: %s is a per-open hint only (MPI_Info of MPI_File_open or "
                      "MPI_File_set_view); ignored here", path, n, s);
            continue;
        }
        if (!*v) {
            file_warn("%s:%d: %s has no value (ignored)", path, n, s);
            continue;
        }
        if (origin[i] == 1) /* the environment overrides the file */
            continue;
        var_name(&settings[i], var, sizeof var);
        if (setenv(var, v, 1) == 0) {
            origin[i] = 2;
            origin_line[i] = n;
        }
    }
    fclose(fp);
}

void amio_hints_report(void)
{
    if (amio_cfg.verbose < 1)
        return;
    int init = 0, rank = 0;
    if (PMPI_Initialized(&init) != MPI_SUCCESS || !init)
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0)
        return;
    char var[64];
    fprintf(stderr, "atomio-mpiio[0] info: settings (hint > environment > ATOMIO_HINTS%s%s > "
                    "default):\n",
            hints_path[0] ? "=" : " unset", hints_path);
    for (size_t i = 0; i < N_SETTINGS; i++) {
        var_name(&settings[i], var, sizeof var);
        const char *v = settings[i].per_file == 2 ? NULL : getenv(var);
        char from[1200];
        if (settings[i].per_file == 2)
            snprintf(from, sizeof from, "per-open hint only");
        else if (origin[i] == 1)
            snprintf(from, sizeof from, "environment %s", var);
        else if (origin[i] == 2)
            snprintf(from, sizeof from, "ATOMIO_HINTS %s:%d", hints_path, origin_line[i]);
        else
            snprintf(from, sizeof from, "default");
        fprintf(stderr, "atomio-mpiio[0] info:   atomio_%-16s = %s  (%s%s)\n", settings[i].name,
                v && *v && origin[i] ? v : settings[i].dflt, from,
                settings[i].per_file == 1 ? "; an open's hint wins" : "");
    }
}

static __thread int open_span = -1;

int amio_hints_open_span(void)
{
    return open_span;
}

void amio_hints_check_info(MPI_Info info)
{
    static unsigned char warned[N_SETTINGS + 1];
    static char unknown[16][MPI_MAX_INFO_KEY + 1];
    static int n_unknown;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    open_span = -1;
    if (info == MPI_INFO_NULL)
        return;
    char v[64];
    int flag = 0;
    if (PMPI_Info_get(info, "atomio_hdf5_span", (int)sizeof v - 1, v, &flag) == MPI_SUCCESS && flag) {
        if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "enable"))
            open_span = 1;
        else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "disable"))
            open_span = 0;
        else
            amio_warn("MPI_File_open: ignoring atomio_hdf5_span=%s (0|1)", v);
    }
    int nkeys = 0;
    if (PMPI_Info_get_nkeys(info, &nkeys) != MPI_SUCCESS)
        return;
    for (int k = 0; k < nkeys; k++) {
        char key[MPI_MAX_INFO_KEY + 1];
        if (PMPI_Info_get_nthkey(info, k, key) != MPI_SUCCESS ||
            strncasecmp(key, "atomio_", 7) != 0)
            continue;
        int i = find(key);
        if (i >= 0 && settings[i].per_file)
            continue;
        pthread_mutex_lock(&mu);
        int first = 0;
        if (i >= 0) {
            first = !warned[i];
            warned[i] = 1;
        } else {
            first = 1;
            for (int u = 0; u < n_unknown && first; u++)
                first = strcmp(unknown[u], key) != 0;
            if (first && n_unknown < 16)
                snprintf(unknown[n_unknown++], sizeof unknown[0], "%s", key);
            else if (first) /* too many distinct ones: stop warning */
                first = !warned[N_SETTINGS]++;
        }
        pthread_mutex_unlock(&mu);
        if (!first)
            continue;
        char var[64];
        if (i >= 0) {
            var_name(&settings[i], var, sizeof var);
            amio_warn("MPI_File_open: hint %s is a job-wide setting, read once at MPI_Init; "
                      "ignored in an open's info (set %s or put it in the ATOMIO_HINTS file)",
                      key, var);
        } else {
            amio_warn("MPI_File_open: unknown hint %s (ignored; the hints are in "
                      "mpi/mpiio/README.md, \"Settings\")", key);
        }
    }
}
