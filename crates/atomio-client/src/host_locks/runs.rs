//! A call's ranges folded into arithmetic runs, and the exact test of whether two run lists
//! share a byte: how the host lock table keeps calls of many regular pieces small.
//!
//! A run is `count` pieces of `len` bytes, `stride` apart from `start` (a subarray's rows, a
//! strided view's blocks: S3D's 50,688 pieces of a call fold into a few thousand runs). A
//! run list comes from sorted, disjoint ranges folded greedily, so its runs are sorted and
//! their hulls (first byte to last) are disjoint: two lists are compared by one merge walk
//! over the hulls, with an exact arithmetic test where two hulls meet.
//!
//! **Invariants:** `expand(fold(r)) == r` for sorted, disjoint, non-empty `r`; within a
//! folded list hulls are sorted and disjoint, `count ≥ 1`, `len ≥ 1`, and `stride > len`
//! when `count > 1`; `overlap(a, b)` is true exactly when some byte lies in a piece of
//! each.

use atomio_layout::ByteRange;

/// `count` pieces of `len` bytes at `start`, `start + stride`, …
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start: u64,
    pub len: u64,
    pub stride: u64,
    pub count: u64,
}

impl Run {
    fn piece(r: ByteRange) -> Self {
        Run {
            start: r.start,
            len: r.len(),
            stride: r.len(),
            count: 1,
        }
    }

    /// One past the last byte of the last piece.
    pub fn end(&self) -> u64 {
        self.last_start().saturating_add(self.len)
    }

    // Saturating: a run read from the table while another process rewrote it is garbage
    // (its answer is dropped), and must not overflow.
    fn last_start(&self) -> u64 {
        self.start
            .saturating_add((self.count - 1).saturating_mul(self.stride))
    }

    /// Whether a piece of this run meets `[x, x + lx)`.
    fn hits(&self, x: u64, lx: u64) -> bool {
        if self.count == 1 {
            return self.start < x + lx && x < self.start + self.len;
        }
        // Pieces i with start + i·stride < x + lx and start + i·stride + len > x.
        let (a, s, la) = (
            i128::from(self.start),
            i128::from(self.stride),
            i128::from(self.len),
        );
        let (x, lx) = (i128::from(x), i128::from(lx));
        let lo = (x - la - a).div_euclid(s) + 1;
        let hi = (x + lx - a - 1).div_euclid(s);
        lo.max(0) <= hi.min(i128::from(self.count) - 1)
    }
}

/// Sorted, disjoint, non-empty ranges folded into runs (greedily, in order).
pub fn fold(ranges: &[ByteRange]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for &r in ranges {
        match out.last_mut() {
            Some(run) if run.len == r.len() && run.count == 1 && r.start > run.end() => {
                run.stride = r.start - run.start;
                run.count = 2;
            }
            Some(run)
                if run.len == r.len()
                    && run.count > 1
                    && r.start - run.last_start() == run.stride =>
            {
                run.count += 1;
            }
            _ => out.push(Run::piece(r)),
        }
    }
    out
}

/// The ranges of a run list, in order.
#[cfg(test)]
pub fn expand(runs: &[Run]) -> Vec<ByteRange> {
    runs.iter()
        .flat_map(|r| {
            (0..r.count).map(move |i| ByteRange {
                start: r.start + i * r.stride,
                end: r.start + i * r.stride + r.len,
            })
        })
        .collect()
}

/// Whether two runs (hulls meeting) share a byte.
fn meet(p: Run, q: Run) -> bool {
    if p.count == 1 {
        return q.hits(p.start, p.len);
    }
    if q.count == 1 {
        return p.hits(q.start, q.len);
    }
    if p.stride == q.stride {
        // Piece i of p meets piece j of q iff -q.len < (q.start - p.start) + k·stride < p.len
        // for k = j - i, and every k in [-(p.count - 1), q.count - 1] is some (i, j).
        let (d, s) = (
            i128::from(q.start) - i128::from(p.start),
            i128::from(p.stride),
        );
        let lo = (-i128::from(q.len) - d).div_euclid(s) + 1;
        let hi = (i128::from(p.len) - d - 1).div_euclid(s);
        return lo.max(1 - i128::from(p.count)) <= hi.min(i128::from(q.count) - 1);
    }
    // Different strides: each piece of the run with fewer, inside the other's hull.
    let (few, many) = if p.count <= q.count { (p, q) } else { (q, p) };
    (0..few.count)
        .map(|i| few.start.saturating_add(i.saturating_mul(few.stride)))
        .skip_while(|&x| x + few.len <= many.start)
        .take_while(|&x| x < many.end())
        .any(|x| many.hits(x, few.len))
}

/// Whether the run list read by `get` (`n` runs) and `b` share a byte.
pub fn overlap_with(n: usize, get: impl Fn(usize) -> Run, b: &[Run]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < n && j < b.len() {
        let (x, y) = (get(i), b[j]);
        if x.start < y.end() && y.start < x.end() && meet(x, y) {
            return true;
        }
        // The run whose hull ends first meets nothing after the other's.
        if x.end() <= y.end() {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    fn sorted_disjoint(v: Vec<(u64, u64)>) -> Vec<ByteRange> {
        // (gap, len) pairs laid out left to right: sorted, apart, non-empty.
        let mut at = 0;
        v.into_iter()
            .map(|(gap, len)| {
                at += gap + 1;
                let x = r(at, at + len);
                at += len;
                x
            })
            .collect()
    }

    fn ranges() -> impl Strategy<Value = Vec<ByteRange>> {
        // Regular stretches (same gap and length) mixed with irregular pieces.
        prop::collection::vec(
            prop_oneof![
                (0..6u64, 1..5u64).prop_map(|(g, l)| vec![(g, l)]),
                (0..6u64, 1..5u64, 2..12usize).prop_map(|(g, l, n)| vec![(g, l); n]),
            ],
            1..8,
        )
        .prop_map(|v| sorted_disjoint(v.into_iter().flatten().collect()))
    }

    fn bytes(v: &[ByteRange]) -> std::collections::BTreeSet<u64> {
        v.iter().flat_map(|r| r.start..r.end).collect()
    }

    #[test]
    fn a_regular_stretch_folds_into_one_run() {
        let v: Vec<ByteRange> = (0..100).map(|i| r(i * 10, i * 10 + 4)).collect();
        assert_eq!(
            fold(&v),
            vec![Run {
                start: 0,
                len: 4,
                stride: 10,
                count: 100
            }]
        );
        assert_eq!(
            fold(&[r(0, 4), r(4, 8)]).len(),
            2,
            "touching pieces stay apart"
        );
    }

    proptest! {
        #[test]
        fn folding_keeps_every_range(v in ranges()) {
            let runs = fold(&v);
            prop_assert_eq!(expand(&runs), v);
            for w in runs.windows(2) {
                prop_assert!(w[0].end() <= w[1].start, "{:?}", w);
            }
            for run in &runs {
                prop_assert!(run.count == 1 || run.stride > run.len, "{:?}", run);
            }
        }

        #[test]
        fn overlap_is_exactly_a_shared_byte(a in ranges(), b in ranges(), shift in 0..40u64) {
            let b: Vec<ByteRange> = b.iter().map(|x| r(x.start + shift, x.end + shift)).collect();
            let (ra, rb) = (fold(&a), fold(&b));
            let want = !bytes(&a).is_disjoint(&bytes(&b));
            prop_assert_eq!(overlap_with(ra.len(), |i| ra[i], &rb), want);
            prop_assert_eq!(overlap_with(rb.len(), |i| rb[i], &ra), want);
        }
    }
}
