//! Striping: how a file's bytes map to objects and objects to servers.
//!
//! A file is `stripe_count` objects. Strip `s` (bytes `[s·S, (s+1)·S)` for stripe size `S`)
//! lives in object `s mod stripe_count` at object offset `(s div stripe_count)·S + (off mod S)`.
//! Object `o` lives on server `object_servers[o]`. Locks and data use the same map, so a
//! server is the lock authority exactly for the bytes it stores.
//!
//! **Invariants:** `stripe_size ≥ 1`; `1 ≤ stripe_count ≤ MAX_STRIPE_COUNT`; `file_offset`
//! and `object_offset` are inverse bijections between file offsets and (object, offset).

use crate::error::LayoutError;
use crate::range::{ByteRange, MAX_OFFSET};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The stripe size used unless a file says otherwise (as in PVFS and the paper's runs).
pub const DEFAULT_STRIPE_SIZE: u64 = 64 * 1024;
/// Most objects one file may be striped over.
pub const MAX_STRIPE_COUNT: usize = 4096;

/// Index of a server in a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServerId(pub u32);

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server {}", self.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawLayout", into = "RawLayout")]
pub struct Layout {
    stripe_size: u64,
    object_servers: Vec<ServerId>,
}

#[derive(Serialize, Deserialize)]
struct RawLayout {
    stripe_size: u64,
    object_servers: Vec<ServerId>,
}

impl TryFrom<RawLayout> for Layout {
    type Error = LayoutError;
    fn try_from(r: RawLayout) -> Result<Self, LayoutError> {
        Layout::new(r.stripe_size, r.object_servers)
    }
}

impl From<Layout> for RawLayout {
    fn from(l: Layout) -> Self {
        RawLayout {
            stripe_size: l.stripe_size,
            object_servers: l.object_servers,
        }
    }
}

/// A piece of a range that lies within one strip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub server: ServerId,
    pub object: u32,
    pub range: ByteRange,
}

impl Layout {
    pub fn new(stripe_size: u64, object_servers: Vec<ServerId>) -> Result<Self, LayoutError> {
        if stripe_size == 0 {
            return Err(LayoutError::InvalidLayout {
                what: "stripe size must be at least 1 byte".into(),
            });
        }
        if object_servers.is_empty() || object_servers.len() > MAX_STRIPE_COUNT {
            return Err(LayoutError::InvalidLayout {
                what: format!(
                    "stripe count {} must be between 1 and {MAX_STRIPE_COUNT}",
                    object_servers.len()
                ),
            });
        }
        Ok(Self {
            stripe_size,
            object_servers,
        })
    }

    /// Objects `0..stripe_count` on servers `first, first+1, …` modulo `server_count`.
    pub fn round_robin(
        stripe_size: u64,
        stripe_count: u32,
        server_count: u32,
        first_server: u32,
    ) -> Result<Self, LayoutError> {
        if server_count == 0 {
            return Err(LayoutError::InvalidLayout {
                what: "a layout needs at least one server".into(),
            });
        }
        let servers = (0..stripe_count)
            .map(|o| {
                ServerId(
                    ((u64::from(first_server) + u64::from(o)) % u64::from(server_count)) as u32,
                )
            })
            .collect();
        Self::new(stripe_size, servers)
    }

    pub fn stripe_size(&self) -> u64 {
        self.stripe_size
    }

    pub fn stripe_count(&self) -> u32 {
        self.object_servers.len() as u32
    }

    pub fn object_servers(&self) -> &[ServerId] {
        &self.object_servers
    }

    pub fn server_of_object(&self, object: u32) -> ServerId {
        self.object_servers[object as usize]
    }

    /// Distinct servers holding at least one object, ascending.
    pub fn servers(&self) -> Vec<ServerId> {
        let mut s = self.object_servers.clone();
        s.sort_unstable();
        s.dedup();
        s
    }

    pub fn strip_of(&self, offset: u64) -> u64 {
        offset / self.stripe_size
    }

    /// The bytes of strip `strip`, clamped at `MAX_OFFSET`.
    pub fn strip_range(&self, strip: u64) -> ByteRange {
        let start = strip.saturating_mul(self.stripe_size).min(MAX_OFFSET);
        let end = start.saturating_add(self.stripe_size).min(MAX_OFFSET);
        ByteRange { start, end }
    }

    pub fn object_of_strip(&self, strip: u64) -> u32 {
        (strip % self.object_servers.len() as u64) as u32
    }

    pub fn server_of(&self, offset: u64) -> ServerId {
        self.server_of_object(self.object_of_strip(self.strip_of(offset)))
    }

