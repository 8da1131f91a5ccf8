//! Interval I/O's technique (Logan & Dickens §3.3): lock only the shared intervals.
//!
//! The file's interval set (`atomio_interval`, from every rank's declared accesses or MPI
//! view) says for each byte who may touch it. A call of rank `r` is split (`File::call`,
//! `Parts::by_run`): runs wholly private to `r` are moved with **no lock, outside the
//! locked window**; the other runs move whole in one sub-call under locks on their shared
//! bytes (and bytes nobody declared) only — a run is never cut, since a piece costs a
//! system call and the cut buys no concurrency the file system's own lock would allow
//! (measured: `bench row` 50 % of `none` cut, see docs/interval-io.md). That is still
//! atomic: a private byte is touched by `r` alone, so when `r` writes it is invisible to
//! every other call; the calls' shared parts are two-phase locked, which orders them; and
//! a cycle through `r`'s program order would need a call of another rank to finish before
//! one of `r`'s started and after a later one — impossible (see docs/interval-io.md).
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
use atomio_lock::plan::server_tier;
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
                // Its server's tier, as in every plan: a group's shared intervals
                // interleave in offset with its neighbours' groups (a row's left and right
                // ghost columns), so in offset order a blocked call would wait once per row,
                // alternating managers; by server it waits at most once per manager.
                tier: server_tier(server),
                desc: ValidDesc::Ranges(RangeList::from_disjoint_sorted(chunk)?),
            });
        }
    }
    Ok(subs)
}

/// A call's bytes cut in two: the part moved with no lock and the part moved under locks,
/// each as `(range, offset of its bytes in the call's buffer)` in offset order. Nothing
/// is copied: the caller writes straight from its buffer, or gathers when it must.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parts {
    pub free: Vec<(ByteRange, usize)>,
    pub locked: Vec<(ByteRange, usize)>,
}

impl Parts {
    /// Cut at every interval boundary: every private piece is free. For interval files,
    /// whose private bytes go to the rank's own region, not in place.
    pub fn by_piece(split: &Split) -> Self {
        let mut p = Parts::default();
        let mut at = 0usize;
        for (r, class) in &split.pieces {
            let is_locked = !matches!(class, PieceClass::Private);
            if is_locked {
                &mut p.locked
            } else {
                &mut p.free
            }
            .push((*r, at));
            at += r.len() as usize;
        }
        p
    }

    /// Cut only between the call's runs: a run wholly private to the caller is free; a run
    /// with any shared or undeclared byte moves whole under the locks of those bytes. Cutting
    /// a run costs a system call (or a copy) per piece and buys only concurrency inside one
    /// call, which writers on the same file system rarely get (the file's own lock).
    /// `runs` are the call's runs in offset order, as `split` was made from them.
    pub fn by_run<I: IntoIterator<Item = ByteRange>>(runs: I, split: &Split) -> Self {
        let mut p = Parts::default();
        let mut pieces = split.pieces.iter().peekable();
        let mut at = 0usize;
        for run in runs {
            let mut free = true;
            // The split refines the runs: its pieces never straddle two runs (runs do not
            // touch, so pieces are merged only inside one).
            while let Some((r, class)) = pieces.next_if(|(r, _)| r.end <= run.end) {
                debug_assert!(r.start >= run.start, "pieces refine the runs");
                free &= matches!(class, PieceClass::Private);
            }
            if free { &mut p.free } else { &mut p.locked }.push((run, at));
            at += run.len() as usize;
        }
        debug_assert!(pieces.next().is_none(), "pieces refine the runs");
        p
    }

    /// The access made of `part`'s ranges (`None` when it has none).
    pub fn access(part: &[(ByteRange, usize)]) -> Result<Option<Access>, WireError> {
        if part.is_empty() {
            return Ok(None);
        }
        let ranges: Vec<ByteRange> = part.iter().map(|(r, _)| *r).collect();
        let list = RangeList::from_ranges(ranges);
        Ok(Some(Access::from_list(&list)?))
    }

    /// `part`'s bytes of the call's `data`, in offset order (a copy).
    pub fn gather(part: &[(ByteRange, usize)], data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(part.iter().map(|(r, _)| r.len() as usize).sum());
        for (r, at) in part {
            out.extend_from_slice(&data[*at..*at + r.len() as usize]);
        }
        out
    }

    /// Puts `buf` (what `part`'s ranges read, in offset order) back into the call's `out`.
    pub fn scatter(part: &[(ByteRange, usize)], buf: &[u8], out: &mut [u8]) {
        let mut i = 0usize;
        for (r, at) in part {
            let n = r.len() as usize;
            out[*at..*at + n].copy_from_slice(&buf[i..i + n]);
            i += n;
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
    fn parts_gather_and_scatter_in_call_order() {
        let set = tiles();
        let a = row_access(0, 60);
        let split = set.split(0, a.ranges());
        let data: Vec<u8> = (0..a.size()).map(|i| i as u8).collect();
        let p = Parts::by_piece(&split);
        let bytes = |part: &[(ByteRange, usize)]| part.iter().map(|(r, _)| r.len()).sum::<u64>();
        assert_eq!((bytes(&p.free), bytes(&p.locked)), (400, 200));
        for (r, at) in &p.free {
            // Tags are offsets in the call's buffer: row k's first private byte is k·60.
            assert_eq!(data[*at], ((r.start / 100) * 60 + r.start % 100) as u8);
        }
        let mut back = vec![0u8; data.len()];
        for part in [&p.free, &p.locked] {
            Parts::scatter(part, &Parts::gather(part, &data), &mut back);
        }
        assert_eq!(back, data);
    }

    #[test]
    fn runs_are_cut_only_between_runs() {
        let set = tiles();
        // Rows 0..40 of rank 0 are wholly private; rows 0..60 each touch shared bytes.
        let private = row_access(0, 40);
        let p = Parts::by_run(private.ranges(), &set.split(0, private.ranges()));
        assert_eq!((p.free.len(), p.locked.len()), (10, 0));
        let mixed = row_access(0, 60);
        let p = Parts::by_run(mixed.ranges(), &set.split(0, mixed.ranges()));
        assert!(p.free.is_empty());
        let want: Vec<_> = mixed.ranges().zip((0..).step_by(60)).collect();
        assert_eq!(
            p.locked, want,
            "every run whole, at its offset in the buffer"
        );
        // A call of private runs and runs reaching into shared bytes: sorted run by run.
        let list = RangeList::from_ranges(vec![
            ByteRange { start: 0, end: 30 },
            ByteRange {
                start: 100,
                end: 150,
            },
            ByteRange {
                start: 200,
                end: 210,
            },
        ]);
        let a = Access::from_list(&list).unwrap();
        let p = Parts::by_run(a.ranges(), &set.split(0, a.ranges()));
        assert_eq!(
            p.free,
            vec![
                (ByteRange { start: 0, end: 30 }, 0),
                (
                    ByteRange {
                        start: 200,
                        end: 210
                    },
                    80
                )
            ]
        );
        assert_eq!(
            p.locked,
            vec![(
                ByteRange {
                    start: 100,
                    end: 150
                },
                30
            )]
        );
    }
}
