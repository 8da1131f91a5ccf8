/*
 * t_hdf5_bands.c -- HDF5 through the library: every rank writes an overlapping column band
 * of one 2-D dataset of `unsigned` with H5Fset_mpi_atomicity(1), and the result is read
 * back through HDF5 and checked to be "atomic as a whole H5Dwrite".
 *
 * The bands, their tags and the check are bands.h's.
 *
 * Every iteration: a barrier, then every rank's H5Dwrite at once (timed: the slowest rank's
 * H5Dwrite, summed over iterations), a barrier, and rank 0 reads the whole dataset back
 * (H5Dread) and checks it (bands_check). A mixed overlap means the dataset write was not
 * atomic as a whole (HDF5 makes one independent H5Dwrite one MPI call per row; only each
 * row is atomic under MPI atomic mode).
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
#include "bands.h"
#include "common.h"
#include <hdf5.h>

#define H(call)                                                                            \
    do {                                                                                   \
        if ((call) < 0)                                                                    \
            t_fail("%s:%d: %s failed", __FILE__, __LINE__, #call);                          \
    } while (0)

struct h5 {
    hid_t dset, mspace, fspace, dxpl;
};

static void h5_write(void *ctx, const unsigned *buf)
{
    struct h5 *h = ctx;
    H(H5Dwrite(h->dset, H5T_NATIVE_UINT, h->mspace, h->fspace, h->dxpl, buf));
}

static void h5_read(void *ctx, unsigned *all)
{
    struct h5 *h = ctx;
    if (all)
        H(H5Dread(h->dset, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    struct bands_args a = bands_parse(argc, argv, "t_hdf5_bands", 0);
    struct bands g = bands_geometry(&a);

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, a.info));
    hid_t file = H5Fcreate(a.path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    T_ASSERT(file >= 0, "H5Fcreate %s failed", a.path);
    H(H5Fset_mpi_atomicity(file, 1));
    hbool_t atomic = 0;
    H(H5Fget_mpi_atomicity(file, &atomic));
    T_ASSERT(atomic, "H5Fget_mpi_atomicity says 0 after H5Fset_mpi_atomicity(1)");

    hsize_t dims[2] = {g.rows, g.cols};
    struct h5 h = {0, 0, H5Screate_simple(2, dims, NULL), H5Pcreate(H5P_DATASET_XFER)};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    H(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY));
    h.dset = H5Dcreate2(file, "bands", H5T_NATIVE_UINT, h.fspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    T_ASSERT(h.dset >= 0, "H5Dcreate2 failed");
    hsize_t start[2] = {0, g.first}, count[2] = {g.rows, g.band};
    H(H5Sselect_hyperslab(h.fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    h.mspace = H5Screate_simple(2, count, NULL);
    H(H5Pset_dxpl_mpio(h.dxpl, a.coll ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT));

    bands_run("t_hdf5_bands", "H5Dwrite", &a, &g, h5_write, h5_read, &h);

    H5Pclose(h.dxpl);
    H5Sclose(h.mspace);
    H5Sclose(h.fspace);
    H5Pclose(dcpl);
    H5Dclose(h.dset);
    H5Fclose(file);
    H5Pclose(fapl);
    MPI_Info_free(&a.info);
    t_finalize();
    return 0;
}
