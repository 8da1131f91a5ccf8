/*
 * flash_hdf5.c -- the checkpoint write of the FLASH I/O benchmark (Zingale's
 * flash_benchmark_io: checkpoint_wr_hdf5_par + h5_parallel_write.c) ported to C
 * against Parallel HDF5 (1.10 API). The HDF5 FLASH-IO source is not reachable from
 * this machine; PnetCDF's benchmarks/FLASH-IO is the same benchmark for PnetCDF, and
 * this program keeps its problem, data layout and timing so that the two compare.
 * It uses nothing but MPI and HDF5, so atomio's PMPI library can be preloaded under it.
 *
 *   mpiexec -n 4 ./flash_hdf5 [--prefix PATH] [--blocks 80] [--no-vary]
 *       [--collective] [--atomic] [--quiet]
 *
 * What it writes (FLASH-IO's defaults; N_DIM=3, MAXBLOCKS=100, IONMAX=13):
 *   - per rank lnblocks = blocks + rank % 3 blocks (flash_benchmark_io's "make it vary a
 *     little"; --no-vary: exactly `blocks` on every rank), of nxb = nyb = nzb = 8 interior
 *     cells with nguard = 4 guard cells per side, nvar = 24 double unknowns (11 named
 *     variables + 13 species f1..f13), unk(i, ...) = i as in the benchmark;
 *   - one file PREFIX + "hdf5_chk_0000", created with H5Pset_fapl_mpio(MPI_COMM_WORLD,
 *     empty info) (the benchmark's Linux setting: no hints, no alignment, no chunking);
 *   - header datasets written by rank 0 alone: "file creation time" (string 40),
 *     "FLASH version" (string 20), "run comment" (string 80), "simulation parameters"
 *     (compound: total blocks, time, timestep, number of steps, nxb, nyb, nzb),
 *     "unknown names" (nvar x 1 strings of 4);
 *   - tree and grid datasets, each rank writing rows [offset, offset + lnblocks) where
 *     offset = blocks of the ranks below it: "refine level" int[tot], "node type" int[tot],
 *     "gid" int[tot][15], "coordinates" double[tot][3], "block size" double[tot][3],
 *     "bounding box" double[tot][3][2];
 *   - the 24 unknowns, one dataset each, named by their 4-character labels,
 *     double[tot][nzb][nyb][nxb], contiguous: the file is ordered by variable, and within a
 *     variable by rank. Before each write the interior cells of that variable are copied
 *     out of unk into a contiguous buffer (as checkpoint_wr_hdf5_par does), inside the timed
 *     region.
 *   - Transfers: independent (H5FD_MPIO_INDEPENDENT, the benchmark's default on Linux);
 *     --collective uses H5FD_MPIO_COLLECTIVE for the tree, grid and unknown writes (the
 *     header stays independent, rank 0 only). --atomic calls H5Fset_mpi_atomicity(file, 1)
 *     after creating the file (MPI_File_set_atomicity underneath).
 *
 * Timing (PnetCDF FLASH-IO's, whose report lines it prints): checkpoint time = the whole
 * checkpoint call from the block-count allgather to H5Fclose, max over ranks; "max header" =
 * create + header + tree/grid datasets, "max unknown" = the 24 unknowns, "max close" =
 * H5Fclose; I/O amount = the bytes of dataset elements all ranks passed to H5Dwrite
 * (HDF5's own metadata not counted). One JSON line follows on stdout (rank 0).
 * Exit status non-zero on any HDF5 or MPI error.
 */
#define _POSIX_C_SOURCE 200809L

#include <hdf5.h>
#include <mpi.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NXB 8
#define NYB 8
#define NZB 8
#define NGUARD 4
#define NVAR 24
#define NDIM 3
#define NGID 15 /* 2*NDIM faces + parent + 2^NDIM children */
#define MAXBLOCKS 100
#define IU (NXB + 2 * NGUARD)
#define JU (NYB + 2 * NGUARD)
#define KU (NZB + 2 * NGUARD)

static int rank;

static void die(const char *what)
{
    fprintf(stderr, "flash_hdf5 rank %d: %s failed\n", rank, what);
    H5Eprint2(H5E_DEFAULT, stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

#define H5OK(call)                                                         \
    do {                                                                      \
        if ((call) < 0)                                                       \
            die(#call);                                                       \
    } while (0)

typedef struct {
    const char *prefix;
    int blocks, vary, collective, atomic, quiet;
} opts_t;

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: flash_hdf5 [--prefix PATH] [--blocks N] [--no-vary] "
                        "[--collective] [--atomic] [--quiet]\n");
    MPI_Finalize();
    exit(2);
}

static void parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.prefix = "flash_io_test_", .blocks = 80, .vary = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--prefix") && i + 1 < argc)
            o->prefix = argv[++i];
        else if (!strcmp(a, "--blocks") && i + 1 < argc)
            o->blocks = atoi(argv[++i]);
        else if (!strcmp(a, "--no-vary"))
            o->vary = 0;
        else if (!strcmp(a, "--collective"))
            o->collective = 1;
        else if (!strcmp(a, "--atomic"))
            o->atomic = 1;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q"))
            o->quiet = 1;
        else
            usage();
    }
    if (o->blocks < 1 || o->blocks + (o->vary ? 2 : 0) > MAXBLOCKS)
        usage();
}

