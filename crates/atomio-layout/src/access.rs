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

    /// An explicit list of ranges (unstructured data), as an indexed pattern.
    pub fn from_list(list: &crate::RangeList) -> Result<Self, LayoutError> {
        let first = list
            .hull()
            .ok_or(LayoutError::EmptyRange { offset: 0 })?
            .start;
        let blocks = list
            .as_slice()
            .iter()
            .map(|r| crate::pattern::Block {
                disp: r.start - first,
                blocklen: r.len(),
            })
            .collect();
        Self::new(first, Pattern::hindexed(blocks, &Pattern::bytes(1)?)?)
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

impl Access {
    /// An MPI-IO file view's bytes for one call: the data bytes `[skip, skip + len)` of the
    /// stream `tile` (the filetype) makes when repeated every `tile.extent()` bytes from `base`
    /// (the view's displacement).
    ///
    /// The structure is kept: a partial first tile (a short list of its runs), the full tiles
    /// in between as one vector of `tile`, a partial last tile — never a list of every run.
    pub fn view_window(
        base: u64,
        tile: &Pattern,
        skip: u64,
        len: u64,
    ) -> Result<Self, LayoutError> {
        let size = tile.size();
        if size == 0 {
            return Err(LayoutError::InvalidPattern {
                what: "a file view's filetype must select at least one byte".into(),
            });
        }
        if len == 0 {
            return Err(LayoutError::EmptyRange { offset: skip });
        }
        let ext = tile.extent();
        if !tile.monotone() || tile.data_bounds().is_some_and(|(_, ub)| ub > ext) {
            return Err(LayoutError::NotMonotone {
                what: "a filetype's data must be increasing and lie within its extent".into(),
            });
        }
        let end = skip.checked_add(len).ok_or(LayoutError::Overflow {
            offset: skip,
            len,
            max: MAX_OFFSET,
        })?;
        let (t0, d0) = (skip / size, skip % size);
        let (t1, d1) = (end / size, end % size);
        let tile_at = |t: u64| {
            t.checked_mul(ext).ok_or(LayoutError::PatternOverflow {
                what: "view offset",
            })
        };
        // (displacement from base, pattern) in increasing order.
        let mut parts: Vec<(u64, Pattern)> = Vec::new();
        if t0 == t1 {
            parts.push((tile_at(t0)?, data_slice(tile, d0, d1)?));
        } else {
            let mut mid = t0;
            if d0 > 0 {
                parts.push((tile_at(t0)?, data_slice(tile, d0, size)?));
                mid = t0 + 1;
            }
            if t1 > mid {
                parts.push((tile_at(mid)?, Pattern::hvector(t1 - mid, 1, ext, tile)?));
            }
            if d1 > 0 {
                parts.push((tile_at(t1)?, data_slice(tile, 0, d1)?));
            }
        }
        let first = parts[0].0;
        let pattern = if parts.len() == 1 {
            parts.pop().expect("one part").1
        } else {
            let fields: Vec<(u64, u64, &Pattern)> =
                parts.iter().map(|(d, p)| (d - first, 1, p)).collect();
            Pattern::structure(&fields)?
        };
        let base = base.checked_add(first).ok_or(LayoutError::Overflow {
            offset: base,
            len: first,
            max: MAX_OFFSET,
        })?;
        Access::new(base, pattern)
    }
}

impl Access {
    /// How many data bytes of a file view (`tile` repeated every extent from `base`) lie at
    /// file offsets below `limit`: what MPI-IO needs for `MPI_SEEK_END`, `MPI_MODE_APPEND`
    /// and the count of a read that reaches the end of the file. O(depth) for vector-like
    /// filetypes whatever the file size.
    pub fn view_data_before(base: u64, tile: &Pattern, limit: u64) -> Result<u64, LayoutError> {
        let size = tile.size();
        let ext = tile.extent();
        if size == 0 {
            return Err(LayoutError::InvalidPattern {
                what: "a file view's filetype must select at least one byte".into(),
            });
        }
        if !tile.monotone() || tile.data_bounds().is_some_and(|(_, ub)| ub > ext) {
            return Err(LayoutError::NotMonotone {
                what: "a filetype's data must be increasing and lie within its extent".into(),
            });
        }
        if limit <= base {
            return Ok(0);
        }
        // size > 0 and data within the extent, so ext > 0; t * size <= t * ext <= x.
        let x = limit - base;
        let (t, r) = (x / ext, x % ext);
        Ok(t * size + tile.data_before(r))
    }
}

/// The runs of one copy of `tile` holding its data bytes `[from, to)`, as an explicit list.
fn data_slice(tile: &Pattern, from: u64, to: u64) -> Result<Pattern, LayoutError> {
    let mut at = 0u64;
    let mut blocks = Vec::new();
    for r in tile.runs(0) {
        let (s, e) = (at, at + r.len());
        at = e;
        if e <= from {
            continue;
        }
        if s >= to {
            break;
        }
        let lo = from.saturating_sub(s);
        let hi = r.len() - e.saturating_sub(to);
        blocks.push(crate::pattern::Block {
            disp: r.start + lo,
            blocklen: hi - lo,
        });
    }
    Pattern::hindexed(blocks, &Pattern::bytes(1)?)
}
