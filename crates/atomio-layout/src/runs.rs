//! Lazy iteration over the contiguous runs of a pattern, with arithmetic seek.
//!
//! **Invariants:** memory is O(depth) whatever the pattern's size; runs come out in typemap
//! order with touching runs coalesced (at most `coalescing_at_most` raw runs each); after `seek(off)` (monotone patterns only) the runs
//! are exactly the pattern's bytes at or after `off`, found by descending the pattern with
//! divisions and binary searches, never by scanning the runs before `off`.

use crate::pattern::{Inner, Node, Pattern};
use crate::range::ByteRange;
use crate::range_list::RangeCursor;

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
