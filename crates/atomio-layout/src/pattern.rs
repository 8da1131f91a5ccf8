//! Structured access patterns (MPI-datatype-like) in a flat, validated, serializable form.
//!
//! A pattern is a DAG of nodes stored in one array; a node refers only to *earlier* nodes and
//! the last node is the root. That shape is what travels on the wire: decoding it never
//! recurses, so a hostile frame cannot blow the stack, and validation is one forward pass.
//!
//! Node meanings (all displacements and strides in bytes, all relative to the node's origin):
//! * `Bytes { len }` — `len` contiguous bytes; extent `len`.
//! * `Vector { count, blocklen, stride, elem }` — block `i` at `i * stride`; a block is
//!   `blocklen` copies of `elem`, copy `j` at `j * extent(elem)` (MPI hvector).
//! * `Indexed { blocks, elem }` — block `k` at `blocks[k].disp`, `blocks[k].blocklen` copies.
//! * `Struct { fields }` — like `Indexed` but each field has its own element node.
//! * `Resized { extent, elem }` — the data of `elem`, with its extent replaced (the spacing
//!   its parents use for repetition).
//!
//! **Invariants** (checked by `Pattern::from_nodes`, which every constructor and the decoder
//! go through): children precede parents; depth ≤ `MAX_PATTERN_DEPTH`; node, block and field
//! counts ≤ `MAX_PATTERN_ITEMS`; size, extent and data bounds fit in `MAX_OFFSET` without
//! overflow. `monotone()` tells whether typemap order is strictly increasing and
//! non-overlapping — the MPI rule for file views, and what `seek` and lock shares rely on.

use crate::error::LayoutError;
use crate::range::MAX_OFFSET;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Deepest nesting accepted (iteration keeps one frame per level).
pub const MAX_PATTERN_DEPTH: usize = 32;
/// Most nodes + indexed blocks + struct fields accepted in one pattern.
pub const MAX_PATTERN_ITEMS: usize = 1 << 20;

/// One block of an `Indexed` node: `blocklen` copies of the element at byte `disp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub disp: u64,
    pub blocklen: u64,
}

/// One field of a `Struct` node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    pub disp: u64,
    pub blocklen: u64,
    pub elem: u32,
}

/// A node of the flat pattern DAG (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Node {
    Bytes {
        len: u64,
    },
    Vector {
        count: u64,
        blocklen: u64,
        stride: u64,
        elem: u32,
    },
    Indexed {
        blocks: Vec<Block>,
        elem: u32,
    },
    Struct {
        fields: Vec<Field>,
    },
    Resized {
        extent: u64,
        elem: u32,
    },
}

/// Array order of a subarray's dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Order {
    /// Row-major: the last dimension varies fastest.
    C,
    /// Column-major: the first dimension varies fastest.
    Fortran,
}

/// Facts about a node computed once at validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeInfo {
    /// Bytes of data.
    pub size: u64,
    /// Spacing used when a parent repeats this node.
    pub extent: u64,
    /// First and one-past-last data byte (meaningful when `size > 0`).
    pub lb: u64,
    pub ub: u64,
    /// Upper bound on the number of leaf runs typemap iteration produces.
    pub runs: u64,
    /// Typemap order is increasing and non-overlapping.
    pub monotone: bool,
    pub depth: u32,
    /// The first node below any chain of `Resized` wrappers.
    pub target: u32,
    /// `target` is `Bytes` whose copies at this node's extent touch (one run per block).
    pub dense_bytes: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Inner {
    pub nodes: Vec<Node>,
    pub info: Vec<NodeInfo>,
}

/// A validated structured pattern. Cheap to clone (shared).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Node>", into = "Vec<Node>")]
pub struct Pattern {
    pub(crate) inner: Arc<Inner>,
}

impl TryFrom<Vec<Node>> for Pattern {
    type Error = LayoutError;
    fn try_from(nodes: Vec<Node>) -> Result<Self, LayoutError> {
        Pattern::from_nodes(nodes)
    }
}

impl From<Pattern> for Vec<Node> {
    fn from(p: Pattern) -> Vec<Node> {
        p.inner.nodes.clone()
    }
}

fn overflow(what: &'static str) -> LayoutError {
    LayoutError::PatternOverflow { what }
}

fn mul(a: u64, b: u64, what: &'static str) -> Result<u64, LayoutError> {
    a.checked_mul(b).ok_or_else(|| overflow(what))
}

