/*
 * t_noncontig.c -- test 3: noncontiguous file views and memory datatypes (vector, indexed,
 * struct, subarray, resized, darray, hindexed with negative displacements, MPI_BOTTOM
 * addresses, negative strides), independent, collective, nonblocking and split
 * collective, checked against ROMIO itself.
 *
 *   t_noncontig [--plain-only]
 *
 * Every case runs the same calls on two files: "atomio:<dir>/t_nc_<case>.dat" (taken by
 * atomio) and "<dir>/t_nc_<case>.ref" (not taken: ROMIO). Checks:
 *   - the data read back through atomio equals the data written (compared packed);
 *   - the whole memory buffer after the read equals ROMIO's after the same read (so bytes
 *     outside the memory type's data are left alone exactly as ROMIO leaves them);
 *   - the status counts equal ROMIO's;
 *   - after close, the atomio file (exported to its path) and ROMIO's file are equal byte
 *     for byte: the decoded view put every byte where MPI says it goes.
 * Ranks access disjoint parts of each file, so the result does not depend on timing.
 * --plain-only: only the ROMIO files (test 4 runs this with and without the library and
 * compares the files and the output).
 */
#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IND, IND_AT, COLL, COLL_AT, NB_AT, NB_COLL, SPLIT, SPLIT_AT };
static const char *mode_name[] = {"write/read",          "write_at/read_at",
                                  "write_all/read_all",  "write_at_all/read_at_all",
                                  "iwrite_at/iread_at",  "iwrite_all/iread_all",
                                  "write_all_begin/end", "write_at_all_begin/end"};

typedef struct {
    char name[64];
    MPI_Offset disp;
    MPI_Datatype etype, filetype;
    MPI_Datatype memtype;
    int count;
    int mode;
    MPI_Offset offset; /* etypes: explicit offset, or where to seek first */
    int bottom;        /* memory addressed from MPI_BOTTOM (absolute addresses) */
} case_t;

#define PREFILL 4096
static int plain_only;
static int bottom_a[8], bottom_b[8]; /* the arrays an MPI_BOTTOM struct addresses */

static void do_io(MPI_File fh, const case_t *c, int is_write, void *buf, MPI_Status *st)
{
    MPI_Request rq;
    if (c->mode == IND || c->mode == COLL || c->mode == NB_COLL || c->mode == SPLIT)
        T_MPI(MPI_File_seek(fh, c->offset, MPI_SEEK_SET));
    switch (c->mode) {
    case IND:
        T_MPI(is_write ? MPI_File_write(fh, buf, c->count, c->memtype, st)
                       : MPI_File_read(fh, buf, c->count, c->memtype, st));
        break;
    case IND_AT:
        T_MPI(is_write ? MPI_File_write_at(fh, c->offset, buf, c->count, c->memtype, st)
                       : MPI_File_read_at(fh, c->offset, buf, c->count, c->memtype, st));
        break;
    case COLL:
        T_MPI(is_write ? MPI_File_write_all(fh, buf, c->count, c->memtype, st)
                       : MPI_File_read_all(fh, buf, c->count, c->memtype, st));
        break;
    case COLL_AT:
        T_MPI(is_write ? MPI_File_write_at_all(fh, c->offset, buf, c->count, c->memtype, st)
                       : MPI_File_read_at_all(fh, c->offset, buf, c->count, c->memtype, st));
        break;
    case NB_AT:
        T_MPI(is_write ? MPI_File_iwrite_at(fh, c->offset, buf, c->count, c->memtype, &rq)
                       : MPI_File_iread_at(fh, c->offset, buf, c->count, c->memtype, &rq));
        T_MPI(MPI_Wait(&rq, st));
        break;
    case NB_COLL:
        T_MPI(is_write ? MPI_File_iwrite_all(fh, buf, c->count, c->memtype, &rq)
                       : MPI_File_iread_all(fh, buf, c->count, c->memtype, &rq));
        T_MPI(MPI_Wait(&rq, st));
        break;
    case SPLIT:
        if (is_write) {
            T_MPI(MPI_File_write_all_begin(fh, buf, c->count, c->memtype));
            T_MPI(MPI_File_write_all_end(fh, buf, st));
        } else {
            T_MPI(MPI_File_read_all_begin(fh, buf, c->count, c->memtype));
            T_MPI(MPI_File_read_all_end(fh, buf, st));
        }
        break;
    case SPLIT_AT:
        if (is_write) {
            T_MPI(MPI_File_write_at_all_begin(fh, c->offset, buf, c->count, c->memtype));
            T_MPI(MPI_File_write_at_all_end(fh, buf, st));
        } else {
            T_MPI(MPI_File_read_at_all_begin(fh, c->offset, buf, c->count, c->memtype));
            T_MPI(MPI_File_read_at_all_end(fh, buf, st));
        }
        break;
    }
}

