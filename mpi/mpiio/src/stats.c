/*
 * stats.c -- what the library did with a file, for people and tests: ATOMIO_STATS=1 prints
 * to stderr, ATOMIO_STATS=<path> appends to that file (any other value than 0).
 *
 * Lines (rank 0 of the file's communicator prints them; one line each, `key=value` words,
 * the free text last and quoted):
 *   atomio-intervals file=P view=K ranks=N entries=E intervals=I private_intervals=..
 *       shared_intervals=.. private_bytes=.. shared_bytes=.. bound=.. seconds=S
 *       strategy=<in force> choice="<auto's strategy: reason>" [failed="<why>"]
 *     after every interval analysis (open and set_view of an `interval`/`auto` file);
 *   atomio-stats file=P strategy=<asked> in_force=<running> ranks=N calls=.. bytes=..
 *       lock_requests=.. lock_messages=.. lock_free_calls=.. interval_fallbacks=..
 *       lock_ranges=.. read_syscalls=.. base_read=.. exported=.. locks=host|servers
 *       choice="..."
 *     at MPI_File_close, the counters summed over the ranks (atomio_file_stats; base_read
 *     and exported: bytes the library read from the ordinary file to fill a server copy
 *     and wrote into it at exports, base.c). The close's own export comes after the line.
 *
 * Invariants: reporting never changes a call's outcome (a failure to print is ignored);
 * the close report is collective (one reduce) and made only when ATOMIO_STATS is set,
 * which every rank reads from the same environment.
 */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
    const char *where = amio_cfg.stats;
    FILE *out = strcmp(where, "1") == 0 ? stderr : fopen(where, "a");
    if (!out)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    if (out == stderr)
        fflush(out);
    else
        fclose(out);
}

/* Text with its double quotes made single (it is printed inside quotes). */
static const char *quoted(const char *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", s);
    for (char *p = buf; *p; p++)
        if (*p == '"' || *p == '\n')
            *p = '\'';
    return buf;
}

void amio_stats_intervals(amio_file *f, const char *failed)
{
    if (f->iv)
        amio_log(2, "%s: interval analysis %u%s%s", f->path, f->views, f->choice[0] ? ": auto: " : "",
                 f->choice);
    if (!amio_cfg.stats || f->rank != 0 || !f->iv)
        return;
    atomio_interval_stats s;
    memset(&s, 0, sizeof s);
    atomio_intervals_stats(f->iv, &s);
    char c[1024], w[512];
    emit("atomio-intervals file=%s view=%u ranks=%u entries=%llu intervals=%llu "
         "private_intervals=%llu shared_intervals=%llu private_bytes=%llu shared_bytes=%llu "
         "bound=%llu seconds=%.6f strategy=%s choice=\"%s\"%s%s%s",
         f->path, f->views, s.ranks, (unsigned long long)s.entries,
         (unsigned long long)s.intervals, (unsigned long long)s.private_intervals,
         (unsigned long long)s.shared_intervals, (unsigned long long)s.private_bytes,
         (unsigned long long)s.shared_bytes, (unsigned long long)s.bound, s.seconds,
         f->in_force[0] ? f->in_force : "none", quoted(f->choice, c, sizeof c),
         failed ? " failed=\"" : "", failed ? quoted(failed, w, sizeof w) : "", failed ? "\"" : "");
}

int amio_stats_close(amio_file *f)
{
    if (!amio_cfg.stats || !f->af)
        return MPI_SUCCESS;
    atomio_io_stats s;
    memset(&s, 0, sizeof s);
    atomio_file_stats(f->af, &s);
    uint64_t v[10] = {s.calls,           s.bytes,
                      s.lock_requests,   s.lock_messages,
                      s.lock_free_calls, s.interval_fallbacks,
                      s.lock_ranges,     s.read_syscalls,
                      f->base_read,      f->exported};
    uint64_t sum[10] = {0};
    MPI_Request r;
    int rc = PMPI_Ireduce(v, sum, 10, MPI_UINT64_T, MPI_SUM, 0, f->comm, &r);
    if (rc == MPI_SUCCESS)
        rc = amio_wait(&r);
    if (rc != MPI_SUCCESS || f->rank != 0)
        return rc;
    char c[1024], in_force[96] = "";
    atomio_get_strategy(f->af, in_force, sizeof in_force);
    emit("atomio-stats file=%s strategy=%s in_force=%s ranks=%d calls=%llu bytes=%llu "
         "lock_requests=%llu lock_messages=%llu lock_free_calls=%llu interval_fallbacks=%llu "
         "lock_ranges=%llu read_syscalls=%llu base_read=%llu exported=%llu locks=%s "
         "choice=\"%s\"",
         f->path, f->strategy, in_force[0] ? in_force : "none", f->size,
         (unsigned long long)sum[0], (unsigned long long)sum[1], (unsigned long long)sum[2],
         (unsigned long long)sum[3], (unsigned long long)sum[4], (unsigned long long)sum[5],
         (unsigned long long)sum[6], (unsigned long long)sum[7], (unsigned long long)sum[8],
         (unsigned long long)sum[9],
         f->host_locks ? "host" : "servers", quoted(f->choice, c, sizeof c));
    return MPI_SUCCESS;
}
