//! Reading a snapshot (§5.3.3): descend its tree along the bytes asked for, level by level,
//! then follow each leaf's forward references to the leaves it inherits; the result says,
//! for every byte asked for, which stored chunk bytes hold it (or that it is the base).
//!
//! **Invariants:** the segments cover exactly the ranges asked for, in order; a reader asks
//! only for nodes reachable from the version it reads (which exist once it is published).

use crate::geometry::{Geometry, Pos};
use crate::node::{Chain, ChunkRef, Node, NodeKey};
use crate::Version;
use atomio_layout::{ByteRange, RangeList};
use std::collections::{BTreeMap, HashMap};

/// `len` bytes of the file from `start` are stored at `at` (`None`: the file's base).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub start: u64,
    pub len: u64,
    pub at: Option<ChunkRef>,
}

pub enum ReadStep {
    Fetch(Vec<NodeKey>),
    Done(Vec<Segment>),
}

/// Every node a reader of `ranges` could meet that versions `versions` wrote: for each of
/// them, each position at every level whose bytes meet `ranges` (a node exists only where
/// its version wrote below it, so most of these are absent). Asked for all at once before
/// a new snapshot's walk, they replace its level-by-level round trips with one (a walk
/// then finds in its cache every node those versions made on its path). `None` when there
/// would be more than `cap` keys: the walk asks for what it needs instead.
pub fn speculative_keys(
    g: &Geometry,
    versions: std::ops::RangeInclusive<Version>,
    ranges: &RangeList,
    cap: usize,
) -> Option<Vec<NodeKey>> {
    let mut positions: Vec<Pos> = Vec::new();
    for level in (0..g.levels).rev() {
        let cover = g.cover(level);
        let mut last: Option<u64> = None;
        for r in ranges.as_slice() {
            let first = (r.start as u128 / cover) as u64;
            let end = ((r.end - 1) as u128 / cover) as u64;
            // Ranges are in order: skip the positions the previous range already named.
            let from = last.map_or(first, |l| first.max(l + 1));
            if from <= end {
                let n = (end - from + 1) as usize;
                if positions.len() + n > cap {
                    return None;
                }
                positions.extend((from..=end).map(|index| Pos { level, index }));
            }
            last = Some(end);
        }
    }
    let versions: Vec<Version> = versions.collect();
    if positions.len().saturating_mul(versions.len()) > cap {
        return None;
    }
    Some(
        versions
            .iter()
            .flat_map(|&version| positions.iter().map(move |&pos| NodeKey { pos, version }))
            .collect(),
    )
}

pub struct TreeReader {
    g: Geometry,
    ranges: RangeList,
    level: u8,
    /// Positions at `level` the read reaches, with the version whose node is there.
    positions: BTreeMap<Pos, Version>,
    /// Leaves: per block, the chain read so far (newest first) and the next leaf.
    chains: BTreeMap<u64, Chain>,
    base: Vec<ByteRange>,
    fetched: HashMap<NodeKey, Node>,
    leaves: bool,
}

impl TreeReader {
    pub fn new(g: Geometry, version: Version, ranges: RangeList) -> Self {
        let mut positions = BTreeMap::new();
        let mut base = Vec::new();
        if version > 0 {
            positions.insert(g.root(), version);
        } else {
            base.extend_from_slice(ranges.as_slice());
        }
        Self {
            g,
            ranges,
            level: g.levels - 1,
            positions,
            chains: BTreeMap::new(),
            base,
            fetched: HashMap::new(),
            leaves: false,
        }
    }

    /// The read's bytes inside `[start, end)`.
    fn within(&self, start: u64, end: u64) -> Vec<ByteRange> {
        let s = self.ranges.as_slice();
        let mut i = self.ranges.first_ending_after(start);
        let mut out = Vec::new();
        while i < s.len() && s[i].start < end {
            out.push(ByteRange {
                start: s[i].start.max(start),
                end: s[i].end.min(end),
            });
            i += 1;
        }
        out
    }

