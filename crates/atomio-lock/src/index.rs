//! Interval indexes of granted byte-range locks, one pair per file per server.
//!
//! * `WriteIndex`: write locks are pairwise disjoint (single writer), so an ordered map keyed
//!   by start answers "first locked byte in [a, b)" with one predecessor and one successor
//!   lookup: O(log n) insert, remove and overlap query.
//! * `ReadIndex`: read locks may overlap each other (shared readers), so the index keeps a
//!   *coverage map*: disjoint segments, each with the number of read locks covering it.
//!   A writer only needs to know whether any reader covers a byte: O(log n) query;
//!   add/remove are O(log n + k) for the k segments the lock spans.
//!
//! **Invariants:** `WriteIndex` entries are disjoint and non-empty. `ReadIndex` segments are
//! disjoint, non-empty, have count ≥ 1, and no two touching segments have equal counts
//! (canonical form, so the map's size is bounded by the distinct lock endpoints).

use atomio_layout::ByteRange;
use atomio_proto::LockId;
use std::collections::BTreeMap;

/// Granted write locks (disjoint).
#[derive(Debug, Default)]
pub struct WriteIndex {
    map: BTreeMap<u64, (u64, LockId)>,
}

impl WriteIndex {
    /// The first byte of `r` covered by a write lock, if any.
    #[inline]
    pub fn first_overlap(&self, r: ByteRange) -> Option<u64> {
        if let Some((_, &(end, _))) = self.map.range(..=r.start).next_back() {
            if end > r.start {
                return Some(r.start);
            }
        }
        self.map.range(r.start..r.end).next().map(|(&s, _)| s)
    }

    #[inline]
    pub fn insert(&mut self, r: ByteRange, lock: LockId) {
        debug_assert!(!r.is_empty() && self.first_overlap(r).is_none());
        self.map.insert(r.start, (r.end, lock));
    }

    /// Removes the lock that starts at `r.start` (it must end at `r.end`).
    #[inline]
    pub fn remove(&mut self, r: ByteRange) {
        let removed = self.map.remove(&r.start);
        debug_assert_eq!(removed.map(|(e, _)| e), Some(r.end));
    }

