//! Small pieces through a shared mapping of the user's file: one `memcpy` per piece instead
//! of one system call per piece.
//!
//! A strided view of 384-byte blocks makes ~11,000 pieces per MiB; a `pwrite` each costs
//! 1–2 µs of kernel entry, page-cache lookup and inode locking, which caps such writes at
//! ~150 MiB/s per process however the locks are arranged (measured: `atomio-lab bench
//! mpi-strided`, B = 384, every strategy ≈ MPICH with data sieving off). ROMIO avoids the
//! cost with data sieving, a read-modify-write of whole buffers, which needs a lock on the
//! whole extent. A `MAP_SHARED` mapping writes into the same page cache byte by byte, so a
//! client still touches only the bytes it holds locks on (the neighbours' bytes in the same
//! page belong to the page cache, not to a buffer of ours that would be written back).
//!
//! **Large folios.** A writable window is advised `MADV_HUGEPAGE`: the page cache then backs
//! what the populate faults in with large folios, and a fault's allocation, zeroing,
//! `page_mkwrite` and dirtying are paid per folio, not per page (S3D: ~30 % less CPU per
//! run, ~1.4× the bandwidth). `ATOMIO_MMAP_HUGE=0` turns the advice off.
//!
//! A window of a call that reaches over more than two large folios (`SPREAD`) is also
//! advised `MADV_RANDOM`. A fault into a `MADV_HUGEPAGE` window otherwise reads
//! ahead the *next* 2 MiB folio too; when another writer (S3D's neighbours, every rank of a
//! strided view) faults that region at the same moment, the loser's readahead falls back to
//! 4 KiB folios there. Those, and a large folio whose first fault in a window came that
//! way, are mapped page by page, and each of those faults runs ext4's `page_mkwrite` over
//! its whole folio's buffer heads. With the advice a fault creates only its own folio and
//! maps it whole. S3D, 4 clients: 201 of 216 (client, folio) pairs mapped whole instead of
//! 101–122, a third of the page faults, ~20 % less CPU per byte and `none` +2 … +25 % in
//! four alternating pairs. A call of one piece or a few (IOR's
//! 47,008-byte transfers) keeps readahead: there the advice cost 1–9 % in three pairs.
//!
//! **Whole folios at the window's ends.** The kernel maps a large folio with one PMD only
//! when the window covers all of it; a window that starts or ends inside a folio gets that
//! folio page by page, and each of those faults again runs `page_mkwrite` over the whole
//! folio. So writable windows start on a 2 MiB boundary below the call's first byte and end
//! on one above its last, past the file's end if need be: those bytes are mapped but never
//! touched. S3D at 8 clients (the 2×2×2 grid, whose calls begin and end mid-folio):
//! 268 → 290–299 of 336 (client, folio) pairs mapped whole per run, ~35 % fewer page faults,
//! `none` +33 … +58 % in three A/B pairs.
//!
//! **When.** [`worth_mapping`]: many pieces, small on average, dense enough in their hull
//! that the pages touched are mostly pages written. Never for file systems whose caches are
//! not coherent (NFS): the caller checks `Coherence` first.
//!
//! **Invariants:** only the bytes of the access are stored or loaded; the file is grown
//! with `fallocate` (which never shrinks it and writes no data) before any byte past its
//! end is written; a writable window reaches past the call's end by less than a large
//! folio, and no byte there is touched (a touch past the file's end raises `SIGBUS`); a
//! read maps only bytes below the size it observed; no Rust reference
//! to mapped memory is ever created (other processes write the same pages), only raw
//! copies. The one hazard a mapping adds over `pwrite`: if *another* program truncates the
//! file below a mapped page while a copy runs, the kernel raises `SIGBUS`. atomio's own
//! `set_size` is collective in MPI and erroneous concurrently with I/O there, so only a
//! program outside the job can do that.

