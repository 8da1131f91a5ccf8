/*
 * atomio.h — the C ABI of atomio: fast, correct atomic I/O to one shared file.
 * Generated from crates/atomio-ffi/src/lib.rs by cbindgen; do not edit (a test fails if
 * this file is stale: cargo test -p atomio-ffi; regenerate with ATOMIO_BLESS=1).
 *
 * Every function returns ATOMIO_OK (0) or an error code; atomio_last_error() has the
 * message (thread-local). Calls block. Handles may be used from one thread at a time.
 */

#ifndef ATOMIO_H
#define ATOMIO_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define ATOMIO_OK 0

#define ATOMIO_EMALFORMED 1

#define ATOMIO_EVERSION 2

#define ATOMIO_EINVAL 3

#define ATOMIO_ELIMIT 4

#define ATOMIO_ENOTFOUND 5

#define ATOMIO_ENOTOWNER 6

#define ATOMIO_ESTATE 7

#define ATOMIO_EIO 8

#define ATOMIO_ETIMEOUT 9

#define ATOMIO_EDISCONNECTED 10

#define ATOMIO_EUNSUPPORTED 11

#define ATOMIO_EINTERNAL 12

#define ATOMIO_EEXISTS 13

#define ATOMIO_ELEASE 14

#define ATOMIO_EAUTH 15

#define ATOMIO_EABORTED 16

#define ATOMIO_ELOCKED 17

// `atomio_open` flag: create the file if it does not exist.
#define ATOMIO_CREATE 1

// `atomio_open` flag: with `ATOMIO_CREATE`, fail if it exists.
#define ATOMIO_EXCL 2

// `atomio_open_direct` flag: treat the file system's clients as caching without coherence
// (NFS, FUSE), whatever detection found: flush before every release, drop cached pages and
// fetch the size after every acquire, never map. Without any `ATOMIO_CACHES_*` flag the
// file system is detected (see `atomio_fs_caches`).
#define ATOMIO_CACHES_PRIVATE 4

// `atomio_open_direct` flag: open the file read-only.
#define ATOMIO_RDONLY 8

// `atomio_open_direct` flag: take the file's locks in this host's shared lock table, not
// on the lock servers (no round trip per call). Every process that opens the file must run
// on this host and pass it too: the table and the servers do not see each other's locks.
#define ATOMIO_HOST_LOCKS 16

// `atomio_open_direct` flag: treat the file system's client caches as kept coherent by the
// file system (Lustre, GPFS), whatever detection found: no mapping, no flushes or drops.
#define ATOMIO_CACHES_COHERENT 32

// `atomio_open_direct` flag: treat the file as one page cache shared by every process
// (a local file system), whatever detection found: small pieces may go through a mapping.
#define ATOMIO_CACHES_SHARED 64

// `atomio_fs_caches` result: one page cache for every process (local file systems).
#define ATOMIO_FS_SHARED 0

// `atomio_fs_caches` result: per-client caches the file system keeps coherent.
#define ATOMIO_FS_COHERENT 1

// `atomio_fs_caches` result: per-client caches without coherence (NFS, FUSE, unknown).
#define ATOMIO_FS_PRIVATE 2

// A connection to every server of a cluster.
typedef struct atomio_client atomio_client;

// An open file: on a cluster's data servers, or the user's own file (direct placement).
typedef struct atomio_file atomio_file;

// The interval set of a group of ranks' file views (immutable).
typedef struct atomio_intervals atomio_intervals;

// An immutable structured pattern (an MPI-datatype-like description of bytes).
typedef struct atomio_pattern atomio_pattern;

// A server (locks + data) running on a thread of this process.
typedef struct atomio_server atomio_server;

