//! Interval translation (Logan §3.5): moving a file's bytes from one interval layout to
//! another — to the flat file, from a flat file, or to the interval file of another
//! interval set (another rank count or another view) — finding the source of every target
//! interval with the source set's search tree.
//!
//! Streaming: the target is produced region by region, in chunks of at most `chunk_bytes`
//! (and `max_segments` intervals); per chunk the source pieces are read into one buffer
//! (reads merged where both the source's physical bytes and the buffer places are
//! consecutive) and the chunk is written with one `pwrite` (to an interval file) or one
//! `pwrite` per run of logically consecutive intervals (to a flat file). Memory is one chunk
//! plus the layouts.
//!
//! **Invariants:** every byte of the target that lies in a source interval receives that
//! source byte; every other byte of the target reads as zero (the target is created empty
//! and extended to its length, and chunk buffers are zeroed before filling); the source is
//! never written (the target may not be the source file).

use crate::ifile::{io, write_metadata, IfileError, IntervalFile, IntervalLayout, Result};
use crate::set::IntervalSet;
use atomio_layout::ByteRange;
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::Instant;

/// Progress of a translation, after each chunk.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub done_bytes: u64,
    pub total_bytes: u64,
    pub seconds: f64,
}

/// How to translate.
pub struct Options<'a> {
    /// Largest chunk buffer.
    pub chunk_bytes: usize,
    /// Most intervals per chunk (bounds the per-chunk bookkeeping for tiny intervals).
    pub max_segments: usize,
    /// `sync_all` the target at the end.
    pub sync: bool,
    pub progress: Option<&'a mut dyn FnMut(Progress)>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            chunk_bytes: 8 << 20,
            max_segments: 1 << 16,
            sync: true,
            progress: None,
        }
    }
}

/// What a translation did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TranslateReport {
    /// "flat" or "intervals".
    pub target: String,
    pub target_ranks: u32,
    pub target_families: u64,
    pub target_intervals: u64,
    /// Bytes of the target's intervals (flat target: of the source's intervals).
    pub bytes: u64,
    /// Bytes read from the source.
    pub bytes_read: u64,
    /// Bytes written to the target (chunks with no source byte are left as holes).
    pub bytes_written: u64,
    /// Target interval bytes with no source byte (left zero).
    pub hole_bytes: u64,
    pub chunks: u64,
    pub reads: u64,
    pub writes: u64,
    /// The target file's length.
    pub target_len: u64,
    pub seconds: f64,
}

/// Where the bytes come from.
enum Source<'a> {
    Intervals(&'a IntervalFile),
    /// A flat file and its length (bytes beyond it read as zeros).
    Flat(&'a File, u64),
}

/// One target interval (or part) in the chunk buffer.
#[derive(Clone, Copy)]
struct Seg {
    logical: u64,
    buf: usize,
    len: usize,
}

/// Pushes a (logical, buffer) run, merging with the previous when both are consecutive.
fn push_seg(segs: &mut Vec<Seg>, s: Seg) {
    if let Some(l) = segs.last_mut() {
        if l.logical + l.len as u64 == s.logical && l.buf + l.len == s.buf {
            l.len += s.len;
            return;
        }
    }
    segs.push(s);
}

/// Walks rank `rank`'s region of `layout` in chunks: `f(physical start, chunk length,
/// segments)` with the chunk's intervals (cut where a chunk ends).
fn for_each_chunk(
    layout: &IntervalLayout,
    rank: u32,
    (cap, max_segments): (usize, usize),
    mut f: impl FnMut(u64, usize, &[Seg]) -> Result<()>,
) -> Result<()> {
    let cap = cap.max(1);
    let mut segs: Vec<Seg> = vec![];
    let mut raw = 0usize;
    let mut start = layout.region(rank).offset;
    let mut fill = 0usize;
    for s in layout.segments(rank) {
        let mut logical = s.logical.start;
        let mut left = s.logical.len();
        while left > 0 {
            let n = (left.min((cap - fill) as u64)) as usize;
            push_seg(
                &mut segs,
                Seg {
                    logical,
                    buf: fill,
                    len: n,
                },
            );
            raw += 1;
            fill += n;
            logical += n as u64;
            left -= n as u64;
            if fill == cap || raw >= max_segments {
                f(start, fill, &segs)?;
                start += fill as u64;
                fill = 0;
                raw = 0;
                segs.clear();
            }
        }
    }
    if fill > 0 {
        f(start, fill, &segs)?;
    }
    Ok(())
}

fn create_target(src_path: Option<&Path>, dst: &Path) -> Result<File> {
    if let (Some(src), Ok(d)) = (src_path, std::fs::metadata(dst)) {
        if let Ok(s) = std::fs::metadata(src) {
            if s.dev() == d.dev() && s.ino() == d.ino() {
                return Err(IfileError::Io {
                    what: format!("{} is the source file", dst.display()),
                    source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
                });
            }
        }
    }
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dst)
        .map_err(io(format!("creating {}", dst.display())))
}