fn add(a: u64, b: u64, what: &'static str) -> Result<u64, LayoutError> {
    a.checked_add(b).ok_or_else(|| overflow(what))
}

fn bounded(v: u64, what: &'static str) -> Result<u64, LayoutError> {
    if v > MAX_OFFSET {
        Err(LayoutError::PatternTooLarge {
            what,
            value: v,
            limit: MAX_OFFSET,
        })
    } else {
        Ok(v)
    }
}

/// Accumulates the blocks of an `Indexed` or `Struct` node in typemap order.
struct BlockSummer {
    size: u64,
    extent: u64,
    lb: u64,
    ub: u64,
    runs: u64,
    monotone: bool,
    any: bool,
}

impl BlockSummer {
    fn new() -> Self {
        Self {
            size: 0,
            extent: 0,
            lb: 0,
            ub: 0,
            runs: 0,
            monotone: true,
            any: false,
        }
    }

    fn add(&mut self, disp: u64, blocklen: u64, e: &NodeInfo) -> Result<(), LayoutError> {
        let span = mul(blocklen, e.extent, "block extent")?;
        self.extent = self.extent.max(add(disp, span, "block end")?);
        if blocklen == 0 || e.size == 0 {
            return Ok(());
        }
        self.size = add(
            self.size,
            mul(blocklen, e.size, "block size")?,
            "pattern size",
        )?;
        self.runs = add(
            self.runs,
            if e.dense_bytes {
                1
            } else {
                mul(blocklen, e.runs, "run count")?
            },
            "run count",
        )?;
        let lb = add(disp, e.lb, "data bound")?;
        let ub = add(
            add(
                disp,
                mul(blocklen - 1, e.extent, "data bound")?,
                "data bound",
            )?,
            e.ub,
            "data bound",
        )?;
        let copies_ok = blocklen == 1 || e.ub - e.lb <= e.extent;
        if !e.monotone || !copies_ok || (self.any && lb < self.ub) {
            self.monotone = false;
        }
        if self.any {
            self.lb = self.lb.min(lb);
            self.ub = self.ub.max(ub);
        } else {
            self.lb = lb;
            self.ub = ub;
        }
        self.any = true;
        Ok(())
    }

    /// The node's facts from the sums, at nesting `depth`, as node `i` of its pattern.
    fn info(&self, depth: u32, i: usize) -> NodeInfo {
        NodeInfo {
            size: self.size,
            extent: self.extent,
            lb: self.lb,
            ub: self.ub,
            runs: self.runs,
            monotone: self.monotone,
            depth,
            target: i as u32,
            dense_bytes: false,
        }
    }
}

/// The facts of node `i = info.len()` of `nodes`, from those of the nodes before it.
fn node_info(nodes: &[Node], info: &[NodeInfo]) -> Result<NodeInfo, LayoutError> {
    let i = info.len();
    let child = |elem: u32| -> Result<NodeInfo, LayoutError> {
        let e = elem as usize;
        if e >= i {
            return Err(LayoutError::InvalidPattern {
                what: format!("node {i} refers to node {e}, which does not come before it"),
            });
        }
        Ok(info[e])
    };
    Ok(match &nodes[i] {
        Node::Bytes { len } => {
            let len = bounded(*len, "byte run length")?;
            NodeInfo {
                size: len,
                extent: len,
                lb: 0,
                ub: len,
                runs: u64::from(len > 0),
                monotone: true,
                depth: 1,
                target: i as u32,
                dense_bytes: true,
            }
        }
        Node::Vector {
            count,
            blocklen,
            stride,
            elem,
        } => {
            let e = child(*elem)?;
            vector_summer(*count, *blocklen, *stride, &e)?.info(e.depth + 1, i)
        }
        Node::Indexed { blocks, elem } => {
            let e = child(*elem)?;
            let mut s = BlockSummer::new();
            let mut last_disp = 0;
            for (k, b) in blocks.iter().enumerate() {
                s.add(b.disp, b.blocklen, &e)?;
                if k > 0 && b.disp < last_disp {
                    s.monotone = false;
                }
                last_disp = b.disp;
            }
            s.info(e.depth + 1, i)
        }
        Node::Struct { fields } => {
            let mut s = BlockSummer::new();
            let mut depth = 1;
            let mut last_disp = 0;
            for (k, f) in fields.iter().enumerate() {
                let e = child(f.elem)?;
                s.add(f.disp, f.blocklen, &e)?;
                if k > 0 && f.disp < last_disp {
                    s.monotone = false;
                }
                last_disp = f.disp;
                depth = depth.max(e.depth + 1);
            }
            s.info(depth, i)
        }
        Node::Resized { extent, elem } => {
            let e = child(*elem)?;
            let extent = bounded(*extent, "resized extent")?;
            let target = e.target;
            let dense = matches!(nodes[target as usize], Node::Bytes { len } if len == extent);
            NodeInfo {
                extent,
                target,
                dense_bytes: dense,
                depth: e.depth + 1,
                ..e
            }
        }
    })
}

