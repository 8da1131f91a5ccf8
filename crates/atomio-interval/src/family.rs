//! Strided families of intervals, and lowering an access pattern into them without
//! expanding its repetitions.
//!
//! A `Family` is `count` equal intervals `[start + i·stride, start + i·stride + len)`. An MPI
//! vector of contiguous blocks is one family however many blocks it has; a subarray is one
//! family per plane (its fastest repetition stays folded, the slower ones are expanded);
//! a file view's filetype repeated every extent is one family per run of the filetype when
//! that filetype's runs are plain.
//!
//! **Invariants:** `len ≥ 1`, `count ≥ 1`; `count > 1 ⇒ stride > len` (touching copies are
//! folded into one longer interval); the hull end `start + (count−1)·stride + len` fits in
//! `MAX_OFFSET` (every constructor checks). Lowering emits at most `budget` families and
//! says so (`TooComplex`) instead of allocating without bound.

use atomio_layout::{Access, ByteRange, Node, Pattern, MAX_OFFSET};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// `count` intervals of `len` bytes, `stride` apart, from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Family {
    pub start: u64,
    pub len: u64,
    pub stride: u64,
    pub count: u64,
}

/// Lowering or analysis would need more than its budget of families or runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: more than {budget} {unit} needed")]
pub struct TooComplex {
    pub what: &'static str,
    pub budget: u64,
    pub unit: &'static str,
}

/// An offset computation left the file (`MAX_OFFSET`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    #[error(transparent)]
    TooComplex(#[from] TooComplex),
    #[error("interval beyond the largest file offset ({0})")]
    Overflow(u64),
}

impl Family {
    /// One interval. `len ≥ 1`.
    pub fn run(start: u64, len: u64) -> Result<Self, LowerError> {
        Self::new(start, len, len, 1)
    }

    /// `count` copies; touching copies are folded into one interval.
    pub fn new(start: u64, len: u64, stride: u64, count: u64) -> Result<Self, LowerError> {
        debug_assert!(len >= 1 && count >= 1);
        let (len, stride, count) = if count > 1 && stride == len {
            let total = len.checked_mul(count).ok_or(LowerError::Overflow(start))?;
            (total, total, 1)
        } else if count == 1 {
            (len, len, 1)
        } else {
            (len, stride, count)
        };
        let f = Family {
            start,
            len,
            stride,
            count,
        };
        match f.checked_end() {
            Some(end) if end <= MAX_OFFSET => Ok(f),
            _ => Err(LowerError::Overflow(start)),
        }
    }

    fn checked_end(&self) -> Option<u64> {
        (self.count - 1)
            .checked_mul(self.stride)?
            .checked_add(self.len)?
            .checked_add(self.start)
    }

    /// One past the last byte of the last interval.
    pub fn end(&self) -> u64 {
        self.start + (self.count - 1) * self.stride + self.len
    }

    /// First to last byte.
    pub fn hull(&self) -> ByteRange {
        ByteRange {
            start: self.start,
            end: self.end(),
        }
    }

    /// Interval `i` (< `count`).
    pub fn nth(&self, i: u64) -> ByteRange {
        let s = self.start + i * self.stride;
        ByteRange {
            start: s,
            end: s + self.len,
        }
    }

    /// Bytes covered.
    pub fn bytes(&self) -> u64 {
        self.len * self.count
    }

    /// Indices of the intervals that overlap `[x, y)`, as `lo..hi` (empty when none).
    pub fn touching(&self, x: u64, y: u64) -> std::ops::Range<u64> {
        if y <= self.start || x >= self.end() {
            return 0..0;
        }
        // Interval i overlaps iff start + i·stride < y and start + i·stride + len > x.
        let lo = if x >= self.start + self.len {
            (x - self.start - self.len) / self.stride + 1
        } else {
            0
        };
        let hi = ((y - 1 - self.start) / self.stride + 1).min(self.count);
        lo..hi.max(lo)
    }

