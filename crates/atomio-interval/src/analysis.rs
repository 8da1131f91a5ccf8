//! Elementary intervals from the declared accesses (file views) of all ranks (Logan §4).
//!
//! The line is cut at every endpoint of every rank's view; each piece is owned by the set
//! of ranks whose views cover it: one rank → *private*, several → *shared*. Views are given
//! as strided families (`family`), and the analysis keeps that structure: it sweeps the
//! families' *hulls*, and between two consecutive hull endpoints (a *segment*) the set of
//! active families is constant, so
//! * one active family → its intervals, clipped, are private to its rank;
//! * active families that all repeat with the same stride `S` (plain runs, which cover the
//!   whole segment, repeat with any stride) → the segment is periodic: the elementary
//!   intervals of one period (the *motif*) become one family each, repeated `K` times, and
//!   only the head and tail shorter than a period are cut explicitly;
//! * otherwise the runs inside the segment are expanded and swept, within `run_budget`; a
//!   segment over budget becomes one *unresolved* interval (everyone locks there).
//!
//! A vector view of a million blocks is therefore a handful of families, and S3D's
//! block-block-block subarrays at 1,024 ranks are one family per rank, plane and array.
//!
//! **Invariants:** output intervals are pairwise disjoint and every byte some rank declared
//! is in exactly one of them, with exactly the set of ranks that declared it (the property
//! test compares with a byte-by-byte expansion); bytes nobody declared are in none;
//! owner sets are sorted and interned (`owners[id]`).

use crate::family::{Family, TooComplex};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Instant;

pub type Rank = u32;

/// Who may touch an interval.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Owner {
    /// The ranks whose views cover it, sorted; one rank = private.
    Ranks(Vec<Rank>),
    /// The analysis gave up on this stretch (over budget): treat as shared by everyone.
    Unresolved,
}

impl Owner {
    pub fn private_to(&self) -> Option<Rank> {
        match self {
            Owner::Ranks(r) if r.len() == 1 => Some(r[0]),
            _ => None,
        }
    }
    pub fn is_shared(&self) -> bool {
        self.private_to().is_none()
    }
}

/// One family of elementary intervals with one owner set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub family: Family,
    /// Index into the owner table.
    pub owner: u32,
}

/// What the analysis cost and found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnalysisStats {
    pub ranks: u32,
    pub families_in: u64,
    pub segments: u64,
    pub periodic_segments: u64,
    pub expanded_runs: u64,
    pub unresolved_segments: u64,
    /// Families of intervals kept (the size of the interval set).
    pub entries: u64,
    /// Elementary intervals those families stand for.
    pub intervals: u64,
    pub private_intervals: u64,
    pub shared_intervals: u64,
    pub private_bytes: u64,
    pub shared_bytes: u64,
    /// Declared bytes and contiguous runs, summed over ranks (a rank declaring a byte
    /// twice counts it twice): their ratio is the mean run a call moves.
    #[serde(default)]
    pub declared_bytes: u64,
    #[serde(default)]
    pub declared_runs: u64,
    /// Sum over ranks of the length of the rank's hull (first to last declared byte).
    #[serde(default)]
    pub hull_bytes: u64,
    /// The most ranks whose hulls cover one byte: how many writers an extent lock
    /// (`bounding-extent`, ROMIO) can serialize.
    #[serde(default)]
    pub hull_depth: u32,
    pub seconds: f64,
}

impl AnalysisStats {
    /// Records what the ranks declared: bytes, runs, hulls and how deep hulls stack.
    fn declared(&mut self, declared: &[(Rank, Vec<Family>)]) {
        let mut hulls: HashMap<Rank, (u64, u64)> = HashMap::new();
        for (r, fams) in declared {
            for f in fams {
                self.declared_bytes += f.bytes();
                // A family whose intervals touch is one contiguous run.
                self.declared_runs += if f.len == f.stride { 1 } else { f.count };
                let h = hulls.entry(*r).or_insert((u64::MAX, 0));
                *h = (h.0.min(f.start), h.1.max(f.end()));
            }
        }
        let mut ends: Vec<(u64, i32)> = Vec::with_capacity(2 * hulls.len());
        for (a, z) in hulls.into_values().filter(|(a, z)| a < z) {
            self.hull_bytes += z - a;
            ends.push((a, 1));
            ends.push((z, -1));
        }
        // Ends before starts at the same offset: touching hulls do not overlap.
        ends.sort_unstable();
        let mut depth = 0i32;
        for (_, d) in ends {
            depth += d;
            self.hull_depth = self.hull_depth.max(depth as u32);
        }
    }
}

