//! S3aSim, the sequence-similarity-search I/O simulator (Ching et al. 2007 §6.3): unstructured,
//! variable-size, noncontiguous, non-overlapping writes, one atomic write per worker per
//! query followed by a sync.
//!
//! **Results** are generated from `seed` alone (ChaCha8, then this module's own uniform
//! sampling, so the stream is fixed by this code and rand_chacha's documented stream), never
//! from the client count — exactly as in S3aSim, where "the results generated are consistent
//! and are not dependent on the number of worker nodes". For each query `q` in order: a
//! result count uniform in `[min_results, max_results]` (paper: 1000–2000), then for each
//! result a size from [`S3ASIM_RESULT_SIZE_BOXES`] and the database fragment that produced it,
//! uniform in `0..fragments` (paper: 128 fragments). The master orders a query's results
//! (by score in S3aSim; here generation order plays that role) and assigns file offsets by
//! prefix sums: query after query, result after result, no gaps.
//!
//! **Workers.** Fragment `f` is searched by worker `f mod W` (a fixed round-robin master
//! schedule; S3aSim's dynamic schedule would make the plan depend on timing). By default
//! rank 0 is the master and writes nothing (`W = N − 1`, at least 2 clients, as in the
//! paper's 2–64 processes); `all_workers` makes every rank a worker (`W = N`). Per query,
//! each worker holding results issues ONE `Write`: an hindexed pattern of its results
//! (adjacent results of the same worker merged into one block), based at its first result;
//! then every rank — master included, because `MPI_File_sync` is collective over the
//! file's communicator — issues one `Sync`. With one worker each query's write is contiguous.
//!
//! **Sizes.** The NT database has sequences from 6 B to ~43 MB with mean 4,401 B. The box
//! histogram below keeps the 6 B minimum and a ~4.4 KB mean (4,442 B expected) but caps
//! results at 64 KiB, so one result never dwarfs a run on this machine. Defaults keep the
//! paper's counts (20 queries × 1000–2000 results): 133 MB (127 MiB) expected per run,
//! 130.4 MiB with the default seed 1, whatever the client count (paper: 208 MB, the
//! difference being the capped tail; scale ≈ 0.65).
//!
//! **Invariants:** writes never overlap; their union is `[0, file_bytes)` and equals the
//! generated results for every client count; each query's bytes are contiguous in the file;
//! every rank issues exactly `queries` syncs, each after that rank's write for the query.

use crate::error::{Ctx, Result};
use crate::plan::{PlanBuilder, WorkloadPlan};
use atomio_layout::{Access, Block, Pattern, MAX_PATTERN_ITEMS};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Result-size histogram: `(smallest size, one past the largest, weight in ‰)`; a box is
/// chosen by weight, then the size uniformly inside it. Expected size 4,442 B.
pub const S3ASIM_RESULT_SIZE_BOXES: [(u64, u64, u64); 5] = [
    (6, 256, 150),
    (256, 1024, 250),
    (1024, 4096, 385),
    (4096, 16384, 180),
    (16384, 65537, 35),
];
/// Most results one plan may generate (all queries together).
pub const S3ASIM_MAX_RESULTS: u64 = 1 << 22;

/// S3aSim parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct S3asimParams {
    /// Seed of the result generator (ChaCha8).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Input queries; one write per worker and one sync per rank each [Ching: 20].
    #[arg(long, default_value_t = 20)]
    pub queries: u64,
    /// Database fragments, dealt round-robin to workers [Ching: 128].
    #[arg(long, default_value_t = 128)]
    pub fragments: u64,
    /// Fewest results per query [Ching: 1000].
    #[arg(long, default_value_t = 1000)]
    pub min_results: u64,
    /// Most results per query [Ching: 2000].
    #[arg(long, default_value_t = 2000)]
    pub max_results: u64,
    /// Every rank is a worker (no master rank that writes nothing).
    #[arg(long)]
    pub all_workers: bool,
}

impl Default for S3asimParams {
    fn default() -> Self {
        crate::workload::defaults()
    }
}

/// One generated result: its query, the fragment (hence worker) that produced it, and its
/// place in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimResult {
    pub query: u64,
    pub fragment: u64,
    pub offset: u64,
    pub len: u64,
}

/// Uniform in `0..n` (`n ≥ 1`) by rejection, so no value is favoured.
fn below(rng: &mut impl RngCore, n: u64) -> u64 {
    let rem = (u64::MAX % n + 1) % n; // 2^64 mod n
    loop {
        let v = rng.next_u64();
        if rem == 0 || v < rem.wrapping_neg() {
            return v % n;
        }
    }
}

