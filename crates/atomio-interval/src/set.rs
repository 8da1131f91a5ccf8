//! The interval set of a file: the analysis's entries with a search tree, and the split of
//! one call into what needs no lock and what does (Logan §3.3).
//!
//! Search: entries are sorted by start; a max-end tree over them finds every entry whose
//! hull overlaps a range in O(log n + k) node visits; inside an entry the touched intervals
//! are computed arithmetically (`Family::touching`).
//!
//! Split of a call by rank `r`: bytes in an interval private to `r` need no lock (nobody
//! else can touch them: every rank's accesses are inside its declared view); bytes in a
//! shared or unresolved interval are locked at that interval's manager; bytes in no interval
//! (nobody declared them, so everyone who touches them comes here too) are locked and
//! counted as a fallback; bytes private to *another* rank cannot be made safe by any lock
//! `r` takes (their owner writes them lock-free) and are refused.
//!
//! **Invariants:** the split's pieces partition the call's bytes; a byte is lock-free only
//! when it is in an interval private to the caller; the manager of a shared interval
//! depends only on its owner set (every rank computes the same).

use crate::analysis::{Analysis, AnalysisStats, Entry, Owner, Rank};
use crate::family::Family;
use atomio_layout::ByteRange;

/// A file's interval set.
#[derive(Clone, Debug, Default)]
pub struct IntervalSet {
    entries: Vec<Entry>,
    owners: Vec<Owner>,
    /// Implicit binary tree (1-based, leaves at `size..`) of the max hull end below.
    max_end: Vec<u64>,
    size: usize,
    stats: AnalysisStats,
}

/// One piece of a call, classified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PieceClass {
    /// In an interval private to the caller: no lock.
    Private,
    /// In a shared (or unresolved) interval with this owner id: locked at its manager.
    Shared(u32),
    /// In no declared interval: locked (fallback).
    Undeclared,
    /// Private to another rank: refused.
    Foreign(Rank),
}

/// A call cut by the interval set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// In call order: (range, class).
    pub pieces: Vec<(ByteRange, PieceClass)>,
    pub private_bytes: u64,
    pub shared_bytes: u64,
    pub undeclared_bytes: u64,
    /// First byte private to another rank, and that rank.
    pub foreign: Option<(u64, Rank)>,
}

impl Split {
    /// Bytes that must be locked.
    pub fn locked_bytes(&self) -> u64 {
        self.shared_bytes + self.undeclared_bytes
    }
}