/// The sums of a `Vector` of `count` blocks of `blocklen` copies of `e`, `stride` apart.
fn vector_summer(
    count: u64,
    blocklen: u64,
    stride: u64,
    e: &NodeInfo,
) -> Result<BlockSummer, LayoutError> {
    let block_span = mul(blocklen, e.extent, "vector block extent")?;
    let extent = if count == 0 {
        0
    } else {
        add(
            mul(count - 1, stride, "vector extent")?,
            block_span,
            "vector extent",
        )?
    };
    let mut s = BlockSummer::new();
    s.extent = extent;
    if count > 0 && blocklen > 0 && e.size > 0 {
        s.size = mul(mul(count, blocklen, "vector size")?, e.size, "vector size")?;
        s.runs = if e.dense_bytes {
            count
        } else {
            mul(mul(count, blocklen, "run count")?, e.runs, "run count")?
        };
        s.lb = e.lb;
        let last_block = mul(count - 1, stride, "vector bound")?;
        s.ub = add(
            add(
                last_block,
                mul(blocklen - 1, e.extent, "vector bound")?,
                "vector bound",
            )?,
            e.ub,
            "vector bound",
        )?;
        let copies_ok = blocklen == 1 || e.ub - e.lb <= e.extent;
        // Block i+1's data must start at or after block i's data ends.
        let block_data_end = add(mul(blocklen - 1, e.extent, "")?, e.ub, "vector bound")?;
        let blocks_ok = count == 1
            || stride
                .checked_add(e.lb)
                .is_some_and(|next| next >= block_data_end);
        s.monotone = e.monotone && copies_ok && blocks_ok;
    }
    Ok(s)
}

impl Pattern {
    /// Validates a flat node array (children before parents, root last) and computes the
    /// per-node facts iteration needs.
    pub fn from_nodes(nodes: Vec<Node>) -> Result<Self, LayoutError> {
        if nodes.is_empty() {
            return Err(LayoutError::InvalidPattern {
                what: "a pattern needs at least one node".into(),
            });
        }
        let items: usize = nodes
            .iter()
            .map(|n| match n {
                Node::Indexed { blocks, .. } => 1 + blocks.len(),
                Node::Struct { fields } => 1 + fields.len(),
                _ => 1,
            })
            .sum();
        if items > MAX_PATTERN_ITEMS {
            return Err(LayoutError::PatternTooLarge {
                what: "nodes + blocks + fields",
                value: items as u64,
                limit: MAX_PATTERN_ITEMS as u64,
            });
        }
        let mut info: Vec<NodeInfo> = Vec::with_capacity(nodes.len());
        while info.len() < nodes.len() {
            let ni = node_info(&nodes, &info)?;
            bounded(ni.size, "pattern size")?;
            bounded(ni.extent, "pattern extent")?;
            if ni.size > 0 {
                bounded(ni.ub, "pattern data bound")?;
            }
            if ni.depth as usize > MAX_PATTERN_DEPTH {
                return Err(LayoutError::PatternTooLarge {
                    what: "nesting depth",
                    value: u64::from(ni.depth),
                    limit: MAX_PATTERN_DEPTH as u64,
                });
            }
            info.push(ni);
        }
        Ok(Self {
            inner: Arc::new(Inner { nodes, info }),
        })
    }

    fn root_info(&self) -> &NodeInfo {
        self.inner.info.last().expect("validated: non-empty")
    }

    pub fn nodes(&self) -> &[Node] {
        &self.inner.nodes
    }

    /// Bytes of data node `i` selects (`i` < `nodes().len()`): for walks over the DAG
    /// that keep its structure (the interval analysis lowers vectors to strided families).
    pub fn node_size(&self, i: u32) -> u64 {
        self.inner.info[i as usize].size
    }

    /// The extent (repetition spacing) of node `i`.
    pub fn node_extent(&self, i: u32) -> u64 {
        self.inner.info[i as usize].extent
    }

