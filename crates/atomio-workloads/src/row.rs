//! Row of overlapping subdomains (Tran et al. 2010 §6.4): the extreme case for locking.
//!
//! Client `c` of `N` holds subdomain `c` of a single row: a `height × width` block of
//! `element_bytes`-byte elements in a row-major array `height` rows tall and
//! `N·width − (N − 1)·overlap` elements wide, starting at column `c·(width − overlap)`.
//! Adjacent subdomains share `overlap` columns (default `width / 8`: Tran's 128 of 1024),
//! so every one of a client's `height` regions overlaps a neighbour's, and the regions of one
//! client are a whole array row apart — its bounding extent spans almost the whole file.
//! This is the `shared` tiling of [`crate::tile`] with `tiles_y = 1`.
//!
//! Defaults are Tran's 1024×1024 × 1 KiB scaled by 1/64 per client: 128 rows of 128
//! elements of 1 KiB (16 MiB per client in 128 regions of 128 KiB; paper: 1 GiB in 1024
//! regions of 1 MiB) with a 16-element overlap: 64 MiB at 4 clients, 256 MiB at 16.
//!
//! **Invariants:** one `Write` per client, a 2-D subarray (one run per row); writes overlap
//! iff `overlap > 0` and there are at least two clients; the union is the whole array.

use crate::error::{Ctx, Result};
use crate::plan::WorkloadPlan;
use crate::tile::{OverlapMode, Tiling};
use serde::{Deserialize, Serialize};

/// Row-of-subdomains parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct RowParams {
    /// Elements per subdomain row, overlap included [Tran: 1024].
    #[arg(long, default_value_t = 128)]
    pub width: u64,
    /// Rows per subdomain: the number of noncontiguous regions per client [Tran: 1024].
    #[arg(long, default_value_t = 128)]
    pub height: u64,
    /// Bytes per element [Tran: 1024].
    #[arg(long, default_value_t = 1024)]
    pub element_bytes: u64,
    /// Columns shared with each neighbour. Default: width / 8 (Tran: 128 of 1024).
    #[arg(long)]
    pub overlap: Option<u64>,
}

impl Default for RowParams {
    fn default() -> Self {
        crate::workload::defaults()
    }
}

pub(crate) fn plan(p: &RowParams, clients: u32) -> Result<WorkloadPlan> {
    let ctx = Ctx("row");
    if clients == 0 {
        return Err(ctx.clients(0, "at least one client is needed"));
    }
    let overlap = p.overlap.unwrap_or(p.width / 8);
    let resolved = RowParams {
        overlap: Some(overlap),
        ..p.clone()
    };
    Tiling {
        tiles_x: u64::from(clients),
        tiles_y: 1,
        tile_x: p.width,
        tile_y: p.height,
        overlap_x: overlap,
        overlap_y: 0,
        mode: OverlapMode::Shared,
        element_bytes: p.element_bytes,
        header_bytes: 0,
        names: ["width", "height", "overlap", "overlap_y"],
    }
    .plan(ctx, &resolved)
}