fn result_size(rng: &mut impl RngCore) -> u64 {
    let mut w = below(rng, 1000);
    let mut chosen = S3ASIM_RESULT_SIZE_BOXES[S3ASIM_RESULT_SIZE_BOXES.len() - 1];
    for abox in S3ASIM_RESULT_SIZE_BOXES {
        if w < abox.2 {
            chosen = abox;
            break;
        }
        w -= abox.2;
    }
    // The weights sum to 1000 (tested), so the loop always chooses.
    let (lo, hi, _) = chosen;
    lo + below(rng, hi - lo)
}

/// The results of a run, in file order; depends only on the parameters, never on clients.
pub fn s3asim_results(
    p: &S3asimParams,
) -> std::result::Result<Vec<SimResult>, crate::WorkloadError> {
    let ctx = Ctx("s3asim");
    let queries = ctx.nonzero(p.queries, "queries")?;
    ctx.nonzero(p.fragments, "fragments")?;
    let max_results = ctx.nonzero(p.max_results, "max_results")?;
    if p.min_results > max_results {
        return Err(ctx.invalid(format!(
            "min_results = {} exceeds max_results = {max_results}",
            p.min_results
        )));
    }
    ctx.at_most(
        max_results,
        MAX_PATTERN_ITEMS as u64 / 2,
        "max_results (blocks of one write)",
    )?;
    ctx.at_most(
        queries.saturating_mul(max_results),
        S3ASIM_MAX_RESULTS,
        "queries × max_results",
    )?;
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let mut out = Vec::new();
    let mut offset = 0u64;
    for query in 0..queries {
        let count = p.min_results + below(&mut rng, max_results - p.min_results + 1);
        for _ in 0..count {
            let len = result_size(&mut rng);
            let fragment = below(&mut rng, p.fragments);
            out.push(SimResult {
                query,
                fragment,
                offset,
                len,
            });
            // At most 2^22 results of at most 64 KiB: far below MAX_OFFSET.
            offset += len;
        }
    }
    Ok(out)
}

pub(crate) fn plan(p: &S3asimParams, clients: u32) -> Result<WorkloadPlan> {
    let ctx = Ctx("s3asim");
    let mut b = PlanBuilder::new(ctx, clients)?;
    let master = u64::from(!p.all_workers);
    let workers = u64::from(clients) - master.min(u64::from(clients));
    if workers == 0 {
        return Err(ctx.clients(
            clients,
            "rank 0 is the master, so at least 2 clients are needed (or set all_workers)",
        ));
    }
    let results = s3asim_results(p)?;
    b.expect_calls(p.queries.checked_mul(u64::from(clients) + workers))?;
    let byte = ctx.layout(Pattern::bytes(1))?;
    let mut per_worker: Vec<Vec<Block>> = vec![Vec::new(); workers as usize];
    let mut rest = results.as_slice();
    for query in 0..p.queries {
        let n = rest.iter().take_while(|r| r.query == query).count();
        let (this, next) = rest.split_at(n);
        rest = next;
        for r in this {
            let blocks = &mut per_worker[(r.fragment % workers) as usize];
            match blocks.last_mut() {
                Some(last) if last.disp + last.blocklen == r.offset => last.blocklen += r.len,
                _ => blocks.push(Block {
                    disp: r.offset,
                    blocklen: r.len,
                }),
            }
        }
        for (w, blocks) in per_worker.iter_mut().enumerate() {
            let Some(first) = blocks.first() else {
                continue;
            };
            let base = first.disp;
            let rel: Vec<Block> = blocks
                .drain(..)
                .map(|b| Block {
                    disp: b.disp - base,
                    blocklen: b.blocklen,
                })
                .collect();
            let pattern = ctx.layout(Pattern::hindexed(rel, &byte))?;
            b.write(
                (w as u64 + master) as u32,
                ctx.layout(Access::new(base, pattern))?,
            )?;
        }
        for rank in 0..clients {
            b.sync(rank)?;
        }
    }
    b.finish(p, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_weights_sum_to_a_thousand_and_mean_is_about_4_4_kb() {
        let total: u64 = S3ASIM_RESULT_SIZE_BOXES.iter().map(|b| b.2).sum();
        assert_eq!(total, 1000);
        let mean_milli: u64 = S3ASIM_RESULT_SIZE_BOXES
            .iter()
            .map(|&(lo, hi, w)| (lo + hi - 1) * w / 2)
            .sum();
        assert!((4400..4500).contains(&(mean_milli / 1000)), "{mean_milli}");
    }

    #[test]
    fn sampled_sizes_stay_in_bounds_with_the_expected_mean() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 200_000u64;
        let mut sum = 0;
        for _ in 0..n {
            let s = result_size(&mut rng);
            assert!((6..=65536).contains(&s));
            sum += s;
        }
        let mean = sum / n;
        assert!((4300..4600).contains(&mean), "mean {mean}");
    }

    #[test]
    fn below_is_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for n in [1u64, 2, 3, 7, 1000, u64::MAX] {
            for _ in 0..100 {
                assert!(below(&mut rng, n) < n);
            }
        }
    }
}
