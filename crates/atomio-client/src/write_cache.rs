//! A client's write-back cache for one lock resource (one object) under cached locks
//! (Chen et al. §IV-A): dirty bytes tagged with the sequence number of the lock they were
//! written under. A write replaces cached bytes with a smaller or equal SN and keeps those
//! with a larger one (they were written under a later lock, so they are newer); when a lock
//! is given back, the bytes still tagged with its SN are flushed, carrying that SN to the
//! data server (whose extent cache applies them in SN order). Bytes a later lock overwrote
//! are flushed with the later lock.
//!
//! Extents hold `Bytes` slices of the writes' own buffers: caching a write copies nothing
//! (the buffer is shared), and splitting an extent is a reference-count change. An index by
//! SN makes taking a lock's bytes cost what it takes, not a scan of the cache.
//!
//! **Invariants:** extents are disjoint, sorted and non-empty, each with its SN and exactly
//! its bytes; `by_sn` lists exactly the extents' starts under their SNs; `bytes` is the sum
//! of the extents' lengths; a byte's SN never decreases while it is cached.

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Extent {
    sn: u64,
    data: Bytes,
}

/// A block to flush: its first byte, the SN it was written under, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirty {
    pub start: u64,
    pub sn: u64,
    pub data: Bytes,
}

#[derive(Debug, Default, Clone)]
pub struct WriteCache {
    /// start → extent
    map: BTreeMap<u64, Extent>,
    by_sn: BTreeMap<u64, BTreeSet<u64>>,
    bytes: u64,
}

