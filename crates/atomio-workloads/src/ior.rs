//! IOR N-1 segmented and N-1 strided (Chen et al. 2022, seqdlm §II-A Fig. 2 and §V-C).
//!
//! Each client issues `segments × transfers_per_block` contiguous writes of `xfer_bytes`,
//! in IOR's loop order (segment outer, transfer inner). With `N` clients, client `c`,
//! `block = transfers_per_block · xfer_bytes`:
//!
//! * **segmented** (IOR `-b block -t xfer -s segments`): transfer `t` of segment `s` is at
//!   `(s·N + c)·block + t·xfer`; each client's data is contiguous within a segment.
//! * **strided** (IOR with `-b` = `-t`, as IO500 ior-hard: `-t 47008 -b 47008`): the `k`-th
//!   transfer (`k = s·transfers_per_block + t`) is at `(k·N + c)·xfer`; consecutive
//!   transfers of one client are `N·xfer` apart and neighbours' transfers touch.
//!
//! Both move the same bytes (`segments · block` per client) into a file of
//! `N · segments · block` bytes, so the two patterns compare at equal volume, as seqdlm's
//! Fig. 20 does. Transfer sizes of the paper: 64 KiB (segmented, single stripe), 64 KiB …
//! 1 MiB (strided), and 47,008 B (IO500 ior-hard) with ×4 and ×16 multiples.
//!
//! Defaults: 64 KiB transfers, 16 per block, and as many segments as make ~16 MiB per
//! client (paper: 2 GiB per client on 16 clients; scale 1/128): 16 segments at 64 KiB, 1 at
//! 1 MiB, 22 (16.5 MB) at 47,008 B — 64 MiB at 4 clients, 256 MiB at 16.
//!
//! **Invariants:** every call is one contiguous write of `xfer_bytes`; no two clients'
//! writes overlap; together they tile `[0, file_bytes)` exactly.

use crate::error::{Ctx, Result};
use crate::plan::{PlanBuilder, WorkloadPlan};
use atomio_layout::{Access, ByteRange};
use serde::{Deserialize, Serialize};

/// Bytes per client the default segment count aims at.
pub const IOR_DEFAULT_BYTES_PER_CLIENT: u64 = 16 << 20;
/// IO500 ior-hard's transfer size.
pub const IOR_HARD_XFER_BYTES: u64 = 47_008;

/// IOR parameters (shared by the segmented and strided variants).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct IorParams {
    /// Bytes per write call (IOR -t) [seqdlm: 65536, 1048576, 47008 (IO500 ior-hard)].
    #[arg(long, default_value_t = 65_536)]
    pub xfer_bytes: u64,
    /// Transfers per block (IOR -b / -t); in strided mode only the total count matters.
    #[arg(long, default_value_t = 16)]
    pub transfers_per_block: u64,
    /// Segments (IOR -s). Default: round(16 MiB / block), at least 1.
    #[arg(long)]
    pub segments: Option<u64>,
}

impl Default for IorParams {
    fn default() -> Self {
        crate::workload::defaults()
    }
}

impl IorParams {
    /// IO500 ior-hard: strided 47,008-byte transfers.
    pub fn ior_hard() -> Self {
        Self {
            xfer_bytes: IOR_HARD_XFER_BYTES,
            ..Self::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IorMode {
    Segmented,
    Strided,
}

pub(crate) fn plan(mode: IorMode, p: &IorParams, clients: u32) -> Result<WorkloadPlan> {
    let ctx = Ctx(match mode {
        IorMode::Segmented => "ior-segmented",
        IorMode::Strided => "ior-strided",
    });
    let xfer = ctx.nonzero(p.xfer_bytes, "xfer_bytes")?;
    let tpb = ctx.nonzero(p.transfers_per_block, "transfers_per_block")?;
    let block = ctx.mul(tpb, xfer, "block size (transfers_per_block × xfer_bytes)")?;
    let segments = match p.segments {
        Some(s) => ctx.nonzero(s, "segments")?,
        None => ((IOR_DEFAULT_BYTES_PER_CLIENT + block / 2) / block).max(1),
    };
    let mut b = PlanBuilder::new(ctx, clients)?;
    let n = u64::from(clients);
    let transfers = ctx.mul(segments, tpb, "transfers per client")?;
    b.expect_calls(transfers.checked_mul(n))?;
    // The last byte: N·segments·block must be a valid offset.
    ctx.mul(ctx.mul(n, segments, "file size")?, block, "file size")?;
    for c in 0..n {
        for s in 0..segments {
            for t in 0..tpb {
                let offset = match mode {
                    IorMode::Segmented => (s * n + c) * block + t * xfer,
                    IorMode::Strided => ((s * tpb + t) * n + c) * xfer,
                };
                let range = ctx.layout(ByteRange::at(offset, xfer))?;
                b.write(c as u32, ctx.layout(Access::contiguous(range))?)?;
            }
        }
    }
    let resolved = IorParams {
        segments: Some(segments),
        ..p.clone()
    };
    b.finish(&resolved, false)
}
