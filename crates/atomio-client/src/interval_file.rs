//! Interval files as an output format (Logan & Dickens §3.2, §3.4): a direct file whose
//! bytes are laid out by its interval set — every rank's intervals contiguous in its own
//! region — with this rank's private intervals kept in a write-behind cache.
//!
//! * A private piece is copied into the cache at its place in the rank's region: no lock
//!   and no system call (nobody else can read or write it).
//! * A shared piece is written (read) in place, at its physical offset in its home rank's
//!   region, under the interval locks of the logical bytes — the same locks as on a flat
//!   file, so atomicity does not change with the format.
//! * At `sync`/flush/close the cache's dirty ranges go out: a rank that wrote its whole
//!   region writes it with one `pwrite`.
//!
//! **Invariants:** a byte reaches the file only at its layout's physical place; the cache
//! holds only bytes homed at this rank and private to it; dirty ranges are written before
//! any read of the file by this rank (reads flush first) and at sync; bytes no interval
//! holds cannot be stored in an interval file and are refused, never dropped.

use crate::direct::io_err;
use atomio_interval::{IntervalLayout, Region};
use atomio_layout::{ByteRange, RangeList};
use atomio_proto::{ErrorCode, WireError};
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Private pieces at least this long are written through while nothing is cached.
pub const WRITE_THROUGH: u64 = 64 << 10;
/// The cache holds the rank's region in chunks of this many bytes, each allocated when a
/// piece first lands in it: a region is as long as the view's reach (an MPI view never
/// ends, so up to the analysis bound), far more than a rank writes.
const CHUNK: u64 = 1 << 20;
/// Cached bytes beyond which the cache is written out and emptied (a bound on memory).
const CACHE_LIMIT: usize = 256 << 20;

/// This rank's view of an interval-format file.
#[derive(Debug)]
pub struct IntervalOutput {
    layout: Arc<IntervalLayout>,
    region: Region,
    /// The rank's region by chunk (region-relative offset / `CHUNK`), allocated lazily.
    cache: BTreeMap<u64, Box<[u8]>>,
    /// Ranges of the region (relative offsets) written since the last flush.
    dirty: Vec<ByteRange>,
}

fn ifile_err(e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::Io, format!("interval file: {e}"))
}

impl IntervalOutput {
    /// Opens the format on `file` for `rank`: rank 0 writes the header and metadata;
    /// every rank sets the file's length to the layout's (the same value everywhere).
    pub fn start(
        file: &std::fs::File,
        layout: Arc<IntervalLayout>,
        rank: u32,
    ) -> Result<Self, WireError> {
        if rank == 0 {
            atomio_interval::ifile::write_metadata(file, &layout).map_err(ifile_err)?;
        }
        atomio_interval::ifile::preallocate(file, &layout).map_err(ifile_err)?;
        let region = layout.region(rank);
        Ok(IntervalOutput {
            layout,
            region,
            cache: BTreeMap::new(),
            dirty: Vec::new(),
        })
    }

    pub fn layout(&self) -> &IntervalLayout {
        &self.layout
    }

    /// Caches a private piece (`logical`, its bytes). Until the first small piece arrives
    /// the cache is not even allocated: pieces of `WRITE_THROUGH` bytes or more go
    /// straight to their place (one `pwrite` each; caching them would only add a copy).
    /// Once the cache exists every piece goes through it, so a later cached write can
    /// never be overtaken by an earlier one at flush.
    pub fn cache_write(
        &mut self,
        file: &std::fs::File,
        logical: ByteRange,
        bytes: &[u8],
    ) -> Result<(), WireError> {
        if self.cache.is_empty() && logical.len() >= WRITE_THROUGH {
            for (r, phys) in self.layout.map(logical.start, logical.end) {
                let src =
                    &bytes[(r.start - logical.start) as usize..(r.end - logical.start) as usize];
                file.write_all_at(src, phys)
                    .map_err(|e| io_err("pwrite (interval region)", phys, e))?;
            }
            return Ok(());
        }
        for (r, phys) in self.layout.map(logical.start, logical.end) {
            let rel = phys
                .checked_sub(self.region.offset)
                .filter(|rel| rel + r.len() <= self.region.len)
                .ok_or_else(|| {
                    WireError::new(
                        ErrorCode::Internal,
                        format!("private byte {} is not in this rank's region", r.start),
                    )
                })?;
            let mut src =
                &bytes[(r.start - logical.start) as usize..(r.end - logical.start) as usize];
            let mut at = rel;
            while !src.is_empty() {
                let (chunk, off) = (at / CHUNK, (at % CHUNK) as usize);
                let n = src.len().min(CHUNK as usize - off);
                let c = self
                    .cache
                    .entry(chunk)
                    .or_insert_with(|| vec![0; CHUNK as usize].into_boxed_slice());
                c[off..off + n].copy_from_slice(&src[..n]);
                src = &src[n..];
                at += n as u64;
            }
            self.dirty.push(ByteRange {
                start: rel,
                end: rel + r.len(),
            });
        }
        if self.cache.len() * CHUNK as usize > CACHE_LIMIT {
            self.flush(file)?;
        }
        Ok(())
    }