impl WriteCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn dirty_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// One past the last cached byte (`None` when empty).
    pub fn end(&self) -> Option<u64> {
        self.map
            .iter()
            .next_back()
            .map(|(&s, e)| s + e.data.len() as u64)
    }

    /// Whether any byte is cached under `sn`.
    pub fn has(&self, sn: u64) -> bool {
        self.by_sn.contains_key(&sn)
    }

    fn insert(&mut self, start: u64, e: Extent) {
        self.bytes += e.data.len() as u64;
        self.by_sn.entry(e.sn).or_default().insert(start);
        self.map.insert(start, e);
    }

    fn remove(&mut self, start: u64) -> Option<Extent> {
        let e = self.map.remove(&start)?;
        self.bytes -= e.data.len() as u64;
        if let Some(set) = self.by_sn.get_mut(&e.sn) {
            set.remove(&start);
            if set.is_empty() {
                self.by_sn.remove(&e.sn);
            }
        }
        Some(e)
    }

    /// Caches `data` at `start`, written under a lock with SN `sn`: replaces cached bytes
    /// whose SN is at most `sn`, keeps newer ones. `data` is shared, not copied.
    pub fn write(&mut self, start: u64, data: Bytes, sn: u64) {
        let end = start + data.len() as u64;
        if data.is_empty() {
            return;
        }
        // Split the extents straddling `start` and `end` so every overlap is whole.
        self.split_at(start);
        self.split_at(end);
        let inside: Vec<u64> = self.map.range(start..end).map(|(&s, _)| s).collect();
        // Newer cached bytes inside stay; everything else in [start, end) becomes ours.
        let mut keep = Vec::new();
        for s in inside {
            let e = self.remove(s).expect("listed");
            if e.sn > sn {
                keep.push((s, e));
            }
        }
        let mut at = start;
        for (s, e) in keep {
            if s > at {
                let piece = data.slice((at - start) as usize..(s - start) as usize);
                self.insert(at, Extent { sn, data: piece });
            }
            at = s + e.data.len() as u64;
            self.insert(s, e);
        }
        if at < end {
            let piece = data.slice((at - start) as usize..);
            self.insert(at, Extent { sn, data: piece });
        }
    }

    fn split_at(&mut self, x: u64) {
        let Some((&s, e)) = self.map.range(..x).next_back() else {
            return;
        };
        let end = s + e.data.len() as u64;
        if end > x {
            let e = self.remove(s).expect("found");
            let cut = (x - s) as usize;
            let sn = e.sn;
            self.insert(
                s,
                Extent {
                    sn,
                    data: e.data.slice(..cut),
                },
            );
            self.insert(
                x,
                Extent {
                    sn,
                    data: e.data.slice(cut..),
                },
            );
        }
    }

    /// Takes the bytes still tagged `sn` out of the cache (to flush when that lock is
    /// given back), as blocks in offset order.
    pub fn take(&mut self, sn: u64) -> Vec<Dirty> {
        let starts: Vec<u64> = self
            .by_sn
            .get(&sn)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        starts
            .into_iter()
            .map(|s| {
                let e = self.remove(s).expect("indexed");
                Dirty {
                    start: s,
                    sn,
                    data: e.data,
                }
            })
            .collect()
    }

    /// Re-tags every byte cached under `from` as written under `to` (an upgrade absorbed
    /// the lock `from`; its bytes now belong to the new lock). `to` is newer than every SN
    /// the absorbed lock's bytes could meet, so nothing is overwritten.
    pub fn retag(&mut self, from: u64, to: u64) {
        for d in self.take(from) {
            self.write(d.start, d.data, to);
        }
    }

    /// Copies the cached bytes inside `[start, start + out.len())` over `out` (a read under
    /// a lock covering them sees this client's own dirty bytes).
    pub fn overlay(&self, start: u64, out: &mut [u8]) {
        let end = start + out.len() as u64;
        let first = self
            .map
            .range(..start)
            .next_back()
            .map_or(start, |(&s, _)| s);
        for (&s, e) in self.map.range(first..end) {
            let e_end = s + e.data.len() as u64;
            let lo = s.max(start);
            let hi = e_end.min(end);
            if lo < hi {
                out[(lo - start) as usize..(hi - start) as usize]
                    .copy_from_slice(&e.data[(lo - s) as usize..(hi - s) as usize]);
            }
        }
    }

    /// The cached byte at `x` and its SN (reads under a lock that covers it see it).
    pub fn byte_at(&self, x: u64) -> Option<(u8, u64)> {
        let (&s, e) = self.map.range(..=x).next_back()?;
        e.data.get((x - s) as usize).map(|&b| (b, e.sn))
    }

    pub fn check(&self) -> Result<(), String> {
        let mut prev_end = 0u64;
        let mut total = 0u64;
        let mut indexed = 0usize;
        for (&s, e) in &self.map {
            if e.data.is_empty() {
                return Err(format!("empty extent at {s}"));
            }
            if s < prev_end {
                return Err(format!("extents overlap at {s}"));
            }
            if !self.by_sn.get(&e.sn).is_some_and(|set| set.contains(&s)) {
                return Err(format!("extent at {s} (SN {}) is not indexed", e.sn));
            }
            prev_end = s + e.data.len() as u64;
            total += e.data.len() as u64;
        }
        for set in self.by_sn.values() {
            indexed += set.len();
        }
        if indexed != self.map.len() {
            return Err(format!(
                "{indexed} indexed extents, {} cached",
                self.map.len()
            ));
        }
        if total != self.bytes {
            return Err(format!("{total} bytes cached, {} counted", self.bytes));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(v: Vec<u8>) -> Bytes {
        Bytes::from(v)
    }

    /// Fig. 14: [0, 4K) under lock A (SN 8), then [2K, 8K) under lock B (SN 9): B's flush
    /// is D[2K, 8K, 9], A's is D[0, 2K, 8].
    #[test]
    fn the_papers_example() {
        let k = 1024;
        let mut c = WriteCache::new();
        c.write(0, b(vec![1; 4 * k]), 8);
        c.write(2 * k as u64, b(vec![2; 6 * k]), 9);
        c.check().unwrap();
        let bl = c.take(9);
        assert_eq!(bl.len(), 1);
        assert_eq!((bl[0].start, bl[0].data.len()), (2 * k as u64, 6 * k));
        let a = c.take(8);
        assert_eq!((a[0].start, a[0].data.len()), (0, 2 * k));
        assert!(c.is_empty());
        c.check().unwrap();
    }

    /// A write under an older lock (a CANCELING lock used once more) does not overwrite
    /// bytes a newer lock already wrote.
    #[test]
    fn newer_cached_bytes_survive_an_older_write() {
        let mut c = WriteCache::new();
        c.write(10, b(vec![9; 10]), 5);
        c.write(0, b(vec![1; 30]), 3);
        c.check().unwrap();
        assert_eq!(c.byte_at(15), Some((9, 5)));
        assert_eq!(c.byte_at(5), Some((1, 3)));
        assert_eq!(c.byte_at(25), Some((1, 3)));
        assert_eq!(c.take(3).len(), 2, "split around the newer bytes");
        assert_eq!(c.dirty_bytes(), 10);
    }

    proptest! {
        /// Against a per-byte model (newest SN wins, equal SN overwrites): the cached
        /// bytes, what `take` hands out per SN, `retag`, `overlay` and the invariants.
        #[test]
        fn matches_a_per_byte_model(
            ops in prop::collection::vec((0u64..200, 1usize..60, 0u64..6, any::<u8>()), 1..40),
            retag in prop::option::of((0u64..6, 6u64..8)),
        ) {
            let mut c = WriteCache::new();
            let mut model: BTreeMap<u64, (u8, u64)> = BTreeMap::new();
            for (start, len, sn, fill) in ops {
                let data: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                c.write(start, Bytes::from(data.clone()), sn);
                for (i, &v) in data.iter().enumerate() {
                    let x = start + i as u64;
                    match model.get(&x) {
                        Some(&(_, old)) if old > sn => {}
                        _ => { model.insert(x, (v, sn)); }
                    }
                }
                c.check().map_err(TestCaseError::fail)?;
            }
            if let Some((from, to)) = retag {
                c.retag(from, to);
                for v in model.values_mut() {
                    if v.1 == from { v.1 = to; }
                }
                c.check().map_err(TestCaseError::fail)?;
            }
            for x in 0..270u64 {
                prop_assert_eq!(c.byte_at(x), model.get(&x).copied(), "byte {}", x);
            }
            let mut buf = vec![0xEEu8; 270];
            c.overlay(0, &mut buf);
            for (x, got) in buf.iter().enumerate() {
                let want = model.get(&(x as u64)).map_or(0xEE, |v| v.0);
                prop_assert_eq!(*got, want);
            }
            prop_assert_eq!(c.dirty_bytes(), model.len() as u64);
            for sn in 0..8 {
                for d in c.take(sn) {
                    for (i, &v) in d.data.iter().enumerate() {
                        let x = d.start + i as u64;
                        prop_assert_eq!(model.remove(&x), Some((v, sn)));
                    }
                }
                c.check().map_err(TestCaseError::fail)?;
            }
            prop_assert!(model.is_empty() && c.is_empty());
        }
    }
}
