//! Interval I/O's technique (Logan & Dickens §3.3): lock only the shared intervals.
//!
//! The file's interval set (`atomio_interval`, from every rank's declared accesses or MPI
//! view) says for each byte who may touch it. A call of rank `r` is split (`File::call`):
//! bytes private to `r` are moved with **no lock, outside the locked window**; the rest
//! (shared intervals, and bytes nobody declared) is one locked sub-call. That is still
//! atomic: a private byte is touched by `r` alone, so when `r` writes it is invisible to
//! every other call; the calls' shared parts are two-phase locked, which orders them; and
//! a cycle through `r`'s program order would need a call of another rank to finish before
//! one of `r`'s started and after a later one — impossible (see ARCHITECTURE.md).
//!
//! Lock managers: on a direct file the locks of a shared interval live at the manager of
//! its owner group (`IntervalSet::manager`: no central manager; a group's locks in one
//! place), bytes nobody declared are striped like `ching:list:one-try`'s. On atomio's
//! servers every lock stays with the server that holds the byte (leases and fencing rely
//! on lock and data of a byte sharing a server).
//!
//! `auto` is the same technique until the file gets its interval set; then `File` asks
//! `atomio_interval::choose` and may replace it with another strategy.
//!
//! **Invariants:** the locks cover every byte of the call that is not private to the
//! caller; a call touching bytes private to another rank is refused (no lock of the
//! caller can order it against that rank's lock-free writes); the same byte is always
//! locked at the same server by every rank.

use crate::technique::{LockGeometry, Locks, PlacementKind, Technique};
use atomio_interval::{IntervalSet, PieceClass, Split};
use atomio_layout::{Access, ByteRange, RangeList, ServerId};
use atomio_lock::{plan, Method, Protocol, SubRequest, DEFAULT_LIST_RANGES};
use atomio_proto::{ErrorCode, LockMode, ValidDesc, WireError};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A file's interval set as its calls see it.
#[derive(Clone, Debug)]
pub struct IntervalGeometry {
    pub set: Arc<IntervalSet>,
    pub rank: u32,
    /// Shared intervals' locks at their group's manager (direct files); else at the
    /// byte's data server.
    pub by_group: bool,
}

/// `interval` (and `auto` before its choice).
#[derive(Debug)]
pub struct IntervalLocks {
    pub auto: bool,
}

const BOTH: &[PlacementKind] = &[PlacementKind::Direct, PlacementKind::Servers];
const LIST: Method = Method::List {
    max_ranges: DEFAULT_LIST_RANGES,
};

impl Technique for IntervalLocks {
    fn name(&self) -> String {
        if self.auto { "auto" } else { "interval" }.into()
    }
    fn placements(&self) -> &'static [PlacementKind] {
        BOTH
    }
    fn uses_lock_service(&self) -> bool {
        true
    }
    fn splits_by_intervals(&self) -> bool {
        true
    }
    fn locks(
        &self,
        _: LockMode,
        access: &Access,
        g: &LockGeometry,
    ) -> Result<Option<Locks>, WireError> {
        if access.hull().is_none() {
            return Ok(None);
        }
        let Some(ig) = &g.intervals else {
            // No declared views: every byte is undeclared and locked.
            return Ok(Some(Locks::Service {
                protocol: Protocol::OneTry,
                subs: plan(access, &g.layout, LIST),
            }));
        };
        let split = ig.set.split(ig.rank, access.ranges());
        refuse_foreign(&split)?;
        let subs = locked_subs(&split, ig, g)?;
        Ok((!subs.is_empty()).then_some(Locks::Service {
            protocol: Protocol::OneTry,
            subs,
        }))
    }
}

/// The error for a call that reaches into another rank's private bytes.
pub fn refuse_foreign(split: &Split) -> Result<(), WireError> {
    match split.foreign {
        Some((off, owner)) => Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!(
                "byte {off} is private to rank {owner} by the declared views: no lock can order this \
                 call against its lock-free writes (declare the access, or set the views again)"
            ),
        )),
        None => Ok(()),
    }
}

