/*
 * span.h -- the write span of one H5Dwrite (hdf5_span.c): while HDF5 turns one dataset
 * write into MPI-IO calls, the independent MPI_File_write_at calls on atomic atomio files
 * are collected, and written as ONE atomic atomio call before H5Dwrite returns.
 */
#ifndef AMIO_SPAN_H
#define AMIO_SPAN_H

#include "internal.h"

/* Independent H5Dwrite calls in progress on this thread whose writes are collected (0: no
 * span, the common case). */
extern __thread int amio_span_depth;
/* H5Dwrite, H5Fcreate, H5Fopen calls in progress on this thread (collecting or not): views
 * set meanwhile are HDF5's own (the default view at open, a temporary filetype inside a
 * collective H5Dwrite), which interval analysis skips when every rank is inside one
 * (intervals.c). */
extern __thread int amio_hdf5_depth;

/* io_calls.c, inside a span: an independent explicit-offset write on `f`. *handled = 1 when
 * the span took it (its n bytes are copied; *bytes = n); else the caller does it as usual,
 * the span's earlier pieces already written. Returns 0 or an MPI error code. */
int amio_span_write(amio_file *f, MPI_Offset off, const void *buf, MPI_Count count,
                    MPI_Datatype dt, MPI_Count *bytes, int *handled);

/* chain.c, inside a span: any other MPI entry point is about to run; the pieces collected so
 * far are written first (program order). */
void amio_span_barrier(void);

/* handles.c: a taken file's handle enters / leaves the table; the open's atomio_hdf5_span
 * hint (if any) is the file's span setting instead of ATOMIO_HDF5_SPAN. */
void amio_span_opened(amio_file *f);
void amio_span_closed(amio_file *f);

#endif