    /// The pieces of `self` inside `[x, y)`: at most a cut first interval, a sub-family of
    /// whole intervals, and a cut last interval.
    pub fn clip(&self, x: u64, y: u64, out: &mut Vec<Family>) {
        let r = self.touching(x, y);
        if r.is_empty() {
            return;
        }
        let (mut lo, mut hi) = (r.start, r.end);
        let cut = |i: u64, out: &mut Vec<Family>| {
            let iv = self.nth(i);
            let (s, e) = (iv.start.max(x), iv.end.min(y));
            if s < e {
                out.push(Family {
                    start: s,
                    len: e - s,
                    stride: e - s,
                    count: 1,
                });
            }
        };
        if self.nth(lo).start < x {
            cut(lo, out);
            lo += 1;
        }
        let mut last_cut = None;
        if hi > lo && self.nth(hi - 1).end > y {
            hi -= 1;
            last_cut = Some(hi);
        }
        if hi > lo {
            out.push(Family {
                start: self.start + lo * self.stride,
                len: self.len,
                stride: if hi - lo == 1 { self.len } else { self.stride },
                count: hi - lo,
            });
        }
        if let Some(i) = last_cut {
            cut(i, out);
        }
    }
}

/// Lowers accesses into families, sharing the work for DAG nodes used more than once.
pub struct Lowerer<'p> {
    pattern: &'p Pattern,
    memo: HashMap<u32, std::rc::Rc<Vec<Family>>>,
    budget: u64,
}

/// Families of the access, sorted by start, adjacent plain runs merged.
pub fn lower(access: &Access, budget: &mut u64) -> Result<Vec<Family>, LowerError> {
    lower_tiled(access.base(), access.pattern(), 1, budget)
}

/// Families of `tiles` copies of `pattern` every `pattern.extent()` bytes from `base`: an
/// MPI file view (displacement, filetype) over its first `tiles` tiles.
pub fn lower_tiled(
    base: u64,
    pattern: &Pattern,
    tiles: u64,
    budget: &mut u64,
) -> Result<Vec<Family>, LowerError> {
    let root = (pattern.nodes().len() - 1) as u32;
    let mut l = Lowerer {
        pattern,
        memo: HashMap::new(),
        budget: *budget,
    };
    let one = l.node(root)?;
    let mut out = l.repeat(&one, tiles, pattern.extent())?;
    *budget = l.budget;
    shift(&mut out, base)?;
    normalize(&mut out);
    Ok(out)
}

fn shift(fams: &mut [Family], by: u64) -> Result<(), LowerError> {
    for f in fams.iter_mut() {
        *f = Family::new(
            f.start
                .checked_add(by)
                .ok_or(LowerError::Overflow(f.start))?,
            f.len,
            f.stride,
            f.count,
        )?;
    }
    Ok(())
}

/// Sorts by start and merges plain runs that touch.
pub fn normalize(fams: &mut Vec<Family>) {
    fams.sort_unstable_by_key(|f| (f.start, f.len, f.count));
    let mut out: Vec<Family> = Vec::with_capacity(fams.len());
    for f in fams.drain(..) {
        if let Some(last) = out.last_mut() {
            if last.count == 1 && f.count == 1 && last.end() == f.start {
                last.len += f.len;
                last.stride = last.len;
                continue;
            }
        }
        out.push(f);
    }
    *fams = out;
}

