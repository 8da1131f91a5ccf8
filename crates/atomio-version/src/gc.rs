//! Garbage collection of a dropped snapshot: which of its nodes and chunk bytes no kept
//! snapshot reaches.
//!
//! Let `k` be the oldest snapshot kept and `w < k` one being dropped. A node `(pos, w)` is
//! reachable from a kept snapshot `x ≥ k` only if no version in `(w, x]` wrote under
//! `pos` — and then none in `(w, k]` did either, so `k`'s own tree has `(pos, w)` at `pos`.
//! Hence comparing `w`'s tree with `k`'s alone decides reachability (plus `k`'s leaves'
//! forward references, which are followed). Likewise a stored byte visible in a kept
//! snapshot, or in any version still in flight, is visible in `k`: a byte's newest writer up
//! to `x` is also its newest writer up to `k` when that writer is older than `k`. So the
//! chunk bytes of `w`'s dead leaves that `k` does not show are garbage, even while writers
//! run (they only reference nodes and bytes of their published base, which `k` reaches).
//! Writers' in-flight versions are above every published one, and collection never touches
//! versions above `k`.
//!
//! **Invariants:** the walker drops only nodes keyed by `w`, only where `k`'s tree does not
//! reach them; it punches only stored bytes that `k`'s content does not reference.

use crate::geometry::{Geometry, Pos};
use crate::node::{Chain, ChunkRef, Extent, Node, NodeKey};
use crate::{Ref, Version};
use std::collections::{BTreeMap, HashMap};

/// Stored bytes to free: `len` bytes of `object` on `server` from `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Punch {
    pub at: ChunkRef,
    pub len: u64,
}

#[derive(Debug, Default)]
pub struct Garbage {
    pub nodes: Vec<NodeKey>,
    pub punch: Vec<Punch>,
}

pub enum GcStep {
    /// Hand these to `advance`; a node that is not stored is `None` (allowed only for the
    /// collected version's nodes: an aborted writer may have put some and not others).
    Fetch(Vec<NodeKey>),
    Done(Garbage),
}

pub struct GcWalker {
    g: Geometry,
    w: Version,
    level: u8,
    /// `w`'s positions at `level` still to decide, with `k`'s version there.
    positions: BTreeMap<Pos, Ref>,
    /// Leaves: `k`'s chain at the block (newest first) and the next to read.
    chains: BTreeMap<u64, Chain>,
    fetched: HashMap<NodeKey, Option<Node>>,
    out: Garbage,
}

impl GcWalker {
    pub fn new(g: Geometry, collected: Version, keep: Version) -> Self {
        let mut positions = BTreeMap::new();
        positions.insert(g.root(), Some(keep).filter(|&k| k > 0));
        Self {
            g,
            w: collected,
            level: g.levels - 1,
            positions,
            chains: BTreeMap::new(),
            fetched: HashMap::new(),
            out: Garbage::default(),
        }
    }

    fn key(pos: Pos, version: Version) -> NodeKey {
        NodeKey { pos, version }
    }

    pub fn advance(
        &mut self,
        supplied: impl IntoIterator<Item = (NodeKey, Option<Node>)>,
    ) -> Result<GcStep, String> {
        self.fetched.extend(supplied);
        loop {
            // Positions `k` shares with `w` are live whole: nothing under them to decide.
            self.positions.retain(|_, kref| *kref != Some(self.w));
            let mut need = Vec::new();
            for (p, kref) in &self.positions {
                need.push(Self::key(*p, self.w));
                if let Some(k) = kref {
                    need.push(Self::key(*p, *k));
                }
            }
            if self.level == 0 {
                let fetched = &self.fetched;
                for (b, chain) in self.chains.iter_mut() {
                    let w = self.w;
                    let got =
                        chain.follow(*b, Some(w), |k| fetched.get(k).and_then(|n| n.as_ref()));
                    match got? {
                        // Fetched but not stored: `k`'s chain must exist.
                        Some(k) if fetched.contains_key(&k) => {
                            return Err(format!("kept leaf {k:?} is missing"))
                        }
                        Some(k) => need.push(k),
                        None => {}
                    }
                }
            }
            need.retain(|k| !self.fetched.contains_key(k));
            need.sort_unstable();
            need.dedup();
            if !need.is_empty() {
                return Ok(GcStep::Fetch(need));
            }
            if self.level == 0 {
                return Ok(GcStep::Done(self.finish_leaves()));
            }
            let mut next = BTreeMap::new();
            for (p, kref) in std::mem::take(&mut self.positions) {
                let Some(Some(Node::Inner(mine))) = self.fetched.get(&Self::key(p, self.w)) else {
                    continue; // never put (an aborted writer's), or not ours to read
                };
                let theirs = match kref {
                    Some(k) => match self.fetched.get(&Self::key(p, k)) {
                        Some(Some(Node::Inner(c))) => Some(c.clone()),
                        _ => return Err(format!("kept node {p:?}@{k} is missing")),
                    },
                    None => None,
                };
                self.out.nodes.push(Self::key(p, self.w));
                for (j, child) in mine.iter().enumerate() {
                    if *child == Some(self.w) {
                        let c = self.g.child(p, j as u32);
                        next.insert(c, theirs.as_ref().and_then(|t| t[j]));
                    }
                }
            }
            self.positions = next;
            self.level -= 1;
            if self.level == 0 {
                // Start `k`'s chain at every leaf of `w` still undecided.
                self.positions.retain(|_, kref| *kref != Some(self.w));
                for (p, kref) in &self.positions {
                    self.chains.insert(p.index, Chain::starting_at(*kref));
                }
            }
        }
    }

    fn finish_leaves(&mut self) -> Garbage {
        for (b, chain) in std::mem::take(&mut self.chains) {
            if chain.versions.contains(&self.w) {
                continue;
            }
            let pos = Pos { level: 0, index: b };
            let Some(Some(Node::Leaf(mine))) = self.fetched.get(&Self::key(pos, self.w)) else {
                continue;
            };
            self.out.nodes.push(Self::key(pos, self.w));
            let visible = chain.content();
            for e in &mine.extents {
                punch_unseen(e, &visible, &mut self.out.punch);
            }
        }
        std::mem::take(&mut self.out)
    }
}

/// The stored bytes of `e` that no extent of `visible` references.
fn punch_unseen(e: &Extent, visible: &[Extent], out: &mut Vec<Punch>) {
    let (start, end) = (e.at.offset, e.at.offset + (e.end - e.start) as u64);
    // Stored ranges `visible` keeps in the same object.
    let mut kept: Vec<(u64, u64)> = visible
        .iter()
        .filter(|v| v.at.server == e.at.server && v.at.object == e.at.object)
        .map(|v| (v.at.offset, v.at.offset + (v.end - v.start) as u64))
        .filter(|(s, t)| *s < end && *t > start)
        .collect();
    kept.sort_unstable();
    let mut at = start;
    for (s, t) in kept {
        if s > at {
            out.push(Punch {
                at: ChunkRef { offset: at, ..e.at },
                len: s - at,
            });
        }
        at = at.max(t);
    }
    if at < end {
        out.push(Punch {
            at: ChunkRef { offset: at, ..e.at },
            len: end - at,
        });
    }
}
