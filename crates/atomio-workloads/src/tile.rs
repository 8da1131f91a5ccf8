//! mpi-tile-io (Tran et al. 2010 §6.5; Chen et al. 2022 §V-D): overlapping 2-D tiles of a
//! global array, each client writing its whole tile in one atomic call.
//!
//! The file is a row-major (C order) `rows × cols` array of `element_bytes`-byte elements
//! starting at `header_bytes`. Clients form a `tiles_x × tiles_y` grid; rank `r` holds tile
//! `(tx, ty) = (r mod tiles_x, r div tiles_x)` (MPI_Cart_create over dims `[tiles_y,
//! tiles_x]`, row-major ranks, as mpi-tile-io does). Along each axis (X shown; Y alike):
//!
//! * **`shared`** (default, mpi-tile-io's own semantics): a tile is `tile_x` elements
//!   *including* its ghost cells; tile `tx` covers `[tx·(tile_x − overlap_x), … + tile_x)`
//!   and `cols = tiles_x·tile_x − (tiles_x − 1)·overlap_x`. Adjacent tiles share exactly
//!   `overlap_x` columns; nothing is added at the array's outer edges. This is what Tran's
//!   numbers mean: 1024×1024 tiles of 1 KiB with overlap 128 → each process writes 1 GiB, of
//!   which 128 MiB is shared with each neighbour.
//! * **`halo`**: a tile *owns* `tile_x` columns of a `tiles_x·tile_x`-wide array and also
//!   writes `overlap_x` ghost columns on each interior side (none at the outer edges), so
//!   adjacent tiles share `2·overlap_x` columns and interior tiles write
//!   `tile_x + 2·overlap_x` columns.
//!
//! **Invariants:** each client issues exactly one `Write`, a 2-D subarray (4 pattern nodes,
//! one run per tile row); the union of all tiles is the whole array; writes of different
//! clients overlap iff some axis has `overlap > 0` and more than one tile.
//! `overlap < tile` (shared) or `overlap ≤ tile` (halo) is required.

use crate::error::{Ctx, Result};
use crate::grid::near_square;
use crate::plan::{PlanBuilder, WorkloadPlan};
use atomio_layout::{Access, Order, Pattern};
use serde::{Deserialize, Serialize};

/// How the overlap parameters extend tiles (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OverlapMode {
    /// mpi-tile-io: the tile size includes the ghost cells; neighbours share `overlap` elements.
    #[default]
    Shared,
    /// Owned tile plus `overlap` ghost elements on each interior side; neighbours share `2·overlap`.
    Halo,
}

/// mpi-tile-io parameters (names follow its `--nr_tiles_x`, `--sz_tile_x`, … options).
///
/// Defaults are Tran §6.5 scaled by 1/64 per client: 128×128 tiles (paper: 1024×1024) of
/// 1 KiB elements with a 16-element overlap (paper: 128, the same 1/8), so each client
/// writes 16 MiB in 128 rows of 128 KiB (paper: 1 GiB in 1024 rows of 1 MiB): 64 MiB at 4
/// clients, 144 MiB at 9, 256 MiB at 16. For Tran's large-element run use
/// [`TileParams::large_elements`] (workload name `tile-large`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct TileParams {
    /// Tiles along X (mpi-tile-io nr_tiles_x). Default: near-square factorization of the
    /// client count with tiles_x ≥ tiles_y; tiles_x × tiles_y must equal the client count.
    #[arg(long)]
    pub tiles_x: Option<u32>,
    /// Tiles along Y (mpi-tile-io nr_tiles_y). Default: clients / tiles_x.
    #[arg(long)]
    pub tiles_y: Option<u32>,
    /// Elements per tile along X (sz_tile_x) [Tran: 1024].
    #[arg(long, default_value_t = 128)]
    pub tile_x: u64,
    /// Elements per tile along Y, i.e. rows per tile (sz_tile_y) [Tran: 1024].
    #[arg(long, default_value_t = 128)]
    pub tile_y: u64,
    /// Bytes per element (sz_element) [Tran: 1024; seqdlm §V-D: 4].
    #[arg(long, default_value_t = 1024)]
    pub element_bytes: u64,
    /// Ghost elements shared between X neighbours (overlap_x) [Tran: 128].
    #[arg(long, default_value_t = 16)]
    pub overlap_x: u64,
    /// Ghost elements shared between Y neighbours (overlap_y) [Tran: 128].
    #[arg(long, default_value_t = 16)]
    pub overlap_y: u64,
    /// How the overlap extends tiles: shared (mpi-tile-io) or halo.
    #[arg(long, value_enum, default_value_t = OverlapMode::Shared)]
    pub overlap_mode: OverlapMode,
    /// Bytes before the array (mpi-tile-io header_bytes, the file view displacement).
    #[arg(long, default_value_t = 0)]
    pub header_bytes: u64,
}