impl IntervalSet {
    pub fn new(a: Analysis) -> Self {
        let n = a.entries.len();
        let size = n.next_power_of_two().max(1);
        let mut max_end = vec![0u64; 2 * size];
        for (i, e) in a.entries.iter().enumerate() {
            max_end[size + i] = e.family.end();
        }
        for i in (1..size).rev() {
            max_end[i] = max_end[2 * i].max(max_end[2 * i + 1]);
        }
        IntervalSet {
            entries: a.entries,
            owners: a.owners,
            max_end,
            size,
            stats: a.stats,
        }
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn owners(&self) -> &[Owner] {
        &self.owners
    }

    pub fn owner(&self, id: u32) -> &Owner {
        &self.owners[id as usize]
    }

    pub fn stats(&self) -> &AnalysisStats {
        &self.stats
    }

    pub fn ranks(&self) -> u32 {
        self.stats.ranks
    }

    /// Indices of the entries whose hulls overlap `[x, y)`, in increasing index order.
    pub fn overlapping(&self, x: u64, y: u64, out: &mut Vec<usize>) {
        out.clear();
        let hi = self.entries.partition_point(|e| e.family.start < y);
        if hi == 0 {
            return;
        }
        // Visit nodes covering leaves [0, hi) whose max end exceeds x.
        let mut stack = vec![(1usize, 0usize, self.size)];
        while let Some((node, lo, width)) = stack.pop() {
            if lo >= hi || self.max_end[node] <= x {
                continue;
            }
            if width == 1 {
                out.push(lo);
                continue;
            }
            let half = width / 2;
            stack.push((2 * node + 1, lo + half, half));
            stack.push((2 * node, lo, half));
        }
    }

    /// The intervals (as clipped ranges with their entry) that overlap `[x, y)`, sorted.
    pub fn pieces(&self, x: u64, y: u64) -> Vec<(ByteRange, u32)> {
        let mut out = vec![];
        self.pieces_into(x, y, &mut vec![], &mut out);
        out.into_iter().map(|(r, owner, _)| (r, owner)).collect()
    }

    /// `pieces` into reused buffers, with each piece's entry index.
    fn pieces_into(
        &self,
        x: u64,
        y: u64,
        idx: &mut Vec<usize>,
        out: &mut Vec<(ByteRange, u32, usize)>,
    ) {
        out.clear();
        self.overlapping(x, y, idx);
        for &i in idx.iter() {
            let e = &self.entries[i];
            for k in e.family.touching(x, y) {
                let iv = e.family.nth(k);
                out.push((
                    ByteRange {
                        start: iv.start.max(x),
                        end: iv.end.min(y),
                    },
                    e.owner,
                    i,
                ));
            }
        }
        out.sort_unstable_by_key(|(r, _, _)| r.start);
    }

    /// The owner of `[x, y)` if one interval of entry `i` covers it whole (then no other
    /// entry has a byte there: entries are disjoint).
    fn covered_by(&self, i: usize, x: u64, y: u64) -> Option<u32> {
        let e = self.entries.get(i)?;
        let t = e.family.touching(x, y);
        (t.end - t.start == 1)
            .then(|| e.family.nth(t.start))
            .filter(|iv| iv.start <= x && y <= iv.end)
            .map(|_| e.owner)
    }

    /// Whether every run of `g` lies in an interval private to `rank`, decided a family at
    /// a time, not a run at a time: the entry holding the group's next run whole must be
    /// private to `rank`, and its intervals, one every `stride`, hold as many of the
    /// following runs as sit at the same place in them (the group's stride a multiple of
    /// the family's); then on from the first run it does not hold. `false` as soon as a
    /// step does not decide it (the caller then splits run by run), or after `max_steps`
    /// entries.
    pub fn group_private_to(&self, rank: Rank, g: atomio_layout::Group, max_steps: usize) -> bool {
        let (mut idx, mut found) = (vec![], vec![]);
        let mut next = 0u64; // the group's first run not yet shown private
        for _ in 0..max_steps {
            let first = g.run(next);
            self.pieces_into(first.start, first.end, &mut idx, &mut found);
            let [(p, owner, i)] = found[..] else {
                return false;
            };
            if p != first
                || !matches!(self.owner(owner), Owner::Ranks(rs) if rs.len() == 1 && rs[0] == rank)
            {
                return false;
            }
            let f = &self.entries[i].family;
            let k0 = f.touching(first.start, first.end).start;
            let iv = f.nth(k0);
            // Runs of this family from `next` on: at the same place in every interval.
            let held = if g.count - next == 1
                || f.stride == 0
                || !g.stride.is_multiple_of(f.stride)
                || first.start < iv.start
                || first.end > iv.end
            {
                1
            } else {
                let step = g.stride / f.stride;
                ((f.count - 1 - k0) / step + 1).min(g.count - next)
            };
            next += held;
            if next == g.count {
                return true;
            }
        }
        false
    }

    /// Cuts a call's ranges (in order) by the interval set, for rank `rank`.
    pub fn split<I: IntoIterator<Item = ByteRange>>(&self, rank: Rank, ranges: I) -> Split {
        let mut s = Split::default();
        let push = |s: &mut Split, r: ByteRange, c: PieceClass| {
            match &c {
                PieceClass::Private => s.private_bytes += r.len(),
                PieceClass::Shared(_) => s.shared_bytes += r.len(),
                PieceClass::Undeclared => s.undeclared_bytes += r.len(),
                PieceClass::Foreign(o) => {
                    if s.foreign.is_none() {
                        s.foreign = Some((r.start, *o));
                    }
                }
            }
            match s.pieces.last_mut() {
                Some((l, lc)) if *lc == c && l.end == r.start => l.end = r.end,
                _ => s.pieces.push((r, c)),
            }
        };
        let class_of = |owner: u32| match self.owner(owner) {
            Owner::Ranks(rs) if rs.len() == 1 && rs[0] == rank => PieceClass::Private,
            Owner::Ranks(rs) if rs.len() == 1 => PieceClass::Foreign(rs[0]),
            _ => PieceClass::Shared(owner),
        };
        // A call's runs usually walk one family interval by interval (rows of a
        // subarray): try the entry of the previous run before searching the tree.
        let mut hint = usize::MAX;
        let (mut idx, mut found) = (vec![], vec![]);
        for r in ranges {
            if let Some(owner) = self.covered_by(hint, r.start, r.end) {
                push(&mut s, r, class_of(owner));
                continue;
            }
            let mut at = r.start;
            self.pieces_into(r.start, r.end, &mut idx, &mut found);
            if let Some(last) = found.last() {
                hint = last.2;
            }
            for &(p, owner, _) in &found {
                if p.start > at {
                    push(
                        &mut s,
                        ByteRange {
                            start: at,
                            end: p.start,
                        },
                        PieceClass::Undeclared,
                    );
                }
                push(&mut s, p, class_of(owner));
                at = p.end;
            }
            if at < r.end {
                push(
                    &mut s,
                    ByteRange {
                        start: at,
                        end: r.end,
                    },
                    PieceClass::Undeclared,
                );
            }
        }
        s
    }

    /// The lock manager (an index below `managers`) of the shared intervals with owner
    /// `id`: the group's lowest rank's share of the managers, so a group's locks live with
    /// one of its members' servers when servers run inside the ranks, and groups spread
    /// over the managers. Unresolved and undeclared bytes are not assigned here.
    pub fn manager(&self, id: u32, managers: u32) -> u32 {
        match self.owner(id) {
            Owner::Ranks(rs) => {
                let ranks = self.ranks().max(1) as u64;
                ((rs[0] as u64 * managers as u64) / ranks) as u32
            }
            Owner::Unresolved => 0,
        }
    }

    /// Every interval (expanded), for small sets and tests.
    pub fn intervals(&self) -> impl Iterator<Item = (ByteRange, &Owner)> + '_ {
        self.entries.iter().flat_map(move |e| {
            let o = &self.owners[e.owner as usize];
            (0..e.family.count).map(move |i| (e.family.nth(i), o))
        })
    }

