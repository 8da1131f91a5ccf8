/*
 * select.c -- which files atomio takes, and with which strategy.
 *
 * A file is taken when (first match wins):
 *   1. its name starts with "atomio:" (the prefix is removed before the name reaches PMPI
 *      or the servers, like ROMIO's own "ufs:" prefixes);
 *   2. the open's info has the hint "atomio_strategy" (its value is the strategy);
 *   3. ATOMIO_FILES lists a glob that matches it: ':'-separated fnmatch(3) patterns with
 *      FNM_PATHNAME ('*' does not cross '/'), and "DIR/ **" (no space) for everything below DIR. An
 *      entry without glob characters that names a directory ("/scratch/run1" or
 *      "/scratch/run1/") takes the tree below it, as "DIR/ **" would (logged at ATOMIO_VERBOSE=1).
 *      The name is matched as given (without a ROMIO "fs:" prefix) and as an absolute path.
 * The strategy is the hint's value, else ATOMIO_STRATEGY, else auto.
 *
 * Invariants: a file that is not taken keeps its name byte for byte; the decision depends
 * only on the name, the info and the environment, so ranks that pass the same arguments
 * decide the same (open_close.c checks that they did).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "hints.h"
#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREFIX "atomio:"
#define HINT "atomio_strategy"

/* `name` without a ROMIO file-system prefix such as "ufs:" or "lustre:". */
static const char *strip_fs_prefix(const char *name)
{
    const char *c = strchr(name, ':');
    if (!c || c - name < 2 || c - name > 16)
        return name;
    for (const char *p = name; p < c; p++)
        if (!isalnum((unsigned char)*p))
            return name;
    return c + 1;
}

static int glob_match(const char *pat, size_t plen, const char *name)
{
    char p[4096];
    if (plen == 0 || plen >= sizeof p)
        return 0;
    memcpy(p, pat, plen);
    p[plen] = 0;
    struct stat st;
    if (!strpbrk(p, "*?[") && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* a plain directory: its tree (never silently nothing) */
        while (plen > 1 && p[plen - 1] == '/')
            p[--plen] = 0;
        if (plen + 3 >= sizeof p)
            return 0;
        amio_log(1, "ATOMIO_FILES: %s is a directory: taking every file below it", p);
        memcpy(p + plen, "/**", 4);
        plen += 3;
    }
    if (plen >= 3 && strcmp(p + plen - 3, "/**") == 0) {
        p[plen - 3] = 0; /* "DIR/ **": DIR matches as a pattern, then anything below it */
        const char *slash = strrchr(name, '/');
        while (slash && slash > name) {
            char dir[4096];
            size_t dl = (size_t)(slash - name);
            if (dl >= sizeof dir)
                return 0;
            memcpy(dir, name, dl);
            dir[dl] = 0;
            if (fnmatch(p, dir, FNM_PATHNAME) == 0)
                return 1;
            slash = memrchr(name, '/', dl);
        }
        return 0;
    }
    return fnmatch(p, name, FNM_PATHNAME) == 0;
}

static int listed(const char *name)
{
    if (!amio_cfg.files)
        return 0;
    char abs[4096];
    const char *n = strip_fs_prefix(name);
    abs[0] = 0;
    if (n[0] != '/') {
        char cwd[2048];
        if (getcwd(cwd, sizeof cwd))
            snprintf(abs, sizeof abs, "%s/%s", cwd, n[0] == '.' && n[1] == '/' ? n + 2 : n);
    }
    for (const char *p = amio_cfg.files; *p;) {
        const char *c = strchr(p, ':');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (glob_match(p, len, n) || (abs[0] && glob_match(p, len, abs)))
            return 1;
        p += len + (c ? 1 : 0);
    }
    return 0;
}

int amio_select(const char *name, MPI_Info info, char *path, size_t path_cap, char *strategy,
                size_t strat_cap)
{
    amio_config_load();
    int taken = 0;
    const char *real = name;
    if (strncmp(name, PREFIX, strlen(PREFIX)) == 0) {
        taken = 1;
        real = name + strlen(PREFIX);
    }
    snprintf(path, path_cap, "%s", real);
    snprintf(strategy, strat_cap, "%s", amio_cfg.strategy);
    if (info != MPI_INFO_NULL) {
        char v[256];
        int flag = 0;
        if (PMPI_Info_get(info, HINT, (int)sizeof v - 1, v, &flag) == MPI_SUCCESS && flag) {
            taken = 1;
            snprintf(strategy, strat_cap, "%s", v);
        }
    }
    if (!taken)
        taken = listed(name);
    if (taken)
        amio_hints_check_info(info); /* unknown or job-wide atomio_ keys: warned */
    return taken;
}
