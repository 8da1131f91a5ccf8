//! Lock methods: how a client turns one access into lock requests (Ching et al. §3).
//!
//! * `Posix`: one request per contiguous piece (a range cut at strip boundaries): what a
//!   client limited to POSIX `fcntl`-style locks must do.
//! * `List`: per server, the pieces in offset order, in requests of at most `max_ranges`
//!   ranges (64 in the paper).
//! * `Datatype`: one request per server holding the whole structured description; the server
//!   works out its own share (arithmetically, see `atomio_layout::share`).
//!
//! **Invariant:** the sub-requests of a plan cover exactly the access's bytes, each byte in
//! exactly one sub-request, addressed to the server that owns it under the layout.

use atomio_layout::{Access, ByteRange, Layout, RangeList, ServerId, Share};
use atomio_proto::ValidDesc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The paper's split point for list lock requests.
pub const DEFAULT_LIST_RANGES: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Method {
    Posix,
    List { max_ranges: usize },
    Datatype,
}

impl Method {
    pub const ALL: [Method; 3] = [
        Method::Posix,
        Method::List {
            max_ranges: DEFAULT_LIST_RANGES,
        },
        Method::Datatype,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Method::Posix => "posix",
            Method::List { .. } => "list",
            Method::Datatype => "datatype",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = String;
    /// `posix`, `list`, `list/N` (N ranges per request) or `datatype`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "posix" => Ok(Method::Posix),
            "list" => Ok(Method::List {
                max_ranges: DEFAULT_LIST_RANGES,
            }),
            "datatype" => Ok(Method::Datatype),
            _ => match s.strip_prefix("list/").map(str::parse::<usize>) {
                Some(Ok(n)) if (1..=atomio_proto::limits::MAX_RANGES_PER_REQUEST).contains(&n) => {
                    Ok(Method::List { max_ranges: n })
                }
                _ => Err(format!(
                    "unknown lock method '{s}' (expected posix, list, list/N with 1 ≤ N ≤ {}, or datatype)",
                    atomio_proto::limits::MAX_RANGES_PER_REQUEST
                )),
            },
        }
    }
}

/// One lock request the client will make at one server.
#[derive(Clone, Debug)]
pub struct SubRequest {
    pub server: ServerId,
    pub desc: ValidDesc,
    /// The first byte it covers (the order in which two-phase rounds visit it).
    pub first: u64,
    /// The sub-request's tier: two-phase rounds visit sub-requests by (tier, first byte).
    /// `plan` gives each server its own tier (`server_tier`); 0 everywhere is the paper's
    /// offset order. A byte must get the same tier from every client (see `protocol`).
    pub tier: u32,
}

/// The tier of every sub-request at `server`: blocked clients wait server by server.
///
/// Ching's two-phase rounds visit bytes in offset order, so a client whose bytes are
/// striped over S servers waits once per stripe unit it crosses (one bounded blocking
/// acquire each: 136 rounds for 8 MiB over 8 servers of 64 KiB stripes), and a failed
/// one-try pays them all. By server, it waits at most once per server and keeps every
/// grant from the servers before (16 messages for the same locks). Measured with 8
/// clients sharing 25–100 % of 128 Ki locks (`bench locks`, TCP): one-try 3–4x and
/// two-phase 2–4x faster under contention, the same at 0 %. Deadlock freedom is the
/// protocol's, given that every client gives a server's bytes the same tier.
pub fn server_tier(server: ServerId) -> u32 {
    server.0
}

/// Splits `access` into the lock requests `method` makes under `layout`.
pub fn plan(access: &Access, layout: &Layout, method: Method) -> Vec<SubRequest> {
    let ranges_sub = |server: ServerId, ranges: &[ByteRange]| SubRequest {
        server,
        first: ranges[0].start,
        tier: server_tier(server),
        desc: ValidDesc::Ranges(
            RangeList::from_disjoint_sorted(ranges).expect("pieces of a monotone access"),
        ),
    };
    match method {
        Method::Posix => access
            .ranges()
            .flat_map(|r| layout.pieces(r).collect::<Vec<_>>())
            .map(|p| ranges_sub(p.server, &[p.range]))
            .collect(),
        Method::List { max_ranges } => {
            let max_ranges = max_ranges.max(1);
            let mut out = Vec::new();
            let mut pending: BTreeMap<ServerId, Vec<ByteRange>> = BTreeMap::new();
            for r in access.ranges() {
                for p in layout.pieces(r) {
                    let buf = pending.entry(p.server).or_default();
                    buf.push(p.range);
                    if buf.len() == max_ranges {
                        out.push(ranges_sub(p.server, buf));
                        buf.clear();
                    }
                }
            }
            for (server, buf) in pending {
                if !buf.is_empty() {
                    out.push(ranges_sub(server, &buf));
                }
            }
            out
        }
        Method::Datatype => layout
            .servers()
            .into_iter()
            .filter_map(|server| {
                let first = Share::new(access.ranges(), layout, server).next()?.start;
                Some(SubRequest {
                    server,
                    first,
                    tier: server_tier(server),
                    desc: ValidDesc::pattern(access.clone(), layout.clone(), server),
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_layout::{Pattern, RangeCursor};

    fn bytes_of(subs: &[SubRequest], layout: &Layout) -> Vec<ByteRange> {
        let mut all = Vec::new();
        for s in subs {
            let mut c = s.desc.cursor();
            while let Some(r) = c.next_range() {
                assert!(
                    layout.pieces(r).all(|p| p.server == s.server),
                    "{r:?} not on {}",
                    s.server
                );
                all.push(r);
            }
        }
        RangeList::from_ranges(all).as_slice().to_vec()
    }

    #[test]
    fn every_method_covers_exactly_the_access() {
        let access = Access::new(
            13,
            Pattern::hvector(500, 3, 64, &Pattern::bytes(5).unwrap()).unwrap(),
        )
        .unwrap();
        let layout = Layout::round_robin(1000, 3, 3, 1).unwrap();
        let want = RangeList::from_ranges(access.ranges().collect());
        for m in [
            Method::Posix,
            Method::List { max_ranges: 7 },
            Method::Datatype,
        ] {
            let subs = plan(&access, &layout, m);
            assert_eq!(bytes_of(&subs, &layout), want.as_slice(), "{m}");
            let total: u64 = subs
                .iter()
                .map(|s| {
                    let mut c = s.desc.cursor();
                    std::iter::from_fn(move || c.next_range())
                        .map(|r| r.len())
                        .sum::<u64>()
                })
                .sum();
            assert_eq!(total, access.size(), "{m}: a byte is in two sub-requests");
            assert!(subs.iter().all(|s| s.tier == server_tier(s.server)), "{m}");
        }
        assert_eq!(plan(&access, &layout, Method::Datatype).len(), 3);
        assert!(plan(&access, &layout, Method::List { max_ranges: 7 })
            .iter()
            .all(|s| matches!(&s.desc, ValidDesc::Ranges(l) if l.len() <= 7)));
    }

    #[test]
    fn method_names_parse() {
        assert_eq!(
            "list/16".parse::<Method>(),
            Ok(Method::List { max_ranges: 16 })
        );
        assert!("list/0".parse::<Method>().is_err());
        assert!("fcntl".parse::<Method>().is_err());
    }
}