/* FLASH's tree and grid arrays (only what the checkpoint stores), C order of Fortran's. */
typedef struct {
    int lnblocks;
    int lrefine[MAXBLOCKS], nodetype[MAXBLOCKS];
    int neigh[MAXBLOCKS][2 * NDIM][2], parent[MAXBLOCKS][2], child[MAXBLOCKS][8][2];
    double coord[MAXBLOCKS][NDIM], size[MAXBLOCKS][NDIM], bnd_box[MAXBLOCKS][NDIM][2];
    double *unk; /* [MAXBLOCKS][KU][JU][IU][NVAR], Fortran's unk(nvar, iu, ju, ku, block) */
} flash_t;

static size_t unk_index(int b, int k, int j, int i, int v)
{
    return ((((size_t)b * KU + k) * JU + j) * IU + i) * NVAR + v;
}

static void flash_init(flash_t *f, int lnblocks)
{
    f->lnblocks = lnblocks;
    for (int b = 0; b < MAXBLOCKS; b++) {
        f->lrefine[b] = 1;
        f->nodetype[b] = 1;
        for (int d = 0; d < 2 * NDIM; d++)
            f->neigh[b][d][0] = f->neigh[b][d][1] = -1;
        f->parent[b][0] = f->parent[b][1] = -1;
        for (int c = 0; c < 8; c++)
            f->child[b][c][0] = f->child[b][c][1] = -1;
        for (int d = 0; d < NDIM; d++) {
            f->coord[b][d] = 0.25;
            f->size[b][d] = 0.5;
            f->bnd_box[b][d][0] = f->bnd_box[b][d][1] = 0.0;
        }
    }
    size_t n = (size_t)MAXBLOCKS * KU * JU * IU * NVAR;
    f->unk = malloc(n * sizeof *f->unk);
    if (!f->unk)
        die("malloc unk");
    for (size_t x = 0; x < n; x++)
        f->unk[x] = (double)(x % NVAR + 1);
}

/* A dataset of `rank_` dims whose first is tot_blocks; this rank writes rows
 * [offset, offset + count) from buf (contiguous). Returns bytes passed to H5Dwrite. */
static size_t write_rows(hid_t file, const char *name, hid_t type, int nd, const hsize_t *dims,
                         hsize_t offset, hsize_t count, const void *buf, hid_t dxpl)
{
    hid_t space = H5Screate_simple(nd, dims, NULL);
    if (space < 0)
        die("H5Screate_simple");
    hid_t dset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (dset < 0)
        die(name);
    hsize_t start[4] = {offset, 0, 0, 0}, cnt[4];
    size_t per_row = 1;
    cnt[0] = count;
    for (int d = 1; d < nd; d++) {
        cnt[d] = dims[d];
        per_row *= dims[d];
    }
    H5OK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, cnt, NULL));
    hid_t mem = H5Screate_simple(nd, cnt, NULL);
    if (mem < 0)
        die("H5Screate_simple (memory)");
    H5OK(H5Dwrite(dset, type, mem, space, dxpl, buf));
    H5OK(H5Sclose(mem));
    H5OK(H5Sclose(space));
    H5OK(H5Dclose(dset));
    return (size_t)count * per_row * H5Tget_size(type);
}

/* A dataset of one element (or nvar x 1 strings) written by rank 0 only. */
static size_t write_header_dataset(hid_t file, const char *name, hid_t type, int nd,
                                   const hsize_t *dims, const void *buf)
{
    hid_t space = H5Screate_simple(nd, dims, NULL);
    if (space < 0)
        die("H5Screate_simple");
    hid_t dset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (dset < 0)
        die(name);
    size_t bytes = 0;
    if (rank == 0) {
        H5OK(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
        bytes = (size_t)H5Sget_simple_extent_npoints(space) * H5Tget_size(type);
    }
    H5OK(H5Sclose(space));
    H5OK(H5Dclose(dset));
    return bytes;
}

static hid_t string_type(size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, n) < 0)
        die("string type");
    return t;
}