/// Limits on the work of one analysis.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Runs expanded per segment that is not periodic.
    pub run_budget: u64,
    /// Entries in the result.
    pub entry_budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            run_budget: 1 << 20,
            entry_budget: 1 << 26,
        }
    }
}

/// The result: entries sorted by start, the owner table, and the cost.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    pub entries: Vec<Entry>,
    pub owners: Vec<Owner>,
    pub stats: AnalysisStats,
}

struct Builder {
    entries: Vec<Entry>,
    owners: Vec<Owner>,
    ids: HashMap<Owner, u32>,
    stats: AnalysisStats,
    limits: Limits,
}

impl Builder {
    fn owner(&mut self, o: Owner) -> u32 {
        if let Some(&id) = self.ids.get(&o) {
            return id;
        }
        let id = self.owners.len() as u32;
        self.owners.push(o.clone());
        self.ids.insert(o, id);
        id
    }

    fn emit(&mut self, family: Family, owner: u32) -> Result<(), TooComplex> {
        if self.entries.len() as u64 >= self.limits.entry_budget {
            return Err(TooComplex {
                what: "interval analysis",
                budget: self.limits.entry_budget,
                unit: "interval families",
            });
        }
        self.entries.push(Entry { family, owner });
        Ok(())
    }
}

/// Analyzes the declared families of every rank (`declared[i] = (rank, families)`; a rank
/// may appear more than once, its families may overlap each other).
pub fn analyze(
    ranks: u32,
    declared: &[(Rank, Vec<Family>)],
    limits: Limits,
) -> Result<Analysis, TooComplex> {
    let t0 = Instant::now();
    // Every declared rank counts, whatever the caller said.
    let ranks = declared.iter().map(|(r, _)| r + 1).fold(ranks, u32::max);
    let mut items: Vec<(Family, Rank)> = declared
        .iter()
        .flat_map(|(r, fs)| fs.iter().map(move |f| (*f, *r)))
        .collect();
    items.sort_unstable_by_key(|(f, _)| f.start);
    let mut b = Builder {
        entries: vec![],
        owners: vec![],
        ids: HashMap::new(),
        stats: AnalysisStats {
            ranks,
            families_in: items.len() as u64,
            ..Default::default()
        },
        limits,
    };
    b.stats.declared(declared);
    let mut bounds: Vec<u64> = items.iter().flat_map(|(f, _)| [f.start, f.end()]).collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut active: Vec<(Family, Rank)> = vec![];
    let mut next = 0;
    for w in bounds.windows(2) {
        let (a, z) = (w[0], w[1]);
        active.retain(|(f, _)| f.end() > a);
        while next < items.len() && items[next].0.start == a {
            active.push(items[next]);
            next += 1;
        }
        if active.is_empty() {
            continue;
        }
        b.stats.segments += 1;
        segment(&mut b, &active, a, z)?;
    }
    let mut entries = b.entries;
    entries.sort_unstable_by_key(|e| e.family.start);
    entries = merge_runs(entries);
    let mut stats = b.stats;
    stats.entries = entries.len() as u64;
    for e in &entries {
        let shared = b.owners[e.owner as usize].is_shared();
        let (n, bytes) = (e.family.count, e.family.bytes());
        if shared {
            stats.shared_intervals += n;
            stats.shared_bytes += bytes;
        } else {
            stats.private_intervals += n;
            stats.private_bytes += bytes;
        }
    }
    stats.intervals = stats.private_intervals + stats.shared_intervals;
    stats.seconds = t0.elapsed().as_secs_f64();
    Ok(Analysis {
        entries,
        owners: b.owners,
        stats,
    })
}