// Facts about an interval set and what computing it cost.
typedef struct {
  // Ranks whose views were analyzed.
  uint32_t ranks;
  // Families of intervals kept (the size of the set).
  uint64_t entries;
  // Elementary intervals those families stand for.
  uint64_t intervals;
  uint64_t private_intervals;
  uint64_t shared_intervals;
  uint64_t private_bytes;
  uint64_t shared_bytes;
  // Wall time of the whole computation (lowering the views and the analysis).
  double seconds;
  // The analysis covers file offsets below this (the same for every rank); beyond it
  // no byte is declared and every call locks.
  uint64_t bound;
} atomio_interval_stats;

// A file's I/O counters (`atomio_client::IoStats`).
typedef struct {
  uint64_t calls;
  uint64_t bytes;
  // Lock requests made (sub-requests, or `fcntl` calls).
  uint64_t lock_requests;
  // Lock messages sent (acquires, partial and full releases).
  uint64_t lock_messages;
  // Calls that took no lock at all (every byte private to the caller).
  uint64_t lock_free_calls;
  // Calls that had to lock bytes no view declared (strategy `interval`/`auto`).
  uint64_t interval_fallbacks;
  // Ranges in the lock requests made (a structured request counts its access's runs,
  // an upper bound).
  uint64_t lock_ranges;
  // `pread` system calls made on the user's file (direct placement).
  uint64_t read_syscalls;
} atomio_io_stats;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The message of the last failed call on this thread ("" after a success).
const char *atomio_last_error(void);

// A short name for an error code ("ATOMIO_EINVAL", …).
const char *atomio_error_name(int code);

// Starts a server on its own thread, listening on `listen` ("127.0.0.1:0" picks a port),
// keeping data under `data_dir`. `id` is its index in the cluster, or -1.
int atomio_server_start(const char *listen, const char *data_dir, int64_t id, atomio_server **out);

// The address the server listens on ("127.0.0.1:40123"), owned by the server.
const char *atomio_server_address(const atomio_server *server);

// Stops the server, waits for its thread, and frees it.
int atomio_server_stop(atomio_server *server);

// Connects to the servers `addrs[0..n]` (server i of the cluster is `addrs[i]`).
int atomio_connect(const char *const *addrs, size_t n, atomio_client **out);

// Drops this handle; the connections close when no file opened through it remains.
void atomio_disconnect(atomio_client *client);

// Deletes the file at `path` (objects and metadata).
int atomio_remove(atomio_client *client, const char *path);

// `len` contiguous bytes.
int atomio_pattern_bytes(uint64_t len, atomio_pattern **out);

// `count` blocks `stride` bytes apart, each `blocklen` copies of `elem` (MPI hvector).
int atomio_pattern_hvector(uint64_t count,
                           uint64_t blocklen,
                           uint64_t stride,
                           const atomio_pattern *elem,
                           atomio_pattern **out);

// Blocks at byte displacements `disps[i]`, `blocklens[i]` copies of `elem` (MPI hindexed).
int atomio_pattern_hindexed(size_t n,
                            const uint64_t *disps,
                            const uint64_t *blocklens,
                            const atomio_pattern *elem,
                            atomio_pattern **out);

// Fields at byte displacements, each `blocklens[i]` copies of `elems[i]` (MPI struct).
int atomio_pattern_struct(size_t n,
                          const uint64_t *disps,
                          const uint64_t *blocklens,
                          const atomio_pattern *const *elems,
                          atomio_pattern **out);

// The same data as `elem` with its extent replaced (MPI resized with lower bound 0).
int atomio_pattern_resized(uint64_t extent, const atomio_pattern *elem, atomio_pattern **out);

// An `ndims`-dimensional subarray of `elem` (MPI subarray); `fortran` selects column-major.
int atomio_pattern_subarray(size_t ndims,
                            const uint64_t *sizes,
                            const uint64_t *subsizes,
                            const uint64_t *starts,
                            int fortran,
                            const atomio_pattern *elem,
                            atomio_pattern **out);

// Facts about a pattern: bytes selected, extent, data upper bound, node count, and
// whether it is monotone (usable as a file view).
int atomio_pattern_info(const atomio_pattern *p,
                        uint64_t *size,
                        uint64_t *extent,
                        uint64_t *data_end,
                        uint64_t *nodes,
                        int *monotone);