    /// Families of the set, for the interval file's metadata.
    pub fn families(&self) -> impl Iterator<Item = (&Family, &Owner)> + '_ {
        self.entries
            .iter()
            .map(move |e| (&e.family, &self.owners[e.owner as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, Limits};
    use proptest::prelude::*;

    fn set(declared: &[(Rank, Vec<Family>)]) -> IntervalSet {
        IntervalSet::new(analyze(4, declared, Limits::default()).unwrap())
    }

    #[test]
    fn split_of_overlapping_tiles() {
        let s = set(&[
            (0, vec![Family::new(0, 60, 100, 50).unwrap()]),
            (1, vec![Family::new(40, 60, 100, 50).unwrap()]),
        ]);
        let row = |k: u64, a: u64, b: u64| ByteRange {
            start: k * 100 + a,
            end: k * 100 + b,
        };
        let sp = s.split(0, (0..50).map(|k| row(k, 0, 60)));
        assert_eq!(sp.private_bytes, 40 * 50);
        assert_eq!(sp.shared_bytes, 20 * 50);
        assert_eq!(sp.undeclared_bytes, 0);
        assert!(sp.foreign.is_none());
        // Rank 0 writing into rank 1's private bytes is refused.
        let sp = s.split(0, [row(3, 70, 80)]);
        assert_eq!(sp.foreign, Some((370, 1)));
        // Beyond every view: undeclared, locked.
        let sp = s.split(
            0,
            [ByteRange {
                start: 9000,
                end: 9100,
            }],
        );
        assert_eq!(sp.undeclared_bytes, 100);
    }

    /// ROMIO noncontig's views for 4 ranks (every 4th int): a call's 2,500 runs are one
    /// group, private to its rank, found so without walking them.
    #[test]
    fn a_noncontig_call_is_private_as_a_group() {
        let declared: Vec<(Rank, Vec<Family>)> = (0..4)
            .map(|r| {
                (
                    r,
                    vec![Family::new(4 * u64::from(r), 4, 16, 100_000).unwrap()],
                )
            })
            .collect();
        let s = set(&declared);
        let g = |r: u64, first: u64, count: u64| atomio_layout::Group {
            start: 4 * r + 16 * first,
            len: 4,
            stride: 16,
            count,
        };
        assert!(s.group_private_to(1, g(1, 0, 2_500), 8));
        assert!(s.group_private_to(3, g(3, 97_500, 2_500), 8));
        assert!(!s.group_private_to(0, g(1, 0, 2_500), 8), "another rank's");
        assert!(
            !s.group_private_to(1, g(1, 97_501, 2_500), 8),
            "past the family"
        );
    }

    proptest! {
        /// A group found private is private run by run (the split agrees).
        #[test]
        fn private_groups_are_private_run_by_run(
            fams in prop::collection::vec((0u32..3, 0u64..500, 1u64..20, 0u64..40, 1u64..30), 1..12),
            start in 0u64..900, len in 1u64..10, stride_mul in 1u64..4, gap in 0u64..30, count in 1u64..20, rank in 0u32..3,
        ) {
            let declared: Vec<(Rank, Vec<Family>)> = fams.iter().map(|&(r, s, l, g, c)| (r, vec![Family::new(s, l, l + g, c).unwrap()])).collect();
            let s = set(&declared);
            let stride = if count == 1 { len } else { (len + gap) * stride_mul };
            let g = atomio_layout::Group { start, len, stride: stride.max(len), count };
            if s.group_private_to(rank, g, 64) {
                let sp = s.split(rank, g.runs());
                prop_assert_eq!(sp.private_bytes, g.bytes(), "{:?}", g);
            }
        }

        /// `overlapping` finds exactly the entries whose hulls overlap the query.
        #[test]
        fn search_tree_matches_scan(
            fams in prop::collection::vec((0u32..4, 0u64..500, 1u64..20, 0u64..40, 1u64..6), 1..30),
            x in 0u64..700, len in 1u64..200,
        ) {
            let declared: Vec<(Rank, Vec<Family>)> = fams.iter().map(|&(r, s, l, g, c)| (r, vec![Family::new(s, l, l + g, c).unwrap()])).collect();
            let s = set(&declared);
            let mut got = vec![];
            s.overlapping(x, x + len, &mut got);
            let want: Vec<usize> = s.entries().iter().enumerate().filter(|(_, e)| e.family.start < x + len && e.family.end() > x).map(|(i, _)| i).collect();
            prop_assert_eq!(got, want);
            // split partitions the bytes
            let sp = s.split(0, [ByteRange { start: x, end: x + len }]);
            let total: u64 = sp.pieces.iter().map(|(r, _)| r.len()).sum();
            prop_assert_eq!(total, len);
            // Cut into small runs (the hinted path) it classifies alike.
            let runs = (x..x + len).step_by(7).map(|a| ByteRange { start: a, end: (a + 7).min(x + len) });
            let cut = s.split(0, runs);
            prop_assert_eq!((cut.private_bytes, cut.shared_bytes, cut.undeclared_bytes, cut.foreign), (sp.private_bytes, sp.shared_bytes, sp.undeclared_bytes, sp.foreign));
        }
    }
}
