/*
 * hints.h -- the settings of libatomio_mpiio the ROMIO way (hints_file.c): one table of
 * every setting a user may change, a site-wide hints file named by ATOMIO_HINTS, the
 * environment as overrides, per-file MPI_Info hints where a setting is per file.
 */
#ifndef AMIO_HINTS_H
#define AMIO_HINTS_H

#include <mpi.h>

/* Called first by amio_config_load: reads the file ATOMIO_HINTS names (if set) and, for each
 * known key whose environment variable is unset, sets that variable to the file's value, so
 * every reader (config.c, runtime.c, libatomio) sees it; warns about unknown keys and bad
 * lines. Notes where each setting came from. */
void amio_hints_load(void);

/* ATOMIO_VERBOSE >= 1, world rank 0 (MPI initialized): one line per setting, its effective
 * value and where it came from (hint / environment / ATOMIO_HINTS file:line / default). */
void amio_hints_report(void);

/* At MPI_File_open of a taken file: warns (once per key and process) about "atomio_" keys of
 * the open's info that are unknown, or that are job-wide settings an open cannot change. */
void amio_hints_check_info(MPI_Info info);

/* What the open in progress on this thread asked with its hint atomio_hdf5_span: 0 or 1, or
 * -1 when it did not (set by amio_hints_check_info; read by amio_span_opened when the open
 * adds its handle to the table, on the same thread). */
int amio_hints_open_span(void);

#endif