void atomio_pattern_free(atomio_pattern *p);

// Packs `count` copies of `memtype` from `base` (a buffer of `span` bytes) into `out`
// (`out_len` = count × type size).
int atomio_gather(const atomio_pattern *memtype,
                  uint64_t count,
                  const void *base,
                  size_t span,
                  void *out,
                  size_t out_len);

// Unpacks `in_len` bytes into `count` copies of `memtype` at `base` (`span` bytes).
int atomio_scatter(const atomio_pattern *memtype,
                   uint64_t count,
                   const void *input,
                   size_t in_len,
                   void *base,
                   size_t span);

// Opens (with `ATOMIO_CREATE`, creates) the file at `path`. Stripe size and count apply at
// creation (0 for the defaults: 64 KiB, every server).
int atomio_open(atomio_client *client,
                const char *path,
                uint32_t flags,
                uint64_t stripe_size,
                uint32_t stripe_count,
                atomio_file **out);

// Forgets this client's cached pages of the open file `fd` that hold any byte of
// `[start, start + len)` (`len` 0: to the end) and fetches its size from the file system,
// as a reader must on a file system whose clients cache privately (see
// `atomio_fs_caches`) before trusting what it reads.
int atomio_forget_cached(int fd, uint64_t start, uint64_t len);

// What the open file `fd` lives on: `*caches` = `ATOMIO_FS_SHARED|COHERENT|PRIVATE` and, if
// `name` is not NULL, the file system's name (`ext4`, `fuse.glusterfs`, …) as a
// NUL-terminated string in `name[0..name_len]` (cut to fit). `override_` (NULL: none; else
// `shared`, `coherent` or `private`) wins over the environment's `ATOMIO_FS_CACHES`, which
// wins over detection.
int atomio_fs_caches(int fd, const char *override_, int *caches, char *name, size_t name_len);

// Opens (with `ATOMIO_CREATE`, creates) the user's ordinary file at `path` in direct
// mode: its bytes stay in that file, written with positioned I/O under atomio's locks;
// `client` provides the lock service (NULL for strategies that need none: "none",
// "posix-fcntl", "romio"). Nothing is copied at open or close.
int atomio_open_direct(atomio_client *client, const char *path, uint32_t flags, atomio_file **out);

// Whether the server file's atomic writes are all-or-nothing (`on` != 0, the default:
// staged at every server, committed at one, so a writer killed mid-call leaves its write
// whole or absent). Turn it off only for a copy whose bytes count once a collective step
// exports them (see `File::set_all_or_nothing`). Direct files: no effect.
int atomio_set_all_or_nothing(atomio_file *file, int on);

// Closes (frees) the file handle.
int atomio_close(atomio_file *file);

// Whether strategy `name` runs on the user's own file (direct placement): `*out` = 1, or
// 0 when it runs only on atomio's data servers (the cached-lock DLMs: `seqdlm…`,
// `dlm-basic`, `dlm-lustre`). An unknown name is `ATOMIO_EINVAL`.
int atomio_strategy_direct(const char *name, int *out);

// Atomic mode with a strategy by name ("ching:datatype:one-try", …); NULL or "none": off.
int atomio_set_atomic(atomio_file *file, const char *strategy);

// 1 if atomic mode is on, else 0.
int atomio_get_atomic(const atomio_file *file);

// Writes `len` bytes to the ranges (offsets[i], lengths[i]) — non-empty, increasing,
// non-overlapping — atomically in atomic mode.
int atomio_write_list(atomio_file *file,
                      size_t n,
                      const uint64_t *offsets,
                      const uint64_t *lengths,
                      const void *buf,
                      size_t len);

// Reads the ranges into `buf` (`len` bytes), atomically in atomic mode.
int atomio_read_list(atomio_file *file,
                     size_t n,
                     const uint64_t *offsets,
                     const uint64_t *lengths,
                     void *buf,
                     size_t len);

