//! S3D checkpoint (Ching et al. 2007 §6.2; the S3D-IO kernel's MPI-IO method).
//!
//! The checkpoint holds four global arrays of doubles over the same `gx × gy × gz` grid:
//! mass fractions (11 components), velocity (3), pressure (1), temperature (1). Each array is
//! stored whole, one after the other ("canonical order"), as a Fortran-order 4-D array
//! `(x, y, z, component)` — x varies fastest, the component slowest — which is how S3D's
//! Fortran arrays `yspecies(nx,ny,nz,nsc)`, `u(nx,ny,nz,3)`, `pressure(nx,ny,nz)`,
//! `temp(nx,ny,nz)` map to a file with `MPI_ORDER_FORTRAN` subarrays. Byte offset of
//! element `(x, y, z, k)` of array `a`:
//!
//! ```text
//! A_a + 8·(((k·gz + z)·gy + y)·gx + x),   A_a = 8·gx·gy·gz·(components of arrays before a)
//! ```
//!
//! The XYZ grid is partitioned block-block-block over a `px × py × pz` process grid
//! (default: the near-cube factorization of the client count, largest factor on X, like
//! `MPI_Dims_create`); rank `r` has coordinates `(r mod px, (r div px) mod py, r div (px·py))`
//! (x fastest, as S3D-IO's topology). Uneven splits give the first `n mod p` blocks one
//! extra cell. The component dimension is not partitioned.
//!
//! Calls: by default one write per array (4 calls, in file order), each a 4-D subarray — as
//! S3D-IO writes one variable per call; `single_call` writes all four in one call, a struct
//! of the four subarrays at their array offsets (one atomic unit per checkpoint).
//!
//! Defaults: a 96³ grid, 16 doubles per cell: 113,246,208 B = 108 MiB per checkpoint,
//! constant over client counts as in the paper (≈1.19 GB there; scale ≈ 1/10.5).
//!
//! **Invariants:** the clients' writes are disjoint and cover `[0, file_bytes)` exactly;
//! each call's pattern is a subarray of a few nodes (6 for an array), never a range list.

use crate::error::{Ctx, Result};
use crate::grid::{block, near_cube};
use crate::plan::{PlanBuilder, WorkloadPlan};
use atomio_layout::{Access, Order, Pattern};
use serde::{Deserialize, Serialize};

/// Bytes per value (double precision).
pub const S3D_VALUE_BYTES: u64 = 8;
/// Most arrays a checkpoint may hold.
pub const S3D_MAX_ARRAYS: usize = 64;

/// S3D checkpoint parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct S3dParams {
    /// Global grid cells along X (fastest varying in the file).
    #[arg(long, default_value_t = 96)]
    pub grid_x: u64,
    /// Global grid cells along Y.
    #[arg(long, default_value_t = 96)]
    pub grid_y: u64,
    /// Global grid cells along Z.
    #[arg(long, default_value_t = 96)]
    pub grid_z: u64,
    /// Components of each array, in file order [S3D: mass 11, velocity 3, pressure 1,
    /// temperature 1].
    #[arg(long, value_delimiter = ',', default_values_t = [11u64, 3, 1, 1])]
    pub components: Vec<u64>,
    /// Processes along X. Default: near-cube factorization of the client count. Give all
    /// three of proc_x, proc_y, proc_z or none; their product must be the client count.
    #[arg(long)]
    pub proc_x: Option<u32>,
    /// Processes along Y.
    #[arg(long)]
    pub proc_y: Option<u32>,
    /// Processes along Z.
    #[arg(long)]
    pub proc_z: Option<u32>,
    /// Write the four arrays in one call (a struct of four subarrays) instead of one call
    /// per array.
    #[arg(long)]
    pub single_call: bool,
}

impl Default for S3dParams {
    fn default() -> Self {
        crate::workload::defaults()
    }
}