static const char *const unk_labels[NVAR] = {
    "dens", "velx", "vely", "velz", "pres", "ener", "temp", "gamc", "game", "enuc", "gpot",
    "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "f12", "f13"};

typedef struct {
    int total_blocks;
    double time, timestep;
    int nsteps, nxb, nyb, nzb;
} sim_params_t;

/* Returns the bytes this rank passed to H5Dwrite; t[0..2] = header, unknowns, close. */
static size_t checkpoint(const opts_t *o, flash_t *f, int nprocs, double simtime, double t[3])
{
    double t0 = MPI_Wtime();
    size_t bytes = 0;
    int lnb = f->lnblocks;

    /* blocks left of each rank, total */
    int *counts = malloc((size_t)nprocs * sizeof *counts);
    if (!counts)
        die("malloc");
    MPI_Allgather(&lnb, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    int tot_blocks = 0, offset = 0;
    for (int r = 0; r < nprocs; r++) {
        if (r < rank)
            offset += counts[r];
        tot_blocks += counts[r];
    }

    /* global ids: neighbours, parent, children, made global with the ranks' offsets */
    static int gid[MAXBLOCKS][NGID];
    int *left = malloc((size_t)nprocs * sizeof *left);
    if (!left)
        die("malloc");
    for (int r = 0, acc = 0; r < nprocs; r++) {
        left[r] = acc;
        acc += counts[r];
    }
#define GLOBAL(pair) ((pair)[0] > 0 ? (pair)[0] + left[(pair)[1]] : (pair)[0])
    for (int b = 0; b < lnb; b++) {
        int n = 0;
        for (int d = 0; d < 2 * NDIM; d++)
            gid[b][n++] = GLOBAL(f->neigh[b][d]);
        gid[b][n++] = GLOBAL(f->parent[b]);
        for (int c = 0; c < 8; c++)
            gid[b][n++] = GLOBAL(f->child[b][c]);
    }
#undef GLOBAL
    free(left);
    free(counts);

    char filename[4096];
    snprintf(filename, sizeof filename, "%shdf5_chk_%04d", o->prefix, 0);
    MPI_Info info;
    MPI_Info_create(&info);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0)
        die("H5Pcreate fapl");
    H5OK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, info));
    hid_t file = H5Fcreate(filename, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0)
        die("H5Fcreate");
    H5OK(H5Pclose(fapl));
    if (o->atomic)
        H5OK(H5Fset_mpi_atomicity(file, 1));

    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (dxpl < 0)
        die("H5Pcreate dxpl");
    H5OK(H5Pset_dxpl_mpio(dxpl, o->collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT));

    /* header (rank 0) */
    hsize_t one = 1;
    char date[40] = "now", version[20] = "FLASH 2.0", comment[80] = "FLASH I/O benchmark";
    hid_t st = string_type(40);
    bytes += write_header_dataset(file, "file creation time", st, 1, &one, date);
    H5Tclose(st);
    st = string_type(20);
    bytes += write_header_dataset(file, "FLASH version", st, 1, &one, version);
    H5Tclose(st);
    st = string_type(80);
    bytes += write_header_dataset(file, "run comment", st, 1, &one, comment);
    H5Tclose(st);

    sim_params_t sp = {tot_blocks, simtime, 0.0, 0, NXB, NYB, NZB};
    hid_t spt = H5Tcreate(H5T_COMPOUND, sizeof sp);
    H5OK(H5Tinsert(spt, "total blocks", offsetof(sim_params_t, total_blocks), H5T_NATIVE_INT));
    H5OK(H5Tinsert(spt, "time", offsetof(sim_params_t, time), H5T_NATIVE_DOUBLE));
    H5OK(H5Tinsert(spt, "timestep", offsetof(sim_params_t, timestep), H5T_NATIVE_DOUBLE));
    H5OK(H5Tinsert(spt, "number of steps", offsetof(sim_params_t, nsteps), H5T_NATIVE_INT));
    H5OK(H5Tinsert(spt, "nxb", offsetof(sim_params_t, nxb), H5T_NATIVE_INT));
    H5OK(H5Tinsert(spt, "nyb", offsetof(sim_params_t, nyb), H5T_NATIVE_INT));
    H5OK(H5Tinsert(spt, "nzb", offsetof(sim_params_t, nzb), H5T_NATIVE_INT));
    bytes += write_header_dataset(file, "simulation parameters", spt, 1, &one, &sp);
    H5Tclose(spt);

    char names[NVAR][4];
    for (int v = 0; v < NVAR; v++) {
        memset(names[v], ' ', 4);
        memcpy(names[v], unk_labels[v], strlen(unk_labels[v]));
    }
    hsize_t ndims[2] = {NVAR, 1};
    st = string_type(4);
    bytes += write_header_dataset(file, "unknown names", st, 2, ndims, names);
    H5Tclose(st);

    /* tree and grid */
    hsize_t off = (hsize_t)offset, cnt = (hsize_t)lnb, tot = (hsize_t)tot_blocks;
    hsize_t d1[1] = {tot}, dg[2] = {tot, NGID}, dc[2] = {tot, NDIM}, db[3] = {tot, NDIM, 2};
    hid_t I = H5T_NATIVE_INT, D = H5T_NATIVE_DOUBLE;
    bytes += write_rows(file, "refine level", I, 1, d1, off, cnt, f->lrefine, dxpl);
    bytes += write_rows(file, "node type", I, 1, d1, off, cnt, f->nodetype, dxpl);
    bytes += write_rows(file, "gid", I, 2, dg, off, cnt, gid, dxpl);
    bytes += write_rows(file, "coordinates", D, 2, dc, off, cnt, f->coord, dxpl);
    bytes += write_rows(file, "block size", D, 2, dc, off, cnt, f->size, dxpl);
    bytes += write_rows(file, "bounding box", D, 3, db, off, cnt, f->bnd_box, dxpl);
    double t1 = MPI_Wtime();

    /* unknowns: interior cells of one variable, contiguous, one dataset each */
    double *buf = malloc((size_t)MAXBLOCKS * NZB * NYB * NXB * sizeof *buf);
    if (!buf)
        die("malloc");
    hsize_t du[4] = {tot, NZB, NYB, NXB};
    for (int v = 0; v < NVAR; v++) {
        size_t x = 0;
        for (int b = 0; b < lnb; b++)
            for (int k = NGUARD; k < NGUARD + NZB; k++)
                for (int j = NGUARD; j < NGUARD + NYB; j++)
                    for (int i = NGUARD; i < NGUARD + NXB; i++)
                        buf[x++] = f->unk[unk_index(b, k, j, i, v)];
        bytes += write_rows(file, unk_labels[v], D, 4, du, off, cnt, buf, dxpl);
    }
    free(buf);
    double t2 = MPI_Wtime();

    H5OK(H5Pclose(dxpl));
    H5OK(H5Fclose(file));
    MPI_Info_free(&info);
    double t3 = MPI_Wtime();
    t[0] = t1 - t0;
    t[1] = t2 - t1;
    t[2] = t3 - t2;
    return bytes;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    opts_t o;
    parse(argc, argv, &o);

    static flash_t f;
    flash_init(&f, o.blocks + (o.vary ? rank % 3 : 0));

    MPI_Barrier(MPI_COMM_WORLD);
    double t[3], begin = MPI_Wtime();
    size_t bytes = checkpoint(&o, &f, nprocs, 0.0, t);
    double total = MPI_Wtime() - begin;

    double tmax[4], mine[4] = {total, t[0], t[1], t[2]};
    MPI_Reduce(mine, tmax, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    double amount = (double)bytes, sum = 0;
    MPI_Reduce(&amount, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);

    if (rank == 0) {
        double mib = sum / 1048576.0;
        if (!o.quiet) {
            printf(" number of guards      : %13d\n", NGUARD);
            printf(" number of blocks      : %13d\n", o.blocks);
            printf(" number of variables   : %13d\n", NVAR);
            printf(" checkpoint time       : %16.4f  sec\n", tmax[0]);
            printf("        max header     : %16.4f  sec\n", tmax[1]);
            printf("        max unknown    : %16.4f  sec\n", tmax[2]);
            printf("        max close      : %16.4f  sec\n", tmax[3]);
            printf("        I/O amount     : %16.4f  MiB\n", mib);
            printf(" -------------------------------------------------------\n");
            printf(" File base name        : %s\n", o.prefix);
            printf(" HDF5 %u.%u.%u, %s transfers%s\n", maj, min, rel,
                   o.collective ? "collective" : "independent",
                   o.atomic ? ", MPI atomic mode" : "");
            printf(" nproc    array size      exec (sec)   bandwidth (MiB/s)\n");
            printf("%5d   %3d x %3d x %3d   %7.2f  %10.2f\n\n", nprocs, NXB, NYB, NZB,
                   tmax[0], mib / tmax[0]);
        }
        printf("{\"bench\":\"flash_hdf5\",\"ranks\":%d,\"blocks\":%d,\"vary\":%s,"
               "\"transfer\":\"%s\",\"atomic\":%s,\"hdf5\":\"%u.%u.%u\",\"bytes\":%.0f,"
               "\"checkpoint_s\":%.6f,\"header_s\":%.6f,\"unknowns_s\":%.6f,\"close_s\":%.6f,"
               "\"mib_s\":%.2f}\n",
               nprocs, o.blocks, o.vary ? "true" : "false",
               o.collective ? "collective" : "independent", o.atomic ? "true" : "false", maj,
               min, rel, sum, tmax[0], tmax[1], tmax[2], tmax[3], sum / 1048576.0 / tmax[0]);
    }
    free(f.unk);
    MPI_Finalize();
    return 0;
}
