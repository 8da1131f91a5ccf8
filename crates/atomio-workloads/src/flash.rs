//! FLASH-IO checkpoint (Logan et al., Interval I/O §5.1; the FLASH I/O benchmark).
//!
//! Each process holds `blocks_per_client` blocks of `block_edge³` cells (FLASH: 80 blocks of
//! 8³ = 512 cells) with `variables` double-precision variables per cell (24). The file is
//! ordered by variable: all of variable 0 for every block of every process, then variable 1,
//! …; within a variable, processes in rank order and each process's blocks contiguous. With
//! `N` clients and `B = blocks_per_client · block_edge³ · 8` bytes (one variable of one
//! process), client `c`'s part of variable `v` is the contiguous range
//!
//! ```text
//! [(v·N + c)·B, (v·N + c + 1)·B)
//! ```
//!
//! By default each client writes its 24 ranges in one call: an hvector of `variables` blocks
//! of `B` bytes with stride `N·B` at base `c·B` (one atomic noncontiguous write). With
//! `per_variable` it issues one contiguous write per variable instead — what FLASH-IO
//! itself does through HDF5 (one dataset write per variable; Logan notes the benefit of
//! caching "a number of separate MPI-IO write operations").
//!
//! Defaults are the paper's own per-process sizes, unscaled: B = 327,680 B, 7.5 MiB per
//! client per checkpoint (Logan: "approximately 7.5 MB"); 30 MiB at 4 clients, 120 MiB at
//! 16 (the paper ran 16–256 processes).
//!
//! **Invariants:** no two clients' writes overlap; together they tile `[0, file_bytes)`,
//! `file_bytes = variables·N·B`; the single-call pattern is 2 nodes.

use crate::error::{Ctx, Result};
use crate::plan::{PlanBuilder, WorkloadPlan};
use atomio_layout::{Access, ByteRange, Pattern};
use serde::{Deserialize, Serialize};

/// Bytes per value (double precision).
pub const FLASH_VALUE_BYTES: u64 = 8;

/// FLASH-IO checkpoint parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct FlashParams {
    /// Blocks per process [FLASH: 80].
    #[arg(long, default_value_t = 80)]
    pub blocks_per_client: u64,
    /// Cells along each edge of a block (nxb = nyb = nzb) [FLASH: 8, i.e. 512 cells].
    #[arg(long, default_value_t = 8)]
    pub block_edge: u64,
    /// Variables per cell, each a double [FLASH: 24].
    #[arg(long, default_value_t = 24)]
    pub variables: u64,
    /// One contiguous write per variable instead of one vector write per client.
    #[arg(long)]
    pub per_variable: bool,
}

impl Default for FlashParams {
    fn default() -> Self {
        crate::workload::defaults()
    }
}

pub(crate) fn plan(p: &FlashParams, clients: u32) -> Result<WorkloadPlan> {
    let ctx = Ctx("flash");
    let mut b = PlanBuilder::new(ctx, clients)?;
    let blocks = ctx.nonzero(p.blocks_per_client, "blocks_per_client")?;
    let edge = ctx.nonzero(p.block_edge, "block_edge")?;
    let vars = ctx.nonzero(p.variables, "variables")?;
    let n = u64::from(clients);
    let var_bytes = ctx.product(
        &[blocks, edge, edge, edge, FLASH_VALUE_BYTES],
        "bytes per variable per client",
    )?;
    let stride = ctx.mul(n, var_bytes, "variable stride")?;
    ctx.mul(vars, stride, "file size")?;
    if p.per_variable {
        b.expect_calls(vars.checked_mul(n))?;
    }
    let chunk = ctx.layout(Pattern::bytes(var_bytes))?;
    let all_vars = ctx.layout(Pattern::hvector(vars, 1, stride, &chunk))?;
    for c in 0..n {
        if p.per_variable {
            for v in 0..vars {
                let range = ctx.layout(ByteRange::at((v * n + c) * var_bytes, var_bytes))?;
                b.write(c as u32, ctx.layout(Access::contiguous(range))?)?;
            }
        } else {
            b.write(
                c as u32,
                ctx.layout(Access::new(c * var_bytes, all_vars.clone()))?,
            )?;
        }
    }
    b.finish(p, false)
}
