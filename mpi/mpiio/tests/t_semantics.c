/*
 * t_semantics.c -- test 3 (API behaviour): MPI-IO semantics on atomio files, observed
 * side by side with ROMIO on an ordinary file.
 *
 *   t_semantics [--plain-only]
 *
 * The same script of calls runs on "atomio:<dir>/t_sem.dat" and on "<dir>/t_sem.ref"
 * (ROMIO); every observable result (error classes, status counts from MPI_Get_count and
 * MPI_Get_elements, file pointers after seeks, sizes, get_view, get_byte_offset, amode,
 * atomicity, requests, error-handler calls, bytes read back, existence after
 * DELETE_ON_CLOSE and MPI_File_delete, MPI_MODE_APPEND, EXCL, RDONLY, reopen after close,
 * independent opens on MPI_COMM_SELF, the shared file pointer: ordered and shared reads
 * and writes, seek_shared, get_position_shared) is recorded and the two records must be equal.
 * Then atomio-only checks: bad input gives MPI errors, never a crash (a filetype with
 * decreasing displacements, an unknown strategy, external32, a shared access of part of an
 * etype), and the
 * atomio message reaches MPI_Error_string. A view MPI itself rejects gives MPI's own error
 * string, the same as on the ROMIO file.
 * --plain-only: only the ROMIO script (test 4 runs it with and without the library).
 */
#define _GNU_SOURCE
#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXOBS 256
static long long obs[2][MAXOBS];
static const char *label[MAXOBS];
static int nobs[2], cur;
static int handler_calls;
static int beyond_count[2] = {-1, -1};
static char baddisp_msg[2][MPI_MAX_ERROR_STRING];

static void record(const char *what, long long v)
{
    if (nobs[cur] < MAXOBS) {
        label[nobs[cur]] = what;
        obs[cur][nobs[cur]++] = v;
    }
}

static long long cls(int rc)
{
    return rc == MPI_SUCCESS ? 0 : t_errclass(rc);
}

static void count_calls(MPI_File *fh, int *code, ...)
{
    (void)fh;
    (void)code;
    handler_calls++;
}

static int exists(const char *p)
{
    return access(p, F_OK) == 0;
}

static void status_obs(const char *what, MPI_Status *st, MPI_Datatype t)
{
    int c = -2, e = -2;
    MPI_Get_count(st, t, &c);
    MPI_Get_elements(st, t, &e);
    record(what, c);
    record(what, e);
}

/* The shared file pointer once every rank's previous calls are done and before any rank
 * moves on (collective calls need not synchronize). */
static long long shared_pos(MPI_File fh)
{
    MPI_Offset p = -1;
    t_barrier(MPI_COMM_WORLD);
    int rc = MPI_File_get_position_shared(fh, &p);
    t_barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? p : -1000 - cls(rc);
}

/* Ordered writes (rank r writes r + 1 ints after the ranks before it), shared writes at
 * places taken in some order, seeks, ordered and shared reads, and set_view resetting the
 * pointer; every observation is deterministic (the order of concurrent shared writes is
 * not, so their bytes are compared as a sum). */
