//! Lazy iteration over the contiguous runs of a pattern, with arithmetic seek.
//!
//! Two ways to take the runs: one by one (`Iterator`), or as *groups* (`next_group`):
//! equal runs at equal spacing, as a vector of bytes (or of dense blocks) lays them, each
//! group found in one step however many runs it holds. A vector of 2,500 four-byte elements
//! is then one group instead of 2,500 steps of the frame loop (~12 ns each), so a reader
//! that copies small pieces, or plans locks over them, pays per group, not per piece.
//!
//! **Invariants:** memory is O(depth) whatever the pattern's size; runs come out in typemap
//! order with touching runs coalesced (at most `coalescing_at_most` raw runs each); after `seek(off)` (monotone patterns only) the runs
//! are exactly the pattern's bytes at or after `off`, found by descending the pattern with
//! divisions and binary searches, never by scanning the runs before `off`. Groups expand to
//! the same bytes in the same order (clipped alike after a seek), but touching runs are not
//! coalesced across groups, and a group's runs touch only when it is one run.

use crate::pattern::{Inner, Node, Pattern};
use crate::range::ByteRange;
use crate::range_list::RangeCursor;

/// `count` runs of `len` bytes, run `i` at `start + i * stride` (`count ≥ 1`, `len ≥ 1`;
/// a group of one run has `stride == len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    pub start: u64,
    pub len: u64,
    pub stride: u64,
    pub count: u64,
}

impl Group {
    /// One run.
    pub fn one(r: ByteRange) -> Self {
        Self {
            start: r.start,
            len: r.len(),
            stride: r.len(),
            count: 1,
        }
    }

    /// Run `i` (`i < count`).
    #[inline]
    pub fn run(&self, i: u64) -> ByteRange {
        let start = self.start + i * self.stride;
        ByteRange {
            start,
            end: start + self.len,
        }
    }

    /// First byte to one past the last run's last byte.
    pub fn hull(&self) -> ByteRange {
        ByteRange {
            start: self.start,
            end: self.start + (self.count - 1) * self.stride + self.len,
        }
    }

    /// Data bytes.
    pub fn bytes(&self) -> u64 {
        self.count * self.len
    }

    /// The runs in order.
    pub fn runs(self) -> impl Iterator<Item = ByteRange> {
        (0..self.count).map(move |i| self.run(i))
    }

    /// The same runs from run `i` on (`i < count`).
    fn from(self, i: u64) -> Self {
        Self {
            start: self.start + i * self.stride,
            count: self.count - i,
            ..self
        }
    }