fn report_progress(opts: &mut Options, t0: Instant, done: u64, total: u64) {
    if let Some(p) = opts.progress.as_mut() {
        p(Progress {
            done_bytes: done,
            total_bytes: total,
            seconds: t0.elapsed().as_secs_f64(),
        });
    }
}

/// Writes the flat file of `src` to `dst` (bytes in no interval are zeros; its length is
/// the source's `flat_size`).
pub fn translate_to_flat(src: &IntervalFile, dst: &Path) -> Result<TranslateReport> {
    translate_to_flat_with(src, dst, &mut Options::default())
}

pub fn translate_to_flat_with(
    src: &IntervalFile,
    dst: &Path,
    opts: &mut Options,
) -> Result<TranslateReport> {
    let t0 = Instant::now();
    let layout = src.layout();
    let h = layout.header();
    let out = create_target(Some(src.path()), dst)?;
    out.set_len(h.flat_size)
        .map_err(io(format!("setting the length of {}", dst.display())))?;
    let mut rep = TranslateReport {
        target: "flat".into(),
        target_ranks: 1,
        target_families: h.families,
        target_intervals: h.intervals,
        bytes: h.interval_bytes,
        target_len: h.flat_size,
        ..Default::default()
    };
    let limits = (opts.chunk_bytes.max(1), opts.max_segments.max(1));
    let mut buf = vec![0u8; limits.0.min(h.data_len.max(1) as usize)];
    let mut done = 0u64;
    for rank in 0..layout.ranks() {
        for_each_chunk(layout, rank, limits, |phys, n, segs| {
            src.file()
                .read_exact_at(&mut buf[..n], phys)
                .map_err(io(format!("reading {}", src.path().display())))?;
            rep.reads += 1;
            rep.bytes_read += n as u64;
            for s in segs {
                out.write_all_at(&buf[s.buf..s.buf + s.len], s.logical)
                    .map_err(io(format!("writing {}", dst.display())))?;
                rep.writes += 1;
                rep.bytes_written += s.len as u64;
            }
            rep.chunks += 1;
            done += n as u64;
            report_progress(opts, t0, done, h.interval_bytes);
            Ok(())
        })?;
    }
    if opts.sync {
        out.sync_all()
            .map_err(io(format!("syncing {}", dst.display())))?;
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    Ok(rep)
}

/// Writes the interval file of `target` at `dst` holding `src`'s bytes (target bytes no
/// source interval holds are zeros).
pub fn translate_to_set(
    src: &IntervalFile,
    target: &IntervalSet,
    dst: &Path,
) -> Result<TranslateReport> {
    translate_to_set_with(src, target, dst, &mut Options::default())
}

pub fn translate_to_set_with(
    src: &IntervalFile,
    target: &IntervalSet,
    dst: &Path,
    opts: &mut Options,
) -> Result<TranslateReport> {
    let layout = IntervalLayout::new(target)?;
    translate(Source::Intervals(src), Some(src.path()), &layout, dst, opts)
}

/// Writes the interval file of `target` at `dst` from the flat file `src` (bytes past
/// its end are zeros).
pub fn flat_to_set(src: &Path, target: &IntervalSet, dst: &Path) -> Result<TranslateReport> {
    flat_to_set_with(src, target, dst, &mut Options::default())
}

pub fn flat_to_set_with(
    src: &Path,
    target: &IntervalSet,
    dst: &Path,
    opts: &mut Options,
) -> Result<TranslateReport> {
    let f = File::open(src).map_err(io(format!("opening {}", src.display())))?;
    let len = f
        .metadata()
        .map_err(io(format!("reading the length of {}", src.display())))?
        .len();
    let layout = IntervalLayout::new(target)?;
    translate(Source::Flat(&f, len), Some(src), &layout, dst, opts)
}

fn translate(
    src: Source,
    src_path: Option<&Path>,
    layout: &IntervalLayout,
    dst: &Path,
    opts: &mut Options,
) -> Result<TranslateReport> {
    let t0 = Instant::now();
    let h = layout.header();
    let out = create_target(src_path, dst)?;
    write_metadata(&out, layout)?;
    crate::ifile::preallocate(&out, layout)?;
    let mut rep = TranslateReport {
        target: "intervals".into(),
        target_ranks: h.ranks,
        target_families: h.families,
        target_intervals: h.intervals,
        bytes: h.interval_bytes,
        target_len: h.file_len(),
        ..Default::default()
    };
    let limits = (opts.chunk_bytes.max(1), opts.max_segments.max(1));
    let mut buf = vec![0u8; limits.0.min(h.data_len.max(1) as usize)];
    // (source physical offset, buffer offset, length), merged.
    let mut reads: Vec<(u64, usize, usize)> = vec![];
    let mut idx = vec![];
    let mut pieces: Vec<(ByteRange, u64)> = vec![];
    let mut done = 0u64;
    let src_name = src_path.map_or_else(String::new, |p| p.display().to_string());
    for rank in 0..layout.ranks() {
        for_each_chunk(layout, rank, limits, |phys, n, segs| {
            let chunk = &mut buf[..n];
            chunk.fill(0);
            reads.clear();
            let push = |reads: &mut Vec<(u64, usize, usize)>, p: u64, b: usize, l: usize| {
                if let Some(last) = reads.last_mut() {
                    if last.0 + last.2 as u64 == p && last.1 + last.2 == b {
                        last.2 += l;
                        return;
                    }
                }
                reads.push((p, b, l));
            };
            for s in segs {
                let (x, y) = (s.logical, s.logical + s.len as u64);
                match &src {
                    Source::Intervals(f) => {
                        f.layout().map_into(x, y, &mut idx, &mut pieces);
                        for (r, p) in &pieces {
                            push(
                                &mut reads,
                                *p,
                                s.buf + (r.start - x) as usize,
                                r.len() as usize,
                            );
                        }
                    }
                    Source::Flat(_, len) => {
                        let e = y.min(*len);
                        if e > x {
                            push(&mut reads, x, s.buf, (e - x) as usize);
                        }
                    }
                }
            }
            let file = match &src {
                Source::Intervals(f) => f.file(),
                Source::Flat(f, _) => f,
            };
            let mut got = 0usize;
            for &(p, b, l) in reads.iter() {
                file.read_exact_at(&mut chunk[b..b + l], p)
                    .map_err(io(format!("reading {src_name}")))?;
                got += l;
            }
            rep.reads += reads.len() as u64;
            rep.bytes_read += got as u64;
            rep.hole_bytes += n.saturating_sub(got) as u64;
            // A chunk with no source byte stays a hole of the (extended) target.
            if got > 0 {
                out.write_all_at(chunk, phys)
                    .map_err(io(format!("writing {}", dst.display())))?;
                rep.writes += 1;
                rep.bytes_written += n as u64;
            }
            rep.chunks += 1;
            done += n as u64;
            report_progress(opts, t0, done, h.interval_bytes);
            Ok(())
        })?;
    }
    if opts.sync {
        out.sync_all()
            .map_err(io(format!("syncing {}", dst.display())))?;
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, Limits, Rank};
    use crate::family::Family;
    use crate::ifile::{preallocate, write_logical};
    use proptest::prelude::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn tmp(name: &str) -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "atomio-interval-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    fn set_of(declared: &[(Rank, Vec<Family>)], ranks: u32) -> IntervalSet {
        IntervalSet::new(analyze(ranks, declared, Limits::default()).unwrap())
    }

    fn arb_declared() -> impl Strategy<Value = Vec<(Rank, Vec<Family>)>> {
        prop::collection::vec(
            (
                0u32..5,
                prop::collection::vec(
                    (0u64..600, 1u64..40, 0u64..50, 1u64..10)
                        .prop_map(|(s, l, g, c)| Family::new(s, l, l + g, c).unwrap()),
                    1..4,
                ),
            ),
            1..6,
        )
    }

    /// The flat bytes a writer leaves: `data` inside the set's intervals, zeros elsewhere,
    /// up to the set's largest end.
    fn flat_of(set: &IntervalSet, data: &[u8]) -> Vec<u8> {
        let end = set
            .entries()
            .iter()
            .map(|e| e.family.end())
            .max()
            .unwrap_or(0);
        let mut v = vec![0u8; end as usize];
        for (r, _) in set.intervals() {
            v[r.start as usize..r.end as usize]
                .copy_from_slice(&data[r.start as usize..r.end as usize]);
        }
        v
    }

    /// Writes an interval file of `set` from logical `data` through the layout's `map`,
    /// in pieces of `piece` bytes.
    fn write_ifile(set: &IntervalSet, data: &[u8], path: &Path, piece: usize) {
        let l = IntervalLayout::new(set).unwrap();
        let f = File::create(path).unwrap();
        write_metadata(&f, &l).unwrap();
        preallocate(&f, &l).unwrap();
        for (i, c) in data.chunks(piece.max(1)).enumerate() {
            write_logical(&f, &l, (i * piece.max(1)) as u64, c).unwrap();
        }
    }

    fn small(chunk: usize) -> Options<'static> {
        Options {
            chunk_bytes: chunk,
            max_segments: 7,
            sync: false,
            progress: None,
        }
    }

    #[test]
    fn tiles_round_trip_through_another_rank_count() {
        // 2×2 tiles of 50×50 one-byte pixels overlapping by 4 → 3 column strips.
        let rows = 100u64;
        let tile = |r: u32, x0: u64, x1: u64, y0: u64, y1: u64| {
            (
                r,
                vec![Family::new(y0 * rows + x0, x1 - x0, rows, y1 - y0).unwrap()],
            )
        };
        let writers = set_of(
            &[
                tile(0, 0, 52, 0, 52),
                tile(1, 48, 100, 0, 52),
                tile(2, 0, 52, 48, 100),
                tile(3, 48, 100, 48, 100),
            ],
            4,
        );
        let readers = set_of(
            &[
                tile(0, 0, 34, 0, 100),
                tile(1, 33, 67, 0, 100),
                tile(2, 66, 100, 0, 100),
            ],
            3,
        );
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let a = tmp("writers.iv");
        write_ifile(&writers, &data, &a, 999);
        let src = IntervalFile::open(&a).unwrap();
        assert_eq!(src.set().entries(), writers.entries());
        let b = tmp("readers.iv");
        let mut progress = 0;
        let mut cb = |_p: Progress| progress += 1;
        let mut opts = Options {
            chunk_bytes: 1000,
            progress: Some(&mut cb),
            ..Default::default()
        };
        let rep = translate_to_set_with(&src, &readers, &b, &mut opts).unwrap();
        assert_eq!(rep.hole_bytes, 0);
        // Elementary intervals are disjoint: the shared columns are stored once.
        assert_eq!(rep.bytes, 10_000);
        assert!(progress >= 10);
        let dst = IntervalFile::open(&b).unwrap();
        assert_eq!(dst.header().ranks, 3);
        let flat = tmp("flat");
        translate_to_flat(&dst, &flat).unwrap();
        assert_eq!(std::fs::read(&flat).unwrap(), data);
        // And back from the flat file.
        let c = tmp("again.iv");
        flat_to_set(&flat, &writers, &c).unwrap();
        let again = IntervalFile::open(&c).unwrap();
        let mut buf = vec![0u8; 10_000];
        again.read_logical(0, &mut buf).unwrap();
        assert_eq!(buf, data);
        // The target may not be the source.
        assert!(translate_to_flat(&again, &c).is_err());
    }

    #[test]
    fn empty_set_translates_to_empty_files() {
        let s = set_of(&[], 0);
        let a = tmp("empty.iv");
        write_ifile(&s, &[], &a, 1);
        let src = IntervalFile::open(&a).unwrap();
        let flat = tmp("empty.flat");
        let rep = translate_to_flat(&src, &flat).unwrap();
        assert_eq!(rep.bytes_written, 0);
        assert_eq!(std::fs::metadata(&flat).unwrap().len(), 0);
    }

    #[test]
    fn truncated_files_are_errors() {
        let s = set_of(&[(0, vec![Family::new(0, 10, 20, 100).unwrap()])], 2);
        let a = tmp("t.iv");
        write_ifile(&s, &vec![1u8; 2000], &a, 64);
        let full = std::fs::metadata(&a).unwrap().len();
        for len in [0, 50, 128, 200, full - 1] {
            write_ifile(&s, &vec![1u8; 2000], &a, 64);
            let f = File::options().write(true).open(&a).unwrap();
            f.set_len(len).unwrap();
            assert!(
                matches!(IntervalFile::open(&a), Err(IfileError::Truncated { .. })),
                "length {len}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Interval file written through the layout → flat equals the flat file written
        /// directly; → another set → flat equals the flat bytes restricted to the target's
        /// intervals (zeros outside them, and inside them where the source had none).
        #[test]
        fn translation_matches_the_model(
            a in arb_declared(),
            b in arb_declared(),
            seed in any::<u64>(),
            piece in 1usize..200,
            chunk in 1usize..300,
        ) {
            let sa = set_of(&a, 5);
            let sb = set_of(&b, 3 + (seed % 4) as u32);
            let n = 2048usize; // above any generated family end (599 + 8·88 + 39)
            let data: Vec<u8> = (0..n as u64).map(|i| (i.wrapping_mul(seed | 1) >> 3) as u8 | 1).collect();
            let pa = tmp("a.iv");
            write_ifile(&sa, &data, &pa, piece);
            let src = IntervalFile::open(&pa).unwrap();
            let flat = tmp("a.flat");
            translate_to_flat_with(&src, &flat, &mut small(chunk)).unwrap();
            let fa = flat_of(&sa, &data);
            prop_assert_eq!(std::fs::read(&flat).unwrap(), fa.clone());

            let pb = tmp("b.iv");
            let rep = translate_to_set_with(&src, &sb, &pb, &mut small(chunk)).unwrap();
            let dst = IntervalFile::open(&pb).unwrap();
            let flat_b = tmp("b.flat");
            translate_to_flat_with(&dst, &flat_b, &mut small(chunk + 13)).unwrap();
            let got = std::fs::read(&flat_b).unwrap();
            let end = sb.entries().iter().map(|e| e.family.end()).max().unwrap_or(0) as usize;
            let mut want = vec![0u8; end];
            let mut holes = 0u64;
            for (r, _) in sb.intervals() {
                let (x0, x1) = (r.start as usize, r.end as usize);
                for (x, w) in want[x0..x1].iter_mut().enumerate() {
                    *w = fa.get(x0 + x).copied().unwrap_or(0);
                    holes += (*w == 0) as u64;
                }
            }
            prop_assert_eq!(got, want);
            prop_assert_eq!(rep.hole_bytes, holes);
            let total = sb.intervals().map(|(r, _)| r.len()).sum::<u64>();
            prop_assert_eq!(rep.bytes, total);
            prop_assert!(rep.bytes_written <= total);
            prop_assert!(rep.bytes_written + rep.hole_bytes >= total);
            let _ = std::fs::remove_dir_all(pa.parent().unwrap());
            let _ = std::fs::remove_dir_all(pb.parent().unwrap());
            let _ = std::fs::remove_dir_all(flat.parent().unwrap());
            let _ = std::fs::remove_dir_all(flat_b.parent().unwrap());
        }
    }
}
