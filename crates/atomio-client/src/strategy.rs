//! Atomicity strategies, by name, and the locks each one takes for an access.
//!
//! | name | locks for one call |
//! |---|---|
//! | `none` | nothing (no atomicity: the upper bound) |
//! | `whole-file` | one exclusive lock on the whole file, at the file's metadata server |
//! | `bounding-extent` | one lock from the call's first to last byte, at the metadata server (what ROMIO and OMPIO do with `fcntl`) |
//! | `block:<bytes>` / `block:stripe` | every range rounded out to whole blocks (pages or stripes, as Lustre and GPFS lock), on the striped lock servers, list method, one-try: exactly `ching:list:one-try` plus the rounding, so the difference is false sharing |
//! | `ching:<method>:<protocol>` | Ching et al.'s byte-range locks: method `posix`, `list`, `list/N`, `datatype`; protocol `two-phase`, `one-try`, `alt-try` |
//! | `posix-fcntl` | not a cluster strategy: one ordinary local file, `fcntl(F_SETLKW)` over the bounding extent, one `pwrite` per piece (ROMIO's UFS atomic path without MPI) |
//!
//! **Invariant:** a strategy's lock plan covers every byte the call touches (the coarse ones
//! cover more); `name()` and `FromStr` are inverse.

use atomio_layout::{Access, ByteRange, Layout, RangeList, ServerId, MAX_OFFSET};
use atomio_lock::{plan, Method, Protocol, SubRequest, DEFAULT_LIST_RANGES};
use atomio_proto::{ErrorCode, ValidDesc, WireError};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockSize {
    Bytes(u64),
    /// The file's stripe size.
    Stripe,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    None,
    WholeFile,
    BoundingExtent,
    Block(BlockSize),
    Ching { method: Method, protocol: Protocol },
    PosixFcntl,
}

impl Strategy {
    /// Every Ching combination.
    pub fn ching_all() -> Vec<Strategy> {
        Method::ALL
            .iter()
            .flat_map(|&method| {
                Protocol::ALL
                    .iter()
                    .map(move |&protocol| Strategy::Ching { method, protocol })
            })
            .collect()
    }

    /// True for strategies that run on an atomio cluster (all but `posix-fcntl`).
    pub fn on_cluster(&self) -> bool {
        !matches!(self, Strategy::PosixFcntl)
    }

    pub fn is_atomic(&self) -> bool {
        !matches!(self, Strategy::None)
    }

    pub fn name(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::None => f.write_str("none"),
            Strategy::WholeFile => f.write_str("whole-file"),
            Strategy::BoundingExtent => f.write_str("bounding-extent"),
            Strategy::Block(BlockSize::Bytes(n)) => write!(f, "block:{n}"),
            Strategy::Block(BlockSize::Stripe) => f.write_str("block:stripe"),
            Strategy::Ching { method, protocol } => match method {
                Method::List { max_ranges } if *max_ranges != DEFAULT_LIST_RANGES => {
                    write!(f, "ching:list/{max_ranges}:{protocol}")
                }
                m => write!(f, "ching:{m}:{protocol}"),
            },
            Strategy::PosixFcntl => f.write_str("posix-fcntl"),
        }
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => return Ok(Strategy::None),
            "whole-file" => return Ok(Strategy::WholeFile),
            "bounding-extent" => return Ok(Strategy::BoundingExtent),
            "posix-fcntl" => return Ok(Strategy::PosixFcntl),
            "block:stripe" => return Ok(Strategy::Block(BlockSize::Stripe)),
            _ => {}
        }
        if let Some(n) = s.strip_prefix("block:") {
            return match n.parse::<u64>() {
                Ok(n) if n > 0 => Ok(Strategy::Block(BlockSize::Bytes(n))),
                _ => Err(format!(
                    "'{s}': a block size is a positive number of bytes or 'stripe'"
                )),
            };
        }
        if let Some(rest) = s.strip_prefix("ching:") {
            let (m, p) = rest
                .split_once(':')
                .ok_or_else(|| format!("'{s}': expected ching:<method>:<protocol>"))?;
            return Ok(Strategy::Ching {
                method: m.parse()?,
                protocol: p.parse()?,
            });
        }
        Err(format!(
            "unknown strategy '{s}' (expected none, whole-file, bounding-extent, block:<bytes>|block:stripe, \
             ching:<posix|list|list/N|datatype>:<two-phase|one-try|alt-try>, or posix-fcntl)"
        ))
    }
}