static void shared_pointer(const char *prefix)
{
    char name[64];
    snprintf(name, sizeof name, "t_sem_sfp.%s", cur ? "dat" : "ref");
    const char *path = t_path(prefix, name), *plain = t_path("", name);
    if (t_rank == 0)
        remove(plain);
    t_barrier(MPI_COMM_WORLD);
    MPI_File fh;
    MPI_Status st;
    int v[8], back[8];
    for (int i = 0; i < 8; i++)
        v[i] = 100 * (t_rank + 1) + i;
    record("sfp open", cls(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                                         MPI_INFO_NULL, &fh)));
    record("sfp position at open", shared_pos(fh));
    record("write_ordered", cls(MPI_File_write_ordered(fh, v, t_rank + 1, MPI_INT, &st)));
    status_obs("write_ordered count", &st, MPI_INT);
    record("sfp position after write_ordered", shared_pos(fh));
    t_barrier(MPI_COMM_WORLD);
    record("write_shared", cls(MPI_File_write_shared(fh, v + 4, 2, MPI_INT, &st)));
    status_obs("write_shared count", &st, MPI_INT);
    t_barrier(MPI_COMM_WORLD);
    record("sfp position after write_shared", shared_pos(fh));
    record("seek_shared set", cls(MPI_File_seek_shared(fh, 4, MPI_SEEK_SET)));
    record("sfp position after seek set", shared_pos(fh));
    memset(back, 0, sizeof back);
    record("read_ordered", cls(MPI_File_read_ordered(fh, back, 1, MPI_INT, &st)));
    status_obs("read_ordered count", &st, MPI_INT);
    record("read_ordered data", back[0]);
    record("sfp position after read_ordered", shared_pos(fh));
    record("seek_shared end", cls(MPI_File_seek_shared(fh, -8, MPI_SEEK_END)));
    record("sfp position after seek end", shared_pos(fh));
    record("seek_shared cur", cls(MPI_File_seek_shared(fh, -4, MPI_SEEK_CUR)));
    record("sfp position after seek cur", shared_pos(fh));
    /* (not compared: ROMIO 4.0 hangs on a negative seek_shared, rank 0 returning the error
     * while the others wait in a barrier; atomio_only checks atomio's answer) */
    MPI_Request rq;
    if (t_rank == 0) {
        memset(back, 0, sizeof back);
        record("read_shared", cls(MPI_File_read_shared(fh, back, 3, MPI_INT, &st)));
        status_obs("read_shared count", &st, MPI_INT);
        /* which rank's shared write comes where is not determined: the ints' low digits */
        record("read_shared data", back[0] % 100 * 10000LL + back[1] % 100 * 100 + back[2] % 100);
        record("iwrite_shared", cls(MPI_File_iwrite_shared(fh, v, 1, MPI_INT, &rq)));
        record("iwrite_shared wait", cls(MPI_Wait(&rq, &st)));
        status_obs("iwrite_shared count", &st, MPI_INT);
    }
    t_barrier(MPI_COMM_WORLD);
    record("sfp position after read/iwrite_shared", shared_pos(fh));
    record("write_ordered_begin", cls(MPI_File_write_ordered_begin(fh, v, 1, MPI_INT)));
    record("write_ordered_end", cls(MPI_File_write_ordered_end(fh, v, &st)));
    status_obs("write_ordered_end count", &st, MPI_INT);
    record("sfp position after split ordered", shared_pos(fh));
    record("set_view", cls(MPI_File_set_view(fh, 8, MPI_INT, MPI_INT, "native", MPI_INFO_NULL)));
    record("sfp position after set_view", shared_pos(fh));
    memset(back, 0, sizeof back);
    record("read_ordered in view", cls(MPI_File_read_ordered(fh, back, 1, MPI_INT, &st)));
    record("read_ordered in view data", back[0] % 100); /* (with 2 ranks: a shared write's) */
    record("sfp close", cls(MPI_File_close(&fh)));
    t_barrier(MPI_COMM_WORLD);
    size_t flen = 0;
    unsigned char *bytes = t_read_file(plain, &flen);
    record("sfp file length", (long long)flen);
    long long sum = 0;
    for (size_t i = 0; bytes && i + 4 <= flen; i += 4) {
        int x;
        memcpy(&x, bytes + i, 4);
        sum += x;
    }
    record("sfp file int sum", sum);
    size_t ordered = 0; /* bytes written by the first write_ordered: rank order */
    for (int r = 0; r < t_size; r++)
        ordered += 4 * (size_t)(r + 1);
    long long osum = 0;
    for (size_t i = 0; bytes && i < ordered && i < flen; i++)
        osum = osum * 131 + bytes[i];
    record("sfp ordered bytes", osum);
    free(bytes);
    /* its bytes depend on the order of the shared writes: not kept for test 4's cmp */
    t_barrier(MPI_COMM_WORLD);
    if (t_rank == 0)
        remove(plain);
    t_barrier(MPI_COMM_WORLD);
}

