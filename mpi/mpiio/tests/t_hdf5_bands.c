/*
 * t_hdf5_bands.c -- HDF5 through the library: every rank writes an overlapping column band
 * of one 2-D dataset of `unsigned` with H5Fset_mpi_atomicity(1), and the result is read
 * back through HDF5 and checked to be "atomic as a whole H5Dwrite".
 *
 * Layout (P ranks, R rows, C columns, overlap O): rank r writes every row of columns
 * [r*S, r*S + S + O), S = (C - O) / P, so neighbours share O columns of every row. Each
 * element carries a tag: (rank + 1) << 24 | iteration << 16 | (row * 131 + col) & 0xffff,
 * so the verifier knows which H5Dwrite put it there and that it is in its place.
 *
 * Every iteration: a barrier, then every rank's H5Dwrite at once (timed: the slowest rank's
 * H5Dwrite, summed over iterations), a barrier, and rank 0 reads the whole dataset back
 * (H5Dread) and checks it: every element of rank r's own columns is (r, this iteration);
 * each overlap of ranks r and r+1 holds ONE H5Dwrite's data entirely -- all (r, it) or all
 * (r+1, it). An overlap that mixes both is "mixed": the dataset write was not atomic as a
 * whole (HDF5 makes one independent H5Dwrite one MPI call per row; only each row is atomic
 * under MPI atomic mode). Anything else (a wrong tag, a stale iteration) is a FAIL always.
 *
 *   t_hdf5_bands PATH [--ind|--coll] [--rows R] [--cols C] [--overlap O] [--iters N]
 *                [--count | --expect-mixed] [--info KEY=VALUE]...
 *   default: FAIL on a mixed overlap. --count: report the mixed overlaps, never fail on
 *   them. --expect-mixed: iterate (up to N) until an overlap is mixed, FAIL if none is (a
 *   negative control: proves the check sees a non-atomic H5Dwrite).
 * T_PER_ITER=1 also prints each iteration's write time.
 * --info: a hint of the MPI_Info given to H5Pset_fapl_mpio (HDF5 passes it to MPI_File_open).
 * PATH may carry the "atomio:" prefix (HDF5 hands the name to MPI_File_open unchanged).
 * Output (rank 0): "t_hdf5_bands: ind 4 ranks 256x2048 overlap 64 iters 8: mixed 0/24
 * overlaps, write 0.123 s".
 */