// Writes `len` bytes at data offset `skip` of the file view (`disp`, `filetype` tiled):
// the bytes of one MPI-IO call, structure kept.
int atomio_write_view(atomio_file *file,
                      uint64_t disp,
                      const atomio_pattern *filetype,
                      uint64_t skip,
                      const void *buf,
                      size_t len);

// Reads `len` bytes at data offset `skip` of the file view into `buf`.
int atomio_read_view(atomio_file *file,
                     uint64_t disp,
                     const atomio_pattern *filetype,
                     uint64_t skip,
                     void *buf,
                     size_t len);

// Makes the file durable on every server.
int atomio_sync(atomio_file *file);

// Gives back every cached lock of this process's cached-lock DLM client (`seqdlm`,
// `dlm-basic`, `dlm-lustre`), its cached bytes flushed to the servers first; nothing to do
// for other strategies. Readers that take no DLM locks (an export) see those bytes only
// after every writer did this.
int atomio_flush(atomio_file *file);

// `versioning`: writes the newest published snapshot's bytes into the file's base (the
// user's file in direct placement, the server file's objects otherwise), so that the base
// alone holds the file as every version made it. Nothing to do for other strategies (or
// with atomic mode off). Idempotent. Run it in ONE process after every writer's calls
// returned (like an export): two materializations running at once may leave the older
// snapshot's bytes in the base. Snapshots older than the one written become unreadable.
int atomio_materialize(atomio_file *file);

// `versioning`: reads the ranges (as `atomio_read_list`) as published snapshot `version`
// has them — any version still kept, not only the newest. Version 0 (the file before any
// version) is not a snapshot: `ATOMIO_EINVAL`. A version that was garbage-collected, is
// older than the one last materialized (the base no longer holds its unwritten bytes), is
// not assigned yet, or is still in flight: `ATOMIO_ENOTFOUND`; one that was aborted:
// `ATOMIO_EABORTED` (the message says which). Other strategies: `ATOMIO_EINVAL`.
int atomio_read_version(atomio_file *file,
                        uint64_t version,
                        size_t n,
                        const uint64_t *offsets,
                        const uint64_t *lengths,
                        void *buf,
                        size_t len);

// `versioning`: the newest published version (0: none yet) into `*out`. Later versions
// may be in flight; every write call that returned before this call began is in it or
// below it. Other strategies: `ATOMIO_EINVAL`.
int atomio_latest_version(atomio_file *file, uint64_t *out);

// The file's size in bytes.
int atomio_size(atomio_file *file, uint64_t *out);

// Truncates or zero-extends the file to `size` bytes.
int atomio_set_size(atomio_file *file, uint64_t size);

// Writes the file's logical bytes to `out_path` as one ordinary file. For a `versioning`
// file: its newest published snapshot (one version throughout, whatever is written
// meanwhile), the base under what no version wrote.
int atomio_export(atomio_file *file, const char *out_path);

// For strategies that need no servers (rma): `pwrite`s `len` bytes of one MPI-IO call,
// at data offset `skip` of the view (`disp`, `filetype`), into the ordinary file `fd`, one
// `pwrite` per contiguous run (the caller holds whatever lock the strategy needs; see
// `atomio_view_hull`).
int atomio_posix_write_view(int fd,
                            uint64_t disp,
                            const atomio_pattern *filetype,
                            uint64_t skip,
                            const void *buf,
                            size_t len);

// `pread`s `len` bytes of one MPI-IO call at data offset `skip` of the view from `fd`;
// bytes past the end of the file read as zero.
int atomio_posix_read_view(int fd,
                           uint64_t disp,
                           const atomio_pattern *filetype,
                           uint64_t skip,
                           void *buf,
                           size_t len);

// The first and one-past-last byte a view call touches (what the rma strategy locks).
int atomio_view_hull(uint64_t disp,
                     const atomio_pattern *filetype,
                     uint64_t skip,
                     size_t len,
                     uint64_t *start,
                     uint64_t *end);

