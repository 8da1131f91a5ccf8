/*
 * t_pnetcdf_bands.c -- PnetCDF through the library: every rank writes an overlapping column
 * band of one 2-D NC_UINT variable (CDF-5) with ncmpi_put_vara_uint_all (--coll) or, in
 * independent data mode, ncmpi_put_vara_uint (--ind), and the result is read back through
 * PnetCDF and checked to be "atomic as a whole put" (bands.h: the bands, their tags, the
 * check).
 *
 * PnetCDF has no atomic-mode switch of its own (it never calls MPI_File_set_atomicity), so
 * atomic mode comes from the library's ATOMIO_FORCE_ATOMIC=1 (site-wide or per job). PnetCDF
 * makes one put of a subarray one MPI-IO call over a file view (MPI_File_set_view +
 * MPI_File_write_at_all, or MPI_File_write_at in independent mode), so in atomic mode one
 * put is one atomic call: an overlap never ends up mixed.
 *
 *   t_pnetcdf_bands PATH [--ind|--coll] [--rows R] [--cols C] [--overlap O] [--iters N]
 *                   [--rows-per-call K] [--count | --expect-mixed] [--info KEY=VALUE]...
 *   --rows-per-call K: each rank writes its band as puts of K rows each (the negative
 *   control: an overlap is then only atomic row group by row group, like HDF5's one MPI call
 *   per row, and --expect-mixed shows the check sees it). --info: a hint of the MPI_Info
 *   given to ncmpi_create (PnetCDF passes it to MPI_File_open; nc_driver=mpiio where the
 *   PnetCDF version would not use MPI-IO otherwise).
 * PATH may carry the "atomio:" prefix (PnetCDF hands the name to MPI_File_open unchanged).
 * Output (rank 0): "t_pnetcdf_bands: coll 4 ranks 256x2048 overlap 64 iters 8: mixed 0/24
 * overlaps, write 0.123 s".
 */
#include "bands.h"
#include "common.h"
#include <pnetcdf.h>

#define N(call)                                                                            \
    do {                                                                                   \
        int n_err_ = (call);                                                               \
        if (n_err_ != NC_NOERR)                                                            \
            t_fail("%s:%d: %s: %s", __FILE__, __LINE__, #call, ncmpi_strerror(n_err_));     \
    } while (0)

struct nc {
    const struct bands_args *a;
    const struct bands *g;
    int ncid, var;
};

static void nc_write(void *ctx, const unsigned *buf)
{
    struct nc *n = ctx;
    unsigned long long step = n->a->rows_per_call ? n->a->rows_per_call : n->g->rows;
    for (unsigned long long row = 0; row < n->g->rows; row += step) {
        unsigned long long k = n->g->rows - row < step ? n->g->rows - row : step;
        MPI_Offset start[2] = {(MPI_Offset)row, (MPI_Offset)n->g->first};
        MPI_Offset count[2] = {(MPI_Offset)k, (MPI_Offset)n->g->band};
        const unsigned *from = buf + row * n->g->band;
        if (n->a->coll)
            N(ncmpi_put_vara_uint_all(n->ncid, n->var, start, count, from));
        else
            N(ncmpi_put_vara_uint(n->ncid, n->var, start, count, from));
    }
    /* the other ranks' puts are read back next: flush PnetCDF's and MPI-IO's buffers */
    N(ncmpi_sync(n->ncid));
}

static void nc_read(void *ctx, unsigned *all)
{
    struct nc *n = ctx;
    MPI_Offset start[2] = {0, 0};
    MPI_Offset count[2] = {all ? (MPI_Offset)n->g->rows : 0, all ? (MPI_Offset)n->g->cols : 0};
    if (n->a->coll)
        N(ncmpi_get_vara_uint_all(n->ncid, n->var, start, count, all));
    else if (all)
        N(ncmpi_get_vara_uint(n->ncid, n->var, start, count, all));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    struct bands_args a = bands_parse(argc, argv, "t_pnetcdf_bands", 1);
    struct bands g = bands_geometry(&a);
    struct nc n = {&a, &g, -1, -1};

    N(ncmpi_create(MPI_COMM_WORLD, a.path, NC_CLOBBER | NC_64BIT_DATA, a.info, &n.ncid));
    int dims[2];
    N(ncmpi_def_dim(n.ncid, "rows", (MPI_Offset)g.rows, &dims[0]));
    N(ncmpi_def_dim(n.ncid, "cols", (MPI_Offset)g.cols, &dims[1]));
    N(ncmpi_def_var(n.ncid, "bands", NC_UINT, 2, dims, &n.var));
    N(ncmpi_set_fill(n.ncid, NC_NOFILL, NULL));
    N(ncmpi_enddef(n.ncid));
    if (!a.coll)
        N(ncmpi_begin_indep_data(n.ncid));

    bands_run("t_pnetcdf_bands", "put", &a, &g, nc_write, nc_read, &n);

    if (!a.coll)
        N(ncmpi_end_indep_data(n.ncid));
    N(ncmpi_close(n.ncid));
    MPI_Info_free(&a.info);
    t_finalize();
    return 0;
}
