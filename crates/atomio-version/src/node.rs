//! Tree nodes and leaves, and how leaf contents combine.
//!
//! An inner node holds, for each child position, the version whose node is there (`Ref`).
//! A leaf holds the chunk pieces of its block that its version knows (`extents`) and, when
//! the bytes around them belonged to a version still in flight at its writer's assignment,
//! a forward reference to that version's leaf of the same block (`inherit`); bytes neither
//! covers are the file's base. A writer that found the lower leaf published copies its
//! pieces instead, so chains of `inherit` are only as long as writers were concurrent.
//!
//! **Invariants:** a leaf's extents are sorted, disjoint, non-empty and inside the chunk;
//! an inner node has exactly `fanout` children; a `NodeKey` names one node forever.

use crate::geometry::{Geometry, Pos};
use crate::{Ref, Version};
use serde::{Deserialize, Serialize};

/// Where a piece of a chunk's bytes is stored: `object` of the file's chunk space on
/// `server`, from byte `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChunkRef {
    pub server: u32,
    pub object: u32,
    pub offset: u64,
}

impl ChunkRef {
    /// The same stored bytes `by` bytes further on.
    pub fn advanced(self, by: u64) -> Self {
        Self {
            offset: self.offset + by,
            ..self
        }
    }
}

/// Bytes `[start, end)` of a leaf's block are stored at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Extent {
    pub start: u32,
    pub end: u32,
    pub at: ChunkRef,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leaf {
    pub extents: Vec<Extent>,
    pub inherit: Ref,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Node {
    Inner(Vec<Ref>),
    Leaf(Leaf),
}

/// A node's name: its position in the tree and the version that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeKey {
    pub pos: Pos,
    pub version: Version,
}

impl NodeKey {
    /// The server of `servers` holding this node of file `file` (the DHT's placement).
    pub fn server(&self, file: u64, servers: u32) -> u32 {
        use std::hash::Hasher;
        let mut h = fnv::FnvHasher::default();
        h.write_u64(file);
        h.write_u8(self.pos.level);
        h.write_u64(self.pos.index);
        h.write_u64(self.version);
        (h.finish() % servers.max(1) as u64) as u32
    }
}

impl Node {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("nodes serialize")
    }

    /// Decodes a node read from the store, checking its shape against the geometry.
    pub fn decode(bytes: &[u8], g: &Geometry, pos: Pos) -> Result<Self, String> {
        let n: Node = postcard::from_bytes(bytes).map_err(|e| format!("bad node: {e}"))?;
        match &n {
            Node::Inner(c) if pos.level > 0 && c.len() == g.fanout as usize => Ok(n),
            Node::Leaf(l) if pos.level == 0 && l.valid(g.chunk) => Ok(n),
            _ => Err(format!("node at {pos:?} has the wrong shape")),
        }
    }
}

impl Leaf {
    fn valid(&self, chunk: u64) -> bool {
        let mut prev = 0u32;
        self.extents.iter().enumerate().all(|(i, e)| {
            let ok = e.start < e.end && (e.end as u64) <= chunk && (i == 0 || e.start >= prev);
            prev = e.end;
            ok
        })
    }

    /// Bytes of the block its own extents cover.
    pub fn covered(&self) -> u64 {
        self.extents.iter().map(|e| (e.end - e.start) as u64).sum()
    }
}

/// The pieces of `lower` not under any of `upper`, merged with `upper` (upper wins): the
/// content of a block after a write of `upper` onto `lower`. Both sorted and disjoint.
pub fn overlay(lower: &[Extent], upper: &[Extent]) -> Vec<Extent> {
    let mut out = Vec::with_capacity(lower.len() + upper.len());
    let mut u = 0;
    for &l in lower {
        let mut start = l.start;
        // Skip upper extents wholly before this piece.
        while u < upper.len() && upper[u].end <= start {
            u += 1;
        }
        let mut k = u;
        while start < l.end {
            match upper.get(k) {
                Some(x) if x.start < l.end => {
                    if x.start > start {
                        out.push(Extent {
                            start,
                            end: x.start,
                            at: l.at.advanced((start - l.start) as u64),
                        });
                    }
                    start = start.max(x.end);
                    k += 1;
                }
                _ => {
                    out.push(Extent {
                        start,
                        end: l.end,
                        at: l.at.advanced((start - l.start) as u64),
                    });
                    start = l.end;
                }
            }
        }
    }
    out.extend_from_slice(upper);
    out.sort_unstable_by_key(|e| e.start);
    out
}

