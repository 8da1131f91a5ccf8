//! The shape of a versioned file's segment trees: chunk size, fan-out, depth.
//!
//! Leaves (level 0) cover one chunk each; a node at level `l` covers `chunk × fanout^l`
//! bytes; the root (level `levels - 1`) covers the whole span. Every snapshot of a file has
//! the same geometry, which is what lets a writer name a node of another version by its
//! position alone (a forward reference) before that node exists.
//!
//! The paper's tree is binary. atomio's fan-out is configurable and defaults to 64: a
//! binary tree over 1 TiB of 256 KiB chunks is 23 levels — 23 dependent round trips for a
//! reader whose cache holds nothing of a new snapshot — where fan-out 64 needs 5.
//!
//! **Invariants:** `chunk ≥ 1` and fits a `u32` (leaf extents are chunk-relative `u32`s);
//! `2 ≤ fanout ≤ 1024`; `span = chunk × fanout^(levels-1) ≥` the size the file was made for,
//! computed in `u128` so no level's cover overflows.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Geometry {
    pub chunk: u64,
    pub fanout: u32,
    pub levels: u8,
}

/// A tree position: the `index`-th node of `level` (covering
/// `[index × cover(level), (index + 1) × cover(level))`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pos {
    pub level: u8,
    pub index: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    #[error("chunk size {0} must be between 1 byte and 4 GiB")]
    Chunk(u64),
    #[error("fan-out {0} must be between 2 and 1024")]
    Fanout(u32),
    #[error("byte {offset} is past the versioned span of {span} bytes")]
    PastSpan { offset: u64, span: u128 },
}

/// Default chunk size: large enough that a 1 GiB write is 4,096 leaves, small enough that a
/// tile's rows share few chunks with other tiles.
pub const DEFAULT_CHUNK: u64 = 256 << 10;
pub const DEFAULT_FANOUT: u32 = 64;
/// Default span: 1 TiB (5 levels at the default chunk and fan-out).
pub const DEFAULT_SPAN: u64 = 1 << 40;

impl Default for Geometry {
    fn default() -> Self {
        Self::new(DEFAULT_CHUNK, DEFAULT_FANOUT, DEFAULT_SPAN).expect("defaults are valid")
    }
}

impl Geometry {
    /// The smallest tree of `chunk`-byte leaves and `fanout` that spans `max_size` bytes.
    pub fn new(chunk: u64, fanout: u32, max_size: u64) -> Result<Self, GeometryError> {
        if chunk == 0 || chunk > u32::MAX as u64 + 1 {
            return Err(GeometryError::Chunk(chunk));
        }
        if !(2..=1024).contains(&fanout) {
            return Err(GeometryError::Fanout(fanout));
        }
        let mut levels = 1u8;
        let mut span = chunk as u128;
        while span < max_size as u128 {
            span *= fanout as u128;
            levels += 1;
        }
        Ok(Self {
            chunk,
            fanout,
            levels,
        })
    }

    /// Checks a geometry that came from outside (decoded from the wire).
    pub fn validate(self) -> Result<Self, GeometryError> {
        if self.chunk == 0 || self.chunk > u32::MAX as u64 + 1 {
            return Err(GeometryError::Chunk(self.chunk));
        }
        if !(2..=1024).contains(&self.fanout) {
            return Err(GeometryError::Fanout(self.fanout));
        }
        if self.levels == 0 || self.cover_u128(self.levels - 1).is_none() {
            return Err(GeometryError::Fanout(self.fanout));
        }
        Ok(self)
    }

    fn cover_u128(&self, level: u8) -> Option<u128> {
        let mut c = self.chunk as u128;
        for _ in 0..level {
            c = c.checked_mul(self.fanout as u128)?;
        }
        Some(c)
    }

    /// Bytes a node of `level` covers.
    pub fn cover(&self, level: u8) -> u128 {
        self.cover_u128(level).expect("validated geometry")
    }

    /// Bytes the whole tree covers.
    pub fn span(&self) -> u128 {
        self.cover(self.levels - 1)
    }

    pub fn root(&self) -> Pos {
        Pos {
            level: self.levels - 1,
            index: 0,
        }
    }

    /// The bytes a position covers, clipped to `u64` (a span past 2^64 is never written).
    pub fn range(&self, p: Pos) -> (u64, u64) {
        let c = self.cover(p.level);
        let start = (p.index as u128 * c).min(u64::MAX as u128) as u64;
        let end = ((p.index as u128 + 1) * c).min(u64::MAX as u128) as u64;
        (start, end)
    }

    /// The leaf (chunk index) holding byte `offset`.
    pub fn block(&self, offset: u64) -> u64 {
        offset / self.chunk
    }

    /// The position at `level` above leaf `block`.
    pub fn ancestor(&self, block: u64, level: u8) -> Pos {
        let mut index = block;
        for _ in 0..level {
            index /= self.fanout as u64;
        }
        Pos { level, index }
    }

    /// The `j`-th child of an inner position.
    pub fn child(&self, p: Pos, j: u32) -> Pos {
        Pos {
            level: p.level - 1,
            index: p.index * self.fanout as u64 + j as u64,
        }
    }

    /// Refuses a byte the tree cannot describe.
    pub fn check(&self, end: u64) -> Result<(), GeometryError> {
        if end as u128 > self.span() {
            return Err(GeometryError::PastSpan {
                offset: end,
                span: self.span(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_tree_spans_1_tib_in_five_levels() {
        let g = Geometry::default();
        assert_eq!(g.levels, 5);
        assert!(g.span() >= DEFAULT_SPAN as u128);
        assert_eq!(g.range(g.root()), (0, g.span() as u64));
    }

    #[test]
    fn ancestors_and_children_agree() {
        let g = Geometry::new(4, 3, 1000).unwrap();
        for block in 0..200 {
            for level in 1..g.levels {
                let a = g.ancestor(block, level);
                let below = g.ancestor(block, level - 1);
                let j = (below.index % 3) as u32;
                assert_eq!(g.child(a, j), below);
                let (s, e) = g.range(a);
                assert!(s <= block * 4 && block * 4 + 4 <= e);
            }
        }
    }

    #[test]
    fn bad_geometries_are_refused() {
        assert!(Geometry::new(0, 32, 1).is_err());
        assert!(Geometry::new(1, 1, 1).is_err());
        assert!(Geometry::new(1 << 33, 32, 1).is_err());
        let g = Geometry {
            chunk: 1 << 20,
            fanout: 1024,
            levels: 40,
        };
        assert!(g.validate().is_err());
        assert!(Geometry::new(16, 2, 64).unwrap().check(65).is_err());
    }
}