use crate::direct::io_err;
use atomio_layout::{Access, ByteRange};
use atomio_proto::WireError;
use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::{fallocate, FallocateFlags};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Mapped windows are at most this long (bounded address space per call; small in tests so
/// that they cross windows).
const WINDOW: u64 = if cfg!(test) { 96 << 10 } else { 256 << 20 };
/// Read windows (and writable ones without large folios) start at multiples of this
/// (memmap2 aligns offsets to the page itself; a coarse grid just keeps windows of
/// neighbouring pieces identical).
const GRID: u64 = 64 << 10;
/// The large folio the page cache backs a `MADV_HUGEPAGE` window with (one PMD on x86-64):
/// writable windows start and end on its multiples (small in tests, so that their windows
/// still cross).
const LARGE_FOLIO: u64 = if cfg!(test) { 32 << 10 } else { 2 << 20 };
// A window starting on a folio boundary below a byte must still reach past it.
const _: () = assert!(WINDOW >= 2 * LARGE_FOLIO);
/// A writing call whose bytes from its first piece on reach further than this (two large
/// folios) faults many folios other writers fault too: its windows get no readahead.
const SPREAD: u64 = 4 << 20;
/// The page size assumed for rounding (populating from a lower page boundary is harmless).
const PAGE: u64 = 4096;
/// Pieces read at most this large on average go through a mapping.
pub const MAX_MEAN_READ_PIECE: u64 = 16 << 10;
/// Pieces written at most this large on average go through a mapping. Larger than for
/// reads: writers of one file by `pwrite` take turns on its inode lock, while copies into a
/// mapping run side by side (measured, `bench mpi-strided --block 47008`, 4 ranks: a
/// `pwrite` per piece 0.95–0.98× MPICH's atomic mode, through a mapping 1.87–1.96×). Not
/// much larger: a tile's 128 KiB rows, written one writer at a time under locks anyway,
/// ran ~40 % slower through a mapping than as `pwrite`s (large folios on either path).
pub const MAX_MEAN_WRITE_PIECE: u64 = 64 << 10;
/// At least this many pieces (below it, a few `pwrite`s cost less than a mapping).
pub const MIN_PIECES: u64 = 32;

/// Whether writable windows are advised `MADV_HUGEPAGE` (`ATOMIO_MMAP_HUGE=0`: no), read
/// once per process.
fn huge_folios() -> bool {
    static HUGE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HUGE.get_or_init(|| std::env::var("ATOMIO_MMAP_HUGE").as_deref() != Ok("0"))
}

/// Which way the bytes of a call go (the rule of `worth` differs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Read,
    Write,
}

/// Whether `access` is cheaper as copies through a mapping than as one system call per
/// piece.
pub fn worth_mapping(access: &Access, way: Way) -> bool {
    let Some(hull) = access.hull() else {
        return false;
    };
    worth(
        way,
        access.pattern().run_count_upper(),
        access.size(),
        hull.len(),
    )
}

/// The same rule for `pieces` pieces of `bytes` bytes in all, spread over `hull` bytes.
pub fn worth(way: Way, pieces: u64, bytes: u64, hull: u64) -> bool {
    let max_mean = match way {
        Way::Read => MAX_MEAN_READ_PIECE,
        Way::Write => MAX_MEAN_WRITE_PIECE,
    };
    // Touched pages must mostly be written pages: at least 1/16 of the hull selected.
    pieces >= MIN_PIECES && bytes / pieces.max(1) <= max_mean && bytes * 16 >= hull
}

/// Whether runs of `bytes` bytes in all are dense enough in their `hull` to fault their
/// pages in ahead of the copies (`populate`, one `madvise` per span of adjacent touched
/// pages): at a quarter or more, the spans are long, and one `madvise` costs less than a
/// fault per page (measured, `bench tile-pixels --clients 1`, 2,048 runs of 8 KiB at half
/// density into a fresh file: 749 → 1,250 MiB/s). Sparser, spans get short and a system
/// call per span costs more than the faults it saves.
pub fn dense(bytes: u64, hull: u64) -> bool {
    bytes.saturating_mul(4) >= hull
}

