//! VPIC-IO particle dump (Chen et al. 2022, seqdlm §V-E; h5bench's VPIC-IO kernel).
//!
//! Processes write particles into one shared file over `iterations` iterations. A particle
//! has 8 variables of 4 bytes each (VPIC-IO's x, y, z, px, py, pz, id1, id2); each variable
//! is a 1-D dataset, and the datasets lie contiguously one after another (HDF5 headers and
//! metadata are not modelled). In each iteration every process writes, for each variable,
//! its `P` particles' values as one contiguous write — N-1 segmented per variable. With `N`
//! clients, `I` iterations and `W = 4·P` bytes per write, dataset `v` occupies
//!
//! ```text
//! [v·N·I·W, (v+1)·N·I·W)
//! ```
//!
//! and in iteration `i` client `c` writes elements `[(i·N + c)·P, (i·N + c + 1)·P)` of each
//! dataset `v`, i.e. `W` bytes at `v·N·I·W + (i·N + c)·W`. Call order per client: iteration
//! outer, variable inner (`for i { for v in 0..8 { write } }`), so consecutive writes of one
//! client within an iteration are one dataset (`N·I·W` bytes) apart.
//!
//! With `sync`, each client ends with one `Sync` (h5bench closes the file after the last
//! iteration, which flushes it). It is off by default: the harness already flushes every
//! client after all calls have returned and reports the bandwidth with and without that
//! flush, so a default sync would only move the flush into the timed calls.
//!
//! Defaults: 65,536 particles per client per iteration (256 KiB writes, the paper's first
//! configuration) and as many iterations as make ~16 MiB per client: 8 (paper: 128
//! iterations, 256 MiB per process; scale 1/16) — 64 MiB at 4 clients, 256 MiB at 16. With
//! `--particles 262144` (1 MiB writes, the paper's second configuration: 32 iterations) the
//! default is 2 iterations, again 16 MiB per client.
//!
//! **Invariants:** every write is one contiguous range of `4·particles` bytes; each client
//! issues `8·iterations` writes (then one `Sync` with `sync`); no two clients' writes
//! overlap; together they tile `[0, 8·N·P·I·4)` exactly.

use crate::error::{Ctx, Result};
use crate::plan::{PlanBuilder, WorkloadPlan};
use atomio_layout::{Access, ByteRange};
use serde::{Deserialize, Serialize};

/// Variables per particle (one dataset each).
pub const VPIC_VARIABLES: u64 = 8;
/// Bytes per value of a variable.
pub const VPIC_VALUE_BYTES: u64 = 4;
/// Bytes per client the default iteration count aims at.
pub const VPIC_DEFAULT_BYTES_PER_CLIENT: u64 = 16 << 20;

/// VPIC-IO parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct VpicParams {
    /// Particles per client per iteration; each write is 4 × this many bytes
    /// [seqdlm: 65536 (256 KiB writes), 262144 (1 MiB writes)].
    #[arg(long, default_value_t = 65_536)]
    pub particles: u64,
    /// Iterations (time steps) [seqdlm: 128 at 65536 particles, 32 at 262144].
    /// Default: round(16 MiB / (32 × particles)), at least 1.
    #[arg(long)]
    pub iterations: Option<u64>,
    /// End each client's calls with one sync (h5bench's file close).
    #[arg(long)]
    pub sync: bool,
}

impl Default for VpicParams {
    fn default() -> Self {
        crate::workload::defaults()
    }
}

pub(crate) fn plan(p: &VpicParams, clients: u32) -> Result<WorkloadPlan> {
    let ctx = Ctx("vpic");
    let particles = ctx.nonzero(p.particles, "particles")?;
    let write = ctx.mul(
        particles,
        VPIC_VALUE_BYTES,
        "bytes per write (particles × 4)",
    )?;
    let per_iteration = ctx.mul(write, VPIC_VARIABLES, "bytes per client per iteration")?;
    let iterations = match p.iterations {
        Some(i) => ctx.nonzero(i, "iterations")?,
        None => ((VPIC_DEFAULT_BYTES_PER_CLIENT + per_iteration / 2) / per_iteration).max(1),
    };
    let mut b = PlanBuilder::new(ctx, clients)?;
    let n = u64::from(clients);
    let per_client = ctx.mul(iterations, VPIC_VARIABLES, "writes per client")?;
    let per_client = ctx.add(per_client, u64::from(p.sync), "calls per client")?;
    b.expect_calls(per_client.checked_mul(n))?;
    // Every offset is below the file size 8·N·I·W, so checking it covers them all.
    let dataset = ctx.product(
        &[n, iterations, write],
        "dataset size (N × iterations × 4P)",
    )?;
    ctx.mul(VPIC_VARIABLES, dataset, "file size")?;
    for c in 0..n {
        for i in 0..iterations {
            for v in 0..VPIC_VARIABLES {
                let offset = v * dataset + (i * n + c) * write;
                let range = ctx.layout(ByteRange::at(offset, write))?;
                b.write(c as u32, ctx.layout(Access::contiguous(range))?)?;
            }
        }
        if p.sync {
            b.sync(c as u32)?;
        }
    }
    let resolved = VpicParams {
        iterations: Some(iterations),
        ..p.clone()
    };
    b.finish(&resolved, false)
}
