//! Lock descriptions: the bytes a lock request names, as sent (`LockDesc`: explicit
//! ranges, or a structured `WirePattern` with the file's layout) and as validated by the
//! server that receives them (`ValidDesc`: its own share, walked in increasing order by a
//! `DescCursor`). A wire description is raw; only `LockDesc::validate` makes a `ValidDesc`.

use crate::error::{ErrorCode, WireError};
use crate::limits::{MAX_RANGES_PER_REQUEST, MAX_RUNS_PER_PATTERN};
use atomio_layout::{Access, ByteRange, Layout, Node, Pattern, RangeList, ServerId};
use serde::{Deserialize, Serialize};

/// A structured lock description as sent: the access pattern plus the file's layout, so
/// the receiving server can work out its own share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WirePattern {
    pub base: u64,
    #[serde(deserialize_with = "crate::bounded::pattern_nodes")]
    pub nodes: Vec<Node>,
    pub stripe_size: u64,
    #[serde(deserialize_with = "crate::bounded::servers")]
    pub object_servers: Vec<ServerId>,
    /// Which server of `object_servers` the receiver is.
    pub server: ServerId,
}

impl WirePattern {
    pub fn new(access: &Access, layout: &Layout, server: ServerId) -> Self {
        Self {
            base: access.base(),
            nodes: access.pattern().nodes().to_vec(),
            stripe_size: layout.stripe_size(),
            object_servers: layout.object_servers().to_vec(),
            server,
        }
    }
}

/// What bytes one lock request covers at one server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockDesc {
    /// Explicit ranges in increasing order, non-empty, non-overlapping (POSIX and list
    /// methods; the client already cut them to this server's strips).
    Ranges(#[serde(deserialize_with = "crate::bounded::ranges")] Vec<ByteRange>),
    /// A structured description (datatype method).
    Pattern(WirePattern),
}

/// A lock description after validation.
#[derive(Clone, Debug)]
pub enum ValidDesc {
    Ranges(RangeList),
    Pattern {
        access: Access,
        layout: Layout,
        server: ServerId,
        /// `server`'s objects under `layout`, computed once.
        owned: atomio_layout::Owned,
    },
}

/// Most touching pattern pieces a lock server's cursor merges into one range: bounds the
/// cost of a seek (one per acquire and per work slice) whatever the pattern, at the price of
/// one more range per this many touching pieces.
const COALESCE_MAX: u64 = 1024;

impl ValidDesc {
    /// A structured description of `access` at `server` under `layout`.
    pub fn pattern(access: Access, layout: Layout, server: ServerId) -> Self {
        let owned = atomio_layout::Owned::new(&layout, server);
        ValidDesc::Pattern {
            access,
            layout,
            server,
            owned,
        }
    }
}

impl LockDesc {
    /// Checks every number against the rules and limits. `me`, when the server knows its
    /// own index, must match the one the description names.
    pub fn validate(self, me: Option<ServerId>) -> Result<ValidDesc, WireError> {
        match self {
            LockDesc::Ranges(ranges) => {
                if ranges.is_empty() {
                    return Err(WireError::new(
                        ErrorCode::InvalidArgument,
                        "a lock request needs at least one range",
                    ));
                }
                if ranges.len() > MAX_RANGES_PER_REQUEST {
                    return Err(WireError::new(
                        ErrorCode::LimitExceeded,
                        format!(
                            "{} ranges in one request; the limit is {MAX_RANGES_PER_REQUEST}",
                            ranges.len()
                        ),
                    ));
                }
                Ok(ValidDesc::Ranges(RangeList::from_disjoint_sorted(&ranges)?))
            }
            LockDesc::Pattern(w) => {
                let pattern = Pattern::from_nodes(w.nodes)?;
                let pattern_runs = pattern.run_count_upper();
                if pattern_runs > MAX_RUNS_PER_PATTERN {
                    return Err(WireError::new(
                        ErrorCode::LimitExceeded,
                        format!(
                            "pattern expands to up to {pattern_runs} runs; the limit is \
                             {MAX_RUNS_PER_PATTERN}"
                        ),
                    ));
                }
                if pattern.size() == 0 {
                    return Err(WireError::new(
                        ErrorCode::InvalidArgument,
                        "a lock pattern must select at least one byte",
                    ));
                }
                let access = Access::new(w.base, pattern)?;
                let layout = Layout::new(w.stripe_size, w.object_servers)?;
                if !layout.object_servers().contains(&w.server) {
                    return Err(WireError::new(
                        ErrorCode::InvalidArgument,
                        format!("{} holds no object of the layout it was sent", w.server),
                    ));
                }
                // The server walks its share stripe by stripe: each stripe boundary inside
                // the hull can cut a run in two. Bound that cost like the runs themselves
                // (fuzzing found a 300-byte request with 2-byte stripes over 65 MB that kept
                // a server busy for over a minute).
                let span = access.hull().map_or(0, |h| h.end - h.start);
                let pieces = pattern_runs.saturating_add(span / layout.stripe_size());
                if pieces > MAX_RUNS_PER_PATTERN {
                    return Err(WireError::new(
                        ErrorCode::LimitExceeded,
                        format!(
                            "cut at {}-byte stripes this pattern can cost up to {pieces} \
                             pieces at a server; the limit is {MAX_RUNS_PER_PATTERN} (use \
                             larger stripes or a list description)",
                            layout.stripe_size()
                        ),
                    ));
                }
                if let Some(me) = me {
                    if me != w.server {
                        return Err(WireError::new(
                            ErrorCode::InvalidArgument,
                            format!("request addressed to {} reached {me}", w.server),
                        ));
                    }
                }
                Ok(ValidDesc::pattern(access, layout, w.server))
            }
        }
    }
}