/// Calls `f(window, window_start, range, at)` for every run `(range, at)` of `runs` clipped
/// to `limit` (no byte at or past `limit` is passed), with `window` a mapping that covers
/// the run and `at` the run's offset in the caller's buffer (advanced past clipped bytes).
/// `populate` (writable windows): the pages the runs touch are faulted in writable by one
/// `madvise(MADV_POPULATE_WRITE)` per span of adjacent touched pages, before the copies
/// into that span, instead of one fault per page. Only touched pages: S3D's 384-byte
/// pieces leave every other 36 KiB of a client's hull to its neighbours, and populating the
/// whole hull faulted every page in for all four clients (measured: 431 MiB populated for
/// a 108 MiB checkpoint).
/// `Ok(false)`: the file system refused the first mapping (FUSE and some network file
/// systems cannot map files); nothing was copied and the caller uses system calls.
fn for_each_mapped(
    file: &File,
    runs: impl Iterator<Item = (ByteRange, usize)>,
    limit: u64,
    writable: bool,
    populate: bool,
    mut f: impl FnMut(&MmapRaw, u64, ByteRange, usize),
) -> Result<bool, WireError> {
    // Writable windows of large folios: whole folios at both ends, and the advice.
    let huge = writable && huge_folios();
    let mut window: Option<(MmapRaw, ByteRange)> = None;
    let mut first = true;
    // The touched pages not yet populated (page-aligned, inside the window) and the runs
    // in them, copied once the span is populated.
    let mut span: Option<ByteRange> = None;
    let mut held: Vec<(ByteRange, usize)> = Vec::new();
    for (r, at) in runs {
        let mut s = r.start;
        let mut at = at;
        let end = r.end.min(limit);
        while s < end {
            let covered = matches!(&window, Some((_, w)) if w.start <= s && s < w.end);
            if !covered {
                flush(&window, &mut span, &mut held, &mut f);
                // Mapping is lazy: only the pages a copy touches cost anything.
                let (start, stop) = if huge {
                    // Whole large folios at both ends (see the module doc); the bytes past
                    // `limit` are mapped, never touched.
                    let start = s / LARGE_FOLIO * LARGE_FOLIO;
                    let end = limit.div_ceil(LARGE_FOLIO).saturating_mul(LARGE_FOLIO);
                    (start, (start + WINDOW).min(end))
                } else {
                    let start = s / GRID * GRID;
                    (start, (start + WINDOW).min(limit))
                };
                let opts = {
                    let mut o = MmapOptions::new();
                    o.offset(start).len((stop - start) as usize);
                    o
                };
                let map = match if writable {
                    opts.map_raw(file)
                } else {
                    opts.map_raw_read_only(file)
                } {
                    Ok(m) => m,
                    Err(e) if first && e.raw_os_error() == Some(nix::libc::ENODEV) => {
                        return Ok(false)
                    }
                    Err(e) => return Err(io_err("mmap", start, e)),
                };
                first = false;
                if huge {
                    // Advice only: lets the page cache back the window with large folios,
                    // and, for a call that spreads over several, keeps each fault to its
                    // own folio (see the module doc).
                    let _ = map.advise(memmap2::Advice::HugePage);
                    if limit - s > SPREAD {
                        let _ = map.advise(memmap2::Advice::Random);
                    }
                }
                window = Some((map, ByteRange { start, end: stop }));
            }
            let (map, w) = window.as_ref().expect("mapped above");
            let e = end.min(w.end);
            let piece = ByteRange { start: s, end: e };
            if populate && writable {
                let pages = ByteRange {
                    start: s / PAGE * PAGE,
                    end: e.div_ceil(PAGE).saturating_mul(PAGE).min(w.end),
                };
                match &mut span {
                    Some(sp) if pages.start <= sp.end => sp.end = sp.end.max(pages.end),
                    _ => {
                        flush(&window, &mut span, &mut held, &mut f);
                        span = Some(pages);
                    }
                }
                held.push((piece, at));
            } else {
                f(map, w.start, piece, at);
            }
            at += (e - s) as usize;
            s = e;
        }
    }
    flush(&window, &mut span, &mut held, &mut f);
    Ok(true)
}

/// Populates `span` (pages of `window`) and then copies the runs `held` in it.
fn flush(
    window: &Option<(MmapRaw, ByteRange)>,
    span: &mut Option<ByteRange>,
    held: &mut Vec<(ByteRange, usize)>,
    f: &mut impl FnMut(&MmapRaw, u64, ByteRange, usize),
) {
    if let (Some((map, w)), Some(sp)) = (window, span.take()) {
        // An optimization only: a kernel without it (before 5.14) faults as usual. A span
        // of one page is left to its fault: the system call costs more than the fault it
        // saves (4 KiB blocks strided over 4 ranks, every span one page: `bench
        // mpi-strided --block 4096` +7–30 % per strategy in two A/B pairs).
        if sp.len() > PAGE {
            let _ = map.advise_range(
                memmap2::Advice::PopulateWrite,
                (sp.start - w.start) as usize,
                sp.len() as usize,
            );
        }
        for (r, at) in held.drain(..) {
            f(map, w.start, r, at);
        }
    }
}