/// A block's chain of leaves being read: each leaf's forward reference names the next.
#[derive(Clone, Debug, Default)]
pub struct Chain {
    /// Versions of the leaves read, newest first.
    pub versions: Vec<Version>,
    /// Their extents, in the same order.
    pub layers: Vec<Vec<Extent>>,
    /// The next leaf to read.
    pub next: Ref,
}

impl Chain {
    pub fn starting_at(v: Ref) -> Self {
        Self {
            next: v,
            ..Self::default()
        }
    }

    /// Reads as far as `node` can supply; returns the key of the next leaf needed, if any.
    /// `stop_at`: a version whose leaf ends the walk when reached (not read).
    pub fn follow<'a>(
        &mut self,
        block: u64,
        stop_at: Option<Version>,
        node: impl Fn(&NodeKey) -> Option<&'a Node>,
    ) -> Result<Option<NodeKey>, String> {
        while let Some(v) = self.next {
            if Some(v) == stop_at {
                self.versions.push(v);
                self.next = None;
                break;
            }
            let key = NodeKey {
                pos: Pos {
                    level: 0,
                    index: block,
                },
                version: v,
            };
            match node(&key) {
                Some(Node::Leaf(l)) => {
                    self.versions.push(v);
                    self.layers.push(l.extents.clone());
                    self.next = l.inherit;
                }
                Some(Node::Inner(_)) => return Err(format!("{key:?} is not a leaf")),
                None => return Ok(Some(key)),
            }
        }
        Ok(None)
    }

    /// The block's content (see `fold`).
    pub fn content(&self) -> Vec<Extent> {
        fold(&self.layers)
    }
}

/// A block's content from a chain of leaves, newest first (`layers[0]` is the leaf asked
/// for, each next one the leaf its predecessor inherits).
pub fn fold(layers: &[Vec<Extent>]) -> Vec<Extent> {
    layers
        .iter()
        .rev()
        .fold(Vec::new(), |acc, layer| overlay(&acc, layer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(start: u32, end: u32, object: u32) -> Extent {
        Extent {
            start,
            end,
            at: ChunkRef {
                server: 0,
                object,
                offset: start as u64 * 10,
            },
        }
    }

    /// Per byte: which object and stored offset holds it.
    fn bytes(es: &[Extent], n: u32) -> Vec<Option<(u32, u64)>> {
        (0..n)
            .map(|b| {
                es.iter()
                    .find(|e| e.start <= b && b < e.end)
                    .map(|e| (e.at.object, e.at.offset + (b - e.start) as u64))
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn overlay_is_upper_wins_per_byte(
            lo in proptest::collection::btree_set(0u32..64, 0..20),
            up in proptest::collection::btree_set(0u32..64, 0..20),
        ) {
            let make = |cuts: &std::collections::BTreeSet<u32>, object| {
                let v: Vec<u32> = cuts.iter().copied().collect();
                v.chunks(2).filter(|c| c.len() == 2 && c[0] < c[1])
                    .map(|c| ext(c[0], c[1], object)).collect::<Vec<_>>()
            };
            let (lower, upper) = (make(&lo, 1), make(&up, 2));
            let got = overlay(&lower, &upper);
            let (bl, bu, bg) = (bytes(&lower, 64), bytes(&upper, 64), bytes(&got, 64));
            for b in 0..64 {
                proptest::prop_assert_eq!(bg[b], bu[b].or(bl[b]));
            }
            let leaf = Leaf { extents: got, inherit: None };
            proptest::prop_assert!(leaf.valid(64));
        }
    }

    #[test]
    fn decode_checks_shape() {
        let g = Geometry::new(64, 4, 1 << 12).unwrap();
        let inner = Node::Inner(vec![None; 4]).encode();
        let leaf_pos = Pos { level: 0, index: 1 };
        assert!(Node::decode(&inner, &g, leaf_pos).is_err());
        let bad = Node::Leaf(Leaf {
            extents: vec![ext(10, 70, 1)],
            inherit: None,
        });
        assert!(Node::decode(&bad.encode(), &g, leaf_pos).is_err());
        assert!(Node::decode(&[0xff, 0xff], &g, leaf_pos).is_err());
    }
}