impl Lowerer<'_> {
    fn spend(&mut self, n: u64) -> Result<(), TooComplex> {
        if n > self.budget {
            return Err(TooComplex {
                what: "lowering an access into strided families",
                budget: self.budget,
                unit: "families",
            });
        }
        self.budget -= n;
        Ok(())
    }

    /// The families of node `i` relative to its origin.
    fn node(&mut self, i: u32) -> Result<std::rc::Rc<Vec<Family>>, LowerError> {
        if let Some(v) = self.memo.get(&i) {
            return Ok(v.clone());
        }
        let p = self.pattern;
        let v = match &p.nodes()[i as usize] {
            Node::Bytes { len } => {
                self.spend(1)?;
                if *len == 0 {
                    vec![]
                } else {
                    vec![Family::run(0, *len)?]
                }
            }
            Node::Vector {
                count,
                blocklen,
                stride,
                elem,
            } => {
                let e = self.node(*elem)?;
                let block = self.repeat(&e, *blocklen, p.node_extent(*elem))?;
                self.repeat(&block, *count, *stride)?
            }
            Node::Indexed { blocks, elem } => {
                let e = self.node(*elem)?;
                let ext = p.node_extent(*elem);
                let mut out = vec![];
                for b in blocks {
                    let mut block = self.repeat(&e, b.blocklen, ext)?;
                    shift(&mut block, b.disp)?;
                    out.extend(block);
                }
                out
            }
            Node::Struct { fields } => {
                let mut out = vec![];
                for fd in fields {
                    let e = self.node(fd.elem)?;
                    let mut block = self.repeat(&e, fd.blocklen, p.node_extent(fd.elem))?;
                    shift(&mut block, fd.disp)?;
                    out.extend(block);
                }
                out
            }
            Node::Resized { elem, .. } => (*self.node(*elem)?).clone(),
        };
        let v = std::rc::Rc::new(v);
        self.memo.insert(i, v.clone());
        Ok(v)
    }

    /// `copies` of `fams`, `spacing` apart. Plain runs become families (folded); families
    /// that already repeat are expanded copy by copy (one level of folding is kept).
    fn repeat(
        &mut self,
        fams: &[Family],
        copies: u64,
        spacing: u64,
    ) -> Result<Vec<Family>, LowerError> {
        if copies == 0 || fams.is_empty() {
            return Ok(vec![]);
        }
        if copies == 1 {
            return Ok(fams.to_vec());
        }
        let mut sorted = fams.to_vec();
        normalize(&mut sorted);
        // One run exactly as long as the spacing: the copies touch.
        if sorted.len() == 1 && sorted[0].count == 1 && sorted[0].len == spacing {
            self.spend(1)?;
            return Ok(vec![Family::new(
                sorted[0].start,
                spacing,
                spacing,
                copies,
            )?]);
        }
        let span = sorted.iter().map(Family::end).max().unwrap_or(0)
            - sorted.first().map_or(0, |f| f.start);
        if sorted.iter().all(|f| f.count == 1) && spacing >= span {
            self.spend(sorted.len() as u64)?;
            return sorted
                .iter()
                .map(|f| Family::new(f.start, f.len, spacing, copies))
                .collect();
        }
        let n = (sorted.len() as u64)
            .checked_mul(copies)
            .ok_or(TooComplex {
                what: "lowering an access into strided families",
                budget: self.budget,
                unit: "families",
            })?;
        self.spend(n)?;
        let mut out = Vec::with_capacity(n as usize);
        for c in 0..copies {
            let by = c.checked_mul(spacing).ok_or(LowerError::Overflow(c))?;
            for f in &sorted {
                out.push(Family::new(
                    f.start
                        .checked_add(by)
                        .ok_or(LowerError::Overflow(f.start))?,
                    f.len,
                    f.stride,
                    f.count,
                )?);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_layout::Order;
    use proptest::prelude::*;

    fn expand(fams: &[Family]) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = fams
            .iter()
            .flat_map(|f| (0..f.count).map(move |i| f.nth(i)))
            .map(|r| (r.start, r.end))
            .collect();
        v.sort();
        // merge touching
        let mut out: Vec<(u64, u64)> = vec![];
        for (s, e) in v {
            match out.last_mut() {
                Some(l) if l.1 == s => l.1 = e,
                _ => out.push((s, e)),
            }
        }
        out
    }

    fn runs(a: &Access) -> Vec<(u64, u64)> {
        expand(
            &a.ranges()
                .map(|r| Family::run(r.start, r.len()).unwrap())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn vector_is_one_family() {
        let v = Pattern::hvector(1000, 1, 4096, &Pattern::bytes(100).unwrap()).unwrap();
        let a = Access::new(7, v).unwrap();
        let mut budget = 1 << 20;
        let f = lower(&a, &mut budget).unwrap();
        assert_eq!(
            f,
            vec![Family {
                start: 7,
                len: 100,
                stride: 4096,
                count: 1000
            }]
        );
    }

    #[test]
    fn subarray_is_one_family_per_plane() {
        let e = Pattern::bytes(8).unwrap();
        let s =
            Pattern::subarray(&[40, 30, 20], &[10, 5, 4], &[3, 2, 1], Order::Fortran, &e).unwrap();
        let a = Access::new(0, s).unwrap();
        let mut budget = 1 << 20;
        let f = lower(&a, &mut budget).unwrap();
        assert_eq!(f.len(), 4);
        assert!(f.iter().all(|f| f.count == 5 && f.len == 80));
        assert_eq!(expand(&f), runs(&a));
    }

    #[test]
    fn budget_is_enforced() {
        let e = Pattern::bytes(8).unwrap();
        let s = Pattern::subarray(&[40, 30, 20], &[10, 5, 4], &[3, 2, 1], Order::C, &e).unwrap();
        let a = Access::new(0, s).unwrap();
        let mut budget = 3;
        assert!(matches!(
            lower(&a, &mut budget),
            Err(LowerError::TooComplex(_))
        ));
    }

    #[test]
    fn clip_pieces_cover_exactly() {
        let f = Family::new(10, 5, 20, 10).unwrap();
        for (x, y) in [
            (0, 500),
            (12, 73),
            (15, 30),
            (13, 14),
            (200, 300),
            (11, 195),
        ] {
            let mut out = vec![];
            f.clip(x, y, &mut out);
            let want: Vec<(u64, u64)> = expand(&[f])
                .into_iter()
                .filter_map(|(s, e)| {
                    let (s, e) = (s.max(x), e.min(y));
                    (s < e).then_some((s, e))
                })
                .collect();
            assert_eq!(expand(&out), want, "clip {x}..{y}");
        }
    }

    fn arb_pattern() -> impl Strategy<Value = Pattern> {
        let leaf = (1u64..20).prop_map(|n| Pattern::bytes(n).unwrap());
        leaf.prop_recursive(3, 40, 4, |inner| {
            prop_oneof![
                (inner.clone(), 1u64..5, 1u64..3, 0u64..50).prop_filter_map(
                    "monotone vector",
                    |(e, c, b, extra)| {
                        let stride = e.extent() * b + extra;
                        Pattern::hvector(c, b, stride, &e).ok()
                    }
                ),
                (
                    inner.clone(),
                    prop::collection::vec((0u64..30, 1u64..3), 1..4)
                )
                    .prop_filter_map("monotone indexed", |(e, gaps)| {
                        let mut disp = 0;
                        let mut blocks = vec![];
                        for (g, b) in gaps {
                            disp += g;
                            blocks.push(atomio_layout::Block { disp, blocklen: b });
                            disp += b * e.extent();
                        }
                        Pattern::hindexed(blocks, &e).ok()
                    }),
            ]
        })
    }

    proptest! {
        /// Lowering selects exactly the bytes the pattern's runs select.
        #[test]
        fn lowering_matches_expansion(p in arb_pattern(), base in 0u64..1000, tiles in 1u64..4) {
            prop_assume!(p.monotone());
            let mut budget = 1 << 16;
            let fams = lower_tiled(base, &p, tiles, &mut budget).unwrap();
            let mut want = vec![];
            for t in 0..tiles {
                let a = Access::new(base + t * p.extent(), p.clone()).unwrap();
                want.extend(runs(&a));
            }
            let want = expand(&want.into_iter().map(|(s, e)| Family::run(s, e - s).unwrap()).collect::<Vec<_>>());
            prop_assert_eq!(expand(&fams), want);
            for f in &fams {
                prop_assert!(f.len >= 1 && f.count >= 1);
                prop_assert!(f.count == 1 || f.stride > f.len);
            }
        }
    }
}