impl Default for TileParams {
    fn default() -> Self {
        crate::workload::defaults()
    }
}

impl TileParams {
    /// Tran §6.5's large-element run scaled like the default: 4×4 tiles (paper: 32×32) of
    /// 1 MiB elements, so each client again writes 16 MiB, now in 4 rows of 4 MiB. Tran does
    /// not state this run's overlap (128 cannot apply to 32-element tiles); we use 1 element,
    /// the smallest that still makes neighbours conflict (a quarter of the tile side).
    pub fn large_elements() -> Self {
        Self {
            tile_x: 4,
            tile_y: 4,
            element_bytes: 1 << 20,
            overlap_x: 1,
            overlap_y: 1,
            ..Self::default()
        }
    }
}

impl TileParams {
    /// Chen et al. (SeqDLM) §V-D scaled by 1/100 per client: 2048×2048 tiles (paper:
    /// 20,480×20,480) of 4-byte pixels with a 10-pixel overlap (paper: 100), so each client
    /// writes 16 MiB in 2048 rows of 8 KiB (paper: 1.6 GB in 20,480 rows of 80 KiB): many
    /// small regions per atomic call.
    pub fn seqdlm_pixels() -> Self {
        Self {
            tile_x: 2048,
            tile_y: 2048,
            element_bytes: 4,
            overlap_x: 10,
            overlap_y: 10,
            ..Self::default()
        }
    }
}

/// One axis of an overlapped tiling: `(array length, start, length)` of tile `i`, in elements.
pub(crate) fn axis(
    ctx: Ctx,
    mode: OverlapMode,
    tiles: u64,
    tile: u64,
    overlap: u64,
    i: u64,
) -> Result<(u64, u64, u64)> {
    match mode {
        OverlapMode::Shared => {
            // overlap < tile was checked, so the step is ≥ 1 and the sums cannot underflow.
            let step = tile - overlap;
            let len = ctx.add(ctx.mul(tiles - 1, step, "array side")?, tile, "array side")?;
            Ok((len, i * step, tile))
        }
        OverlapMode::Halo => {
            let len = ctx.mul(tiles, tile, "array side")?;
            let own = i * tile;
            let start = if i > 0 { own - overlap } else { own };
            let end = if i + 1 < tiles {
                own + tile + overlap
            } else {
                own + tile
            };
            Ok((len, start, end - start))
        }
    }
}

/// Geometry of an overlapped 2-D tiling, shared by `tile` and `row`.
pub(crate) struct Tiling {
    pub tiles_x: u64,
    pub tiles_y: u64,
    pub tile_x: u64,
    pub tile_y: u64,
    pub overlap_x: u64,
    pub overlap_y: u64,
    pub mode: OverlapMode,
    pub element_bytes: u64,
    pub header_bytes: u64,
    /// Parameter names for messages: tile x, tile y, overlap x, overlap y.
    pub names: [&'static str; 4],
}

/// `tile`'s parameter names.
pub(crate) const TILE_NAMES: [&str; 4] = ["tile_x", "tile_y", "overlap_x", "overlap_y"];

impl Tiling {
    fn check(&self, ctx: Ctx) -> Result<()> {
        let [nx, ny, ox, oy] = self.names;
        ctx.nonzero(self.tile_x, nx)?;
        ctx.nonzero(self.tile_y, ny)?;
        ctx.nonzero(self.element_bytes, "element_bytes")?;
        for (overlap, tile, oname, tname) in [
            (self.overlap_x, self.tile_x, ox, nx),
            (self.overlap_y, self.tile_y, oy, ny),
        ] {
            let ok = match self.mode {
                OverlapMode::Shared => overlap < tile,
                OverlapMode::Halo => overlap <= tile,
            };
            if !ok {
                let rule = match self.mode {
                    OverlapMode::Shared => "smaller than",
                    OverlapMode::Halo => "at most",
                };
                return Err(ctx.invalid(format!(
                    "{oname} = {overlap} must be {rule} {tname} = {tile}"
                )));
            }
        }
        Ok(())
    }

    /// Writes of different tiles overlap.
    pub fn overlapping(&self) -> bool {
        (self.overlap_x > 0 && self.tiles_x > 1) || (self.overlap_y > 0 && self.tiles_y > 1)
    }