/// The runs of `access` with their offsets in the packed buffer.
fn packed_runs(access: &Access) -> impl Iterator<Item = (ByteRange, usize)> + '_ {
    access.ranges().scan(0usize, |at, r| {
        let here = *at;
        *at += r.len() as usize;
        Some((r, here))
    })
}

/// Writes `data` (offset order) into the pieces of `access` through a shared mapping;
/// `pwrites` counts the `pwrite`s of the pieces on the file's edge pages.
/// `Ok(false)`: the file could not be grown with `fallocate` (a file system without it);
/// nothing was written and the caller uses `pwrite`.
pub fn write(
    file: &File,
    access: &Access,
    data: &[u8],
    pwrites: &AtomicU64,
) -> Result<bool, WireError> {
    match access.hull() {
        None => Ok(true),
        Some(hull) => write_runs(
            file,
            packed_runs(access),
            hull,
            dense(access.size(), hull.len()),
            data,
            pwrites,
        ),
    }
}

/// Writes `data[at..at + len]` to every run `(range, at)` of `runs` (all inside `hull`)
/// through a shared mapping, growing the file to `hull.end` first; `populate` as in
/// `dense`; `pwrites` counts the `pwrite`s of edge pages. `Ok(false)`: the file
/// system cannot grow a file without writing (no `fallocate`) or cannot map it; nothing
/// written.
pub fn write_runs(
    file: &File,
    runs: impl Iterator<Item = (ByteRange, usize)>,
    hull: ByteRange,
    populate: bool,
    data: &[u8],
    pwrites: &AtomicU64,
) -> Result<bool, WireError> {
    let end = hull.end;
    let size = file.metadata().map_err(|e| io_err("fstat", 0, e))?.len();
    if end > size {
        // Grows the file to the runs' end without writing a byte and without ever
        // shrinking it, so concurrent growers cannot cut each other's data. Only the hull
        // is allocated: whatever lies between the old end and the hull stays a hole (a
        // first write at 1 TiB must not allocate a terabyte).
        let from = size.max(hull.start);
        let len = (end - from) as i64;
        match fallocate(file.as_raw_fd(), FallocateFlags::empty(), from as i64, len) {
            Ok(()) => {}
            Err(nix::errno::Errno::EOPNOTSUPP) => return Ok(false),
            Err(e) => return Err(io_err("fallocate", from, e)),
        }
    }
    // Bytes in a page that straddles an end of the file (the end before this call grew
    // it, and the new end) are stored with `pwrite`, not through the mapping. Seen: under
    // writeback pressure, 2 of 80 runs of `bench mpi-strided` B = 384 found the last piece
    // of one call zero — the piece ending at the end of the file — and 0 of 240 with
    // this. Our reading (not proven): writeback zeroes the part of the end page past the
    // size it saw, and a mapped store racing that is lost; `pwrite` stores under the
    // page's lock and moves the size itself.
    let edges = [
        (size < end).then_some(size / PAGE * PAGE),
        Some((end - 1) / PAGE * PAGE),
    ];
    let on_edge = |x: u64| edges.iter().flatten().any(|&p| p <= x && x < p + PAGE);
    let mut by_pwrite: Vec<(ByteRange, usize)> = Vec::new();
    let runs = runs
        .flat_map(|(r, at)| split_at_edges(r, at, edges))
        .filter(|&(r, at)| {
            if on_edge(r.start) {
                by_pwrite.push((r, at));
                false
            } else {
                true
            }
        });
    let mapped = for_each_mapped(file, runs, end, true, populate, |map, base, r, at| {
        let n = r.len() as usize;
        let src = &data[at..at + n];
        // SAFETY: `r` lies inside the mapping (`for_each_mapped` guarantees `base <= r.start`
        // and `r.end <= base + map.len()`), the mapping is of a file at least `end` bytes
        // long (grown above; only an outside truncation could shrink it, see the module
        // doc), and the destination is written through a raw pointer only: no reference to
        // shared memory exists that another process's store could invalidate.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                map.as_mut_ptr().add((r.start - base) as usize),
                n,
            );
        }
    })?;
    if mapped {
        pwrites.fetch_add(by_pwrite.len() as u64, Ordering::Relaxed);
        for (r, at) in by_pwrite {
            file.write_all_at(&data[at..at + r.len() as usize], r.start)
                .map_err(|e| io_err("pwrite", r.start, e))?;
        }
    }
    Ok(mapped)
}

