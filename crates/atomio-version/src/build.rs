//! Building one version's segment tree (§5.3.2, §5.3.4), without waiting for other writers.
//!
//! A writer that stored its chunks and was assigned version `v` (with `p`, the newest
//! published version, and hints: the regions of every version in `(p, v)`, all in flight)
//! makes a node at every position its bytes fall under, top-down, level by level. A child
//! position it does not write is a **border**: the newest lower version that wrote there —
//! the highest hinted version whose regions meet the position (a *forward reference*: that
//! writer makes the node, maybe later), else whatever `p`'s tree has there (read from `p`'s
//! nodes at the writer's own positions only). Borders are evaluated **lazily**: only for the
//! children of nodes the write makes, never per region, so borders that the write's own
//! nodes hide are never computed (the paper's Fig. 2 example). A leaf the write covers only
//! partly inherits the hinted version's leaf by reference, or copies the pieces of `p`'s leaf
//! (published, so readable now), so reads do not follow chains through published versions.
//!
//! Positions wholly covered by the write need nothing from `p`: their subtrees are all new.
//!
//! **Invariants:** the builder asks only for nodes of published versions (≤ `p`); every
//! node it outputs is keyed by version `v`; an output inner node's `Some(u)` child has
//! `u ≤ v`, and `u < v` only for a position `v` does not write.

use crate::geometry::{Geometry, Pos};
use crate::node::{Chain, ChunkRef, Extent, Leaf, Node, NodeKey};
use crate::{Ref, Version};
use atomio_layout::{ByteRange, RangeList};
use std::collections::{BTreeMap, HashMap};

/// At most `max` ranges covering `ranges` (the smallest gaps filled first): what a write
/// with very many pieces declares to the version manager. Declaring more than it writes is
/// safe — the writer makes nodes (pass-through where it wrote nothing) at every declared
/// position — and keeps hints, and the manager's memory, bounded.
pub fn coalesce(ranges: &RangeList, max: usize) -> RangeList {
    let s = ranges.as_slice();
    if s.len() <= max.max(1) {
        return ranges.clone();
    }
    let mut gaps: Vec<u64> = s.windows(2).map(|w| w[1].start - w[0].end).collect();
    gaps.sort_unstable();
    // Fill every gap up to the one that leaves `max` ranges.
    let fill = gaps[s.len() - max.max(1) - 1];
    let mut out: Vec<ByteRange> = Vec::with_capacity(max);
    for r in s {
        match out.last_mut() {
            Some(last) if r.start - last.end <= fill => last.end = r.end,
            _ => out.push(*r),
        }
    }
    RangeList::from_ranges(out)
}

/// One write's pieces, per leaf block.
#[derive(Clone, Debug, Default)]
pub struct WritePieces {
    pub blocks: BTreeMap<u64, Vec<Extent>>,
}

impl WritePieces {
    /// Adds file bytes `range` stored from `at` on (split at chunk boundaries). Ranges must
    /// be added in increasing order and not overlap.
    pub fn add(&mut self, g: &Geometry, range: ByteRange, mut at: ChunkRef) {
        let mut start = range.start;
        while start < range.end {
            let block = g.block(start);
            let block_start = block * g.chunk;
            let end = range.end.min(block_start + g.chunk);
            self.blocks.entry(block).or_default().push(Extent {
                start: (start - block_start) as u32,
                end: (end - block_start) as u32,
                at,
            });
            at = at.advanced(end - start);
            start = end;
        }
    }

    pub fn bytes(&self) -> u64 {
        self.blocks
            .values()
            .flatten()
            .map(|e| (e.end - e.start) as u64)
            .sum()
    }
}

pub enum BuildStep {
    /// Hand these nodes to `advance` (each of a published version: from a cache or the
    /// store).
    Fetch(Vec<NodeKey>),
    /// The version's new nodes.
    Done(Vec<(NodeKey, Node)>),
}

enum Stage {
    Inner,
    /// Per partly written block whose border is in `p`'s tree: the chain of leaves read so
    /// far (newest first) and the next leaf to read.
    Leaves(BTreeMap<u64, Chain>),
    Done,
}

pub struct TreeBuilder {
    g: Geometry,
    v: Version,
    /// Hinted in-flight versions, newest first.
    hints: Vec<(Version, RangeList)>,
    own: BTreeMap<u64, Vec<Extent>>,
    own_bytes: BTreeMap<u64, u64>,
    /// Blocks under the regions this version declared to the manager (a superset of the
    /// blocks it writes): it makes a node at every position above them, since later
    /// writers' forward references name those positions.
    declared: std::collections::BTreeSet<u64>,
    level: u8,
    /// The write's positions at `level`, each with what `p`'s tree has there.
    positions: BTreeMap<Pos, Ref>,
    fetched: HashMap<NodeKey, Node>,
    out: Vec<(NodeKey, Node)>,
    stage: Stage,
}

impl TreeBuilder {
    /// `hints` must be the versions strictly between `published` and `v`; `declared` the
    /// regions `v` was assigned with (covering every byte of `pieces`).
    pub fn new(
        g: Geometry,
        v: Version,
        published: Version,
        mut hints: Vec<(Version, RangeList)>,
        pieces: WritePieces,
        declared: &RangeList,
    ) -> Self {
        let mut blocks: std::collections::BTreeSet<u64> = pieces.blocks.keys().copied().collect();
        for r in declared.as_slice() {
            if r.is_empty() {
                continue;
            }
            blocks.extend(g.block(r.start)..=g.block(r.end - 1));
        }
        hints.sort_unstable_by_key(|h| std::cmp::Reverse(h.0));
        let own_bytes = pieces
            .blocks
            .iter()
            .map(|(b, es)| (*b, es.iter().map(|e| (e.end - e.start) as u64).sum()))
            .collect();
        let mut positions = BTreeMap::new();
        positions.insert(g.root(), Some(published).filter(|&p| p > 0));
        Self {
            g,
            v,
            hints,
            own: pieces.blocks,
            own_bytes,
            declared: blocks,
            level: g.levels - 1,
            positions,
            fetched: HashMap::new(),
            out: Vec::new(),
            stage: Stage::Inner,
        }
    }