    /// Runs of `len` at `stride`, touching runs made one.
    fn new(start: u64, len: u64, stride: u64, count: u64) -> Self {
        if stride == len || count == 1 {
            Self {
                start,
                len: len * count,
                stride: len * count,
                count: 1,
            }
        } else {
            Self {
                start,
                len,
                stride,
                count,
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    /// A container node (`Vector`, `Indexed` or `Struct`), never `Resized` or `Bytes`.
    node: u32,
    base: u64,
    block: u64,
    copy: u64,
}

/// Iterator over the runs of a pattern placed at `base`.
#[derive(Clone, Debug)]
pub struct Runs<'a> {
    inner: &'a Inner,
    base: u64,
    /// Inline for the usual depths, so creating a cursor (once per precise lock query)
    /// allocates nothing.
    stack: smallvec::SmallVec<[Frame; 8]>,
    /// A leaf run produced outside the frame loop (a root that is plain bytes).
    leaf: Option<ByteRange>,
    /// Coalescing buffer.
    pending: Option<ByteRange>,
    clip: u64,
    /// Most raw runs one output run may coalesce (`u64::MAX`: all that touch).
    coalesce_max: u64,
    /// Raw runs in `pending`.
    coalesced: u64,
    /// `next_group`: the rest of a group whose first run was clipped.
    held: Option<Group>,
}

impl Inner {
    /// Block `b` of container `node`: (displacement, copies, element node).
    #[inline]
    fn block(&self, node: u32, b: u64) -> Option<(u64, u64, u32)> {
        match &self.nodes[node as usize] {
            Node::Vector {
                count,
                blocklen,
                stride,
                elem,
            } => (b < *count).then(|| (b * stride, *blocklen, *elem)),
            Node::Indexed { blocks, elem } => {
                let blk = blocks.get(usize::try_from(b).ok()?)?;
                Some((blk.disp, blk.blocklen, *elem))
            }
            Node::Struct { fields } => {
                let f = fields.get(usize::try_from(b).ok()?)?;
                Some((f.disp, f.blocklen, f.elem))
            }
            Node::Bytes { .. } | Node::Resized { .. } => None,
        }
    }
}

impl<'a> Runs<'a> {
    pub(crate) fn new(pattern: &'a Pattern, base: u64) -> Self {
        let mut r = Runs {
            inner: &pattern.inner,
            base,
            stack: smallvec::SmallVec::new(),
            leaf: None,
            pending: None,
            clip: 0,
            coalesce_max: u64::MAX,
            coalesced: 0,
            held: None,
        };
        r.start_at_root();
        r
    }

    /// Coalesces at most `n` touching raw runs into one output run (then starts another,
    /// touching it). Without a bound, producing the first run after a `seek` can cost every
    /// raw run that follows when they all touch (a pattern of millions of pieces that tile
    /// a region is one run); a lock server that resumes a long request by seeking once per
    /// slice needs that cost bounded.
    pub fn coalescing_at_most(mut self, n: u64) -> Self {
        self.coalesce_max = n.max(1);
        self
    }

    fn start_at_root(&mut self) {
        self.position_root(0);
    }

    /// Places the root for iteration from the first byte at or after `offset` (0: all).
    fn position_root(&mut self, offset: u64) {
        let inner = self.inner;
        let ri = inner.info[inner.nodes.len() - 1];
        if ri.size == 0 {
            return;
        }
        match inner.nodes[ri.target as usize] {
            Node::Bytes { len } => {
                self.leaf = Some(ByteRange {
                    start: self.base,
                    end: self.base + len,
                })
            }
            _ => self.descend(ri.target, self.base, offset),
        }
    }

    #[inline]
    fn next_raw(&mut self) -> Option<ByteRange> {
        if let Some(r) = self.leaf.take() {
            return Some(r);
        }
        let inner = self.inner;
        loop {
            let f = self.stack.last_mut()?;
            let Some((disp, copies, child)) = inner.block(f.node, f.block) else {
                self.stack.pop();
                continue;
            };
            let ci = &inner.info[child as usize];
            if f.copy >= copies || ci.size == 0 {
                f.block += 1;
                f.copy = 0;
                continue;
            }
            let off = f.base + disp + f.copy * ci.extent;
            if let Node::Bytes { len } = inner.nodes[ci.target as usize] {
                let n = if ci.dense_bytes { copies - f.copy } else { 1 };
                f.copy += n;
                return Some(ByteRange {
                    start: off,
                    end: off + n * len,
                });
            }
            f.copy += 1;
            self.stack.push(Frame {
                node: ci.target,
                base: off,
                block: 0,
                copy: 0,
            });
        }
    }

    /// `next_raw`, a group at a time: where a frame's leaf copies (or, for a vector, its
    /// remaining blocks) are equal runs at equal spacing, all of them in one step.
    #[inline]
    fn next_raw_group(&mut self) -> Option<Group> {
        if let Some(r) = self.leaf.take() {
            return Some(Group::one(r));
        }
        let inner = self.inner;
        loop {
            let f = self.stack.last_mut()?;
            let Some((disp, copies, child)) = inner.block(f.node, f.block) else {
                self.stack.pop();
                continue;
            };
            let ci = &inner.info[child as usize];
            if f.copy >= copies || ci.size == 0 {
                f.block += 1;
                f.copy = 0;
                continue;
            }
            let off = f.base + disp + f.copy * ci.extent;
            if let Node::Bytes { len } = inner.nodes[ci.target as usize] {
                // One run per block (dense copies, or a single copy): a vector's remaining
                // blocks from here are one group.
                let block_run = ci.dense_bytes || copies == 1;
                if block_run && f.copy == 0 {
                    match &inner.nodes[f.node as usize] {
                        Node::Vector { count, stride, .. } => {
                            let n = count - f.block;
                            if n > 1 && *stride >= copies * len {
                                f.block = *count;
                                return Some(Group::new(off, copies * len, *stride, n));
                            }
                        }
                        // The blocks from here of the same length at the same spacing (a
                        // view window's partial tiles are such lists) are one group.
                        Node::Indexed { blocks, .. } => {
                            let b = f.block as usize;
                            let run = copies * len;
                            if let Some(next) = blocks.get(b + 1) {
                                let step = next.disp.wrapping_sub(blocks[b].disp);
                                if next.disp >= blocks[b].disp + run && next.blocklen == copies {
                                    let mut k = b + 1;
                                    while blocks.get(k + 1).is_some_and(|x| {
                                        x.blocklen == copies
                                            && x.disp.wrapping_sub(blocks[k].disp) == step
                                    }) {
                                        k += 1;
                                    }
                                    f.block = k as u64 + 1;
                                    return Some(Group::new(off, run, step, (k - b + 1) as u64));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                if ci.dense_bytes {
                    let n = copies - f.copy;
                    f.copy = copies;
                    return Some(Group::new(off, n * len, n * len, 1));
                }
                // Copies in the block, one extent apart.
                let n = copies - f.copy;
                f.copy = copies;
                return Some(Group::new(off, len, ci.extent, n));
            }
            f.copy += 1;
            self.stack.push(Frame {
                node: ci.target,
                base: off,
                block: 0,
                copy: 0,
            });
        }
    }

    /// The next group of runs (see `Group`): the same bytes as `next` gives, in the same
    /// order and clipped alike after `seek_to`, many equal runs at a time. Not to be mixed
    /// with `next` on one iterator (each keeps its own state between calls).
    pub fn next_group(&mut self) -> Option<Group> {
        if let Some(g) = self.held.take() {
            return Some(g);
        }
        loop {
            let g = self.next_raw_group()?;
            if g.len == 0 {
                continue;
            }
            if g.start >= self.clip {
                return Some(g);
            }
            if g.hull().end <= self.clip {
                continue;
            }
            // The first run that ends past the clip; runs before it are skipped.
            let i = if g.start + g.len > self.clip {
                0
            } else {
                (self.clip - g.start - g.len) / g.stride.max(1) + 1
            };
            let g = g.from(i);
            if g.start >= self.clip {
                return Some(g);
            }
            let first = ByteRange {
                start: self.clip,
                end: g.start + g.len,
            };
            if g.count > 1 {
                self.held = Some(g.from(1));
            }
            return Some(Group::one(first));
        }
    }

    /// Positions frames so iteration resumes at the first run of container `node` (placed
    /// at `base`, holding data) that may hold bytes at or after `off`.
    ///
    /// Rule at every level: land on the last block, and in it the last copy, whose *data*
    /// starts at or before `off` (data can start well after a displacement when an element
    /// has a positive lower bound). In a monotone pattern everything before that element ends
    /// at or before `off`, so nothing needed is skipped; what lands early is clipped.
    fn descend(&mut self, node: u32, base: u64, off: u64) {
        let inner = self.inner;
        let info = &inner.info;
        let push = |stack: &mut smallvec::SmallVec<[Frame; 8]>, block: u64, copy: u64| {
            stack.push(Frame {
                node,
                base,
                block,
                copy,
            })
        };
        if off <= base + info[node as usize].lb {
            return push(&mut self.stack, 0, 0);
        }
        let rel = off - base;
        let (block, disp, copies, child) = match &inner.nodes[node as usize] {
            Node::Vector {
                count,
                blocklen,
                stride,
                elem,
            } => {
                let lb = info[*elem as usize].lb;
                let b = if *stride == 0 {
                    0
                } else {
                    ((rel - lb) / stride).min(count - 1)
                };
                (b, b * stride, *blocklen, *elem)
            }
            Node::Indexed { blocks, elem } => {
                let lb = info[*elem as usize].lb;
                let k0 = blocks.partition_point(|b| b.disp + lb <= rel);
                match (0..k0).rev().find(|&k| blocks[k].blocklen > 0) {
                    Some(k) => (k as u64, blocks[k].disp, blocks[k].blocklen, *elem),
                    None => return push(&mut self.stack, k0 as u64, 0),
                }
            }
            Node::Struct { fields } => {
                // Field displacements are sorted, so `k0` bounds the candidates; data starts
                // are sorted only among fields that hold data, hence the backward walk.
                let k0 = fields.partition_point(|f| f.disp <= rel);
                let found = (0..k0).rev().find(|&k| {
                    let f = &fields[k];
                    let e = &info[f.elem as usize];
                    f.blocklen > 0 && e.size > 0 && f.disp + e.lb <= rel
                });
                match found {
                    Some(k) => (k as u64, fields[k].disp, fields[k].blocklen, fields[k].elem),
                    None => return push(&mut self.stack, k0 as u64, 0),
                }
            }
            Node::Bytes { .. } | Node::Resized { .. } => unreachable!("frames hold containers"),
        };
        let ci = info[child as usize];
        let within = rel - disp;
        let copy = (within - ci.lb)
            .checked_div(ci.extent)
            .map_or(0, |c| c.min(copies - 1));
        if matches!(inner.nodes[ci.target as usize], Node::Bytes { .. }) {
            // The frame itself emits this copy (and, when dense, the rest of the block).
            return push(&mut self.stack, block, copy);
        }
        push(&mut self.stack, block, copy + 1);
        self.descend(ci.target, base + disp + copy * ci.extent, off);
    }

    /// Repositions at `offset`; only meaningful for monotone patterns (see `Access`).
    pub fn seek_to(&mut self, offset: u64) {
        self.stack.clear();
        self.leaf = None;
        self.pending = None;
        self.held = None;
        self.clip = offset;
        self.position_root(offset);
    }
}

impl Iterator for Runs<'_> {
    type Item = ByteRange;

    #[inline]
    fn next(&mut self) -> Option<ByteRange> {
        loop {
            let Some(r) = self.next_raw() else {
                return self.pending.take();
            };
            if r.end <= self.clip {
                continue;
            }
            let r = ByteRange {
                start: r.start.max(self.clip),
                end: r.end,
            };
            match &mut self.pending {
                Some(p) if p.end == r.start && self.coalesced < self.coalesce_max => {
                    p.end = r.end;
                    self.coalesced += 1;
                }
                Some(p) => {
                    self.coalesced = 1;
                    return Some(std::mem::replace(p, r));
                }
                None => {
                    self.coalesced = 1;
                    self.pending = Some(r);
                }
            }
        }
    }
}

impl RangeCursor for Runs<'_> {
    fn next_range(&mut self) -> Option<ByteRange> {
        self.next()
    }
    fn seek(&mut self, offset: u64) {
        self.seek_to(offset)
    }
}

impl Inner {
    /// Data bytes of node `n` (one copy, origin 0) at offsets below `off`. Exact for
    /// monotone nodes: at every level the blocks and copies before the one holding `off`
    /// are counted whole and those after it not at all, so the work is O(depth) for vectors
    /// and O(blocks) for indexed and struct nodes — never proportional to the runs.
    fn data_before(&self, n: u32, off: u64) -> u64 {
        let i = &self.info[n as usize];
        if i.size == 0 || off <= i.lb {
            return 0;
        }
        if off >= i.ub {
            return i.size;
        }
        match &self.nodes[n as usize] {
            Node::Bytes { len } => off.min(*len),
            Node::Resized { elem, .. } => self.data_before(*elem, off),
            Node::Vector {
                count,
                blocklen,
                stride,
                elem,
            } => {
                let e = &self.info[*elem as usize];
                // off > lb of this node = lb of the element, so no underflow.
                let b = if *stride == 0 {
                    0
                } else {
                    ((off - e.lb) / stride).min(count - 1)
                };
                b * blocklen * e.size + self.copies_before(*elem, *blocklen, off - b * stride)
            }
            Node::Indexed { blocks, elem } => {
                let e = &self.info[*elem as usize];
                let mut total = 0;
                for b in blocks.iter().filter(|b| b.blocklen > 0) {
                    if b.disp + e.lb >= off {
                        break;
                    }
                    total += self.copies_before(*elem, b.blocklen, off - b.disp);
                }
                total
            }
            Node::Struct { fields } => {
                let mut total = 0;
                for f in fields.iter().filter(|f| f.blocklen > 0) {
                    let e = &self.info[f.elem as usize];
                    if e.size == 0 {
                        continue;
                    }
                    if f.disp + e.lb >= off {
                        break;
                    }
                    total += self.copies_before(f.elem, f.blocklen, off - f.disp);
                }
                total
            }
        }
    }

    /// Data bytes below `rel` of `copies` copies of node `elem` laid every extent from 0.
    fn copies_before(&self, elem: u32, copies: u64, rel: u64) -> u64 {
        let e = &self.info[elem as usize];
        if copies == 0 || e.size == 0 || rel <= e.lb {
            return 0;
        }
        let c = (rel - e.lb)
            .checked_div(e.extent)
            .map_or(0, |c| c.min(copies - 1));
        c * e.size + self.data_before(elem, rel - c * e.extent)
    }
}

impl Pattern {
    /// Data bytes of one copy of the pattern (origin 0) at offsets below `off`, in
    /// O(depth) for vectors (O(blocks) for indexed and struct levels). Meaningful only for
    /// monotone patterns (see `Access`), where it is exact.
    pub fn data_before(&self, off: u64) -> u64 {
        let root = self.inner.nodes.len() - 1;
        self.inner.data_before(root as u32, off)
    }
}

impl Pattern {
    /// The pattern's runs in typemap order, placed at `base`, touching runs coalesced.
    /// The caller guarantees `base` + the pattern's extent and data bound fit in u64 (see
    /// `Access::new`, which checks it against `MAX_OFFSET`).
    pub fn runs(&self, base: u64) -> Runs<'_> {
        Runs::new(self, base)
    }
}