/* Memory for `count` memtype: an allocation with room on both sides of the origin. */
typedef struct {
    unsigned char *alloc;
    size_t len;
    void *origin;
} mem_t;

static mem_t mem_for(const case_t *c, unsigned char fill)
{
    mem_t m;
    if (c->bottom) {
        for (int i = 0; i < 8; i++)
            bottom_a[i] = bottom_b[i] = fill ? (fill << 8) + i + 1 + 100 * t_rank : 0x0E0E0E0E;
        m.alloc = NULL;
        m.len = 0;
        m.origin = MPI_BOTTOM;
        return m;
    }
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(c->memtype, &lb, &ext);
    MPI_Type_get_true_extent(c->memtype, &tlb, &text);
    /* instance i spans [i*ext + tlb, i*ext + tlb + text) */
    MPI_Aint lo = tlb < (c->count - 1) * ext + tlb ? tlb : (c->count - 1) * ext + tlb;
    MPI_Aint hi = (c->count - 1) * ext + tlb + text;
    if (tlb + text > hi)
        hi = tlb + text;
    size_t pad = 64;
    m.len = (size_t)(hi - (lo < 0 ? lo : 0)) + 2 * pad;
    m.alloc = malloc(m.len);
    for (size_t i = 0; i < m.len; i++)
        m.alloc[i] = fill ? (unsigned char)((i * 11 + (size_t)t_rank * 37 + fill) | 1) : 0xEE;
    m.origin = m.alloc + pad + (lo < 0 ? -lo : 0);
    return m;
}

static unsigned char *packed(const case_t *c, void *origin, int *len)
{
    int size;
    MPI_Pack_size(c->count, c->memtype, MPI_COMM_SELF, &size);
    unsigned char *p = malloc((size_t)size + 1);
    int pos = 0;
    MPI_Pack(origin, c->count, c->memtype, p, size, &pos, MPI_COMM_SELF);
    *len = pos;
    return p;
}

