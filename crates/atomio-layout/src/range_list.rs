//! Normalized range lists and the `RangeCursor` trait shared by every in-order range source.
//!
//! **Invariant:** a `RangeList` is sorted by start, holds no empty range, and no two of its
//! ranges overlap or touch (touching ranges are merged). Lookups are binary searches.

use crate::error::LayoutError;
use crate::range::ByteRange;
use serde::{Deserialize, Serialize};

/// An in-order, seekable source of disjoint non-empty byte ranges.
///
/// `next` yields ranges in increasing offset order. `seek(off)` repositions the cursor so the
/// following ranges are exactly the source's bytes at or after `off` (a range straddling `off`
/// comes back clipped to start at `off`). Seeking backwards is allowed.
pub trait RangeCursor {
    fn next_range(&mut self) -> Option<ByteRange>;
    fn seek(&mut self, offset: u64);
}

/// A sorted, merged list of byte ranges. Decoding validates every range and normalizes,
/// so a `RangeList` read from outside upholds the invariant too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<ByteRange>", into = "Vec<ByteRange>")]
pub struct RangeList {
    ranges: Vec<ByteRange>,
}

impl TryFrom<Vec<ByteRange>> for RangeList {
    type Error = LayoutError;
    fn try_from(v: Vec<ByteRange>) -> Result<Self, LayoutError> {
        for r in &v {
            r.validate()?;
        }
        Ok(Self::from_ranges(v))
    }
}

impl From<RangeList> for Vec<ByteRange> {
    fn from(l: RangeList) -> Self {
        l.ranges
    }
}

impl RangeList {
    pub fn new() -> Self {
        Self::default()
    }

    /// Normalizes any ranges: sorts, drops empties and merges overlapping or touching ones.
    pub fn from_ranges(mut ranges: Vec<ByteRange>) -> Self {
        ranges.retain(|r| !r.is_empty());
        ranges.sort_unstable();
        let mut out: Vec<ByteRange> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match out.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => out.push(r),
            }
        }
        Self { ranges: out }
    }

    /// Builds a list from ranges that must already be sorted, non-empty and non-overlapping;
    /// touching ranges are merged. Used where overlap within one call is an error.
    pub fn from_disjoint_sorted(ranges: &[ByteRange]) -> Result<Self, LayoutError> {
        let mut out: Vec<ByteRange> = Vec::with_capacity(ranges.len());
        for &r in ranges {
            let r = r.validate()?;
            if r.is_empty() {
                return Err(LayoutError::EmptyRange { offset: r.start });
            }
            match out.last_mut() {
                Some(last) if r.start < last.end => {
                    return Err(LayoutError::NotMonotone {
                        what: format!("range {r} overlaps or precedes {last}"),
                    })
                }
                Some(last) if r.start == last.end => last.end = r.end,
                _ => out.push(r),
            }
        }
        Ok(Self { ranges: out })
    }

    pub fn as_slice(&self) -> &[ByteRange] {
        &self.ranges
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn total_bytes(&self) -> u64 {
        self.ranges.iter().map(ByteRange::len).sum()
    }

    pub fn hull(&self) -> Option<ByteRange> {
        Some(ByteRange {
            start: self.ranges.first()?.start,
            end: self.ranges.last()?.end,
        })
    }

    /// Index of the first range that ends after `offset`.
    pub fn first_ending_after(&self, offset: u64) -> usize {
        self.ranges.partition_point(|r| r.end <= offset)
    }

    /// True when any byte of `range` is in the list.
    pub fn overlaps(&self, range: &ByteRange) -> bool {
        let i = self.first_ending_after(range.start);
        self.ranges.get(i).is_some_and(|r| r.start < range.end)
    }

    /// True when `offset` is in the list.
    pub fn contains(&self, offset: u64) -> bool {
        let i = self.first_ending_after(offset);
        self.ranges.get(i).is_some_and(|r| r.start <= offset)
    }

    pub fn cursor(&self) -> RangeListCursor<'_> {
        RangeListCursor {
            ranges: &self.ranges,
            index: 0,
            clip: 0,
        }
    }
}

/// A `RangeCursor` over a borrowed sorted slice of disjoint ranges.
#[derive(Clone, Debug)]
pub struct RangeListCursor<'a> {
    ranges: &'a [ByteRange],
    index: usize,
    clip: u64,
}

impl<'a> RangeListCursor<'a> {
    /// A cursor over a slice the caller guarantees to be sorted and disjoint.
    pub fn over(ranges: &'a [ByteRange]) -> Self {
        Self {
            ranges,
            index: 0,
            clip: 0,
        }
    }
}

impl RangeCursor for RangeListCursor<'_> {
    fn next_range(&mut self) -> Option<ByteRange> {
        let r = *self.ranges.get(self.index)?;
        self.index += 1;
        Some(ByteRange {
            start: r.start.max(self.clip),
            end: r.end,
        })
    }

    fn seek(&mut self, offset: u64) {
        self.index = self.ranges.partition_point(|r| r.end <= offset);
        self.clip = offset;
    }
}

impl Iterator for RangeListCursor<'_> {
    type Item = ByteRange;
    fn next(&mut self) -> Option<ByteRange> {
        self.next_range()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: u64, e: u64) -> ByteRange {
        ByteRange::new(s, e).unwrap()
    }

    #[test]
    fn normalization_sorts_merges_and_drops_empties() {
        let l = RangeList::from_ranges(vec![r(10, 20), r(0, 5), r(5, 7), r(15, 30), r(40, 40)]);
        assert_eq!(l.as_slice(), &[r(0, 7), r(10, 30)]);
        assert_eq!(l.total_bytes(), 27);
        assert!(l.overlaps(&r(6, 8)) && !l.overlaps(&r(7, 10)));
        assert!(l.contains(29) && !l.contains(30));
    }

    #[test]
    fn disjoint_sorted_rejects_overlap_and_empty() {
        assert!(RangeList::from_disjoint_sorted(&[r(0, 5), r(4, 6)]).is_err());
        assert!(RangeList::from_disjoint_sorted(&[r(0, 5), r(6, 6)]).is_err());
        assert_eq!(
            RangeList::from_disjoint_sorted(&[r(0, 5), r(5, 6)])
                .unwrap()
                .as_slice(),
            &[r(0, 6)]
        );
    }

    #[test]
    fn cursor_seek_clips_the_straddling_range() {
        let l = RangeList::from_ranges(vec![r(0, 10), r(20, 30)]);
        let mut c = l.cursor();
        c.seek(25);
        assert_eq!(c.next_range(), Some(r(25, 30)));
        assert_eq!(c.next_range(), None);
        c.seek(10);
        assert_eq!(c.next_range(), Some(r(20, 30)));
        c.seek(0);
        assert_eq!(c.next_range(), Some(r(0, 10)));
    }
}