    fn blocks_under(&self, p: Pos) -> std::ops::Range<u64> {
        let per = self.g.cover(p.level) / self.g.chunk as u128;
        let first = p.index as u128 * per;
        let last = (first + per).min(u64::MAX as u128);
        first.min(u64::MAX as u128) as u64..last as u64
    }

    fn writes_under(&self, p: Pos) -> bool {
        self.declared.range(self.blocks_under(p)).next().is_some()
    }

    fn full(&self, p: Pos) -> bool {
        let covered: u64 = self
            .own_bytes
            .range(self.blocks_under(p))
            .map(|(_, b)| b)
            .sum();
        covered as u128 == self.g.cover(p.level)
    }

    /// The newest hinted version writing anywhere under `p`.
    fn hinted(&self, p: Pos) -> Ref {
        let (start, end) = self.g.range(p);
        let r = ByteRange { start, end };
        self.hints
            .iter()
            .find(|(_, regions)| regions.overlaps(&r))
            .map(|(u, _)| *u)
    }

    fn key(&self, pos: Pos, version: Version) -> NodeKey {
        NodeKey { pos, version }
    }

    /// A negative control: build as if no other writer were in flight (borders from the
    /// published tree only, no forward references) — concurrent overlapping writes then
    /// lose each other's bytes in some subtrees and not others (torn), which the
    /// verifier must catch.
    pub fn ignoring_hints(mut self) -> Self {
        self.hints.clear();
        self
    }

    /// Feeds the nodes last asked for and runs as far as possible.
    pub fn advance(
        &mut self,
        supplied: impl IntoIterator<Item = (NodeKey, Node)>,
    ) -> Result<BuildStep, String> {
        self.fetched.extend(supplied);
        loop {
            match &mut self.stage {
                Stage::Done => return Err("the tree is already built".into()),
                Stage::Inner if self.level == 0 => self.start_leaves(),
                Stage::Inner => {
                    let need: Vec<NodeKey> = self
                        .positions
                        .iter()
                        .filter(|(p, _)| !self.full(**p))
                        .filter_map(|(p, r)| r.map(|w| self.key(*p, w)))
                        .filter(|k| !self.fetched.contains_key(k))
                        .collect();
                    if !need.is_empty() {
                        return Ok(BuildStep::Fetch(need));
                    }
                    self.build_level()?;
                }
                Stage::Leaves(chains) => {
                    let mut need = Vec::new();
                    for (block, chain) in chains.iter_mut() {
                        need.extend(chain.follow(*block, None, |k| self.fetched.get(k))?);
                    }
                    if !need.is_empty() {
                        return Ok(BuildStep::Fetch(need));
                    }
                    let Stage::Leaves(chains) = std::mem::replace(&mut self.stage, Stage::Done)
                    else {
                        unreachable!()
                    };
                    for (block, chain) in chains {
                        let own = self.own.remove(&block).unwrap_or_default();
                        let extents = crate::node::overlay(&chain.content(), &own);
                        self.push_leaf(block, extents, None);
                    }
                    self.out.sort_unstable_by_key(|(k, _)| k.pos);
                    return Ok(BuildStep::Done(std::mem::take(&mut self.out)));
                }
            }
        }
    }

    fn build_level(&mut self) -> Result<(), String> {
        let mut next = BTreeMap::new();
        let positions = std::mem::take(&mut self.positions);
        for (p, pref) in positions {
            let full = self.full(p);
            let pnode = match pref {
                Some(w) if !full => match self.fetched.get(&self.key(p, w)) {
                    Some(Node::Inner(c)) if c.len() == self.g.fanout as usize => Some(c.clone()),
                    _ => return Err(format!("node {p:?}@{w} missing or not an inner node")),
                },
                _ => None,
            };
            let mut children = Vec::with_capacity(self.g.fanout as usize);
            for j in 0..self.g.fanout {
                let c = self.g.child(p, j);
                let below = pnode.as_ref().and_then(|n| n[j as usize]);
                if self.writes_under(c) {
                    children.push(Some(self.v));
                    next.insert(c, below);
                } else {
                    children.push(self.hinted(c).or(below));
                }
            }
            self.out.push((self.key(p, self.v), Node::Inner(children)));
        }
        self.positions = next;
        self.level -= 1;
        self.fetched.clear();
        Ok(())
    }

    fn push_leaf(&mut self, block: u64, extents: Vec<Extent>, inherit: Ref) {
        let key = self.key(
            Pos {
                level: 0,
                index: block,
            },
            self.v,
        );
        self.out.push((key, Node::Leaf(Leaf { extents, inherit })));
    }

    fn start_leaves(&mut self) {
        let mut chains = BTreeMap::new();
        let positions = std::mem::take(&mut self.positions);
        for (p, pref) in positions {
            let own = self.own.get(&p.index).cloned().unwrap_or_default();
            if self.full(p) {
                self.push_leaf(p.index, own, None);
            } else if let Some(u) = self.hinted(p) {
                self.push_leaf(p.index, own, Some(u));
            } else if pref.is_some() {
                chains.insert(p.index, Chain::starting_at(pref));
            } else {
                self.push_leaf(p.index, own, None);
            }
        }
        self.fetched.clear();
        self.stage = Stage::Leaves(chains);
    }
}
