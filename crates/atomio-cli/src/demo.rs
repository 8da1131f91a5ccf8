//! `atomio demo`: the main job. An embedded cluster (no daemons), the overlapping tile
//! workload with 4 client processes under today's baselines and the best Ching strategies,
//! each result proven atomic (or not) by the verifier, a table and a chart.

use crate::bench_workload::{chart, run_config, table, CommonArgs, DEFAULT_STRATEGIES};
use anyhow::anyhow;
use atomio_workloads::Workload;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct DemoArgs {
    /// Where to write the chart.
    #[arg(long, default_value = "out/demo.svg")]
    chart: PathBuf,
    /// Runs per strategy.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long)]
    no_progress: bool,
}

pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    let common = CommonArgs {
        clients: 4,
        servers: 4,
        strategies: DEFAULT_STRATEGIES.to_string(),
        deploy: "embedded".into(),
        memory: false,
        cluster: None,
        stripe_size: atomio_layout::DEFAULT_STRIPE_SIZE,
        runs: a.runs,
        no_verify: false,
        keep: None,
        scratch: None,
        json: a.json.clone(),
        chart: Some(a.chart.clone()),
        no_progress: a.no_progress,
    };
    let workload = Workload::from_name("tile", &[] as &[&str]).map_err(|e| anyhow!("{e}"))?;
    println!("atomio demo: overlapping mpi-tile-io tiles, 4 client processes, 4 embedded servers");
    let cfg = crate::bench_workload::config(&common, workload)?;
    let rows = run_config(&cfg)?;
    print!("{}", table(&rows));
    let fcntl = rows
        .iter()
        .find(|r| r.strategy == "posix-fcntl")
        .map(|r| r.mib_per_s);
    let best = rows
        .iter()
        .filter(|r| r.strategy.starts_with("ching:"))
        .max_by(|a, b| a.mib_per_s.total_cmp(&b.mib_per_s));
    if let (Some(f), Some(b)) = (fcntl, best) {
        println!(
            "best Ching strategy: {} at {:.1} MiB/s = {:.2}x posix-fcntl",
            b.strategy,
            b.mib_per_s,
            b.mib_per_s / f
        );
    }
    let atomic: Vec<_> = rows.iter().filter(|r| r.strategy != "none").collect();
    let all_ok = atomic.iter().all(|r| r.verified == Some(true));
    println!(
        "verification: {}",
        if all_ok {
            "every atomic strategy produced an atomic file".to_string()
        } else {
            let bad: Vec<&str> = atomic
                .iter()
                .filter(|r| r.verified != Some(true))
                .map(|r| r.strategy.as_str())
                .collect();
            format!("NOT atomic: {}", bad.join(", "))
        }
    );
    if let Some(none) = rows.iter().find(|r| r.strategy == "none") {
        println!(
            "none (no atomicity): {}",
            crate::bench_workload::verdict(none.verified)
        );
    }
    if let Some(p) = &a.json {
        crate::output::write_json(p, &rows)?;
    }
    chart(&a.chart, "atomio demo: overlapping tiles, 4 clients", &rows)?;
    println!("chart: {}", a.chart.display());
    if !all_ok {
        return Err(anyhow!("an atomic strategy produced a non-atomic file"));
    }
    Ok(())
}
