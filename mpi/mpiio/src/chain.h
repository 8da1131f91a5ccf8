/*
 * chain.h -- every entry point this library defines, as X(NAME, (parameters), (arguments)),
 * NAME without its MPI_/PMPI_ prefix. chain.c expands it into the MPI_NAME and PMPI_NAME
 * definitions and the genuine PMPI_NAME found by dlsym(RTLD_NEXT); the Makefile turns each
 * X(NAME, line into the renames of chain_rename.h (-include'd by every other source file):
 *   MPI_NAME  -> amio_impl_MPI_NAME   (the implementation the sources define)
 *   PMPI_NAME -> amio_next_PMPI_NAME  (what the sources call: the genuine one, never ours)
 * One entry per line, each starting with "    X(". The parameter lists must be mpi.h's
 * (chain.c's definitions are checked against its declarations by the compiler).
 */
#ifndef AMIO_CHAIN_H
#define AMIO_CHAIN_H

/* int counts, and everything without a count */
#define AMIO_CHAIN_LIST(X) \
    X(Init, (int *argc, char ***argv), (argc, argv)) \
    X(Init_thread, (int *argc, char ***argv, int required, int *provided), (argc, argv, required, provided)) \
    X(Finalize, (void), ()) \
    X(File_open, (MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh), (comm, filename, amode, info, fh)) \
    X(File_close, (MPI_File *fh), (fh)) \
    X(File_delete, (const char *filename, MPI_Info info), (filename, info)) \
    X(File_set_atomicity, (MPI_File fh, int flag), (fh, flag)) \
    X(File_get_atomicity, (MPI_File fh, int *flag), (fh, flag)) \
    X(File_sync, (MPI_File fh), (fh)) \
    X(File_get_size, (MPI_File fh, MPI_Offset *size), (fh, size)) \
    X(File_set_size, (MPI_File fh, MPI_Offset size), (fh, size)) \
    X(File_preallocate, (MPI_File fh, MPI_Offset size), (fh, size)) \
    X(File_set_view, (MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char *datarep, MPI_Info info), (fh, disp, etype, filetype, datarep, info)) \
    X(File_get_view, (MPI_File fh, MPI_Offset *disp, MPI_Datatype *etype, MPI_Datatype *filetype, char *datarep), (fh, disp, etype, filetype, datarep)) \
    X(File_seek, (MPI_File fh, MPI_Offset offset, int whence), (fh, offset, whence)) \
    X(File_get_position, (MPI_File fh, MPI_Offset *offset), (fh, offset)) \
    X(File_seek_shared, (MPI_File fh, MPI_Offset offset, int whence), (fh, offset, whence)) \
    X(File_get_position_shared, (MPI_File fh, MPI_Offset *offset), (fh, offset)) \
    X(File_read_all_end, (MPI_File fh, void *buf, MPI_Status *st), (fh, buf, st)) \
    X(File_read_at_all_end, (MPI_File fh, void *buf, MPI_Status *st), (fh, buf, st)) \
    X(File_read_ordered_end, (MPI_File fh, void *buf, MPI_Status *st), (fh, buf, st)) \
    X(File_write_all_end, (MPI_File fh, const void *buf, MPI_Status *st), (fh, buf, st)) \
    X(File_write_at_all_end, (MPI_File fh, const void *buf, MPI_Status *st), (fh, buf, st)) \
    X(File_write_ordered_end, (MPI_File fh, const void *buf, MPI_Status *st), (fh, buf, st)) \
    X(File_read, (MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_read_all, (MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_write, (MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_write_all, (MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_read_at, (MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, off, buf, count, dt, st)) \
    X(File_read_at_all, (MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, off, buf, count, dt, st)) \
    X(File_write_at, (MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, off, buf, count, dt, st)) \
    X(File_write_at_all, (MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, off, buf, count, dt, st)) \
    X(File_iread, (MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iread_all, (MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iwrite, (MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iwrite_all, (MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iread_at, (MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, off, buf, count, dt, req)) \
    X(File_iread_at_all, (MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, off, buf, count, dt, req)) \
    X(File_iwrite_at, (MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, off, buf, count, dt, req)) \
    X(File_iwrite_at_all, (MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, off, buf, count, dt, req)) \
    X(File_read_all_begin, (MPI_File fh, void *buf, int count, MPI_Datatype dt), (fh, buf, count, dt)) \
    X(File_write_all_begin, (MPI_File fh, const void *buf, int count, MPI_Datatype dt), (fh, buf, count, dt)) \
    X(File_read_at_all_begin, (MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype dt), (fh, off, buf, count, dt)) \
    X(File_write_at_all_begin, (MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt), (fh, off, buf, count, dt)) \
    X(File_read_shared, (MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_write_shared, (MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_read_ordered, (MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_write_ordered, (MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_iread_shared, (MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iwrite_shared, (MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_read_ordered_begin, (MPI_File fh, void *buf, int count, MPI_Datatype dt), (fh, buf, count, dt)) \
    X(File_write_ordered_begin, (MPI_File fh, const void *buf, int count, MPI_Datatype dt), (fh, buf, count, dt))

/* (MPI 4) the large-count _c forms, defined only when mpi.h declares them */
#define AMIO_CHAIN_LIST_C(X) \
    X(File_read_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_read_all_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_write_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_write_all_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_read_at_c, (MPI_File fh, MPI_Offset off, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, off, buf, count, dt, st)) \
    X(File_read_at_all_c, (MPI_File fh, MPI_Offset off, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, off, buf, count, dt, st)) \
    X(File_write_at_c, (MPI_File fh, MPI_Offset off, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, off, buf, count, dt, st)) \
    X(File_write_at_all_c, (MPI_File fh, MPI_Offset off, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, off, buf, count, dt, st)) \
    X(File_iread_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iread_all_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iwrite_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iwrite_all_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iread_at_c, (MPI_File fh, MPI_Offset off, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, off, buf, count, dt, req)) \
    X(File_iread_at_all_c, (MPI_File fh, MPI_Offset off, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, off, buf, count, dt, req)) \
    X(File_iwrite_at_c, (MPI_File fh, MPI_Offset off, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, off, buf, count, dt, req)) \
    X(File_iwrite_at_all_c, (MPI_File fh, MPI_Offset off, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, off, buf, count, dt, req)) \
    X(File_read_all_begin_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt), (fh, buf, count, dt)) \
    X(File_write_all_begin_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt), (fh, buf, count, dt)) \
    X(File_read_at_all_begin_c, (MPI_File fh, MPI_Offset off, void *buf, MPI_Count count, MPI_Datatype dt), (fh, off, buf, count, dt)) \
    X(File_write_at_all_begin_c, (MPI_File fh, MPI_Offset off, const void *buf, MPI_Count count, MPI_Datatype dt), (fh, off, buf, count, dt)) \
    X(File_read_shared_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_write_shared_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_read_ordered_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_write_ordered_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Status *st), (fh, buf, count, dt, st)) \
    X(File_iread_shared_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_iwrite_shared_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Request *req), (fh, buf, count, dt, req)) \
    X(File_read_ordered_begin_c, (MPI_File fh, void *buf, MPI_Count count, MPI_Datatype dt), (fh, buf, count, dt)) \
    X(File_write_ordered_begin_c, (MPI_File fh, const void *buf, MPI_Count count, MPI_Datatype dt), (fh, buf, count, dt))

#endif
