//! A file access: a monotone pattern placed at a base offset.
//!
//! **Invariant:** an `Access` always has a monotone pattern (its runs are increasing and
//! disjoint) and `base + data upper bound ≤ MAX_OFFSET`, so its cursor can seek and every
//! offset it yields is a valid file offset.

use crate::error::LayoutError;
use crate::pattern::Pattern;
use crate::range::{ByteRange, MAX_OFFSET};
use crate::runs::Runs;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawAccess", into = "RawAccess")]
pub struct Access {
    base: u64,
    pattern: Pattern,
}

#[derive(Serialize, Deserialize)]
struct RawAccess {
    base: u64,
    pattern: Pattern,
}

impl TryFrom<RawAccess> for Access {
    type Error = LayoutError;
    fn try_from(r: RawAccess) -> Result<Self, LayoutError> {
        Access::new(r.base, r.pattern)
    }
}

impl From<Access> for RawAccess {
    fn from(a: Access) -> Self {
        RawAccess {
            base: a.base,
            pattern: a.pattern,
        }
    }
}

impl Access {
    pub fn new(base: u64, pattern: Pattern) -> Result<Self, LayoutError> {
        if !pattern.monotone() {
            return Err(LayoutError::NotMonotone {
                what: "a file access pattern must have increasing, non-overlapping offsets".into(),
            });
        }
        let reach = pattern
            .data_bounds()
            .map_or(0, |(_, ub)| ub)
            .max(pattern.extent());
        match base.checked_add(reach) {
            Some(end) if end <= MAX_OFFSET => Ok(Self { base, pattern }),
            _ => Err(LayoutError::Overflow {
                offset: base,
                len: reach,
                max: MAX_OFFSET,
            }),
        }
    }

    /// One contiguous range.
    pub fn contiguous(range: ByteRange) -> Result<Self, LayoutError> {
        Self::new(range.start, Pattern::bytes(range.len())?)
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// Bytes selected.
    pub fn size(&self) -> u64 {
        self.pattern.size()
    }

    /// First to last selected byte, `None` when empty.
    pub fn hull(&self) -> Option<ByteRange> {
        let (lb, ub) = self.pattern.data_bounds()?;
        Some(ByteRange {
            start: self.base + lb,
            end: self.base + ub,
        })
    }

    /// The selected ranges in increasing order; seekable.
    pub fn ranges(&self) -> Runs<'_> {
        self.pattern.runs(self.base)
    }
}