    /// Bytes of data the pattern selects.
    pub fn size(&self) -> u64 {
        self.root_info().size
    }

    /// The spacing used when the pattern is repeated (MPI extent).
    pub fn extent(&self) -> u64 {
        self.root_info().extent
    }

    /// First and one-past-last data byte relative to the origin, `None` when empty.
    pub fn data_bounds(&self) -> Option<(u64, u64)> {
        let i = self.root_info();
        (i.size > 0).then_some((i.lb, i.ub))
    }

    /// Upper bound on the number of contiguous runs the pattern produces.
    pub fn run_count_upper(&self) -> u64 {
        self.root_info().runs
    }

    /// Typemap order is increasing and non-overlapping (required for file access patterns).
    pub fn monotone(&self) -> bool {
        self.root_info().monotone
    }

    // ----- constructors -------------------------------------------------------------------

    /// `len` contiguous bytes.
    pub fn bytes(len: u64) -> Result<Self, LayoutError> {
        Self::from_nodes(vec![Node::Bytes { len }])
    }

    /// Copies `elem`'s nodes into `nodes` and returns the index of its root there.
    fn append(nodes: &mut Vec<Node>, elem: &Pattern) -> u32 {
        let shift = nodes.len() as u32;
        for n in elem.nodes() {
            let mut n = n.clone();
            match &mut n {
                Node::Bytes { .. } => {}
                Node::Vector { elem, .. }
                | Node::Indexed { elem, .. }
                | Node::Resized { elem, .. } => *elem += shift,
                Node::Struct { fields } => fields.iter_mut().for_each(|f| f.elem += shift),
            }
            nodes.push(n);
        }
        nodes.len() as u32 - 1
    }

    fn wrap(elem: &Pattern, make: impl FnOnce(u32) -> Node) -> Result<Self, LayoutError> {
        let mut nodes = Vec::with_capacity(elem.nodes().len() + 1);
        let e = Self::append(&mut nodes, elem);
        nodes.push(make(e));
        Self::from_nodes(nodes)
    }

    /// `count` copies of `elem` laid end to end (MPI_Type_contiguous).
    pub fn contiguous(count: u64, elem: &Pattern) -> Result<Self, LayoutError> {
        if let [Node::Bytes { len }] = elem.nodes() {
            return Self::bytes(mul(count, *len, "contiguous size")?);
        }
        Self::hvector(1, count, 0, elem)
    }

    /// MPI_Type_vector: the stride counts elements of `elem`.
    pub fn vector(
        count: u64,
        blocklen: u64,
        stride: u64,
        elem: &Pattern,
    ) -> Result<Self, LayoutError> {
        let stride = mul(stride, elem.extent(), "vector stride")?;
        Self::hvector(count, blocklen, stride, elem)
    }

    /// MPI_Type_create_hvector: the stride counts bytes.
    pub fn hvector(
        count: u64,
        blocklen: u64,
        stride: u64,
        elem: &Pattern,
    ) -> Result<Self, LayoutError> {
        Self::wrap(elem, |elem| Node::Vector {
            count,
            blocklen,
            stride,
            elem,
        })
    }

    /// MPI_Type_indexed: displacements count elements of `elem`.
    pub fn indexed(blocks: &[(u64, u64)], elem: &Pattern) -> Result<Self, LayoutError> {
        let ext = elem.extent();
        let blocks = blocks
            .iter()
            .map(|&(disp, blocklen)| {
                Ok(Block {
                    disp: mul(disp, ext, "indexed displacement")?,
                    blocklen,
                })
            })
            .collect::<Result<Vec<_>, LayoutError>>()?;
        Self::hindexed(blocks, elem)
    }

    /// MPI_Type_create_hindexed: displacements count bytes.
    pub fn hindexed(blocks: Vec<Block>, elem: &Pattern) -> Result<Self, LayoutError> {
        Self::wrap(elem, |elem| Node::Indexed { blocks, elem })
    }

    /// MPI_Type_create_struct: `(displacement in bytes, block length, element)` per field.
    pub fn structure(fields: &[(u64, u64, &Pattern)]) -> Result<Self, LayoutError> {
        let mut nodes = Vec::new();
        let mut out = Vec::with_capacity(fields.len());
        for &(disp, blocklen, elem) in fields {
            let e = Self::append(&mut nodes, elem);
            out.push(Field {
                disp,
                blocklen,
                elem: e,
            });
        }
        nodes.push(Node::Struct { fields: out });
        Self::from_nodes(nodes)
    }