/// Lock requests for the split's shared and undeclared pieces.
fn locked_subs(
    split: &Split,
    ig: &IntervalGeometry,
    g: &LockGeometry,
) -> Result<Vec<SubRequest>, WireError> {
    let servers = g.layout.servers();
    let mut striped: Vec<ByteRange> = vec![];
    let mut by_server: BTreeMap<ServerId, Vec<ByteRange>> = BTreeMap::new();
    for (r, class) in &split.pieces {
        match class {
            PieceClass::Private | PieceClass::Foreign(_) => {}
            PieceClass::Shared(owner) if ig.by_group && !servers.is_empty() => {
                let m = ig.set.manager(*owner, servers.len() as u32) as usize;
                by_server.entry(servers[m]).or_default().push(*r);
            }
            PieceClass::Shared(_) | PieceClass::Undeclared => striped.push(*r),
        }
    }
    let mut subs = vec![];
    if !striped.is_empty() {
        let list = RangeList::from_ranges(striped);
        subs.extend(plan(&Access::from_list(&list)?, &g.layout, LIST));
    }
    for (server, ranges) in by_server {
        let list = RangeList::from_ranges(ranges);
        for chunk in list.as_slice().chunks(DEFAULT_LIST_RANGES) {
            subs.push(SubRequest {
                server,
                first: chunk[0].start,
                desc: ValidDesc::Ranges(RangeList::from_disjoint_sorted(chunk)?),
            });
        }
    }
    Ok(subs)
}

/// A call's bytes cut in two: the part with no lock and the part under locks, each as an
/// access with its data gathered in offset order (writes) or a buffer to scatter back
/// (reads).
pub struct Halves {
    pub free: Option<(Access, Vec<u8>)>,
    pub locked: Option<(Access, Vec<u8>)>,
    /// For each piece in call order: (is locked half, length).
    order: Vec<(bool, u64)>,
}

impl Halves {
    /// Cuts a write's `data` (or, with `data = None`, sizes read buffers). With
    /// `gather_free` false the free half's bytes are not copied (the caller writes them
    /// from its own buffer: `free_pieces`).
    pub fn new(split: &Split, data: Option<&[u8]>, gather_free: bool) -> Result<Self, WireError> {
        let (mut free, mut locked) = (vec![], vec![]);
        let cap = |n: u64, on: bool| if on && data.is_some() { n as usize } else { 0 };
        let mut fd = Vec::with_capacity(cap(split.private_bytes, gather_free));
        let mut ld = Vec::with_capacity(cap(split.locked_bytes(), true));
        let mut order = Vec::with_capacity(split.pieces.len());
        let mut at = 0usize;
        for (r, class) in &split.pieces {
            let is_locked = !matches!(class, PieceClass::Private);
            let n = r.len() as usize;
            match data {
                Some(d) if is_locked => ld.extend_from_slice(&d[at..at + n]),
                Some(d) if gather_free => fd.extend_from_slice(&d[at..at + n]),
                _ => {}
            }
            at += n;
            if is_locked { &mut locked } else { &mut free }.push(*r);
            order.push((is_locked, r.len()));
        }
        let half = |ranges: Vec<ByteRange>, mut buf: Vec<u8>| -> Result<_, WireError> {
            if ranges.is_empty() {
                return Ok(None);
            }
            let list = RangeList::from_ranges(ranges);
            if data.is_none() {
                buf = vec![0; list.total_bytes() as usize];
            }
            Ok(Some((Access::from_list(&list)?, buf)))
        };
        Ok(Halves {
            free: half(free, fd)?,
            locked: half(locked, ld)?,
            order,
        })
    }

    /// The caller's private pieces with their offsets in the call's buffer.
    pub fn free_pieces(split: &Split) -> Vec<(ByteRange, usize)> {
        let mut at = 0usize;
        split
            .pieces
            .iter()
            .filter_map(|(r, class)| {
                let here = at;
                at += r.len() as usize;
                matches!(class, PieceClass::Private).then_some((*r, here))
            })
            .collect()
    }