    /// Plans one subarray write per tile, rank `ty·tiles_x + tx`.
    pub fn plan(&self, ctx: Ctx, params: &impl Serialize) -> Result<WorkloadPlan> {
        self.check(ctx)?;
        let clients = self.tiles_x * self.tiles_y;
        let mut b = PlanBuilder::new(ctx, u32::try_from(clients).unwrap_or(u32::MAX))?;
        let elem = ctx.layout(Pattern::bytes(self.element_bytes))?;
        for rank in 0..clients {
            let (tx, ty) = (rank % self.tiles_x, rank / self.tiles_x);
            let (cols, x0, nx) = axis(
                ctx,
                self.mode,
                self.tiles_x,
                self.tile_x,
                self.overlap_x,
                tx,
            )?;
            let (rows, y0, ny) = axis(
                ctx,
                self.mode,
                self.tiles_y,
                self.tile_y,
                self.overlap_y,
                ty,
            )?;
            // Whole-array bytes must be addressable past the header.
            let array = ctx.mul(
                ctx.mul(rows, cols, "array size")?,
                self.element_bytes,
                "array size",
            )?;
            ctx.add(self.header_bytes, array, "header + array")?;
            let pattern = ctx.layout(Pattern::subarray(
                &[rows, cols],
                &[ny, nx],
                &[y0, x0],
                Order::C,
                &elem,
            ))?;
            let access = ctx.layout(Access::new(self.header_bytes, pattern))?;
            b.write(rank as u32, access)?;
        }
        b.finish(params, self.overlapping())
    }
}

/// Resolves the tile grid for `clients` (see [`TileParams::tiles_x`]).
fn tile_grid(ctx: Ctx, p: &TileParams, clients: u32) -> Result<(u32, u32)> {
    if clients == 0 {
        return Err(ctx.clients(0, "at least one client is needed"));
    }
    let divides = |given: u32, axis: &str| -> Result<u32> {
        if given == 0 {
            return Err(ctx.invalid(format!("tiles_{axis} must be at least 1")));
        }
        if !clients.is_multiple_of(given) {
            return Err(ctx.clients(
                clients,
                format!("tiles_{axis} = {given} does not divide the client count"),
            ));
        }
        Ok(clients / given)
    };
    match (p.tiles_x, p.tiles_y) {
        (None, None) => Ok(near_square(clients)),
        (Some(x), None) => Ok((x, divides(x, "x")?)),
        (None, Some(y)) => Ok((divides(y, "y")?, y)),
        (Some(x), Some(y)) => {
            if u64::from(x) * u64::from(y) != u64::from(clients) {
                return Err(ctx.clients(
                    clients,
                    format!("tiles_x × tiles_y = {x} × {y} must equal the client count"),
                ));
            }
            Ok((x, y))
        }
    }
}

pub(crate) fn plan(p: &TileParams, clients: u32) -> Result<WorkloadPlan> {
    let ctx = Ctx("tile");
    let (tiles_x, tiles_y) = tile_grid(ctx, p, clients)?;
    let resolved = TileParams {
        tiles_x: Some(tiles_x),
        tiles_y: Some(tiles_y),
        ..p.clone()
    };
    Tiling {
        tiles_x: u64::from(tiles_x),
        tiles_y: u64::from(tiles_y),
        tile_x: p.tile_x,
        tile_y: p.tile_y,
        overlap_x: p.overlap_x,
        overlap_y: p.overlap_y,
        mode: p.overlap_mode,
        element_bytes: p.element_bytes,
        header_bytes: p.header_bytes,
        names: TILE_NAMES,
    }
    .plan(ctx, &resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_axis_matches_mpi_tile_io() {
        let c = Ctx("t");
        // sz_dataset = n·tile − (n−1)·overlap; off_tile = i·(tile − overlap).
        assert_eq!(axis(c, OverlapMode::Shared, 3, 10, 2, 0), Ok((26, 0, 10)));
        assert_eq!(axis(c, OverlapMode::Shared, 3, 10, 2, 2), Ok((26, 16, 10)));
        assert_eq!(axis(c, OverlapMode::Halo, 3, 10, 2, 0), Ok((30, 0, 12)));
        assert_eq!(axis(c, OverlapMode::Halo, 3, 10, 2, 1), Ok((30, 8, 14)));
        assert_eq!(axis(c, OverlapMode::Halo, 3, 10, 2, 2), Ok((30, 18, 12)));
        assert_eq!(axis(c, OverlapMode::Halo, 1, 10, 2, 0), Ok((10, 0, 10)));
    }
}
