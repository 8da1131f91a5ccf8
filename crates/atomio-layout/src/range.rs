//! Half-open byte ranges with overflow-checked construction.
//!
//! **Invariant:** every `ByteRange` satisfies `start <= end <= MAX_OFFSET`. Arithmetic that
//! could leave that space is checked and reported, never wrapped.

use crate::error::LayoutError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest byte offset (exclusive end) atomio accepts: the largest value of a signed
/// 64-bit `off_t`, so every range can also be handed to POSIX and MPI calls.
pub const MAX_OFFSET: u64 = i64::MAX as u64;

/// The bytes `[start, end)` of a file or object.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    /// A range from its two ends; `end < start` or `end > MAX_OFFSET` is an error.
    pub fn new(start: u64, end: u64) -> Result<Self, LayoutError> {
        if end < start {
            return Err(LayoutError::EndBeforeStart { start, end });
        }
        if end > MAX_OFFSET {
            return Err(LayoutError::Overflow {
                offset: start,
                len: end - start,
                max: MAX_OFFSET,
            });
        }
        Ok(Self { start, end })
    }

    /// A range from an offset and a length; overflow past `MAX_OFFSET` is an error.
    pub fn at(offset: u64, len: u64) -> Result<Self, LayoutError> {
        match offset.checked_add(len) {
            Some(end) if end <= MAX_OFFSET => Ok(Self { start: offset, end }),
            _ => Err(LayoutError::Overflow {
                offset,
                len,
                max: MAX_OFFSET,
            }),
        }
    }

    /// Checks a range that came from outside (decoded from the wire): the same rules as `new`.
    pub fn validate(self) -> Result<Self, LayoutError> {
        Self::new(self.start, self.end)
    }

    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub fn overlaps(&self, other: &ByteRange) -> bool {
        self.start < other.end && other.start < self.end
    }

    pub fn contains(&self, offset: u64) -> bool {
        self.start <= offset && offset < self.end
    }

    /// The common bytes of two ranges, if any.
    pub fn intersect(&self, other: &ByteRange) -> Option<ByteRange> {
        let start = self.start.max(other.start);
        let end = self.end.min(other.end);
        (start < end).then_some(ByteRange { start, end })
    }
}

impl fmt::Debug for ByteRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

impl fmt::Display for ByteRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_rejects_inverted_and_overflowing_ranges() {
        assert!(matches!(
            ByteRange::new(10, 5),
            Err(LayoutError::EndBeforeStart { .. })
        ));
        assert!(matches!(
            ByteRange::at(u64::MAX - 1, 10),
            Err(LayoutError::Overflow { .. })
        ));
        assert!(matches!(
            ByteRange::at(MAX_OFFSET, 1),
            Err(LayoutError::Overflow { .. })
        ));
        assert_eq!(ByteRange::at(MAX_OFFSET - 1, 1).unwrap().end, MAX_OFFSET);
        assert_eq!(ByteRange::at(5, 3).unwrap(), ByteRange { start: 5, end: 8 });
    }

    #[test]
    fn overlap_and_intersection_are_half_open() {
        let a = ByteRange::new(0, 10).unwrap();
        let b = ByteRange::new(10, 20).unwrap();
        let c = ByteRange::new(5, 15).unwrap();
        assert!(!a.overlaps(&b));
        assert!(a.overlaps(&c) && c.overlaps(&b));
        assert_eq!(a.intersect(&b), None);
        assert_eq!(a.intersect(&c), Some(ByteRange::new(5, 10).unwrap()));
    }
}
