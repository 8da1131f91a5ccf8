//! `atomio sim`: replay or sweep the lock-protocol simulation.

use anyhow::bail;
use atomio_lock::sim::{run as run_sim, SimConfig};
use clap::Args;

#[derive(Args)]
pub struct SimArgs {
    /// First seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How many consecutive seeds to run.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    #[arg(long, default_value_t = 32)]
    clients: usize,
    #[arg(long, default_value_t = 4)]
    servers: u32,
    /// Lock operations per client.
    #[arg(long, default_value_t = 4)]
    ops: usize,
    /// Simulate whole atomic calls (locks and data, checked by the verifier) instead of
    /// lock operations alone.
    #[arg(long)]
    stack: bool,
}

pub fn run(a: SimArgs) -> anyhow::Result<()> {
    if a.stack {
        return run_stack(&a);
    }
    let mut ops = 0;
    for seed in a.seed..a.seed + a.seeds {
        let mut cfg = SimConfig::new(seed);
        cfg.clients = a.clients;
        cfg.servers = a.servers;
        cfg.ops_per_client = a.ops;
        match run_sim(&cfg) {
            Ok(r) => ops += r.ops,
            Err(f) => bail!("{f}"),
        }
    }
    println!(
        "{} seeds from {}: {ops} lock operations, no conflict, no deadlock",
        a.seeds, a.seed
    );
    Ok(())
}

fn run_stack(a: &SimArgs) -> anyhow::Result<()> {
    use atomio_client::sim::{run as run_stack_sim, StackSimConfig};
    let mut calls = 0;
    for seed in a.seed..a.seed + a.seeds {
        let mut cfg = StackSimConfig::new(seed);
        cfg.clients = a.clients.min(64);
        cfg.servers = a.servers;
        cfg.calls_per_client = a.ops;
        match run_stack_sim(&cfg) {
            Ok(r) => calls += r.calls,
            Err(f) => bail!("{f}"),
        }
    }
    println!(
        "{} seeds from {}: {calls} atomic calls (locks and data), verified atomic, no deadlock",
        a.seeds, a.seed
    );
    Ok(())
}
