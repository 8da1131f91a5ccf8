/*
 * atomio_oracle.h -- the verifier for C test programs and benchmarks (lab, not the product).
 * Link with -latomio_oracle -latomio. Views are the product's patterns (atomio.h): the data
 * of one MPI-IO call is `len` bytes at data offset `skip` of the view (`disp`, `filetype`
 * tiled). Return codes are atomio.h's ATOMIO_*; atomio_oracle_last_error() says why.
 */
#ifndef ATOMIO_ORACLE_H
#define ATOMIO_ORACLE_H

#include "atomio.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct atomio_verifier atomio_verifier;

/* The message of this thread's last failed call of this library ("" after a success). */
const char *atomio_oracle_last_error(void);

/* Fills `buf` (`len` bytes) with the verifier's tags for the data of one call by `writer`
 * (its `op`-th write). */
int atomio_tag_view(uint32_t writer, uint64_t op, uint64_t disp, const atomio_pattern *filetype,
                    uint64_t skip, void *buf, size_t len);

/* A new, empty verifier. */
int atomio_verifier_new(atomio_verifier **out);

/* Records a write by (`writer`, `op`) whose data came from atomio_tag_view with the same
 * arguments. */
int atomio_verifier_add_write(atomio_verifier *v, uint32_t writer, uint64_t op, uint64_t disp,
                              const atomio_pattern *filetype, uint64_t skip, size_t len);

/* Records a read and the `len` bytes it returned. */
int atomio_verifier_add_read(atomio_verifier *v, uint32_t reader, uint64_t op, uint64_t disp,
                             const atomio_pattern *filetype, uint64_t skip,
                             const void *observed, size_t len);

/* Checks the ordinary file at `path` (read as its file system holds it, not this client's
 * cache) against the recorded operations. `*atomic` is 1 (atomic), 0 (violated) or -1
 * (inconclusive); the report is copied into `report` (`cap` bytes, truncated). */
int atomio_verifier_check(const atomio_verifier *v, const char *path, int *atomic,
                          char *report, size_t cap);

void atomio_verifier_free(atomio_verifier *v);

#ifdef __cplusplus
}
#endif
#endif