#include "common.h"
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H(call)                                                                            \
    do {                                                                                   \
        if ((call) < 0)                                                                    \
            t_fail("%s:%d: %s failed", __FILE__, __LINE__, #call);                          \
    } while (0)

static unsigned tag(int rank, int it, hsize_t row, hsize_t col)
{
    return (unsigned)(rank + 1) << 24 | (unsigned)(it & 0xff) << 16 |
           (unsigned)((row * 131 + col) & 0xffff);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    const char *path = NULL;
    int coll = 0, mode = 0; /* 0 verify, 1 count, 2 expect mixed */
    hsize_t rows = 1024, cols = 8192, overlap = 64;
    int iters = 4;
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ind"))
            coll = 0;
        else if (!strcmp(argv[i], "--coll"))
            coll = 1;
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc)
            cols = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--overlap") && i + 1 < argc)
            overlap = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--count"))
            mode = 1;
        else if (!strcmp(argv[i], "--expect-mixed"))
            mode = 2;
        else if (!strcmp(argv[i], "--info") && i + 1 < argc && strchr(argv[i + 1], '=')) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", argv[++i]);
            *strchr(kv, '=') = '\0';
            T_MPI(MPI_Info_set(info, kv, kv + strlen(kv) + 1));
        }
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            t_fail("usage: t_hdf5_bands PATH [--ind|--coll] [--rows R] [--cols C] "
                   "[--overlap O] [--iters N] [--count|--expect-mixed] [--info KEY=VALUE]");
    }
    T_ASSERT(path, "no PATH");
    hsize_t P = (hsize_t)t_size;
    T_ASSERT(iters > 0 && iters < 256 && rows > 0 && cols > overlap && (cols - overlap) % P == 0 &&
                 (cols - overlap) / P >= overlap,
             "bad geometry: %llu columns, overlap %llu, %d ranks", (unsigned long long)cols,
             (unsigned long long)overlap, t_size);
    hsize_t step = (cols - overlap) / P, band = step + overlap, first = (hsize_t)t_rank * step;

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, info));
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    T_ASSERT(file >= 0, "H5Fcreate %s failed", path);
    H(H5Fset_mpi_atomicity(file, 1));
    hbool_t atomic = 0;
    H(H5Fget_mpi_atomicity(file, &atomic));
    T_ASSERT(atomic, "H5Fget_mpi_atomicity says 0 after H5Fset_mpi_atomicity(1)");

    hsize_t dims[2] = {rows, cols};
    hid_t fspace = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    H(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY));
    hid_t dset = H5Dcreate2(file, "bands", H5T_NATIVE_UINT, fspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    T_ASSERT(dset >= 0, "H5Dcreate2 failed");
    hsize_t start[2] = {0, first}, count[2] = {rows, band};
    H(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t mspace = H5Screate_simple(2, count, NULL);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H(H5Pset_dxpl_mpio(dxpl, coll ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT));

    unsigned *buf = malloc(rows * band * sizeof *buf);
    unsigned *all = t_rank == 0 ? malloc(rows * cols * sizeof *all) : NULL;
    T_ASSERT(buf && (t_rank || all), "out of memory");
    int mixed = 0, checked = 0, done = 0;
    double write_s = 0;
    for (int it = 0; it < iters && !done; it++) {
        for (hsize_t i = 0; i < rows; i++)
            for (hsize_t j = 0; j < band; j++)
                buf[i * band + j] = tag(t_rank, it, i, first + j);
        t_barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        H(H5Dwrite(dset, H5T_NATIVE_UINT, mspace, fspace, dxpl, buf));
        double dt = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        write_s += slowest;
        if (getenv("T_PER_ITER"))
            t_log("  iteration %d: write %.4f s", it, slowest);
        if (t_rank == 0) {
            H(H5Dread(dset, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all));
            for (int r = 0; r < t_size; r++) {
                /* own columns: [r*step + (r ? overlap : 0), r*step + step) + the last band's tail */
                hsize_t lo = (hsize_t)r * step + (r ? overlap : 0), hi = (hsize_t)r * step + step;
                if (r == t_size - 1)
                    hi = cols;
                for (hsize_t i = 0; i < rows; i++)
                    for (hsize_t j = lo; j < hi; j++)
                        if (all[i * cols + j] != tag(r, it, i, j))
                            t_fail("iteration %d: element (%llu,%llu) = %#x, want rank %d's %#x", it,
                                   (unsigned long long)i, (unsigned long long)j,
                                   all[i * cols + j], r, tag(r, it, i, j));
            }
            for (int r = 0; r + 1 < t_size; r++) {
                hsize_t lo = (hsize_t)(r + 1) * step, hi = lo + overlap;
                size_t of[2] = {0, 0};
                for (hsize_t i = 0; i < rows; i++)
                    for (hsize_t j = lo; j < hi; j++) {
                        unsigned v = all[i * cols + j];
                        if (v == tag(r, it, i, j))
                            of[0]++;
                        else if (v == tag(r + 1, it, i, j))
                            of[1]++;
                        else
                            t_fail("iteration %d: overlap element (%llu,%llu) = %#x is neither "
                                   "rank %d's nor rank %d's",
                                   it, (unsigned long long)i, (unsigned long long)j, v, r, r + 1);
                    }
                checked++;
                if (of[0] && of[1]) {
                    mixed++;
                    if (mode == 0)
                        t_fail("iteration %d: the overlap of ranks %d and %d mixes both H5Dwrites "
                               "(%zu elements of rank %d, %zu of rank %d): not atomic as a whole",
                               it, r, r + 1, of[0], r, of[1], r + 1);
                }
            }
            done = mode == 2 && mixed > 0;
        }
        MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    int ran = 0;
    MPI_Allreduce(&checked, &ran, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    t_log("t_hdf5_bands: %s %d ranks %llux%llu overlap %llu iters %d: mixed %d/%d overlaps, "
          "write %.3f s",
          coll ? "coll" : "ind", t_size, (unsigned long long)rows, (unsigned long long)cols,
          (unsigned long long)overlap, ran / (t_size > 1 ? t_size - 1 : 1), mixed, ran, write_s);
    if (mode == 2 && t_rank == 0 && mixed == 0)
        t_fail("--expect-mixed: no overlap was mixed in %d iterations", iters);
    free(buf);
    free(all);
    H5Pclose(dxpl);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Pclose(dcpl);
    H5Dclose(dset);
    H5Fclose(file);
    H5Pclose(fapl);
    MPI_Info_free(&info);
    t_finalize();
    return 0;
}
