//! SeqDLM's data-server extent cache (Chen et al. §IV-B): per stripe, the newest sequence
//! number applied to each byte. Early grant lets conflicting writers' flushes reach a data
//! server in any order; each flushed block carries the SN of the lock it was written under,
//! and `merge` answers which of its bytes are newer than what the stripe holds (the *update
//! set*: write those, discard the rest). So the stripe ends up as if the writes had been
//! applied in SN order — the lock server's grant order — whatever order they arrived in.
//!
//! Entries are cleaned with the *mSN* — the smallest SN of an unreleased write lock
//! overlapping them: a block with an SN below it can no longer arrive (its lock was released
//! after its flush), so entries at or below it decide nothing any more and go.
//!
//! **Invariants:** extents are disjoint, non-empty and sorted; adjacent extents with the same
//! SN are merged (the cache stays small for contiguous writes); a byte's SN never decreases
//! while it has an entry; `merge` returns exactly the bytes of the block whose SN is at
//! least their entry's (or that have none).

use atomio_layout::ByteRange;
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone)]
pub struct ExtentCache {
    /// start → (end, SN)
    map: BTreeMap<u64, (u64, u64)>,
}

impl ExtentCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries held (what the paper's 256 Ki threshold counts).
    pub fn entries(&self) -> usize {
        self.map.len()
    }

    /// Every extent and its SN, in order.
    pub fn extents(&self) -> impl Iterator<Item = (ByteRange, u64)> + '_ {
        self.map
            .iter()
            .map(|(&start, &(end, sn))| (ByteRange { start, end }, sn))
    }

    /// The SN recorded for `byte`, if any.
    pub fn sn_at(&self, byte: u64) -> Option<u64> {
        self.map
            .range(..=byte)
            .next_back()
            .filter(|(_, &(end, _))| end > byte)
            .map(|(_, &(_, sn))| sn)
    }

    /// A block of `range` written under SN `sn` arrives: records `sn` where it is not older
    /// than what the stripe holds and returns those parts (in order) — the bytes to write;
    /// the rest of the block is older and is discarded.
    pub fn merge(&mut self, range: ByteRange, sn: u64) -> Vec<ByteRange> {
        let mut update = Vec::new();
        if range.is_empty() {
            return update;
        }
        // Existing extents overlapping the block, in order.
        let first = self
            .map
            .range(..range.start)
            .next_back()
            .filter(|(_, &(end, _))| end > range.start)
            .map(|(&s, _)| s)
            .unwrap_or(range.start);
        let overlapping: Vec<(u64, u64, u64)> = self
            .map
            .range(first..range.end)
            .map(|(&s, &(e, sn))| (s, e, sn))
            .collect();
        let mut at = range.start;
        for (s, e, old) in overlapping {
            if s > at {
                update.push(ByteRange { start: at, end: s });
            }
            let lo = s.max(range.start);
            let hi = e.min(range.end);
            // An equal SN is the same lock's later flush (a lock's flushes travel in order
            // on its holder's connection), so it is newer too — and a redone flush after a
            // restart is applied again, not lost.
            if old <= sn {
                update.push(ByteRange { start: lo, end: hi });
            }
            at = hi;
        }
        if at < range.end {
            update.push(ByteRange {
                start: at,
                end: range.end,
            });
        }
        let update = coalesce(update);
        for r in &update {
            self.set(*r, sn);
        }
        update
    }

    /// Records `sn` for every byte of `r` (splitting the extents it cuts), then merges
    /// same-SN neighbours.
    fn set(&mut self, r: ByteRange, sn: u64) {
        // Cut the extent straddling r.start and the one straddling r.end.
        if let Some((&s, &(e, old))) = self.map.range(..r.start).next_back() {
            if e > r.start {
                self.map.insert(s, (r.start, old));
                self.map.insert(r.start, (e, old));
            }
        }
        if let Some((&s, &(e, old))) = self.map.range(..r.end).next_back() {
            if e > r.end {
                self.map.insert(s, (r.end, old));
                self.map.insert(r.end, (e, old));
            }
        }
        let inside: Vec<u64> = self.map.range(r.start..r.end).map(|(&s, _)| s).collect();
        for s in inside {
            self.map.remove(&s);
        }
        self.map.insert(r.start, (r.end, sn));
        self.join_around(r.start);
        if let Some((&s, _)) = self.map.range(..=r.start).next_back() {
            self.join_around(s);
        }
    }

    /// Merges the extent at `start` with touching neighbours of the same SN.
    fn join_around(&mut self, start: u64) {
        let Some(&(mut end, sn)) = self.map.get(&start) else {
            return;
        };
        let mut start = start;
        if let Some((&ps, &(pe, psn))) = self.map.range(..start).next_back() {
            if pe == start && psn == sn {
                self.map.remove(&start);
                start = ps;
            }
        }
        while let Some(&(ne, nsn)) = self.map.get(&end) {
            if nsn != sn {
                break;
            }
            self.map.remove(&end);
            end = ne;
        }
        self.map.insert(start, (end, sn));
    }

    /// Drops the entries inside `range` whose SN is at most `msn` — the smallest SN of an
    /// unreleased write lock overlapping them (`None`: no such lock, so every entry there
    /// goes). At most `budget` entries are examined (the paper's 1,024 per pass); returns
    /// how many were dropped.
    pub fn clean(&mut self, range: ByteRange, msn: Option<u64>, budget: usize) -> usize {
        let stale: Vec<u64> = self
            .map
            .range(range.start..range.end)
            .take(budget)
            .filter(|(_, &(end, sn))| end <= range.end && msn.is_none_or(|m| sn <= m))
            .map(|(&s, _)| s)
            .collect();
        for s in &stale {
            self.map.remove(s);
        }
        stale.len()
    }

    /// Checks the module's invariants.
    pub fn check(&self) -> Result<(), String> {
        let mut prev: Option<(u64, u64)> = None;
        for (&s, &(e, sn)) in &self.map {
            if e <= s {
                return Err(format!("empty extent at {s}"));
            }
            if let Some((pe, psn)) = prev {
                if pe > s {
                    return Err(format!("extents overlap at {s}"));
                }
                if pe == s && psn == sn {
                    return Err(format!("same-SN neighbours not merged at {s}"));
                }
            }
            prev = Some((e, sn));
        }
        Ok(())
    }
}

