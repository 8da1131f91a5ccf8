//! From declared accesses to an interval set: a list of calls per rank (client API,
//! benchmarks) or an MPI file view per rank (displacement + filetype, repeated forever).
//!
//! An MPI view never ends, so it is analyzed up to a *bound*: a filetype whose runs are
//! plain repeats at no cost (each run is one family however many tiles), a filetype that
//! already repeats inside (a subarray) is expanded tile by tile within the budget. Every
//! rank's families are clipped to the smallest bound any rank reached, so beyond it no
//! rank has intervals: every call there locks (undeclared bytes), which is correct
//! whatever the views are.
//!
//! **Invariant:** the set's intervals lie below `bound`; the bound is the same for every
//! rank (computed from all views), so every rank classifies every byte alike.

use crate::analysis::{analyze, Analysis, Limits, Rank};
use crate::family::{lower, lower_tiled, Family, LowerError};
use crate::set::IntervalSet;
use atomio_layout::{Access, Pattern, MAX_OFFSET};

/// Default reach of an MPI view's analysis: 1 TiB from its displacement.
pub const DEFAULT_VIEW_REACH: u64 = 1 << 40;

/// Most families one rank's expanded tiles may produce (a filetype that repeats inside).
pub const TILE_FAMILIES: u64 = 1 << 14;

/// Most families lowering may produce over all ranks.
pub const FAMILY_BUDGET: u64 = 1 << 24;

/// The interval set of explicit calls: `calls[i] = (rank, access)`.
pub fn from_accesses(
    ranks: u32,
    calls: &[(Rank, Access)],
    limits: Limits,
) -> Result<IntervalSet, LowerError> {
    let mut budget = FAMILY_BUDGET;
    let mut declared: Vec<(Rank, Vec<Family>)> = Vec::with_capacity(calls.len());
    for (r, a) in calls {
        declared.push((*r, lower(a, &mut budget)?));
    }
    Ok(IntervalSet::new(analyze(ranks, &declared, limits)?))
}

/// One rank's MPI file view.
#[derive(Clone, Debug)]
pub struct View {
    pub disp: u64,
    pub filetype: Pattern,
}

/// The interval set of one MPI view per rank (rank = index), analyzed up to `reach`
/// bytes past the largest displacement. Returns the set and the bound it covers.
pub fn from_views(
    views: &[View],
    reach: u64,
    limits: Limits,
) -> Result<(IntervalSet, u64), LowerError> {
    let mut budget = FAMILY_BUDGET;
    let max_disp = views.iter().map(|v| v.disp).max().unwrap_or(0);
    let want_end = max_disp.saturating_add(reach).min(MAX_OFFSET);
    let mut lowered = Vec::with_capacity(views.len());
    let mut bound = want_end;
    for v in views {
        let ext = v.filetype.extent().max(1);
        let (_, ub) = v.filetype.data_bounds().unwrap_or((0, 0));
        // Tiles whose data lies below want_end.
        let room = want_end.saturating_sub(v.disp).saturating_sub(ub);
        let mut tiles = room / ext + 1;
        let mut one = FAMILY_BUDGET;
        let per_tile = lower_tiled(0, &v.filetype, 1, &mut one)?;
        if per_tile.iter().any(|f| f.count > 1) {
            // Repeats inside: expand tiles, within a share of the budget.
            // Half a fair share leaves slack for the per-node costs of lowering, and a cap
            // keeps the analysis of one-tile subarray views (written once) cheap: beyond
            // the bound every call simply locks.
            let share = (FAMILY_BUDGET / 2 / views.len().max(1) as u64).clamp(1, TILE_FAMILIES);
            tiles = tiles.min((share / per_tile.len().max(1) as u64).max(1));
        }
        let fams = lower_tiled(v.disp, &v.filetype, tiles, &mut budget)?;
        // Tile `tiles` and later start at or past this: everything below it is analyzed.
        bound = bound.min(v.disp.saturating_add(tiles.saturating_mul(ext)));
        lowered.push(fams);
    }
    let declared: Vec<(Rank, Vec<Family>)> = lowered
        .into_iter()
        .enumerate()
        .map(|(r, fams)| {
            let mut out = vec![];
            for f in fams {
                f.clip(0, bound, &mut out);
            }
            (r as Rank, out)
        })
        .collect();
    let a: Analysis = analyze(views.len() as u32, &declared, limits)?;
    Ok((IntervalSet::new(a), bound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Owner;

    #[test]
    fn strided_views_are_private_and_folded() {
        // strided_io: rank r owns every P-th block of B bytes.
        let (p, b) = (4u64, 384u64);
        let ft = Pattern::resized(p * b, &Pattern::bytes(b).unwrap()).unwrap();
        let views: Vec<View> = (0..p)
            .map(|r| View {
                disp: r * b,
                filetype: ft.clone(),
            })
            .collect();
        let (set, bound) = from_views(&views, 1 << 30, Limits::default()).unwrap();
        assert!(bound + p * b >= 1 << 30, "bound {bound}");
        assert_eq!(set.stats().shared_bytes, 0);
        assert!(set.entries().len() <= 16, "{} entries", set.entries().len());
        assert!(set
            .owners()
            .iter()
            .all(|o| matches!(o, Owner::Ranks(r) if r.len() == 1)));
    }

    #[test]
    fn subarray_views_expand_within_budget() {
        let e = Pattern::bytes(8).unwrap();
        let views: Vec<View> = (0..4u64)
            .map(|r| View {
                disp: 0,
                filetype: Pattern::subarray(
                    &[64, 64],
                    &[32, 40],
                    &[(r / 2) * 32, (r % 2) * 24],
                    atomio_layout::Order::C,
                    &e,
                )
                .unwrap(),
            })
            .collect();
        let (set, bound) = from_views(&views, 64 * 64 * 8, Limits::default()).unwrap();
        assert_eq!(bound, 64 * 64 * 8);
        // Columns 24..40 are shared by the two ranks of each row of tiles.
        assert_eq!(set.stats().shared_bytes, 64 * 16 * 8);
    }
}