    /// Writes the cache's dirty ranges into the rank's region and empties the cache.
    pub fn flush(&mut self, file: &std::fs::File) -> Result<(), WireError> {
        let dirty = RangeList::from_ranges(std::mem::take(&mut self.dirty));
        for r in dirty.as_slice() {
            // One write per run of chunks a dirty range covers (chunks are consecutive
            // in the region, not in memory).
            let mut at = r.start;
            while at < r.end {
                let (chunk, off) = (at / CHUNK, (at % CHUNK) as usize);
                let n = (r.end - at).min(CHUNK - off as u64) as usize;
                let c = self.cache.get(&chunk).ok_or_else(|| {
                    WireError::new(ErrorCode::Internal, "a dirty range of no cached chunk")
                })?;
                let phys = self.region.offset + at;
                file.write_all_at(&c[off..off + n], phys)
                    .map_err(|e| io_err("pwrite (interval region)", phys, e))?;
                at += n as u64;
            }
        }
        self.cache.clear();
        Ok(())
    }

    /// Writes logical runs (in order, bytes concatenated in `data`) at their physical
    /// places: the shared pieces of a call, under its locks.
    pub fn write_in_place(
        &self,
        file: &std::fs::File,
        runs: impl Iterator<Item = ByteRange>,
        data: &[u8],
    ) -> Result<(), WireError> {
        let mut at = 0usize;
        for r in runs {
            let n = r.len() as usize;
            let stored = atomio_interval::ifile::write_logical(
                file,
                &self.layout,
                r.start,
                &data[at..at + n],
            )
            .map_err(ifile_err)?;
            if stored != r.len() {
                return Err(undeclared(r));
            }
            at += n;
        }
        Ok(())
    }

    /// Reads logical runs from their physical places into `out` (in order).
    pub fn read_in_place(
        &self,
        file: &std::fs::File,
        runs: impl Iterator<Item = ByteRange>,
        out: &mut [u8],
    ) -> Result<(), WireError> {
        let mut at = 0usize;
        for r in runs {
            let n = r.len() as usize;
            atomio_interval::ifile::read_logical(file, &self.layout, r.start, &mut out[at..at + n])
                .map_err(ifile_err)?;
            at += n;
        }
        Ok(())
    }
}

/// The error for bytes an interval file has no place for.
pub fn undeclared(r: ByteRange) -> WireError {
    WireError::new(
        ErrorCode::InvalidArgument,
        format!(
            "bytes [{}, {}) are in no declared interval: an interval file stores only the \
             intervals of its views (write a flat file, or declare the access)",
            r.start, r.end
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_interval::{analyze, Family, IntervalSet, Limits};

    /// Two ranks, each a private region of 64 GiB (an MPI view analyzed far past its data):
    /// small pieces far apart and across chunk boundaries are cached, flushed and read
    /// back, without a region-sized allocation (which would abort this process).
    #[test]
    fn a_huge_region_is_cached_by_chunk() {
        const REGION: u64 = 64 << 30;
        let set = IntervalSet::new(
            analyze(
                2,
                &[
                    (0, vec![Family::run(0, REGION).unwrap()]),
                    (1, vec![Family::run(REGION, REGION).unwrap()]),
                ],
                Limits::default(),
            )
            .unwrap(),
        );
        let layout = Arc::new(IntervalLayout::new(&set).unwrap());
        let path = std::env::temp_dir().join(format!("atomio-ifile-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut out = IntervalOutput::start(&file, layout.clone(), 0).unwrap();
        let pieces: Vec<(u64, Vec<u8>)> = [0u64, CHUNK - 10, 40 << 30, REGION - 100]
            .iter()
            .enumerate()
            .map(|(i, &at)| (at, vec![i as u8 + 1; 100]))
            .collect();
        for (at, bytes) in &pieces {
            let r = ByteRange {
                start: *at,
                end: at + bytes.len() as u64,
            };
            out.cache_write(&file, r, bytes).unwrap();
        }
        assert_eq!(
            out.cache.len(),
            4,
            "chunks 0 and 1 (a piece across them) and one per far piece"
        );
        out.flush(&file).unwrap();
        assert!(out.cache.is_empty() && out.dirty.is_empty());
        for (at, bytes) in &pieces {
            let mut back = vec![0u8; bytes.len()];
            atomio_interval::ifile::read_logical(&file, &layout, *at, &mut back).unwrap();
            assert_eq!(&back, bytes, "piece at {at}");
        }
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }
}
