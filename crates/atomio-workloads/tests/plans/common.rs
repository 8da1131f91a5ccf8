//! Checks every plan must pass, computed from the expanded byte ranges (small sizes only).

use atomio_layout::{Access, ByteRange, RangeList};
use atomio_workloads::{CallKind, WorkloadPlan};

pub fn r(start: u64, end: u64) -> ByteRange {
    ByteRange::new(start, end).unwrap()
}

pub fn list(ranges: &[(u64, u64)]) -> RangeList {
    RangeList::from_ranges(ranges.iter().map(|&(s, e)| r(s, e)).collect())
}

/// The access's ranges, checked to be increasing, disjoint, non-empty and to add up to
/// its size and hull.
pub fn ranges(a: &Access) -> Vec<ByteRange> {
    let v: Vec<ByteRange> = a.ranges().collect();
    assert!(!v.is_empty(), "empty access");
    for w in v.windows(2) {
        assert!(
            w[0].end < w[1].start,
            "runs not increasing and separated: {w:?}"
        );
    }
    assert!(v.iter().all(|x| !x.is_empty()));
    assert_eq!(v.iter().map(ByteRange::len).sum::<u64>(), a.size());
    let hull = a.hull().unwrap();
    assert_eq!((hull.start, hull.end), (v[0].start, v[v.len() - 1].end));
    v
}

/// Invariants that need no expansion: ranks, ops, access presence, non-empty accesses,
/// `file_bytes` = the end of the highest byte written.
pub fn check_cheap(plan: &WorkloadPlan) {
    let mut end = 0;
    for (i, c) in plan.clients.iter().enumerate() {
        assert_eq!(c.rank as usize, i);
        for (k, call) in c.calls.iter().enumerate() {
            assert_eq!(call.op as usize, k, "ops numbered 0.. per client");
            match call.kind {
                CallKind::Sync => assert!(call.access.is_none()),
                CallKind::Write | CallKind::Read => {
                    let a = call.access.as_ref().expect("I/O calls carry an access");
                    let hull = a.hull().expect("no call's access is empty");
                    assert!(a.size() > 0);
                    if call.kind == CallKind::Write {
                        end = end.max(hull.end);
                    }
                }
            }
        }
    }
    assert_eq!(
        plan.file_bytes, end,
        "file_bytes is the end of the last byte written"
    );
}

/// Bytes common to two normalized lists.
pub fn common_bytes(a: &RangeList, b: &RangeList) -> u64 {
    let (a, b) = (a.as_slice(), b.as_slice());
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        if let Some(x) = a[i].intersect(&b[j]) {
            n += x.len();
        }
        if a[i].end <= b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    n
}

/// Everything [`check_cheap`] checks, plus: every access's ranges are well formed, and
/// `overlapping` is true exactly when two different clients write a common byte. Returns
/// each client's written bytes.
pub fn check(plan: &WorkloadPlan) -> Vec<RangeList> {
    check_cheap(plan);
    let sets: Vec<RangeList> = plan
        .clients
        .iter()
        .map(|c| {
            let mut all = Vec::new();
            for call in &c.calls {
                if let Some(a) = &call.access {
                    let v = ranges(a);
                    if call.kind == CallKind::Write {
                        all.extend(v);
                    }
                }
            }
            RangeList::from_ranges(all)
        })
        .collect();
    let mut any = false;
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            any |= common_bytes(&sets[i], &sets[j]) > 0;
        }
    }
    assert_eq!(
        plan.overlapping, any,
        "`overlapping` must say whether different clients' writes overlap"
    );
    sets
}

/// The union of all clients' writes.
pub fn union(sets: &[RangeList]) -> RangeList {
    RangeList::from_ranges(
        sets.iter()
            .flat_map(|s| s.as_slice().iter().copied())
            .collect(),
    )
}

/// All write accesses of a client, in order.
pub fn writes(plan: &WorkloadPlan, rank: usize) -> Vec<&Access> {
    plan.clients[rank]
        .accesses(CallKind::Write)
        .collect::<Vec<_>>()
}
