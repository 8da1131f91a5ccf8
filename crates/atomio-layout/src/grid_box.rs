//! Accesses recognized as *grid boxes*, and a disjointness test between two of them that
//! costs O(dimensions), not O(runs).
//!
//! A grid box is the byte set `base + Σₖ iₖ·strideₖ + [0, len)` for `0 ≤ iₖ < countₖ`:
//! what a subarray (nested vectors of a contiguous run) is. Two block-partitioned
//! processes' subarrays of one array are two boxes with the same strides; whether they share
//! a byte is whether `b − a = Σₖ eₖ·strideₖ + u` has a solution with every `eₖ = iₖ − jₖ` and
//! `u = r − t` in range, which a search from the outermost stride down decides with a few
//! candidates per level. The lock server uses it to skip walking interleaved writers' ranges
//! one by one (S3D's neighbours' rows inside one hull).
//!
//! **Invariant:** `provably_disjoint` answers `true` only if the two accesses share no byte
//! (a property test compares it with their bytes); `false` means overlapping *or unknown*
//! (shapes it does not recognize, different strides, a search over its step budget).

use crate::access::Access;
use crate::pattern::{Node, Pattern};

/// Search steps `provably_disjoint` may take before it gives up (answers "unknown").
const SEARCH_STEPS: u32 = 256;

/// An access as a box: `base + Σ iₖ·strideₖ + [0, len)`, dimensions innermost first
/// (`(count, stride)`, every count ≥ 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GridBox {
    pub base: u64,
    pub len: u64,
    pub dims: Vec<(u64, u64)>,
}

impl GridBox {
    /// The box `access` is, if its pattern is one (contiguous runs repeated by vectors; a
    /// single placed block; resized wrappers), else `None`.
    pub fn of(access: &Access) -> Option<GridBox> {
        let p = access.pattern();
        let root = u32::try_from(p.nodes().len().checked_sub(1)?).ok()?;
        let (offset, len, dims) = shape(p, root, 0)?;
        Some(GridBox {
            base: access.base().checked_add(offset)?,
            len,
            dims,
        })
    }
}

/// A node's box: (offset of its first byte, run length, dimensions innermost first).
type Shape = (u64, u64, Vec<(u64, u64)>);

/// `copies` of the box `s`, `spacing` bytes apart: a longer run when they touch, else one
/// more dimension. `None` for no copies, or copies on top of each other.
fn repeated((offset, len, mut dims): Shape, copies: u64, spacing: u64) -> Option<Shape> {
    match copies {
        0 => None,
        1 => Some((offset, len, dims)),
        _ if spacing == 0 => None,
        _ if dims.is_empty() && spacing == len => Some((offset, len.checked_mul(copies)?, dims)),
        _ => {
            dims.push((copies, spacing));
            Some((offset, len, dims))
        }
    }
}

/// The box of node `i`, if it is one.
fn shape(p: &Pattern, i: u32, depth: usize) -> Option<Shape> {
    if depth > crate::pattern::MAX_PATTERN_DEPTH {
        return None;
    }
    // `copies` of node `elem`, each MPI-style at the element's extent, placed at `disp`.
    let placed = |elem: u32, copies: u64, disp: u64| {
        let (offset, len, dims) =
            repeated(shape(p, elem, depth + 1)?, copies, p.node_extent(elem))?;
        Some((offset.checked_add(disp)?, len, dims))
    };
    match p.nodes().get(i as usize)? {
        Node::Bytes { len } => (*len > 0).then(|| (0, *len, Vec::new())),
        Node::Resized { elem, .. } => shape(p, *elem, depth + 1),
        Node::Indexed { blocks, elem } => match blocks.as_slice() {
            [b] => placed(*elem, b.blocklen, b.disp),
            _ => None,
        },
        Node::Struct { fields } => match fields.as_slice() {
            [f] => placed(f.elem, f.blocklen, f.disp),
            _ => None,
        },
        Node::Vector {
            count,
            blocklen,
            stride,
            elem,
        } => repeated(placed(*elem, *blocklen, 0)?, *count, *stride),
    }
}

/// Whether `a` and `b` certainly share no byte (see the module docs): both are grid boxes
/// with the same strides and no solution exists.
pub fn provably_disjoint(a: &Access, b: &Access) -> bool {
    let (Some(x), Some(y)) = (GridBox::of(a), GridBox::of(b)) else {
        return false;
    };
    boxes_disjoint(&x, &y)
}

/// `provably_disjoint` for boxes already recognized.
pub fn boxes_disjoint(x: &GridBox, y: &GridBox) -> bool {
    if x.dims.len() != y.dims.len() || x.dims.iter().zip(&y.dims).any(|(p, q)| p.1 != q.1) {
        return false;
    }
    let d = i128::from(y.base) - i128::from(x.base);
    let mut steps = SEARCH_STEPS;
    matches!(solvable(x, y, x.dims.len(), d, &mut steps), Some(false))
}