/// An in-order cursor over the bytes a validated description covers at its server.
// Short-lived stack values: boxing the pattern cursor would bring back the allocation per
// query that its inline frame stack exists to avoid.
#[allow(clippy::large_enum_variant)]
pub enum DescCursor<'a> {
    Ranges(atomio_layout::RangeListCursor<'a>),
    Pattern(atomio_layout::Share<'a, atomio_layout::Runs<'a>>),
}

impl atomio_layout::RangeCursor for DescCursor<'_> {
    #[inline]
    fn next_range(&mut self) -> Option<ByteRange> {
        match self {
            DescCursor::Ranges(c) => c.next_range(),
            DescCursor::Pattern(c) => c.next_range(),
        }
    }

    fn seek(&mut self, offset: u64) {
        match self {
            DescCursor::Ranges(c) => c.seek(offset),
            DescCursor::Pattern(c) => c.seek(offset),
        }
    }
}

impl ValidDesc {
    /// The bytes of this description that its server owns, in increasing order.
    pub fn cursor(&self) -> DescCursor<'_> {
        match self {
            ValidDesc::Ranges(list) => DescCursor::Ranges(list.cursor()),
            ValidDesc::Pattern {
                access,
                layout,
                owned,
                ..
            } => DescCursor::Pattern(atomio_layout::Share::borrowed(
                access.ranges().coalescing_at_most(COALESCE_MAX),
                layout,
                owned,
            )),
        }
    }

    /// The access of a structured description (`None` for explicit ranges).
    pub fn access(&self) -> Option<&Access> {
        match self {
            ValidDesc::Ranges(_) => None,
            ValidDesc::Pattern { access, .. } => Some(access),
        }
    }

    /// One past the last byte this description may cover (an upper bound: a structured
    /// description's whole access, not only its server's share).
    pub fn end_bound(&self) -> u64 {
        match self {
            ValidDesc::Ranges(list) => list.as_slice().last().map_or(0, |r| r.end),
            ValidDesc::Pattern { access, .. } => access
                .pattern()
                .data_bounds()
                .map_or(0, |(_, ub)| access.base().saturating_add(ub)),
        }
    }

    /// The first byte at or after `offset` that this description covers at its server.
    pub fn first_at_or_after(&self, offset: u64) -> Option<u64> {
        use atomio_layout::RangeCursor;
        let mut c = self.cursor();
        c.seek(offset);
        c.next_range().map(|r| r.start)
    }

    /// The last byte in `[lo, x)` that this description covers at its server, found by
    /// binary search over forward seeks: O(log(x − lo) · pattern depth), no backward cursor.
    pub fn last_before(&self, x: u64, lo: u64) -> Option<u64> {
        let first = self.first_at_or_after(lo).filter(|&b| b < x)?;
        // Invariant: first_at_or_after(good) < x; bad is x or a y with first_at_or_after(y) ≥ x.
        let (mut good, mut bad) = (first, x);
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            if self.first_at_or_after(mid).is_some_and(|b| b < x) {
                good = mid;
            } else {
                bad = mid;
            }
        }
        // `good` is covered: were it not, first_at_or_after(good) would be a larger answer.
        Some(good)
    }

    /// The wire form of this description.
    pub fn to_wire(&self) -> LockDesc {
        match self {
            ValidDesc::Ranges(list) => LockDesc::Ranges(list.as_slice().to_vec()),
            ValidDesc::Pattern {
                access,
                layout,
                server,
                ..
            } => LockDesc::Pattern(WirePattern::new(access, layout, *server)),
        }
    }
}