    /// MPI_Type_create_resized with a zero lower bound: same data, new extent.
    pub fn resized(extent: u64, elem: &Pattern) -> Result<Self, LayoutError> {
        Self::wrap(elem, |elem| Node::Resized { extent, elem })
    }

    /// MPI_Type_create_subarray: the `subsizes` block at `starts` of a `sizes` array of
    /// `elem`, in C or Fortran order. The result's extent is the whole array, so it tiles.
    /// Lowered to nested vectors (a few nodes, whatever the sizes).
    pub fn subarray(
        sizes: &[u64],
        subsizes: &[u64],
        starts: &[u64],
        order: Order,
        elem: &Pattern,
    ) -> Result<Self, LayoutError> {
        let n = sizes.len();
        if n == 0 || subsizes.len() != n || starts.len() != n {
            return Err(LayoutError::InvalidPattern {
                what: "subarray needs the same number (≥ 1) of sizes, subsizes and starts".into(),
            });
        }
        // Dimension indices from slowest to fastest varying.
        let dims: Vec<usize> = match order {
            Order::C => (0..n).collect(),
            Order::Fortran => (0..n).rev().collect(),
        };
        for &d in &dims {
            let end = add(starts[d], subsizes[d], "subarray start + subsize")?;
            if subsizes[d] == 0 || end > sizes[d] {
                return Err(LayoutError::InvalidPattern {
                    what: format!(
                        "subarray dimension {d}: start {} + subsize {} must be within size {} and subsize ≥ 1",
                        starts[d], subsizes[d], sizes[d]
                    ),
                });
            }
        }
        // Byte stride of each dimension: product of the faster dimensions' sizes × extent.
        let mut strides = vec![0u64; n];
        let mut acc = elem.extent();
        for &d in dims.iter().rev() {
            strides[d] = acc;
            acc = mul(acc, sizes[d], "subarray extent")?;
        }
        let total_extent = acc;
        let fastest = *dims.last().expect("n ≥ 1");
        let mut t = Self::contiguous(subsizes[fastest], elem)?;
        for &d in dims.iter().rev().skip(1) {
            t = Self::hvector(subsizes[d], 1, strides[d], &t)?;
        }
        let mut disp = 0u64;
        for &d in &dims {
            disp = add(
                disp,
                mul(starts[d], strides[d], "subarray offset")?,
                "subarray offset",
            )?;
        }
        let placed = Self::hindexed(vec![Block { disp, blocklen: 1 }], &t)?;
        Self::resized(total_extent, &placed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_facts() {
        let v = Pattern::hvector(4, 2, 10, &Pattern::bytes(3).unwrap()).unwrap();
        assert_eq!(v.size(), 24);
        assert_eq!(v.extent(), 3 * 10 + 6);
        assert_eq!(v.data_bounds(), Some((0, 36)));
        assert!(v.monotone());
        assert_eq!(v.run_count_upper(), 4);
    }

    #[test]
    fn overlapping_vector_is_not_monotone() {
        let v = Pattern::hvector(4, 2, 5, &Pattern::bytes(3).unwrap()).unwrap();
        assert!(!v.monotone());
    }

    #[test]
    fn subarray_extent_is_the_whole_array() {
        let e = Pattern::bytes(8).unwrap();
        let s = Pattern::subarray(&[10, 20], &[3, 4], &[2, 5], Order::C, &e).unwrap();
        assert_eq!(s.extent(), 10 * 20 * 8);
        assert_eq!(s.size(), 3 * 4 * 8);
        assert!(s.monotone());
        assert!(Pattern::subarray(&[10], &[3], &[8], Order::C, &e).is_err());
    }

    #[test]
    fn forward_references_and_overflow_are_rejected() {
        assert!(Pattern::from_nodes(vec![Node::Vector {
            count: 2,
            blocklen: 1,
            stride: 1,
            elem: 0
        }])
        .is_err());
        let big = Pattern::bytes(1 << 40).unwrap();
        assert!(Pattern::hvector(1 << 30, 1, 1 << 40, &big).is_err());
        assert!(Pattern::bytes(u64::MAX).is_err());
    }

    #[test]
    fn depth_is_limited() {
        let mut p = Pattern::bytes(1).unwrap();
        for _ in 0..MAX_PATTERN_DEPTH - 1 {
            p = Pattern::hvector(1, 1, 1, &p).unwrap();
        }
        assert!(Pattern::hvector(1, 1, 1, &p).is_err());
    }
}