/// The locks `strategy` takes for `access` on a file with `layout` whose metadata server is
/// `central`: `None` when it takes none.
pub fn lock_plan(
    strategy: Strategy,
    access: &Access,
    layout: &Layout,
    central: ServerId,
) -> Result<Option<(Protocol, Vec<SubRequest>)>, WireError> {
    let Some(hull) = access.hull() else {
        return Ok(None);
    };
    let one = |r: ByteRange| {
        Ok::<_, WireError>(Some((
            Protocol::TwoPhase,
            vec![SubRequest {
                server: central,
                first: r.start,
                desc: ValidDesc::Ranges(RangeList::from_disjoint_sorted(&[r])?),
            }],
        )))
    };
    match strategy {
        Strategy::None => Ok(None),
        Strategy::WholeFile => one(ByteRange::new(0, MAX_OFFSET)?),
        Strategy::BoundingExtent => one(hull),
        Strategy::Block(size) => {
            let b = match size {
                BlockSize::Bytes(n) => n,
                BlockSize::Stripe => layout.stripe_size(),
            };
            let rounded = RangeList::from_ranges(
                access
                    .ranges()
                    .map(|r| {
                        let start = r.start / b * b;
                        let end = r.end.div_ceil(b).saturating_mul(b).min(MAX_OFFSET);
                        ByteRange { start, end }
                    })
                    .collect(),
            );
            let as_access = Access::from_list(&rounded)?;
            let method = Method::List {
                max_ranges: DEFAULT_LIST_RANGES,
            };
            Ok(Some((Protocol::OneTry, plan(&as_access, layout, method))))
        }
        Strategy::Ching { method, protocol } => Ok(Some((protocol, plan(access, layout, method)))),
        Strategy::PosixFcntl => Err(WireError::new(
            ErrorCode::InvalidArgument,
            "posix-fcntl works on a local file, not on an atomio cluster",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_layout::Pattern;

    #[test]
    fn names_round_trip() {
        let mut all = vec![
            Strategy::None,
            Strategy::WholeFile,
            Strategy::BoundingExtent,
            Strategy::Block(BlockSize::Bytes(4096)),
            Strategy::Block(BlockSize::Stripe),
            Strategy::PosixFcntl,
            Strategy::Ching {
                method: Method::List { max_ranges: 16 },
                protocol: Protocol::AltTry,
            },
        ];
        all.extend(Strategy::ching_all());
        for s in all {
            assert_eq!(s.to_string().parse::<Strategy>(), Ok(s), "{s}");
        }
        assert!("block:0".parse::<Strategy>().is_err());
        assert!("ching:datatype".parse::<Strategy>().is_err());
        assert!("fcntl".parse::<Strategy>().is_err());
    }

    #[test]
    fn block_rounding_covers_more_than_the_access() {
        let layout = Layout::round_robin(65536, 2, 2, 0).unwrap();
        let a = Access::new(
            100,
            Pattern::hvector(3, 1, 10_000, &Pattern::bytes(10).unwrap()).unwrap(),
        )
        .unwrap();
        let (_, subs) = lock_plan(
            Strategy::Block(BlockSize::Bytes(4096)),
            &a,
            &layout,
            ServerId(0),
        )
        .unwrap()
        .unwrap();
        let mut covered: Vec<ByteRange> = Vec::new();
        for s in &subs {
            if let ValidDesc::Ranges(l) = &s.desc {
                covered.extend_from_slice(l.as_slice());
            }
        }
        let covered = RangeList::from_ranges(covered);
        assert_eq!(
            covered.as_slice(),
            &[
                ByteRange::new(0, 4096).unwrap(),
                ByteRange::new(8192, 12288).unwrap(),
                ByteRange::new(16384, 20480).unwrap()
            ]
        );
    }
}
