//! `atomio explain <workload>`: the interval analysis of a workload's declared accesses,
//! what `auto` would choose for it and why, and what each rank's calls would lock.

use anyhow::anyhow;
use atomio_interval::{choose, from_accesses, Limits};
use atomio_layout::Access;
use atomio_workloads::Workload;
use clap::Args;
use std::time::Instant;

#[derive(Args)]
pub struct ExplainArgs {
    /// A workload (`atomio-lab bench list`).
    workload: String,
    /// Client processes (ranks).
    #[arg(long, default_value_t = 4)]
    clients: u32,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Workload parameters, after `--`.
    #[arg(last = true)]
    params: Vec<String>,
}

#[derive(serde::Serialize)]
struct Explained {
    workload: String,
    clients: u32,
    analysis: atomio_interval::AnalysisStats,
    choice: atomio_interval::Choice,
    calls: u64,
    lock_free_calls: u64,
    locked_bytes: u64,
    private_bytes: u64,
    undeclared_bytes: u64,
    split_seconds: f64,
}

pub fn run(a: ExplainArgs) -> anyhow::Result<()> {
    let w = Workload::from_name(&a.workload, &a.params).map_err(|e| anyhow!("{e}"))?;
    let plan = atomio_workloads::plan(&w, a.clients).map_err(|e| anyhow!("{e}"))?;
    let calls: Vec<(u32, Access)> = plan
        .clients
        .iter()
        .flat_map(|c| {
            c.calls
                .iter()
                .filter_map(move |k| k.access.clone().map(|x| (c.rank, x)))
        })
        .collect();
    let set = from_accesses(a.clients, &calls, Limits::default())
        .map_err(|e| anyhow!("analyzing {}: {e}", a.workload))?;
    // As for the user's file (direct placement, the default).
    let choice = choose(&set, true);
    let t0 = Instant::now();
    let (mut free, mut locked, mut private, mut undeclared) = (0u64, 0u64, 0u64, 0u64);
    for (rank, access) in &calls {
        let s = set.split(*rank, access.ranges());
        if s.locked_bytes() == 0 {
            free += 1;
        }
        locked += s.locked_bytes();
        private += s.private_bytes;
        undeclared += s.undeclared_bytes;
    }
    let e = Explained {
        workload: a.workload.clone(),
        clients: a.clients,
        analysis: set.stats().clone(),
        choice,
        calls: calls.len() as u64,
        lock_free_calls: free,
        locked_bytes: locked,
        private_bytes: private,
        undeclared_bytes: undeclared,
        split_seconds: t0.elapsed().as_secs_f64(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
        return Ok(());
    }
    let s = &e.analysis;
    println!("{} with {} clients", e.workload, e.clients);
    println!(
        "  analysis: {} families in → {} interval families = {} elementary intervals ({} private, {} shared) in {:.3} ms",
        s.families_in, s.entries, s.intervals, s.private_intervals, s.shared_intervals, s.seconds * 1e3
    );
    println!(
        "            {} segments, {} periodic (folded), {} runs expanded, {} unresolved",
        s.segments, s.periodic_segments, s.expanded_runs, s.unresolved_segments
    );
    println!(
        "  bytes:    {} private, {} shared ({:.1}%)",
        s.private_bytes,
        s.shared_bytes,
        100.0 * e.choice.shared_fraction
    );
    println!(
        "  calls:    {} of {} take no lock; {} bytes locked, {} lock-free, {} undeclared (split in {:.3} ms)",
        e.lock_free_calls, e.calls, e.locked_bytes, e.private_bytes, e.undeclared_bytes, e.split_seconds * 1e3
    );
    println!("  auto →    {}", e.choice.strategy);
    println!("  because   {}", e.choice.reason);
    Ok(())
}