/// Adjacent plain runs with the same owner become one.
fn merge_runs(entries: Vec<Entry>) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    for e in entries {
        if let Some(l) = out.last_mut() {
            if l.owner == e.owner
                && l.family.count == 1
                && e.family.count == 1
                && l.family.end() == e.family.start
            {
                l.family.len += e.family.len;
                l.family.stride = l.family.len;
                continue;
            }
        }
        out.push(e);
    }
    out
}

/// The segment `[a, z)` with a constant set of active families.
fn segment(b: &mut Builder, active: &[(Family, Rank)], a: u64, z: u64) -> Result<(), TooComplex> {
    if let [(f, r)] = active {
        let o = b.owner(Owner::Ranks(vec![*r]));
        let mut out = vec![];
        f.clip(a, z, &mut out);
        for f in out {
            b.emit(f, o)?;
        }
        return Ok(());
    }
    let strides: Vec<u64> = active
        .iter()
        .filter(|(f, _)| f.count > 1)
        .map(|(f, _)| f.stride)
        .collect();
    let common = strides.first().copied();
    if strides.iter().all(|s| Some(*s) == common) {
        match common {
            // Only plain runs: each covers the whole segment.
            None => {
                let mut rs: Vec<Rank> = active.iter().map(|(_, r)| *r).collect();
                rs.sort_unstable();
                rs.dedup();
                let o = b.owner(Owner::Ranks(rs));
                let f = Family::new(a, z - a, z - a, 1).expect("inside a family hull");
                return b.emit(f, o);
            }
            Some(s) if z - a >= 2 * s => {
                b.stats.periodic_segments += 1;
                return periodic(b, active, a, z, s);
            }
            _ => {}
        }
    }
    explicit(b, active, a, z)
}

/// Elementary pieces `(start, end, ranks)` of the active families inside `[x, y)`, by
/// sweeping their runs there (at most `budget` runs).
fn sweep(
    active: &[(Family, Rank)],
    x: u64,
    y: u64,
    budget: u64,
) -> Option<Vec<(u64, u64, Vec<Rank>)>> {
    let mut n = 0u64;
    for (f, _) in active {
        n += f.touching(x, y).end - f.touching(x, y).start;
        if n > budget {
            return None;
        }
    }
    let mut ev: Vec<(u64, bool, Rank)> = Vec::with_capacity(2 * n as usize);
    for (f, r) in active {
        for i in f.touching(x, y) {
            let iv = f.nth(i);
            ev.push((iv.start.max(x), true, *r));
            ev.push((iv.end.min(y), false, *r));
        }
    }
    ev.sort_unstable_by_key(|e| (e.0, e.1));
    // Open runs per rank; few ranks are active in a segment, so a small vector beats a map.
    let mut count: Vec<(Rank, u32)> = Vec::new();
    let mut out = vec![];
    let mut prev = x;
    for (pos, open, r) in ev {
        if pos > prev && !count.is_empty() {
            let mut rs: Vec<Rank> = count.iter().map(|c| c.0).collect();
            rs.sort_unstable();
            out.push((prev, pos, rs));
        }
        prev = pos;
        let at = count.iter().position(|c| c.0 == r);
        match (open, at) {
            (true, Some(i)) => count[i].1 += 1,
            (true, None) => count.push((r, 1)),
            (false, Some(i)) => {
                count[i].1 -= 1;
                if count[i].1 == 0 {
                    count.swap_remove(i);
                }
            }
            (false, None) => unreachable!("opened before closed"),
        }
    }
    Some(out)
}

fn explicit(b: &mut Builder, active: &[(Family, Rank)], x: u64, y: u64) -> Result<(), TooComplex> {
    if x >= y {
        return Ok(());
    }
    match sweep(active, x, y, b.limits.run_budget) {
        Some(pieces) => {
            for (s, e, rs) in pieces {
                b.stats.expanded_runs += 1;
                let o = b.owner(Owner::Ranks(rs));
                b.emit(Family::new(s, e - s, e - s, 1).expect("inside hulls"), o)?;
            }
        }
        None => {
            b.stats.unresolved_segments += 1;
            let o = b.owner(Owner::Unresolved);
            b.emit(Family::new(x, y - x, y - x, 1).expect("inside hulls"), o)?;
        }
    }
    Ok(())
}