/// Joins touching ranges of a sorted list.
fn coalesce(v: Vec<ByteRange>) -> Vec<ByteRange> {
    let mut out: Vec<ByteRange> = Vec::with_capacity(v.len());
    for r in v {
        if r.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    /// Fig. 15: blocks D[0,2K,7], D[2K,4K,9], D[4K,8K,9] into a stripe holding S[0,4K,8].
    #[test]
    fn the_papers_example() {
        let k = 1024;
        let mut c = ExtentCache::new();
        assert_eq!(c.merge(r(0, 4 * k), 8), vec![r(0, 4 * k)]);
        assert!(
            c.merge(r(0, 2 * k), 7).is_empty(),
            "older than what is there"
        );
        assert_eq!(c.merge(r(2 * k, 4 * k), 9), vec![r(2 * k, 4 * k)]);
        assert_eq!(c.merge(r(4 * k, 8 * k), 9), vec![r(4 * k, 8 * k)]);
        assert_eq!(c.entries(), 2, "S[0,2K,8] and S[2K,8K,9], merged");
        assert_eq!((c.sn_at(0), c.sn_at(5 * k)), (Some(8), Some(9)));
        // mSN 9: both go.
        assert_eq!(c.clean(r(0, 8 * k), Some(9), 1024), 2);
        c.check().unwrap();
    }

    #[derive(Clone, Debug)]
    struct Block {
        start: u64,
        len: u64,
        sn: u64,
    }

    fn blocks() -> impl Strategy<Value = Vec<Block>> {
        prop::collection::vec(
            (0u64..200, 1u64..60, 0u64..12).prop_map(|(start, len, sn)| Block { start, len, sn }),
            1..30,
        )
    }

    /// Applies `blocks` in `order` through the cache (writing only the update sets),
    /// cleaning now and then with the mSN the lock server would report (the smallest SN of
    /// a block not yet applied: its lock is still unreleased). With `ignore_sn` the cache
    /// is bypassed (every block written whole: the negative control).
    fn apply(blocks: &[Block], order: &[usize], clean_every: usize, ignore_sn: bool) -> Vec<u64> {
        let mut stripe = vec![u64::MAX; 260];
        let mut cache = ExtentCache::new();
        let mut applied = vec![false; blocks.len()];
        for (step, &i) in order.iter().enumerate() {
            let b = &blocks[i];
            let range = r(b.start, b.start + b.len);
            let update = if ignore_sn {
                vec![range]
            } else {
                cache.merge(range, b.sn)
            };
            for u in update {
                for x in u.start..u.end {
                    stripe[x as usize] = b.sn;
                }
            }
            applied[i] = true;
            cache.check().unwrap();
            if clean_every > 0 && step % clean_every == 0 {
                let msn = blocks
                    .iter()
                    .zip(&applied)
                    .filter(|(_, &a)| !a)
                    .map(|(b, _)| b.sn)
                    .min();
                cache.clean(r(0, 260), msn, 1024);
                cache.check().unwrap();
            }
        }
        stripe
    }

    /// The model: every byte holds the newest SN of the blocks covering it.
    fn newest(blocks: &[Block]) -> Vec<u64> {
        let mut stripe = vec![u64::MAX; 260];
        for b in blocks {
            for x in b.start..b.start + b.len {
                let cur = &mut stripe[x as usize];
                if *cur == u64::MAX || b.sn > *cur {
                    *cur = b.sn;
                }
            }
        }
        stripe
    }

    proptest! {
        /// Blocks arriving in any order, with cleaning between them, leave the stripe as if
        /// applied in SN order. (Blocks of one SN are one lock's flushes: they may overlap
        /// only with the same data, which here is the SN itself.)
        #[test]
        fn any_arrival_order_gives_the_sn_order_result(
            bs in blocks(),
            seed in any::<u64>(),
            clean_every in 0usize..5,
        ) {
            let mut order: Vec<usize> = (0..bs.len()).collect();
            let mut x = seed | 1;
            for i in (1..order.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
            prop_assert_eq!(apply(&bs, &order, clean_every, false), newest(&bs));
        }
    }

    /// Negative control: writing blocks as they arrive (no SNs) loses the newer write when
    /// an older flush arrives last.
    #[test]
    fn without_sns_a_late_old_flush_wins() {
        let bs = [
            Block {
                start: 0,
                len: 10,
                sn: 1,
            },
            Block {
                start: 0,
                len: 10,
                sn: 0,
            },
        ];
        assert_ne!(apply(&bs, &[0, 1], 0, true), newest(&bs));
        assert_eq!(apply(&bs, &[0, 1], 0, false), newest(&bs));
    }
}