    /// The lock covering `offset`, if any.
    pub fn holder_at(&self, offset: u64) -> Option<LockId> {
        let (_, &(end, id)) = self.map.range(..=offset).next_back()?;
        (end > offset).then_some(id)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (ByteRange, LockId)> + '_ {
        self.map
            .iter()
            .map(|(&start, &(end, id))| (ByteRange { start, end }, id))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seg {
    end: u64,
    count: u32,
}

/// Granted read locks as a coverage-count map.
#[derive(Debug, Default)]
pub struct ReadIndex {
    map: BTreeMap<u64, Seg>,
}

impl ReadIndex {
    /// The first byte of `r` covered by any read lock.
    #[inline]
    pub fn first_overlap(&self, r: ByteRange) -> Option<u64> {
        if self.map.is_empty() {
            return None;
        }
        if let Some((_, seg)) = self.map.range(..=r.start).next_back() {
            if seg.end > r.start {
                return Some(r.start);
            }
        }
        self.map.range(r.start..r.end).next().map(|(&s, _)| s)
    }

    /// Number of read locks covering `offset`.
    pub fn count_at(&self, offset: u64) -> u32 {
        match self.map.range(..=offset).next_back() {
            Some((_, seg)) if seg.end > offset => seg.count,
            _ => 0,
        }
    }

    /// Makes `x` a segment boundary (splitting the segment that straddles it).
    fn split_at(&mut self, x: u64) {
        let Some((&s, seg)) = self.map.range_mut(..x).next_back() else {
            return;
        };
        if seg.end > x {
            let right = Seg {
                end: seg.end,
                count: seg.count,
            };
            seg.end = x;
            debug_assert!(s < x);
            self.map.insert(x, right);
        }
    }

    /// Merges the segments meeting at `x` if they have equal counts.
    fn merge_at(&mut self, x: u64) {
        let Some(&right) = self.map.get(&x) else {
            return;
        };
        let merged = match self.map.range_mut(..x).next_back() {
            Some((_, left)) if left.end == x && left.count == right.count => {
                left.end = right.end;
                true
            }
            _ => false,
        };
        if merged {
            self.map.remove(&x);
        }
    }

    pub fn add(&mut self, r: ByteRange) {
        debug_assert!(!r.is_empty());
        self.split_at(r.start);
        self.split_at(r.end);
        let mut pos = r.start;
        let mut gaps: Vec<ByteRange> = Vec::new();
        for (&s, seg) in self.map.range_mut(r.start..r.end) {
            if s > pos {
                gaps.push(ByteRange { start: pos, end: s });
            }
            seg.count += 1;
            pos = seg.end;
        }
        if pos < r.end {
            gaps.push(ByteRange {
                start: pos,
                end: r.end,
            });
        }
        for g in gaps {
            self.map.insert(
                g.start,
                Seg {
                    end: g.end,
                    count: 1,
                },
            );
        }
        self.merge_at(r.start);
        self.merge_at(r.end);
    }

    /// Removes one read lock over exactly `r` (which must have been added).
    pub fn remove(&mut self, r: ByteRange) {
        debug_assert!(!r.is_empty());
        self.split_at(r.start);
        self.split_at(r.end);
        let mut pos = r.start;
        while pos < r.end {
            let Some((&s, seg)) = self.map.range_mut(pos..r.end).next() else {
                break;
            };
            debug_assert_eq!(s, pos, "read lock {r:?} was not fully covered");
            seg.count -= 1;
            pos = seg.end;
            if seg.count == 0 {
                self.map.remove(&s);
            }
        }
        debug_assert_eq!(pos, r.end, "read lock {r:?} was not fully covered");
        self.merge_at(r.start);
        self.merge_at(r.end);
    }

    pub fn segments(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// (segment, count) pairs in order; for invariant checks.
    pub fn iter(&self) -> impl Iterator<Item = (ByteRange, u32)> + '_ {
        self.map.iter().map(|(&start, seg)| {
            (
                ByteRange {
                    start,
                    end: seg.end,
                },
                seg.count,
            )
        })
    }

    /// Checks the canonical-form invariant; returns a description of the first violation.
    pub fn check(&self) -> Result<(), String> {
        let mut prev: Option<(ByteRange, u32)> = None;
        for (r, c) in self.iter() {
            if r.is_empty() || c == 0 {
                return Err(format!("degenerate segment {r:?} count {c}"));
            }
            if let Some((p, pc)) = prev {
                if p.end > r.start {
                    return Err(format!("segments {p:?} and {r:?} overlap"));
                }
                if p.end == r.start && pc == c {
                    return Err(format!("touching segments {p:?} and {r:?} share count {c}"));
                }
            }
            prev = Some((r, c));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(s: u64, e: u64) -> ByteRange {
        ByteRange { start: s, end: e }
    }

    proptest! {
        /// The coverage map against a per-byte count array, under random adds and removes.
        #[test]
        fn read_index_matches_per_byte_counts(ops in prop::collection::vec((any::<bool>(), 0u64..40, 1u64..12), 1..200)) {
            let mut idx = ReadIndex::default();
            let mut model = [0u32; 64];
            let mut held: Vec<ByteRange> = Vec::new();
            for (add, start, len) in ops {
                if add || held.is_empty() {
                    let rr = r(start, start + len);
                    idx.add(rr);
                    held.push(rr);
                    for b in rr.start..rr.end { model[b as usize] += 1; }
                } else {
                    let rr = held.swap_remove(start as usize % held.len());
                    idx.remove(rr);
                    for b in rr.start..rr.end { model[b as usize] -= 1; }
                }
                idx.check().map_err(TestCaseError::fail)?;
                for b in 0..64u64 {
                    prop_assert_eq!(idx.count_at(b), model[b as usize]);
                }
                for s in 0..60u64 {
                    for l in [1u64, 3, 9] {
                        let q = r(s, (s + l).min(64));
                        let want = (q.start..q.end).find(|&b| model[b as usize] > 0);
                        prop_assert_eq!(idx.first_overlap(q), want);
                    }
                }
            }
        }

        #[test]
        fn write_index_first_overlap_is_exact(locks in prop::collection::vec((0u64..60, 1u64..6), 0..20), q in (0u64..64, 1u64..10)) {
            let mut idx = WriteIndex::default();
            let mut model = [false; 80];
            for (i, (s, l)) in locks.into_iter().enumerate() {
                let rr = r(s, s + l);
                if idx.first_overlap(rr).is_none() {
                    idx.insert(rr, LockId(i as u64));
                    for b in rr.start..rr.end { model[b as usize] = true; }
                }
            }
            let q = r(q.0, q.0 + q.1);
            let want = (q.start..q.end).find(|&b| model[b as usize]);
            prop_assert_eq!(idx.first_overlap(q), want);
        }
    }
}