static void run_case(case_t *c, int seq)
{
    char an[128], rn[128];
    snprintf(an, sizeof an, "t_nc_%02d_%s.dat", seq, c->name);
    snprintf(rn, sizeof rn, "t_nc_%02d_%s.ref", seq, c->name);
    const char *apath = t_path("atomio:", an), *aplain = t_path("", an), *rpath = t_path("", rn);
    if (t_rank == 0) {
        /* Both files start with the same bytes (ROMIO's collective writes fill holes past
         * the end of a file with whatever their buffer held; inside the file they read
         * first). The atomio file imports them at open. */
        unsigned char pre[PREFILL];
        for (size_t i = 0; i < PREFILL; i++)
            pre[i] = (unsigned char)(i * 7 + 3);
        for (int f = 0; f < 2; f++) {
            FILE *fp = fopen(f ? aplain : rpath, "wb");
            T_ASSERT(fp && fwrite(pre, 1, PREFILL, fp) == PREFILL, "prefilling a file");
            fclose(fp);
        }
    }
    t_barrier(MPI_COMM_WORLD);
    int nfiles = plain_only ? 1 : 2;
    const char *paths[2] = {rpath, apath};
    MPI_File fh[2];
    int counts[2][2];
    unsigned char *after[2];
    mem_t src = mem_for(c, (unsigned char)(seq + 1));
    int plen;
    unsigned char *want = packed(c, src.origin, &plen);
    for (int f = 0; f < nfiles; f++) {
        T_MPI(MPI_File_open(MPI_COMM_WORLD, paths[f], MPI_MODE_CREATE | MPI_MODE_RDWR,
                            MPI_INFO_NULL, &fh[f]));
        T_MPI(MPI_File_set_view(fh[f], c->disp, c->etype, c->filetype, "native", MPI_INFO_NULL));
        MPI_Status st;
        do_io(fh[f], c, 1, src.origin, &st);
        MPI_Get_count(&st, MPI_BYTE, &counts[f][0]);
        t_barrier(MPI_COMM_WORLD);
        mem_t back = mem_for(c, 0);
        do_io(fh[f], c, 0, back.origin, &st);
        MPI_Get_count(&st, MPI_BYTE, &counts[f][1]);
        int blen;
        unsigned char *got = packed(c, back.origin, &blen);
        T_ASSERT(blen == plen && memcmp(got, want, (size_t)plen) == 0,
                 "case %s (%s) on %s: the data read back differs from the data written",
                 c->name, mode_name[c->mode], paths[f]);
        free(got);
        if (c->bottom) {
            after[f] = malloc(sizeof bottom_a + sizeof bottom_b);
            memcpy(after[f], bottom_a, sizeof bottom_a);
            memcpy(after[f] + sizeof bottom_a, bottom_b, sizeof bottom_b);
            back.len = sizeof bottom_a + sizeof bottom_b;
        } else {
            after[f] = back.alloc;
        }
        if (f == 1) {
            T_ASSERT(memcmp(after[0], after[1], back.len) == 0,
                     "case %s: memory after the read differs from ROMIO's", c->name);
            T_ASSERT(counts[0][0] == counts[1][0] && counts[0][1] == counts[1][1],
                     "case %s: status counts %d/%d, ROMIO's %d/%d", c->name, counts[1][0],
                     counts[1][1], counts[0][0], counts[0][1]);
        }
        T_MPI(MPI_File_close(&fh[f]));
    }
    for (int f = 0; f < nfiles; f++)
        free(after[f]);
    free(want);
    free(src.alloc);
    t_barrier(MPI_COMM_WORLD);
    if (t_rank == 0 && !plain_only) {
        size_t la = 0, lr = 0;
        unsigned char *a = t_read_file(aplain, &la), *r = t_read_file(rpath, &lr);
        T_ASSERT(a && r, "case %s: a file is missing after close", c->name);
        T_ASSERT(la == lr && memcmp(a, r, la) == 0,
                 "case %s: the atomio file (%zu bytes) differs from ROMIO's (%zu bytes)",
                 c->name, la, lr);
        free(a);
        free(r);
        remove(aplain);
    }
    t_log("%-22s %-26s bytes %d: %s", c->name, mode_name[c->mode], counts[0][0],
          plain_only ? "done" : "same as ROMIO");
    if (c->filetype != c->etype && c->filetype != MPI_BYTE && c->filetype != MPI_INT)
        MPI_Type_free(&c->filetype);
    if (c->memtype != MPI_INT && c->memtype != MPI_BYTE && c->memtype != MPI_DOUBLE)
        MPI_Type_free(&c->memtype);
}

static MPI_Datatype commit(MPI_Datatype t)
{
    MPI_Type_commit(&t);
    return t;
}

