//! SN-ordered writes at a data server (SeqDLM, Chen et al. §IV-B): flushes of bytes written
//! under cached DLM locks arrive in any order (early grant lets a newer lock's flush
//! overtake an older one's); each byte is written only if its SN is not older than what the
//! object holds (`ExtentCache::merge` gives the *update set*), so every object ends up as if
//! the writes had been applied in SN order — the lock server's grant order. The update sets
//! are appended to the extent log (`extent_log`) after the bytes, so a restarted server
//! rebuilds its caches and never reuses an SN (the lock service starts above `max_sn`).
//!
//! Cleaning: every admitted flush carries its resource's mSN (stamped by the lock service:
//! every lock with a smaller SN was released after its flushes were applied); entries with
//! SNs at or below it decide nothing any more. Each flush cleans at most `CLEAN_BUDGET`
//! entries of its object (the paper's 1,024 per pass). When an object still holds more than
//! the threshold (256 Ki entries by default) after cleaning, the service asks the lock
//! service to synchronize the object (a read lock over it: every writer flushes and
//! releases), after which the next flush's mSN cleans everything. The log is rewritten from
//! the caches when it has grown to four times their entries (and at least 1 MiB).
//!
//! **Invariants:** a byte is written only with an SN at least the one its cache holds; the
//! log's records, replayed, give the caches' SNs for every byte they still hold; `max_sn` is
//! at least every SN ever applied here.

use crate::extent_cache::ExtentCache;
use crate::extent_log::{self, ObjectKey, RECORD_BYTES};
use crate::store::ObjectStore;
use atomio_layout::ByteRange;
use atomio_proto::dlm::SnBlock;
use atomio_proto::{FileId, ObjPiece};
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// Entries one flush may clean in its object.
pub const CLEAN_BUDGET: usize = 1024;
/// Entries per object past which the object's writers are synchronized (the paper's 256 K).
pub const DEFAULT_SYNC_THRESHOLD: usize = 256 << 10;

#[derive(Debug)]
pub struct SeqWrites {
    caches: BTreeMap<ObjectKey, ExtentCache>,
    max_sn: Option<u64>,
    log_bytes: usize,
    threshold: usize,
    /// Objects over the threshold whose synchronization was asked for and not yet seen to
    /// work (asked again only once cleaning succeeded in between).
    syncing: BTreeSet<ObjectKey>,
    /// Bytes discarded because a newer SN held them (a statistic).
    pub discarded: u64,
    /// Negative control for the simulators: write every flush whole as it arrives,
    /// ignoring SNs (what SeqDLM's data servers must not do).
    pub fault_ignore_sns: bool,
}

/// What applying one flush did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub written: u64,
    pub discarded: u64,
    /// The object's cache could not be cleaned below the threshold: synchronize it.
    pub synchronize: bool,
}

impl SeqWrites {
    /// The state a server's store left: its extent log replayed.
    pub fn recover(log: &[u8]) -> Self {
        let r = extent_log::replay(log);
        Self {
            caches: r.caches,
            max_sn: r.max_sn,
            log_bytes: r.whole,
            threshold: DEFAULT_SYNC_THRESHOLD,
            syncing: BTreeSet::new(),
            discarded: 0,
            fault_ignore_sns: false,
        }
    }

    /// Synchronize objects past `entries` entries (tests lower it).
    pub fn with_threshold(mut self, entries: usize) -> Self {
        self.threshold = entries.max(1);
        self
    }

    /// The highest SN ever applied here (the lock service gives SNs above it).
    pub fn max_sn(&self) -> Option<u64> {
        self.max_sn
    }

    /// Entries held for one object.
    pub fn entries(&self, file: FileId, object: u32) -> usize {
        self.caches
            .get(&(file.0, object))
            .map_or(0, |c| c.entries())
    }

    /// Forgets a file's objects (they were dropped).
    pub fn drop_file(&mut self, file: FileId) {
        self.caches.retain(|k, _| k.0 != file.0);
    }

