/*
 * t_shared_fp.c -- test 9: the shared file pointer under concurrency.
 *
 *   t_shared_fp STRATEGY
 *
 * Every rank appends ROUNDS records {rank, i} with MPI_File_write_shared as fast as it can;
 * then the file must hold every record exactly once (the fetch-and-add gave disjoint
 * places), nothing else, and no hidden pointer file may be left in the directory after
 * close. Then two independent opens on MPI_COMM_SELF of one file per rank pair must have
 * independent pointers (each starts at 0), which the ROMIO comparison tests do not race.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 300

static int hidden_files(void)
{
    DIR *d = opendir(t_dir());
    T_ASSERT(d, "cannot list %s", t_dir());
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, "atomio-shfp") != NULL;
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    T_ASSERT(argc == 2, "usage: t_shared_fp STRATEGY");
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "atomio_strategy", argv[1]);
    char name[] = "shared_fp.dat";
    const char *path = t_fresh_path(name);
    int nranks = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    MPI_File fh;
    T_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    T_MPI(MPI_File_set_atomicity(fh, 1));
    for (int i = 0; i < ROUNDS; i++) {
        int rec[2] = {t_rank, i};
        T_MPI(MPI_File_write_shared(fh, rec, 2, MPI_INT, MPI_STATUS_IGNORE));
    }
    MPI_Offset pos = -1;
    t_barrier(MPI_COMM_WORLD);
    T_MPI(MPI_File_get_position_shared(fh, &pos));
    T_ASSERT(pos == (MPI_Offset)nranks * ROUNDS * 8, "shared pointer at %lld, expected %lld",
             (long long)pos, (long long)nranks * ROUNDS * 8);
    T_MPI(MPI_File_close(&fh));
    T_ASSERT(hidden_files() == 0, "a hidden shared-pointer file is left in %s", t_dir());

    if (t_rank == 0) {
        FILE *fp = fopen(path + (strncmp(path, "atomio:", 7) == 0 ? 7 : 0), "rb");
        T_ASSERT(fp, "cannot read %s back", path);
        int total = nranks * ROUNDS, *seen = calloc((size_t)total, sizeof *seen), rec[2];
        T_ASSERT(seen, "out of memory");
        int n = 0;
        while (fread(rec, sizeof rec, 1, fp) == 1) {
            T_ASSERT(rec[0] >= 0 && rec[0] < nranks && rec[1] >= 0 && rec[1] < ROUNDS,
                     "record %d is {%d, %d}: not a record any rank wrote", n, rec[0], rec[1]);
            T_ASSERT(!seen[rec[0] * ROUNDS + rec[1]]++, "record {%d, %d} is in the file twice",
                     rec[0], rec[1]);
            n++;
        }
        fclose(fp);
        T_ASSERT(n == total, "%d records in the file, expected %d", n, total);
        free(seen);
        t_log("%d ranks x %d write_shared: every record once, no hidden file left", nranks,
              ROUNDS);
    }

    /* independent opens: one pointer each */
    char self_name[] = "shared_fp_self.dat";
    const char *self = t_fresh_path(self_name);
    MPI_File a, b;
    T_MPI(MPI_File_open(MPI_COMM_SELF, self, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &a));
    T_MPI(MPI_File_open(MPI_COMM_SELF, self, MPI_MODE_RDWR, info, &b));
    int one = 1;
    T_MPI(MPI_File_write_shared(a, &one, 1, MPI_INT, MPI_STATUS_IGNORE));
    MPI_Offset pa = -1, pb = -1;
    T_MPI(MPI_File_get_position_shared(a, &pa));
    T_MPI(MPI_File_get_position_shared(b, &pb));
    T_ASSERT(pa == 4 && pb == 0, "independent opens share a pointer: %lld and %lld",
             (long long)pa, (long long)pb);
    T_MPI(MPI_File_close(&a));
    T_MPI(MPI_File_close(&b));
    MPI_Info_free(&info);
    t_finalize();
    return 0;
}