/// Whether `rem = Σ_{k<level} eₖ·strideₖ + u` has a solution (`None`: out of steps).
fn solvable(x: &GridBox, y: &GridBox, level: usize, rem: i128, steps: &mut u32) -> Option<bool> {
    *steps = steps.checked_sub(1)?;
    // The lowest terms' reach: u ∈ [−(y.len − 1), x.len − 1] plus every lower dimension's.
    let (mut lo, mut hi) = (-(i128::from(y.len) - 1), i128::from(x.len) - 1);
    for k in 0..level.saturating_sub(1) {
        let s = i128::from(x.dims[k].1);
        lo -= (i128::from(y.dims[k].0) - 1) * s;
        hi += (i128::from(x.dims[k].0) - 1) * s;
    }
    if level == 0 {
        return Some(lo <= rem && rem <= hi);
    }
    let k = level - 1;
    let s = i128::from(x.dims[k].1);
    // eₖ with rem − eₖ·s ∈ [lo, hi], within its own range.
    let first = (rem - hi).div_euclid(s) + i128::from((rem - hi).rem_euclid(s) != 0);
    let last = (rem - lo).div_euclid(s);
    let first = first.max(-(i128::from(y.dims[k].0) - 1));
    let last = last.min(i128::from(x.dims[k].0) - 1);
    let mut e = first;
    while e <= last {
        if solvable(x, y, k, rem - e * s, steps)? {
            return Some(true);
        }
        e += 1;
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::Order;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn bytes_of(a: &Access) -> BTreeSet<u64> {
        a.ranges().flat_map(|r| r.start..r.end).collect()
    }

    fn sub(sizes: &[u64], subsizes: &[u64], starts: &[u64], elem: u64) -> Access {
        let e = Pattern::bytes(elem).unwrap();
        Access::new(
            0,
            Pattern::subarray(sizes, subsizes, starts, Order::C, &e).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn neighbours_subarrays_are_boxes_and_disjoint() {
        // S3D's shape: x-neighbours' rows interleave in every row of every plane.
        let a = sub(&[6, 8, 8], &[6, 4, 4], &[0, 0, 0], 8);
        let b = sub(&[6, 8, 8], &[6, 4, 4], &[0, 0, 4], 8);
        let c = sub(&[6, 8, 8], &[6, 4, 4], &[0, 4, 0], 8);
        assert_eq!(GridBox::of(&a).unwrap().dims.len(), 2);
        assert!(provably_disjoint(&a, &b) && provably_disjoint(&b, &a));
        assert!(provably_disjoint(&a, &c) && provably_disjoint(&b, &c));
        // Ghost cells: one column shared.
        let d = sub(&[6, 8, 8], &[6, 4, 5], &[0, 0, 3], 8);
        assert!(!provably_disjoint(&a, &d));
    }

    #[test]
    fn unknown_shapes_are_not_called_disjoint() {
        let e = Pattern::bytes(4).unwrap();
        let idx = Pattern::indexed(&[(0, 1), (10, 1)], &e).unwrap();
        let a = Access::new(0, idx).unwrap();
        let b = Access::new(100, Pattern::bytes(4).unwrap()).unwrap();
        assert!(GridBox::of(&a).is_none());
        assert!(!provably_disjoint(&a, &b));
    }

    fn arb_sub() -> impl Strategy<Value = Access> {
        // A 3-D array of up to 5×6×7 elements of 1–3 bytes; any subarray of it.
        (1u64..=5, 1u64..=6, 1u64..=7, 1u64..=3)
            .prop_flat_map(|(z, y, x, e)| {
                (
                    Just((z, y, x, e)),
                    (0..z, 0..y, 0..x),
                    (1..=z, 1..=y, 1..=x),
                )
            })
            .prop_map(|((z, y, x, e), (sz, sy, sx), (nz, ny, nx))| {
                let n = [nz.min(z - sz), ny.min(y - sy), nx.min(x - sx)];
                sub(&[z, y, x], &n, &[sz, sy, sx], e)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Never "disjoint" when a byte is shared; and for boxes of one array (same
        /// strides), always decided: "disjoint" exactly when no byte is shared.
        #[test]
        fn disjoint_means_no_shared_byte(a in arb_sub(), b in arb_sub(), shift in 0u64..40) {
            let b = Access::new(b.base() + shift, b.pattern().clone()).unwrap();
            let shared = !bytes_of(&a).is_disjoint(&bytes_of(&b));
            let said = provably_disjoint(&a, &b);
            prop_assert!(!(said && shared), "called disjoint but share a byte");
            let (x, y) = (GridBox::of(&a), GridBox::of(&b));
            if let (Some(x), Some(y)) = (x, y) {
                let same = x.dims.len() == y.dims.len()
                    && x.dims.iter().zip(&y.dims).all(|(p, q)| p.1 == q.1);
                if same {
                    prop_assert_eq!(said, !shared);
                }
            }
        }
    }
}