/// `[a, z)` where every repeating family has stride `s` and `z − a ≥ 2s`.
fn periodic(
    b: &mut Builder,
    active: &[(Family, Rank)],
    a: u64,
    z: u64,
    s: u64,
) -> Result<(), TooComplex> {
    // One period from `a`, to find a phase where no elementary interval crosses the
    // period boundary (so none is cut in two at every period).
    let probe = sweep(active, a, a + s, u64::MAX).expect("unbounded");
    let phase = match (probe.first(), probe.last()) {
        (Some(f), Some(l)) if f.0 == a && l.1 == a + s && f.2 == l.2 && probe.len() > 1 => f.1 - a,
        _ => 0,
    };
    let p0 = a + phase;
    let k = (z - p0) / s;
    explicit(b, active, a, p0)?;
    let motif = sweep(active, p0, p0 + s, u64::MAX).expect("unbounded");
    for (x, y, rs) in motif {
        let o = b.owner(Owner::Ranks(rs));
        b.emit(Family::new(x, y - x, s, k).expect("inside the segment"), o)?;
    }
    explicit(b, active, p0 + k * s, z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Byte → sorted ranks, by brute force.
    fn brute(declared: &[(Rank, Vec<Family>)], n: u64) -> Vec<Vec<Rank>> {
        let mut v = vec![vec![]; n as usize];
        for (r, fs) in declared {
            for f in fs {
                for i in 0..f.count {
                    let iv = f.nth(i);
                    for x in iv.start..iv.end {
                        let cell: &mut Vec<Rank> = &mut v[x as usize];
                        if !cell.contains(r) {
                            cell.push(*r);
                        }
                    }
                }
            }
        }
        for c in &mut v {
            c.sort_unstable();
        }
        v
    }

    fn check(declared: &[(Rank, Vec<Family>)], n: u64) -> Analysis {
        let a = analyze(8, declared, Limits::default()).unwrap();
        let want = brute(declared, n);
        let mut got: Vec<Option<Vec<Rank>>> = vec![None; n as usize];
        for e in &a.entries {
            for i in 0..e.family.count {
                let iv = e.family.nth(i);
                for x in iv.start..iv.end {
                    assert!(got[x as usize].is_none(), "byte {x} in two intervals");
                    let Owner::Ranks(rs) = &a.owners[e.owner as usize] else {
                        panic!("unresolved")
                    };
                    got[x as usize] = Some(rs.clone());
                }
            }
        }
        for x in 0..n as usize {
            match &got[x] {
                None => assert!(
                    want[x].is_empty(),
                    "byte {x} declared by {:?} lost",
                    want[x]
                ),
                Some(rs) => assert_eq!(rs, &want[x], "byte {x}"),
            }
        }
        a
    }

    #[test]
    fn flash_like_views_stay_folded() {
        // 64 ranks, rank c owns block c of every period of 64 blocks, 24 periods.
        let declared: Vec<(Rank, Vec<Family>)> = (0..64)
            .map(|c| (c, vec![Family::new(c as u64 * 100, 100, 6400, 24).unwrap()]))
            .collect();
        let a = check(&declared, 6400 * 24);
        assert_eq!(a.stats.intervals, 64 * 24);
        assert_eq!(a.stats.shared_intervals, 0);
        assert!(a.entries.len() <= 64 * 4, "{} entries", a.entries.len());
    }

    #[test]
    fn overlapping_tiles_have_shared_strips() {
        // Two ranks, rows of 100 bytes: rank 0 bytes 0..60, rank 1 bytes 40..100, 50 rows.
        let declared = vec![
            (0, vec![Family::new(0, 60, 100, 50).unwrap()]),
            (1, vec![Family::new(40, 60, 100, 50).unwrap()]),
        ];
        let a = check(&declared, 5000);
        assert_eq!(a.stats.shared_bytes, 20 * 50);
        assert!(a.entries.len() < 12);
    }

    fn arb_family() -> impl Strategy<Value = Family> {
        (0u64..300, 1u64..20, 0u64..30, 1u64..12)
            .prop_map(|(s, l, g, c)| Family::new(s, l, l + g, c).unwrap())
    }

    proptest! {
        #[test]
        fn matches_brute_force(decl in prop::collection::vec((0u32..5, prop::collection::vec(arb_family(), 1..4)), 1..6)) {
            check(&decl, 1000);
        }
    }
}