/* `t` placed at byte `at` of a tile of `extent` bytes (per-rank interleaving). */
static MPI_Datatype place(MPI_Datatype t, MPI_Aint at, MPI_Aint extent)
{
    int one = 1;
    MPI_Datatype h, r;
    MPI_Type_create_hindexed(1, &one, &at, t, &h);
    MPI_Type_create_resized(h, 0, extent, &r);
    MPI_Type_free(&h);
    return commit(r);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    plain_only = argc > 1 && strcmp(argv[1], "--plain-only") == 0;
    int P = t_size, r = t_rank;
    int dims[2] = {0, 0};
    MPI_Dims_create(P, 2, dims);
    case_t c;
    int seq = 0;

    /* vector filetype, ranks interleaved; contiguous memory */
    for (int mode = IND; mode <= SPLIT_AT; mode++) {
        memset(&c, 0, sizeof c);
        snprintf(c.name, sizeof c.name, "vector");
        c.disp = (MPI_Offset)r * 2 * (MPI_Offset)sizeof(int);
        c.etype = MPI_INT;
        MPI_Datatype v;
        MPI_Type_vector(8, 2, 2 * P, MPI_INT, &v); /* tiles every 16P ints: no overlap */
        MPI_Type_create_resized(v, 0, (MPI_Aint)16 * P * (MPI_Aint)sizeof(int), &c.filetype);
        MPI_Type_free(&v);
        c.filetype = commit(c.filetype);
        c.memtype = MPI_INT;
        c.count = 16 + (mode % 3) * 16; /* one to three tiles */
        c.mode = mode;
        c.offset = mode % 2 ? 3 : 0; /* etypes: mid-tile starts too */
        run_case(&c, seq++);
    }

    /* indexed filetype (element displacements) resized, ranks interleaved; memory vector */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "indexed+memvector");
    {
        int bl[3] = {1, 3, 2}, d[3] = {0, 2, 7};
        MPI_Datatype ix;
        MPI_Type_indexed(3, bl, d, MPI_DOUBLE, &ix);
        c.filetype = place(ix, (MPI_Aint)r * 10 * 8, (MPI_Aint)P * 10 * 8);
        MPI_Type_free(&ix);
    }
    c.etype = MPI_DOUBLE;
    MPI_Type_vector(12, 1, 2, MPI_DOUBLE, &c.memtype);
    c.memtype = commit(c.memtype);
    c.count = 1;
    c.mode = COLL;
    run_case(&c, seq++);

    /* struct filetype (gaps) and struct memory type (other gaps), one block per rank */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "struct+memstruct");
    {
        int bl[3] = {2, 1, 3};
        MPI_Aint d[3] = {0, 16, 28};
        MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, st, rs;
        MPI_Type_create_struct(3, bl, d, ts, &st);
        MPI_Type_create_resized(st, 0, 32, &rs);
        c.filetype = commit(rs);
        MPI_Type_free(&st);
        int mbl[4] = {3, 1, 1, 1};
        MPI_Aint md[4] = {0, 8, 16, 24};
        MPI_Datatype mts[4] = {MPI_CHAR, MPI_INT, MPI_DOUBLE, MPI_INT};
        MPI_Type_create_struct(4, mbl, md, mts, &c.memtype);
        c.memtype = commit(c.memtype);
    }
    c.disp = (MPI_Offset)r * 32 * 6;
    c.etype = MPI_BYTE;
    c.count = 6;
    c.mode = IND;
    run_case(&c, seq++);

    /* 2-D subarray file view (C order), ghost-cell memory subarray (Fortran order) */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "subarray+memsubarray");
    {
        int gs[2] = {6 * dims[0], 5 * dims[1]}, ss[2] = {6, 5};
        int st[2] = {6 * (r / dims[1]), 5 * (r % dims[1])};
        MPI_Type_create_subarray(2, gs, ss, st, MPI_ORDER_C, MPI_INT, &c.filetype);
        c.filetype = commit(c.filetype);
        int ms[2] = {8, 7}, mss[2] = {6, 5}, mst[2] = {1, 1};
        MPI_Type_create_subarray(2, ms, mss, mst, MPI_ORDER_FORTRAN, MPI_INT, &c.memtype);
        c.memtype = commit(c.memtype);
    }
    c.etype = MPI_INT;
    c.count = 1;
    c.mode = COLL_AT;
    run_case(&c, seq++);

    /* darray: block x cyclic(2), C order; contiguous memory */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "darray-block-cyclic");
    {
        int gs[2] = {10, 9}, db[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
        int da[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2};
        MPI_Type_create_darray(P, r, 2, gs, db, da, dims, MPI_ORDER_C, MPI_INT, &c.filetype);
        c.filetype = commit(c.filetype);
        int sz;
        MPI_Type_size(c.filetype, &sz);
        c.count = sz / 4;
    }
    c.etype = MPI_INT;
    c.memtype = MPI_INT;
    c.mode = COLL;
    run_case(&c, seq++);

    /* darray: 3-D, Fortran order, cyclic(3) x block x none; nonblocking collective */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "darray-3d-fortran");
    {
        int gs[3] = {7, 6, 3};
        int db[3] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_NONE};
        int da[3] = {3, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG};
        int ps[3] = {dims[0], dims[1], 1};
        MPI_Type_create_darray(P, r, 3, gs, db, da, ps, MPI_ORDER_FORTRAN, MPI_DOUBLE,
                               &c.filetype);
        c.filetype = commit(c.filetype);
        int sz;
        MPI_Type_size(c.filetype, &sz);
        c.count = sz / 8;
    }
    c.etype = MPI_DOUBLE;
    c.memtype = MPI_DOUBLE;
    c.mode = NB_COLL;
    run_case(&c, seq++);

    /* resized vector, partial first and last tiles (start mid-tile, odd count) */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "resized-partial");
    {
        MPI_Datatype v;
        MPI_Type_vector(3, 2, 5, MPI_SHORT, &v);
        c.filetype = place(v, (MPI_Aint)r * 32, (MPI_Aint)P * 32);
        MPI_Type_free(&v);
    }
    c.etype = MPI_SHORT;
    c.memtype = MPI_SHORT;
    c.count = 13;
    c.offset = 1;
    c.mode = IND;
    run_case(&c, seq++);

    /* memory hindexed with a negative displacement (decoded, no MPI_Pack) */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "mem-negative-disp");
    {
        int bl[2] = {2, 3};
        MPI_Aint d[2] = {-16, 8};
        MPI_Type_create_hindexed(2, bl, d, MPI_INT, &c.memtype);
        c.memtype = commit(c.memtype);
    }
    c.disp = (MPI_Offset)r * 4 * 5 * 3;
    c.etype = MPI_INT;
    c.filetype = MPI_INT;
    c.count = 3;
    c.mode = IND_AT;
    run_case(&c, seq++);

    /* memory hvector with a negative stride (MPI_Pack fallback) */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "mem-negative-stride");
    MPI_Type_create_hvector(5, 1, -8, MPI_INT, &c.memtype);
    c.memtype = commit(c.memtype);
    c.disp = (MPI_Offset)r * 4 * 5 * 2;
    c.etype = MPI_INT;
    c.filetype = MPI_INT;
    c.count = 2;
    c.mode = NB_AT;
    run_case(&c, seq++);

    /* memory from MPI_BOTTOM: struct of absolute addresses of two arrays */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "mem-bottom");
    {
        int bl[2] = {3, 4};
        MPI_Aint d[2];
        MPI_Get_address(&bottom_b[2], &d[0]);
        MPI_Get_address(&bottom_a[1], &d[1]);
        MPI_Datatype ts[2] = {MPI_INT, MPI_INT};
        MPI_Type_create_struct(2, bl, d, ts, &c.memtype);
        c.memtype = commit(c.memtype);
    }
    c.bottom = 1;
    c.disp = (MPI_Offset)r * 4 * 7;
    c.etype = MPI_INT;
    c.filetype = MPI_INT;
    c.count = 1;
    c.mode = SPLIT_AT;
    run_case(&c, seq++);

    /* etype units: double etype, contiguous-of-3 filetype, explicit offset 5 etypes */
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "etype-units");
    {
        MPI_Datatype t3;
        MPI_Type_contiguous(3, MPI_DOUBLE, &t3);
        c.filetype = place(t3, (MPI_Aint)r * 24, (MPI_Aint)P * 24);
        MPI_Type_free(&t3);
    }
    c.disp = 100;
    c.etype = MPI_DOUBLE;
    c.memtype = MPI_DOUBLE;
    c.count = 7;
    c.offset = 5;
    c.mode = IND_AT;
    run_case(&c, seq++);

    t_finalize();
    return 0;
}