    /// Applies one flush (blocks validated against `data` by the caller) to `store`.
    pub fn apply<S: ObjectStore>(
        &mut self,
        store: &mut S,
        file: FileId,
        object: u32,
        blocks: &[SnBlock],
        data: &[u8],
        msn: u64,
    ) -> io::Result<Applied> {
        let key = (file.0, object);
        let cache = self.caches.entry(key).or_default();
        let mut pieces = Vec::new();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut records = Vec::new();
        let mut at = 0usize;
        let mut out = Applied::default();
        // Every block applies whole (the usual case): the flush's own buffer is written.
        let mut all_whole = true;
        for b in blocks {
            let range = ByteRange {
                start: b.offset,
                end: b.offset + b.len,
            };
            let mut update = cache.merge(range, b.sn);
            if self.fault_ignore_sns {
                update = vec![range];
            }
            all_whole &= update.len() == 1 && update[0] == range;
            for u in update {
                let lo = at + (u.start - b.offset) as usize;
                let hi = at + (u.end - b.offset) as usize;
                pieces.push(ObjPiece {
                    offset: u.start,
                    len: u.end - u.start,
                });
                spans.push((lo, hi));
                records.extend_from_slice(&extent_log::encode(key, u, b.sn));
                out.written += u.end - u.start;
            }
            self.max_sn = Some(self.max_sn.map_or(b.sn, |m| m.max(b.sn)));
            at += b.len as usize;
        }
        out.discarded = data.len() as u64 - out.written;
        self.discarded += out.discarded;
        // Pieces must be in order for the store: sort (blocks may come in any order; their
        // update sets never overlap, since each byte's newest SN wins once).
        if !pieces.is_empty() {
            let in_order = pieces.windows(2).all(|w| w[0].offset < w[1].offset);
            if all_whole && in_order {
                store.write(file, object, &pieces, data)?;
            } else {
                let mut bytes = Vec::with_capacity(out.written as usize);
                for &(lo, hi) in &spans {
                    bytes.extend_from_slice(&data[lo..hi]);
                }
                let (pieces, bytes) = sorted(pieces, &bytes);
                store.write(file, object, &pieces, &bytes)?;
            }
            store.log_extents(&records)?;
            self.log_bytes += records.len();
        }
        let cache = self.caches.get_mut(&key).expect("made above");
        let whole = ByteRange {
            start: 0,
            end: atomio_layout::MAX_OFFSET,
        };
        cache.clean(whole, Some(msn), CLEAN_BUDGET);
        let entries = cache.entries();
        if entries == 0 {
            self.caches.remove(&key);
        }
        if entries > self.threshold {
            out.synchronize = self.syncing.insert(key);
        } else {
            self.syncing.remove(&key);
        }
        self.compact(store)?;
        Ok(out)
    }

    /// Rewrites the log from the caches once most of its records are stale.
    fn compact<S: ObjectStore>(&mut self, store: &mut S) -> io::Result<()> {
        let live: usize = self.caches.values().map(ExtentCache::entries).sum();
        if self.log_bytes < (1 << 20) || self.log_bytes < 4 * live * RECORD_BYTES {
            return Ok(());
        }
        let mut snapshot = extent_log::snapshot(self.caches.iter());
        // Keep the highest SN in the log even when no cache holds it: the lock service
        // must start above it after a restart.
        if let Some(m) = self.max_sn {
            snapshot.extend_from_slice(&extent_log::encode(
                (0, u32::MAX),
                ByteRange { start: 0, end: 1 },
                m,
            ));
        }
        store.rewrite_extent_log(&snapshot)?;
        self.log_bytes = snapshot.len();
        Ok(())
    }
}