/// `(r, at)` cut at the boundaries of the pages starting at `edges`, so that each piece
/// lies on one of those pages or on none of them. A run that meets none comes back whole.
fn split_at_edges(
    r: ByteRange,
    at: usize,
    edges: [Option<u64>; 2],
) -> impl Iterator<Item = (ByteRange, usize)> {
    let mut s = r.start;
    std::iter::from_fn(move || {
        if s >= r.end {
            return None;
        }
        let e = edges
            .iter()
            .flatten()
            .flat_map(|&p| [p, p + PAGE])
            .filter(|&c| c > s && c < r.end)
            .min()
            .unwrap_or(r.end);
        let piece = (ByteRange { start: s, end: e }, at + (s - r.start) as usize);
        s = e;
        Some(piece)
    })
}

/// Reads the pieces of `access` below `size` (the file's size, observed by the caller) into
/// `out` (offset order); bytes at or past `size` are left as they are. `Ok(false)`: the
/// file cannot be mapped; nothing was read.
pub fn read(file: &File, access: &Access, out: &mut [u8], size: u64) -> Result<bool, WireError> {
    read_runs(file, packed_runs(access), size, out)
}

/// Reads every run `(range, at)` of `runs` below `size` into `out[at..]`; bytes at or past
/// `size` are left as they are. `Ok(false)`: the file cannot be mapped; nothing was read.
pub fn read_runs(
    file: &File,
    runs: impl Iterator<Item = (ByteRange, usize)>,
    size: u64,
    out: &mut [u8],
) -> Result<bool, WireError> {
    for_each_mapped(file, runs, size, false, false, |map, base, r, at| {
        let n = r.len() as usize;
        let dst = &mut out[at..at + n];
        // SAFETY: as in `write_runs`; the source lies below `size`, and the mapping is read
        // through a raw pointer into a buffer we own.
        unsafe {
            std::ptr::copy_nonoverlapping(
                map.as_ptr().add((r.start - base) as usize),
                dst.as_mut_ptr(),
                n,
            );
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_map_larger_pieces_than_reads() {
        // 64 interleaved pieces, a quarter of their hull (4 writers' strided blocks).
        let of = |piece: u64| (64, 64 * piece, 4 * 64 * piece);
        for (piece, read, write) in [
            (384, true, true),
            (16 << 10, true, true),
            (47_008, false, true),
            (64 << 10, false, true),
            (128 << 10, false, false),
        ] {
            let (n, bytes, hull) = of(piece);
            assert_eq!(worth(Way::Read, n, bytes, hull), read, "read {piece}");
            assert_eq!(worth(Way::Write, n, bytes, hull), write, "write {piece}");
        }
        // Too few pieces, or too sparse in their hull: never.
        assert!(!worth(Way::Write, MIN_PIECES - 1, 1 << 20, 4 << 20));
        assert!(!worth(Way::Write, 64, 64 * 384, 17 * 64 * 384));
    }

    /// Cutting at edge pages keeps every byte once, in order, with its buffer offset; each
    /// piece is on one edge page or on none.
    #[test]
    fn runs_are_cut_only_at_edge_pages() {
        let edges = [Some(2 * PAGE), Some(5 * PAGE)];
        let cases = [
            (
                ByteRange {
                    start: 10,
                    end: 100,
                },
                7usize,
            ),
            (
                ByteRange {
                    start: PAGE + 5,
                    end: 6 * PAGE + 1,
                },
                0,
            ),
            (
                ByteRange {
                    start: 2 * PAGE + 1,
                    end: 2 * PAGE + 9,
                },
                3,
            ),
        ];
        for (r, at) in cases {
            let pieces: Vec<_> = split_at_edges(r, at, edges).collect();
            let mut s = r.start;
            for &(p, pat) in &pieces {
                assert_eq!((p.start, pat), (s, at + (s - r.start) as usize));
                let page = |x: u64| edges.iter().flatten().find(|&&e| e <= x && x < e + PAGE);
                assert_eq!(page(p.start), page(p.end - 1), "{p:?} crosses an edge page");
                s = p.end;
            }
            assert_eq!(s, r.end);
        }
        assert_eq!(split_at_edges(cases[0].0, 7, edges).count(), 1);
        assert_eq!(split_at_edges(cases[1].0, 0, edges).count(), 5);
    }
}