    /// (object, offset within the object) of a file offset.
    pub fn object_offset(&self, offset: u64) -> (u32, u64) {
        let strip = offset / self.stripe_size;
        let count = self.object_servers.len() as u64;
        let object = (strip % count) as u32;
        let row = strip / count;
        (object, row * self.stripe_size + offset % self.stripe_size)
    }

    /// Inverse of `object_offset`; `None` if the file offset would overflow.
    pub fn file_offset(&self, object: u32, object_offset: u64) -> Option<u64> {
        let row = object_offset / self.stripe_size;
        let strip = row
            .checked_mul(self.object_servers.len() as u64)?
            .checked_add(u64::from(object))?;
        strip
            .checked_mul(self.stripe_size)?
            .checked_add(object_offset % self.stripe_size)
    }

    /// How many bytes `object` holds when the file is `file_size` bytes long (one past the
    /// object offset of its last byte below `file_size`).
    pub fn object_size_for(&self, file_size: u64, object: u32) -> u64 {
        if file_size == 0 {
            return 0;
        }
        let count = self.object_servers.len() as u64;
        let last_strip = (file_size - 1) / self.stripe_size;
        let o = u64::from(object);
        // The last strip at or before `last_strip` that belongs to `object`.
        let col = last_strip % count;
        let strip = if o <= col {
            last_strip - (col - o)
        } else if last_strip + o >= count + col {
            last_strip - col - count + o
        } else {
            return 0;
        };
        let row = strip / count;
        if strip == last_strip {
            row * self.stripe_size + (file_size - 1) % self.stripe_size + 1
        } else {
            (row + 1) * self.stripe_size
        }
    }

    /// Cuts `range` at strip boundaries, in order.
    pub fn pieces(&self, range: ByteRange) -> Pieces<'_> {
        Pieces {
            layout: self,
            rest: range,
        }
    }

    /// Which objects `server` holds, as a mask indexed by object.
    pub fn owned_mask(&self, server: ServerId) -> Vec<bool> {
        self.object_servers.iter().map(|&s| s == server).collect()
    }
}

/// Iterator returned by `Layout::pieces`.
pub struct Pieces<'a> {
    layout: &'a Layout,
    rest: ByteRange,
}

impl Iterator for Pieces<'_> {
    type Item = Piece;
    fn next(&mut self) -> Option<Piece> {
        if self.rest.is_empty() {
            return None;
        }
        let strip = self.layout.strip_of(self.rest.start);
        let end = self.layout.strip_range(strip).end.min(self.rest.end);
        let object = self.layout.object_of_strip(strip);
        let piece = Piece {
            server: self.layout.server_of_object(object),
            object,
            range: ByteRange {
                start: self.rest.start,
                end,
            },
        };
        self.rest.start = end;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_offsets_round_trip() {
        let l = Layout::round_robin(100, 3, 2, 1).unwrap();
        for off in [0, 1, 99, 100, 250, 299, 300, 1234, 99_999] {
            let (o, oo) = l.object_offset(off);
            assert_eq!(l.file_offset(o, oo), Some(off), "offset {off}");
        }
        assert_eq!(l.server_of(0), ServerId(1));
        assert_eq!(l.server_of(100), ServerId(0));
        assert_eq!(l.server_of(200), ServerId(1));
        assert_eq!(l.servers(), vec![ServerId(0), ServerId(1)]);
    }

    #[test]
    fn pieces_cut_at_strip_boundaries() {
        let l = Layout::round_robin(10, 2, 2, 0).unwrap();
        let p: Vec<_> = l.pieces(ByteRange::new(5, 27).unwrap()).collect();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].range, ByteRange::new(5, 10).unwrap());
        assert_eq!(p[1].server, ServerId(1));
        assert_eq!(p[2].range, ByteRange::new(20, 27).unwrap());
    }

    #[test]
    fn object_sizes_match_a_byte_count() {
        for (stripe, count) in [(10u64, 3u32), (7, 1), (4, 5)] {
            let l = Layout::round_robin(stripe, count, count, 0).unwrap();
            for size in 0..120u64 {
                for o in 0..count {
                    let want = (0..size)
                        .filter(|&b| l.object_offset(b).0 == o)
                        .map(|b| l.object_offset(b).1 + 1)
                        .max()
                        .unwrap_or(0);
                    assert_eq!(
                        l.object_size_for(size, o),
                        want,
                        "stripe {stripe} count {count} size {size} object {o}"
                    );
                }
            }
        }
    }

    #[test]
    fn invalid_layouts_are_rejected() {
        assert!(Layout::new(0, vec![ServerId(0)]).is_err());
        assert!(Layout::new(10, vec![]).is_err());
        assert!(Layout::round_robin(10, 2, 0, 0).is_err());
    }
}