/// Pieces (with their bytes back to back) sorted by offset.
fn sorted(pieces: Vec<ObjPiece>, bytes: &[u8]) -> (Vec<ObjPiece>, Vec<u8>) {
    if pieces.windows(2).all(|w| w[0].offset < w[1].offset) {
        return (pieces, bytes.to_vec());
    }
    let mut with_data: Vec<(ObjPiece, usize)> = Vec::with_capacity(pieces.len());
    let mut at = 0usize;
    for p in pieces {
        with_data.push((p, at));
        at += p.len as usize;
    }
    with_data.sort_by_key(|(p, _)| p.offset);
    let mut out = Vec::with_capacity(bytes.len());
    let mut ps = Vec::with_capacity(with_data.len());
    for (p, at) in with_data {
        out.extend_from_slice(&bytes[at..at + p.len as usize]);
        ps.push(p);
    }
    (ps, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use proptest::prelude::*;

    fn read(store: &mut MemStore, len: u64) -> Vec<u8> {
        let mut out = Vec::new();
        store
            .read(FileId(1), 0, &[ObjPiece { offset: 0, len }], &mut out)
            .unwrap();
        out
    }

    proptest! {
        /// Flushes arriving in any order leave every byte with the value of its newest SN;
        /// a service made again on the store (a restart) keeps doing so for redone flushes.
        #[test]
        fn any_arrival_order_gives_sn_order(
            blocks in prop::collection::vec((0u64..120, 1u64..40, 0u64..12), 1..16)
                .prop_shuffle(),
            restart_after in 0usize..16,
        ) {
            let mut store = MemStore::new();
            let mut seq = SeqWrites::recover(&[]);
            let mut want = vec![(0u8, None::<u64>); 160];
            for (i, &(start, len, sn)) in blocks.iter().enumerate() {
                if i == restart_after {
                    let log = store.take_recovered().extent_log;
                    seq = SeqWrites::recover(&log);
                }
                let fill = (sn as u8).wrapping_mul(17).wrapping_add(1);
                let data = vec![fill; len as usize];
                let b = [SnBlock { offset: start, len, sn }];
                seq.apply(&mut store, FileId(1), 0, &b, &data, 0).unwrap();
                for x in start..start + len {
                    let w = &mut want[x as usize];
                    if w.1.is_none_or(|old| old <= sn) {
                        *w = (fill, Some(sn));
                    }
                }
            }
            let got = read(&mut store, 160);
            for (x, (v, _)) in want.iter().enumerate() {
                let g = got.get(x).copied().unwrap_or(0);
                prop_assert_eq!(g, *v, "byte {}", x);
            }
        }
    }

    /// Negative control for the restart: without the log, a redone older flush overwrites
    /// a newer one's bytes.
    #[test]
    fn a_restart_without_the_log_lets_an_older_flush_win() {
        let run = |keep_log: bool| {
            let mut store = MemStore::new();
            let mut seq = SeqWrites::recover(&[]);
            let newer = [SnBlock {
                offset: 0,
                len: 4,
                sn: 9,
            }];
            seq.apply(&mut store, FileId(1), 0, &newer, &[9; 4], 0)
                .unwrap();
            let log = if keep_log {
                store.take_recovered().extent_log
            } else {
                Vec::new()
            };
            let mut seq = SeqWrites::recover(&log);
            let older = [SnBlock {
                offset: 0,
                len: 4,
                sn: 3,
            }];
            seq.apply(&mut store, FileId(1), 0, &older, &[3; 4], 0)
                .unwrap();
            read(&mut store, 4)
        };
        assert_eq!(run(true), vec![9; 4]);
        assert_eq!(run(false), vec![3; 4]);
    }

    /// Cleaning by mSN keeps the cache small; past the threshold a synchronization is asked
    /// for once; the compacted log still carries the highest SN.
    #[test]
    fn cleaning_and_the_synchronization_threshold() {
        let mut store = MemStore::new();
        let mut seq = SeqWrites::recover(&[]).with_threshold(4);
        // Strided blocks under rising SNs with mSN 0: nothing can be cleaned.
        let mut asked = 0;
        for i in 0..10u64 {
            let b = [SnBlock {
                offset: i * 10,
                len: 5,
                sn: i + 1,
            }];
            if seq
                .apply(&mut store, FileId(1), 0, &b, &[1; 5], 0)
                .unwrap()
                .synchronize
            {
                asked += 1;
            }
        }
        assert_eq!(asked, 1, "asked once while over the threshold");
        assert_eq!(seq.entries(FileId(1), 0), 10);
        // Every lock below SN 20 released: the next flush's mSN cleans everything older.
        let b = [SnBlock {
            offset: 500,
            len: 1,
            sn: 20,
        }];
        seq.apply(&mut store, FileId(1), 0, &b, &[2], 20).unwrap();
        assert_eq!(seq.entries(FileId(1), 0), 0);
        assert_eq!(
            SeqWrites::recover(&store.take_recovered().extent_log).max_sn(),
            Some(20)
        );
    }
}
