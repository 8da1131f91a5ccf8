//! Same bytes, more regions (Tran et al. 2010 §6.3): one client writes a fixed amount of
//! data split into `regions` equal noncontiguous regions (the paper doubles R from 1 to
//! 1024 with 1 GB) and, with `read_back`, reads the same regions back (the paper measures
//! `NONCONT_WRITE` and `NONCONT_READ`).
//!
//! With `L = bytes_per_client / regions` and `stride = L + gap_bytes`, region `r` of client
//! `c` is `[c·regions·stride + r·stride, … + L)`: one hvector call of `regions` blocks.
//! Tran does not say how far apart the regions are; the default gap equals the region size
//! (every other `L`-byte slot is written), so the bounding extent is twice the data and the
//! region count is the only thing that changes along a sweep. `gap_bytes = 0` makes the
//! regions touch (the same bytes as one contiguous write, described as R pieces).
//!
//! The experiment is single-client. With `N > 1` clients each writes its own copy in its own
//! disjoint file segment of `regions·stride` bytes (N independent single-writer runs); no
//! writes overlap.
//!
//! Defaults: 64 MiB in 1024 regions of 64 KiB (paper: 1 GB, regions of 1 MiB at R = 1024;
//! scale 1/16). `bytes_per_client` must be a multiple of `regions`.
//!
//! **Invariants:** each client issues one `Write` (then one `Read` of the same access with
//! `read_back`); a 2-node pattern whatever R is.

use crate::error::{Ctx, Result};
use crate::plan::{PlanBuilder, WorkloadPlan};
use atomio_layout::{Access, Pattern};
use serde::{Deserialize, Serialize};

/// Regions parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct RegionsParams {
    /// Number of equal regions the data is split into [Tran: 1, 2, 4, …, 1024].
    #[arg(long, default_value_t = 1024)]
    pub regions: u64,
    /// Bytes each client writes in total [Tran: 1 GB].
    #[arg(long, default_value_t = 64 << 20)]
    pub bytes_per_client: u64,
    /// Bytes between consecutive regions. Default: the region size.
    #[arg(long)]
    pub gap_bytes: Option<u64>,
    /// After the write, read the same regions back (one more call).
    #[arg(long)]
    pub read_back: bool,
}

impl Default for RegionsParams {
    fn default() -> Self {
        crate::workload::defaults()
    }
}

pub(crate) fn plan(p: &RegionsParams, clients: u32) -> Result<WorkloadPlan> {
    let ctx = Ctx("regions");
    let mut b = PlanBuilder::new(ctx, clients)?;
    let regions = ctx.nonzero(p.regions, "regions")?;
    let total = ctx.nonzero(p.bytes_per_client, "bytes_per_client")?;
    if !total.is_multiple_of(regions) {
        return Err(ctx.invalid(format!(
            "bytes_per_client = {total} is not a multiple of regions = {regions}: the regions must be equal"
        )));
    }
    let len = total / regions;
    let gap = p.gap_bytes.unwrap_or(len);
    let stride = ctx.add(len, gap, "region stride")?;
    let segment = ctx.mul(regions, stride, "bytes per client segment")?;
    ctx.mul(segment, u64::from(clients), "file size")?;
    let region = ctx.layout(Pattern::bytes(len))?;
    let pattern = ctx.layout(Pattern::hvector(regions, 1, stride, &region))?;
    for c in 0..u64::from(clients) {
        let access = ctx.layout(Access::new(c * segment, pattern.clone()))?;
        b.write(c as u32, access.clone())?;
        if p.read_back {
            b.read(c as u32, access)?;
        }
    }
    let resolved = RegionsParams {
        gap_bytes: Some(gap),
        ..p.clone()
    };
    b.finish(&resolved, false)
}