    pub fn advance(
        &mut self,
        supplied: impl IntoIterator<Item = (NodeKey, Node)>,
    ) -> Result<ReadStep, String> {
        self.fetched.extend(supplied);
        loop {
            if self.leaves {
                return self.follow_chains();
            }
            let need: Vec<NodeKey> = self
                .positions
                .iter()
                .map(|(p, v)| NodeKey {
                    pos: *p,
                    version: *v,
                })
                .filter(|k| !self.fetched.contains_key(k))
                .collect();
            if !need.is_empty() {
                return Ok(ReadStep::Fetch(need));
            }
            let positions = std::mem::take(&mut self.positions);
            if self.level == 0 {
                for (p, v) in positions {
                    self.chains.insert(p.index, Chain::starting_at(Some(v)));
                }
                self.leaves = true;
                continue;
            }
            for (p, v) in positions {
                let key = NodeKey { pos: p, version: v };
                let Some(Node::Inner(children)) = self.fetched.get(&key) else {
                    return Err(format!("{key:?} is not an inner node"));
                };
                let children = children.clone();
                let (pstart, _) = self.g.range(p);
                let cover = self.g.cover(p.level - 1);
                for piece in self.within(self.g.range(p).0, self.g.range(p).1) {
                    let first = ((piece.start - pstart) as u128 / cover) as u32;
                    let last = ((piece.end - 1 - pstart) as u128 / cover) as u32;
                    for j in first..=last {
                        let c = self.g.child(p, j);
                        match children[j as usize] {
                            Some(u) => {
                                self.positions.insert(c, u);
                            }
                            None => {
                                let (cs, ce) = self.g.range(c);
                                self.base.push(ByteRange {
                                    start: piece.start.max(cs),
                                    end: piece.end.min(ce),
                                });
                            }
                        }
                    }
                }
            }
            self.level -= 1;
            self.fetched.clear();
        }
    }

    fn follow_chains(&mut self) -> Result<ReadStep, String> {
        let mut need = Vec::new();
        for (block, chain) in self.chains.iter_mut() {
            need.extend(chain.follow(*block, None, |k| self.fetched.get(k))?);
        }
        if !need.is_empty() {
            return Ok(ReadStep::Fetch(need));
        }
        let mut segs: Vec<Segment> = self
            .base
            .iter()
            .map(|r| Segment {
                start: r.start,
                len: r.len(),
                at: None,
            })
            .collect();
        for (block, chain) in std::mem::take(&mut self.chains) {
            let content = chain.content();
            let bstart = block * self.g.chunk;
            for piece in self.within(bstart, bstart + self.g.chunk) {
                // Walk the block's content over the piece: stored bytes and base gaps.
                let mut at = piece.start;
                let (lo, hi) = ((piece.start - bstart) as u32, (piece.end - bstart) as u32);
                for e in content.iter().filter(|e| e.end > lo && e.start < hi) {
                    let s = bstart + e.start.max(lo) as u64;
                    let t = bstart + e.end.min(hi) as u64;
                    if s > at {
                        segs.push(Segment {
                            start: at,
                            len: s - at,
                            at: None,
                        });
                    }
                    segs.push(Segment {
                        start: s,
                        len: t - s,
                        at: Some(e.at.advanced(s - bstart - e.start as u64)),
                    });
                    at = t;
                }
                if at < piece.end {
                    segs.push(Segment {
                        start: at,
                        len: piece.end - at,
                        at: None,
                    });
                }
            }
        }
        segs.sort_unstable_by_key(|s| s.start);
        Ok(ReadStep::Done(segs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Positions meeting the ranges, by brute force over every position of every level.
    fn brute(g: &Geometry, ranges: &RangeList) -> Vec<Pos> {
        let mut out = Vec::new();
        for level in (0..g.levels).rev() {
            let count = (g.span() / g.cover(level)) as u64;
            for index in 0..count {
                let (s, e) = g.range(Pos { level, index });
                if ranges.as_slice().iter().any(|r| r.start < e && s < r.end) {
                    out.push(Pos { level, index });
                }
            }
        }
        out
    }

    #[test]
    fn speculative_keys_name_every_position_the_ranges_meet_once_per_version() {
        let g = Geometry::new(16, 4, 1024).unwrap();
        for ranges in [
            vec![(0, 1)],
            vec![(5, 40), (41, 42), (300, 700)],
            vec![(0, 1024)],
            vec![(15, 17), (17, 18), (1000, 1024)],
        ] {
            let ranges = RangeList::from_ranges(
                ranges
                    .iter()
                    .map(|&(s, e)| ByteRange { start: s, end: e })
                    .collect(),
            );
            let want = brute(&g, &ranges);
            let keys = speculative_keys(&g, 3..=5, &ranges, usize::MAX).unwrap();
            assert_eq!(keys.len(), want.len() * 3, "{ranges:?}");
            for v in 3..=5 {
                let mut got: Vec<Pos> = keys
                    .iter()
                    .filter(|k| k.version == v)
                    .map(|k| k.pos)
                    .collect();
                got.sort_by_key(|p| (std::cmp::Reverse(p.level), p.index));
                assert_eq!(got, want, "{ranges:?}");
            }
            // Over the cap: no list at all.
            assert!(speculative_keys(&g, 3..=5, &ranges, want.len() * 3 - 1).is_none());
        }
    }
}