static void script(const char *prefix)
{
    char name[64], other[64], del[64];
    snprintf(name, sizeof name, "t_sem.%s", cur ? "dat" : "ref");
    snprintf(other, sizeof other, "t_sem_excl.%s", cur ? "dat" : "ref");
    snprintf(del, sizeof del, "t_sem_doc.%s", cur ? "dat" : "ref");
    const char *path = t_path(prefix, name), *plain = t_path("", name);
    const char *opath = t_path(prefix, other), *oplain = t_path("", other);
    const char *dpath = t_path(prefix, del), *dplain = t_path("", del);
    if (t_rank == 0) {
        remove(plain);
        remove(oplain);
        remove(dplain);
    }
    t_barrier(MPI_COMM_WORLD);
    MPI_File fh;
    MPI_Status st;
    int ints[64], back[64], flag, amode;
    for (int i = 0; i < 64; i++)
        ints[i] = 1000 * t_rank + i + 1;

    /* RDONLY on a missing file, then create */
    record("open missing rdonly", cls(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY,
                                                    MPI_INFO_NULL, &fh)));
    record("open create", cls(MPI_File_open(MPI_COMM_WORLD, path,
                                            MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                                            &fh)));
    MPI_File_get_amode(fh, &amode);
    record("amode", amode);
    MPI_File_get_atomicity(fh, &flag);
    record("atomicity initially", flag);
    record("set_atomicity", cls(MPI_File_set_atomicity(fh, 1)));
    MPI_File_get_atomicity(fh, &flag);
    record("atomicity after set", flag);
    MPI_File_set_atomicity(fh, 0);

    /* default view: bytes, contiguous; each rank 100 bytes of its own */
    record("write_at", cls(MPI_File_write_at(fh, 100 * t_rank, ints, 25, MPI_INT, &st)));
    status_obs("write_at count/elements", &st, MPI_INT);
    t_barrier(MPI_COMM_WORLD);
    MPI_Offset size = -1;
    MPI_File_get_size(fh, &size);
    record("size", size);

    /* a view: disp 8, etype int, filetype every other int, interleaved by rank */
    MPI_Datatype v, ft;
    MPI_Type_vector(4, 1, 2, MPI_INT, &v);
    MPI_Type_create_resized(v, 0, 8 * 4, &ft);
    MPI_Type_commit(&ft);
    MPI_Type_free(&v);
    record("set_view", cls(MPI_File_set_view(fh, 8 + 4 * t_rank * 0, MPI_INT, ft, "native",
                                             MPI_INFO_NULL)));
    /* a view MPI itself rejects: MPI's own error (class and message; ROMIO's test/error.c
     * looks for "displacement" in it), and the view just set stays */
    int rc = MPI_File_set_view(fh, -1, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    record("set_view disp -1", cls(rc));
    if (rc != MPI_SUCCESS) {
        int len = 0;
        MPI_Error_string(rc, baddisp_msg[cur], &len);
    }
    MPI_Offset pos = -1;
    MPI_File_get_position(fh, &pos);
    record("position after set_view", pos);
    if (t_rank == 0) {
        record("write ind", cls(MPI_File_write(fh, ints, 6, MPI_INT, &st)));
        status_obs("write ind count", &st, MPI_INT);
        MPI_File_get_position(fh, &pos);
        record("position after write", pos);
        MPI_File_seek(fh, -2, MPI_SEEK_CUR);
        MPI_File_get_position(fh, &pos);
        record("position after seek cur", pos);
        MPI_File_write(fh, ints + 10, 2, MPI_INT, &st);
        MPI_File_get_position(fh, &pos);
        record("position after second write", pos);
        record("seek end", cls(MPI_File_seek(fh, 0, MPI_SEEK_END)));
        MPI_File_get_position(fh, &pos);
        record("position at end", pos);
        record("seek negative", cls(MPI_File_seek(fh, -1000, MPI_SEEK_SET)));
        MPI_Offset boff = -1;
        MPI_File_get_byte_offset(fh, 5, &boff);
        record("byte offset of etype 5", boff);
        MPI_Aint ext = -1;
        MPI_File_get_type_extent(fh, MPI_INT, &ext);
        record("type extent", ext);
        /* reads: within the file, then across its end (contiguous memory) */
        memset(back, 0, sizeof back);
        record("read_at", cls(MPI_File_read_at(fh, 0, back, 6, MPI_INT, &st)));
        status_obs("read_at count", &st, MPI_INT);
        long long sum = 0;
        for (int i = 0; i < 6; i++)
            sum = sum * 31 + back[i];
        record("read_at data", sum);
        record("read_at beyond end", cls(MPI_File_read_at(fh, 1000, back, 4, MPI_INT, &st)));
        /* Not compared: ROMIO's strided reads report the whole request even past the end
         * of the file; MPI says the count is what was read (0), which atomio reports. */
        MPI_Get_count(&st, MPI_INT, &beyond_count[cur]);
        record("negative offset", cls(MPI_File_write_at(fh, -1, ints, 1, MPI_INT, &st)));
        /* nonblocking */
        MPI_Request rq;
        record("iwrite_at", cls(MPI_File_iwrite_at(fh, 20, ints, 3, MPI_INT, &rq)));
        record("wait", cls(MPI_Wait(&rq, &st)));
        status_obs("iwrite count", &st, MPI_INT);
        record("iread_at", cls(MPI_File_iread_at(fh, 20, back, 3, MPI_INT, &rq)));
        flag = 0;
        for (int i = 0; i < 1000000 && !flag; i++)
            MPI_Test(&rq, &flag, &st);
        record("test completes", flag);
        status_obs("iread count", &st, MPI_INT);
        record("iread data", back[0] * 10000LL + back[1] * 100 + back[2]);
        /* an error handler on the file is called for errors */
        MPI_Errhandler eh;
        MPI_File_create_errhandler(count_calls, &eh);
        MPI_File_set_errhandler(fh, eh);
        handler_calls = 0;
        MPI_File_write_at(fh, -5, ints, 1, MPI_INT, &st);
        record("handler calls", handler_calls);
        MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
        MPI_Errhandler_free(&eh);
    }
    MPI_Offset d = -1;
    MPI_Datatype et, gft;
    char rep[MPI_MAX_DATAREP_STRING];
    record("get_view", cls(MPI_File_get_view(fh, &d, &et, &gft, rep)));
    int ni, na, nd, comb;
    MPI_Type_get_envelope(gft, &ni, &na, &nd, &comb);
    record("get_view disp", d);
    record("get_view etype is int", et == MPI_INT);
    /* the combiner of the returned copy is the implementation's choice (ROMIO: contiguous
     * of 1); what must hold is a derived type of the same size and extent */
    record("get_view filetype is derived", comb != MPI_COMBINER_NAMED);
    MPI_Aint flb, fext;
    int fsize;
    MPI_Type_get_extent(gft, &flb, &fext);
    MPI_Type_size(gft, &fsize);
    record("get_view filetype extent", fext);
    record("get_view filetype size", fsize);
    record("get_view datarep native", strcmp(rep, "native") == 0);
    if (comb != MPI_COMBINER_NAMED)
        MPI_Type_free(&gft);
    t_barrier(MPI_COMM_WORLD);

    /* collective size changes */
    record("set_size 50", cls(MPI_File_set_size(fh, 50)));
    MPI_File_get_size(fh, &size);
    record("size after set_size 50", size);
    record("preallocate 300", cls(MPI_File_preallocate(fh, 300)));
    MPI_File_get_size(fh, &size);
    record("size after preallocate 300", size);
    record("preallocate 10", cls(MPI_File_preallocate(fh, 10)));
    MPI_File_get_size(fh, &size);
    record("size after preallocate 10", size);
    record("sync", cls(MPI_File_sync(fh)));
    record("close", cls(MPI_File_close(&fh)));
    record("handle null after close", fh == MPI_FILE_NULL);
    MPI_Type_free(&ft);

    /* EXCL on an existing file; RDONLY write; reopen and read the bytes back */
    record("excl existing", cls(MPI_File_open(MPI_COMM_WORLD, path,
                                              MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR,
                                              MPI_INFO_NULL, &fh)));
    record("open rdonly", cls(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY,
                                            MPI_INFO_NULL, &fh)));
    record("write on rdonly", cls(MPI_File_write_at(fh, 0, ints, 1, MPI_INT, &st)));
    memset(back, 0, sizeof back);
    record("read on rdonly", cls(MPI_File_read_at(fh, 0, back, 40, MPI_INT, &st)));
    status_obs("reread count (file is 300 bytes)", &st, MPI_INT);
    record("read across the end", cls(MPI_File_read_at(fh, 280, back, 10, MPI_INT, &st)));
    status_obs("read across the end count", &st, MPI_INT);
    MPI_Datatype three;
    MPI_Type_contiguous(3, MPI_INT, &three);
    MPI_Type_commit(&three);
    MPI_File_read_at(fh, 280, back, 2, three, &st);
    status_obs("read across the end, 3-int type", &st, three);
    MPI_Type_free(&three);
    long long sum = 0;
    for (int i = 0; i < 40; i++)
        sum = sum * 31 + back[i];
    record("reread data", sum);
    MPI_File_get_size(fh, &size);
    record("reread size", size);
    MPI_File_close(&fh);

    /* APPEND puts the pointer at the end; WRONLY refuses reads */
    record("open append", cls(MPI_File_open(MPI_COMM_WORLD, path,
                                            MPI_MODE_WRONLY | MPI_MODE_APPEND, MPI_INFO_NULL,
                                            &fh)));
    MPI_File_get_position(fh, &pos);
    record("append position", pos);
    record("read on wronly", cls(MPI_File_read_at(fh, 0, back, 1, MPI_INT, &st)));
    if (t_rank == 0)
        MPI_File_write(fh, "tail", 4, MPI_CHAR, &st);
    MPI_File_close(&fh);
    t_barrier(MPI_COMM_WORLD);
    size_t flen = 0;
    unsigned char *bytes = t_read_file(plain, &flen);
    record("ordinary file length", (long long)flen);
    sum = 0;
    for (size_t i = 0; bytes && i < flen; i++)
        sum = sum * 131 + bytes[i];
    record("ordinary file bytes", sum);
    free(bytes);

    /* the shared file pointer (MPI 4.0 14.4.4) */
    shared_pointer(prefix);

    /* independent opens on MPI_COMM_SELF, each rank its own 16 bytes, then read by all */
    record("open self", cls(MPI_File_open(MPI_COMM_SELF, opath, MPI_MODE_CREATE | MPI_MODE_RDWR,
                                          MPI_INFO_NULL, &fh)));
    MPI_File_write_at(fh, 16 * t_rank, ints, 4, MPI_INT, &st);
    t_barrier(MPI_COMM_WORLD);
    MPI_File_close(&fh);
    t_barrier(MPI_COMM_WORLD);
    MPI_File_open(MPI_COMM_WORLD, opath, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    MPI_File_get_size(fh, &size);
    record("self-opened size", size);
    memset(back, 0, sizeof back);
    MPI_File_read_at_all(fh, 0, back, 4 * t_size, MPI_INT, &st);
    sum = 0;
    for (int i = 0; i < 4 * t_size; i++)
        sum = sum * 31 + back[i];
    record("self-opened data", sum);
    MPI_File_close(&fh);

    /* DELETE_ON_CLOSE, MPI_File_delete */
    MPI_File_open(MPI_COMM_WORLD, dpath,
                  MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    MPI_File_write_at(fh, 4 * t_rank, ints, 1, MPI_INT, &st);
    MPI_File_close(&fh);
    t_barrier(MPI_COMM_WORLD);
    record("exists after delete-on-close", exists(dplain));
    t_barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        record("delete", cls(MPI_File_delete(opath, MPI_INFO_NULL)));
        record("exists after delete", exists(oplain));
        record("delete missing", cls(MPI_File_delete(opath, MPI_INFO_NULL)));
    }
    t_barrier(MPI_COMM_WORLD);
}