// The file ranges of one MPI-IO call (data bytes `[skip, skip + len)` of the view), in
// increasing order, adjacent ranges merged: the first `cap` go to `offsets`/`lengths` and
// `*n` is how many there are (call again with `cap >= *n` if it is larger).
int atomio_view_runs(uint64_t disp,
                     const atomio_pattern *filetype,
                     uint64_t skip,
                     size_t len,
                     uint64_t *offsets,
                     uint64_t *lengths,
                     size_t cap,
                     size_t *n);

// How many data bytes of the view (`disp`, `filetype` tiled) lie at file offsets below
// `limit` (MPI-IO's end-of-file position in a view: `MPI_SEEK_END`, `MPI_MODE_APPEND`,
// the count of a read that reaches the end of the file). Arithmetic, not iteration.
int atomio_view_data_before(uint64_t disp,
                            const atomio_pattern *filetype,
                            uint64_t limit,
                            uint64_t *out);

// Writes the encoded form of `p` into `buf` (`cap` bytes); `*len` is always set to the
// bytes the encoding needs. `buf` NULL with `cap` 0 only asks for the length; a `cap`
// too small is `ATOMIO_ELIMIT` (nothing written).
int atomio_pattern_encode(const atomio_pattern *p, uint8_t *buf, size_t cap, size_t *len);

// A pattern from the `len` bytes `atomio_pattern_encode` wrote (possibly in another
// process). Malformed or invalid bytes are `ATOMIO_EMALFORMED` / `ATOMIO_EINVAL` /
// `ATOMIO_ELIMIT`, never a crash. Free with `atomio_pattern_free`.
int atomio_pattern_decode(const uint8_t *buf, size_t len, atomio_pattern **out);

// The interval set of `n` ranks' MPI file views: rank `i` sees `filetypes[i]` repeated
// every extent from byte `disps[i]` (filetypes monotone, data within the extent, as MPI
// requires of views). Analyzed up to `reach` bytes past the largest displacement (0: the
// default, 1 TiB). Every rank calling it with the same inputs gets the same set.
int atomio_intervals_from_views(size_t n,
                                const atomio_pattern *const *filetypes,
                                const uint64_t *disps,
                                uint64_t reach,
                                atomio_intervals **out);

// Facts about an interval set.
int atomio_intervals_stats(const atomio_intervals *set, atomio_interval_stats *out);

// Frees an interval set (files it was installed on keep their own reference).
void atomio_intervals_free(atomio_intervals *set);

// Installs `set` on the file, for rank `rank` of the views it was computed from
// (strategies `interval` and `auto`: bytes private to `rank` are written and read without
// locks; `auto` picks its strategy from the set). Call it again when the views change.
int atomio_file_set_intervals(atomio_file *file, const atomio_intervals *set, uint32_t rank);

// Makes the file an **interval file** laid out by the interval set installed last
// (`atomio_file_set_intervals`; strategy `interval` on the user's file): rank 0 writes the
// metadata now, each rank's private bytes are cached and written at `atomio_sync` /
// `atomio_flush` as one stretch per rank, shared bytes in place under their locks. Every
// rank of the set calls it before any I/O. Bytes outside the set are refused afterwards,
// and the layout does not follow later views. `atomio interval translate FILE OUT --to
// flat` turns the file back into a flat one.
int atomio_file_set_interval_format(atomio_file *file);

// The strategy `auto` chose for the file and why, as "strategy: reason" (NUL-terminated,
// truncated to `cap` - 1 bytes at a character boundary); "" when nothing was chosen.
int atomio_file_explain(const atomio_file *file, char *buf, size_t cap);

// The strategy in force on the file ("" when atomic mode is off): for `auto`, the one it
// chose (or fell back to); NUL-terminated, truncated to `cap` - 1 bytes.
int atomio_get_strategy(const atomio_file *file, char *buf, size_t cap);

// The file's I/O counters since it was opened.
int atomio_file_stats(const atomio_file *file, atomio_io_stats *out);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* ATOMIO_H */