fn process_grid(ctx: Ctx, p: &S3dParams, clients: u32) -> Result<[u32; 3]> {
    match (p.proc_x, p.proc_y, p.proc_z) {
        (None, None, None) => Ok(near_cube(clients)),
        (Some(x), Some(y), Some(z)) => {
            let product = u64::from(x)
                .checked_mul(u64::from(y))
                .and_then(|xy| xy.checked_mul(u64::from(z)));
            if product != Some(u64::from(clients)) {
                return Err(ctx.clients(
                    clients,
                    format!(
                        "proc_x × proc_y × proc_z = {x} × {y} × {z} must equal the client count"
                    ),
                ));
            }
            Ok([x, y, z])
        }
        _ => Err(ctx.invalid("give all three of proc_x, proc_y, proc_z, or none")),
    }
}

pub(crate) fn plan(p: &S3dParams, clients: u32) -> Result<WorkloadPlan> {
    let ctx = Ctx("s3d");
    let mut b = PlanBuilder::new(ctx, clients)?;
    let grid = [
        ctx.nonzero(p.grid_x, "grid_x")?,
        ctx.nonzero(p.grid_y, "grid_y")?,
        ctx.nonzero(p.grid_z, "grid_z")?,
    ];
    if p.components.is_empty() || p.components.len() > S3D_MAX_ARRAYS {
        return Err(ctx.invalid(format!(
            "components must list 1 to {S3D_MAX_ARRAYS} arrays, got {}",
            p.components.len()
        )));
    }
    for &k in &p.components {
        ctx.nonzero(k, "components")?;
    }
    let procs = process_grid(ctx, p, clients)?;
    for (axis, (&n, &pr)) in ["x", "y", "z"].iter().zip(grid.iter().zip(&procs)) {
        if pr == 0 || u64::from(pr) > n {
            return Err(ctx.clients(
                clients,
                format!("{pr} processes along {axis} cannot each get a cell of grid_{axis} = {n}"),
            ));
        }
    }
    let cells = ctx.product(&grid, "grid cells")?;
    let cell_bytes = ctx.mul(cells, S3D_VALUE_BYTES, "array size")?;
    // File offset of each array, and the file end.
    let mut array_offsets = Vec::with_capacity(p.components.len());
    let mut end = 0u64;
    for &k in &p.components {
        array_offsets.push(end);
        end = ctx.add(end, ctx.mul(cell_bytes, k, "array size")?, "file size")?;
    }
    let value = ctx.layout(Pattern::bytes(S3D_VALUE_BYTES))?;
    let [px, py, _] = procs.map(u64::from);
    for rank in 0..u64::from(clients) {
        let coords = [rank % px, (rank / px) % py, rank / (px * py)];
        let parts: Vec<(u64, u64)> = (0..3)
            .map(|d| block(grid[d], u64::from(procs[d]), coords[d]))
            .collect();
        let subarrays = p
            .components
            .iter()
            .map(|&k| {
                ctx.layout(Pattern::subarray(
                    &[grid[0], grid[1], grid[2], k],
                    &[parts[0].1, parts[1].1, parts[2].1, k],
                    &[parts[0].0, parts[1].0, parts[2].0, 0],
                    Order::Fortran,
                    &value,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        if p.single_call {
            let fields: Vec<(u64, u64, &Pattern)> = array_offsets
                .iter()
                .zip(&subarrays)
                .map(|(&off, s)| (off, 1, s))
                .collect();
            let all = ctx.layout(Pattern::structure(&fields))?;
            b.write(rank as u32, ctx.layout(Access::new(0, all))?)?;
        } else {
            for (&off, s) in array_offsets.iter().zip(subarrays) {
                b.write(rank as u32, ctx.layout(Access::new(off, s))?)?;
            }
        }
    }
    let resolved = S3dParams {
        proc_x: Some(procs[0]),
        proc_y: Some(procs[1]),
        proc_z: Some(procs[2]),
        ..p.clone()
    };
    b.finish(&resolved, false)
}