static void atomio_only(void)
{
    const char *path = t_path("atomio:", "t_sem_bad.dat");
    MPI_File fh;
    MPI_Status st;
    int ints[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    T_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                        &fh));
    T_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    /* a filetype with decreasing displacements is not a legal file view */
    int bl[2] = {1, 1}, d[2] = {4, 0};
    MPI_Datatype bad;
    MPI_Type_indexed(2, bl, d, MPI_INT, &bad);
    MPI_Type_commit(&bad);
    int rc = MPI_File_set_view(fh, 0, MPI_INT, bad, "native", MPI_INFO_NULL);
    /* (ROMIO rejects it itself, class MPI_ERR_IO; an MPI that accepts it gets atomio's
     * MPI_ERR_TYPE) */
    T_ASSERT(rc != MPI_SUCCESS, "a non-monotone filetype must be rejected");
    MPI_Type_free(&bad);
    rc = MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL);
    T_ASSERT(t_errclass(rc) == MPI_ERR_UNSUPPORTED_DATAREP, "external32: %s", t_errstr(rc));
    /* the old view still works */
    T_MPI(MPI_File_write_at(fh, 4 * t_rank, ints, 1, MPI_INT, &st));
    rc = MPI_File_seek_shared(fh, -1, MPI_SEEK_SET);
    T_ASSERT(t_errclass(rc) == MPI_ERR_ARG, "seek_shared to -1: %s", t_errstr(rc));
    rc = MPI_File_write_shared(fh, ints, 3, MPI_CHAR, &st);
    T_ASSERT(rc != MPI_SUCCESS, "a shared access of part of an etype must fail");
    rc = MPI_File_write_at(fh, 0, ints, -1, MPI_INT, &st);
    T_ASSERT(rc != MPI_SUCCESS, "a negative count must fail");
    T_MPI(MPI_File_close(&fh));
    /* an unknown strategy fails the open on every rank, with atomio's message */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", "fcntl-please");
    rc = MPI_File_open(MPI_COMM_WORLD, t_path("", "t_sem_bad.dat"), MPI_MODE_RDWR, info, &fh);
    MPI_Info_free(&info);
    T_ASSERT(rc != MPI_SUCCESS && fh == MPI_FILE_NULL, "an unknown strategy must fail the open");
    char s[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(rc, s, &len);
    T_ASSERT(strstr(s, "fcntl-please") != NULL, "the message names the strategy: %s", s);
    t_barrier(MPI_COMM_WORLD);
    if (t_rank == 0)
        remove(t_path("", "t_sem_bad.dat"));
    t_log("atomio-only checks: bad input gives MPI errors (%s)", s);
}