    /// Puts what the two halves read back into the call's buffer, in call order.
    pub fn scatter(&self, out: &mut [u8]) {
        let empty = Vec::new();
        let f = self.free.as_ref().map_or(&empty, |(_, b)| b);
        let l = self.locked.as_ref().map_or(&empty, |(_, b)| b);
        let (mut fi, mut li, mut at) = (0usize, 0usize, 0usize);
        for &(is_locked, n) in &self.order {
            let n = n as usize;
            let (src, i) = if is_locked {
                (l, &mut li)
            } else {
                (f, &mut fi)
            };
            out[at..at + n].copy_from_slice(&src[*i..*i + n]);
            *i += n;
            at += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_interval::{analyze, Family, Limits};
    use atomio_layout::Layout;

    fn tiles() -> Arc<IntervalSet> {
        // Rows of 100 bytes: rank 0 owns 0..60, rank 1 40..100; 10 rows.
        let a = analyze(
            2,
            &[
                (0, vec![Family::new(0, 60, 100, 10).unwrap()]),
                (1, vec![Family::new(40, 60, 100, 10).unwrap()]),
            ],
            Limits::default(),
        )
        .unwrap();
        Arc::new(IntervalSet::new(a))
    }

    fn geometry(rank: u32, by_group: bool) -> LockGeometry {
        LockGeometry {
            layout: Layout::round_robin(64, 4, 4, 0).unwrap(),
            central: ServerId(0),
            intervals: Some(IntervalGeometry {
                set: tiles(),
                rank,
                by_group,
            }),
        }
    }

    fn row_access(lo: u64, hi: u64) -> Access {
        let list = RangeList::from_ranges(
            (0..10)
                .map(|k| ByteRange {
                    start: k * 100 + lo,
                    end: k * 100 + hi,
                })
                .collect(),
        );
        Access::from_list(&list).unwrap()
    }

    #[test]
    fn locks_cover_exactly_the_shared_bytes() {
        for by_group in [false, true] {
            let t = IntervalLocks { auto: false };
            let g = geometry(0, by_group);
            let Some(Locks::Service { subs, .. }) =
                t.locks(LockMode::Write, &row_access(0, 60), &g).unwrap()
            else {
                panic!("shared bytes need locks")
            };
            let mut locked: Vec<ByteRange> = subs
                .iter()
                .flat_map(|s| match &s.desc {
                    ValidDesc::Ranges(l) => l.as_slice().to_vec(),
                    _ => vec![],
                })
                .collect();
            locked.sort_by_key(|r| r.start);
            let want: Vec<ByteRange> = RangeList::from_ranges(
                (0..10)
                    .map(|k| ByteRange {
                        start: k * 100 + 40,
                        end: k * 100 + 60,
                    })
                    .collect(),
            )
            .as_slice()
            .to_vec();
            let got = RangeList::from_ranges(locked);
            assert_eq!(got.as_slice(), &want[..], "by_group {by_group}");
            if by_group {
                assert!(
                    subs.iter().all(|s| s.server == subs[0].server),
                    "one group, one manager"
                );
            }
        }
        // Only private bytes: no lock at all.
        let t = IntervalLocks { auto: false };
        assert!(t
            .locks(LockMode::Write, &row_access(0, 40), &geometry(0, true))
            .unwrap()
            .is_none());
        // Another rank's private bytes: refused.
        assert!(t
            .locks(LockMode::Write, &row_access(70, 80), &geometry(0, true))
            .is_err());
    }

    #[test]
    fn halves_gather_and_scatter_in_call_order() {
        let set = tiles();
        let a = row_access(0, 60);
        let split = set.split(0, a.ranges());
        let data: Vec<u8> = (0..a.size()).map(|i| i as u8).collect();
        let h = Halves::new(&split, Some(&data), true).unwrap();
        assert_eq!(h.free.as_ref().unwrap().1.len(), 400);
        assert_eq!(h.locked.as_ref().unwrap().1.len(), 200);
        let mut back = vec![0u8; data.len()];
        h.scatter(&mut back);
        assert_eq!(back, data);
        let free: u64 = Halves::free_pieces(&split)
            .into_iter()
            .map(|(r, at)| {
                let b = &data[at..at + r.len() as usize];
                // Tags are offsets in the call's buffer: row k's first private byte is k·60.
                assert_eq!(b[0], ((r.start / 100) * 60 + r.start % 100) as u8);
                r.len()
            })
            .sum();
        assert_eq!(free, 400);
    }
}