/* T_REF_QUIRKS: ','-separated observation labels where the reference MPI-IO is known to
 * deviate from ROMIO (Open MPI's OMPIO; run.sh sets it and README.md says why). Their
 * differences are printed but do not fail the test, and --plain-only prints no value for
 * them (so outputs with and without atomio compare equal). Empty or unset: none. */
static int quirk(const char *what)
{
    const char *q = getenv("T_REF_QUIRKS");
    size_t n = strlen(what);
    while (q && *q) {
        const char *e = strchr(q, ',');
        size_t len = e ? (size_t)(e - q) : strlen(q);
        if (len == n && strncmp(q, what, n) == 0)
            return 1;
        q = e ? e + 1 : NULL;
    }
    return 0;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int plain_only = argc > 1 && strcmp(argv[1], "--plain-only") == 0;
    cur = 0;
    script("");
    if (plain_only) {
        for (int i = 0; i < nobs[0]; i++)
            if (quirk(label[i]))
                t_log("%-36s (not compared: T_REF_QUIRKS)", label[i]);
            else
                t_log("%-36s %lld", label[i], obs[0][i]);
        t_finalize();
        return 0;
    }
    cur = 1;
    script("atomio:");
    T_ASSERT(nobs[0] == nobs[1], "%d observations with ROMIO, %d with atomio", nobs[0], nobs[1]);
    int bad = 0, quirks = 0;
    for (int i = 0; i < nobs[0]; i++)
        if (obs[0][i] != obs[1][i]) {
            int q = quirk(label[i]);
            fprintf(stderr, "rank %d: %-36s reference %lld, atomio %lld%s\n", t_rank, label[i],
                    obs[0][i], obs[1][i], q ? " (known reference quirk, T_REF_QUIRKS)" : "");
            if (q)
                quirks++;
            else
                bad = 1;
        }
    T_ASSERT(!bad, "atomio's MPI-IO semantics differ from the reference's (see above)");
    T_ASSERT(strcmp(baddisp_msg[0], baddisp_msg[1]) == 0,
             "set_view with displacement -1: message \"%s\" with the reference, \"%s\" with atomio",
             baddisp_msg[0], baddisp_msg[1]);
    t_log("%d observations, all equal to the reference's%s", nobs[0],
          quirks ? " except the known quirks above" : "");
    if (t_rank == 0)
        T_ASSERT(beyond_count[1] == 0, "a read entirely past the end counts %d ints, not 0",
                 beyond_count[1]);
    atomio_only();
    t_finalize();
    return 0;
}
