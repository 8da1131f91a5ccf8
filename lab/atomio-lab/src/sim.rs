//! `atomio-lab sim`: replay or sweep the lock-protocol simulation.

use anyhow::bail;
use atomio_lock::sim::{run as run_sim, SimConfig};
use clap::{Args, Subcommand};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimArgs {
    #[command(subcommand)]
    cmd: Option<SimCmd>,
    /// The calibrated scale model: throughput vs clients per strategy, up to
    /// 4,096 clients × 64 servers on the papers' workloads and clusters, safety checked at
    /// every size; prints a table, writes JSON and an SVG chart, and sets the projections
    /// beside the papers' figures. Needs a cost file (`atomio-lab sim calibrate`).
    #[arg(long)]
    scale: bool,
    #[command(flatten)]
    scale_args: crate::sim_scale::ScaleArgs,
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
    /// Simulate cached-lock DLMs over a striped file (SeqDLM by default; see `--dlm`):
    /// lock resources, caching clients with write-back caches, SN-ordered data servers,
    /// every message in arbitrary order; the file checked by the verifier. `--servers` is
    /// the number of stripes, `--ops` writes per client.
    #[arg(long)]
    seqdlm: bool,
    /// With `--seqdlm`: seqdlm, seqdlm-no-er (no early revocation), seqdlm-no-cr (the
    /// paper's early revocation only), dlm-basic, dlm-lustre.
    /// With `--dlm-stack`: any DLM strategy name (seqdlm[:mode][:no-er|:no-cr][:no-conv],
    /// dlm-basic, dlm-lustre).
    #[arg(long, default_value = "seqdlm")]
    dlm: String,
    /// Simulate the product's DLM code itself: the very client machines each file's agent
    /// runs, real lock servers and data services, FIFO links in random interleavings,
    /// random noncontiguous writes and reads across stripes; every server's invariants
    /// after every step, no deadlock, the file and the reads verified. `--clients`,
    /// `--servers` (also the stripes), `--ops` calls per client.
    #[arg(long)]
    dlm_stack: bool,
    /// With `--dlm-stack`: a negative control that must be caught — nbw-across-stripes
    /// (Fig. 8) or sn-blind (data servers ignore SNs).
    #[arg(long)]
    dlm_fault: Option<String>,
    /// With `--seqdlm`: the negative control — NBW even for writes across stripes (the
    /// verifier must catch a torn write).
    #[arg(long)]
    nbw_everywhere: bool,
    /// Inject faults. Lock simulation: clients frozen past their lease, connection resets,
    /// partitions, server crashes and restarts, abandoned operations. With `--stack`:
    /// clients killed mid-call (their cut-short writes must appear whole or not at all).
    #[arg(long)]
    faults: bool,
    /// Only this lock protocol (two-phase, one-try, alt-try); default: all, drawn per op.
    #[arg(long)]
    protocol: Option<atomio_lock::Protocol>,
    /// Simulate versioning (Tran et al.): writers, the version manager, the node store and
    /// chunk stores; every step of every writer (chunks, assignment, each node fetch of the
    /// tree build, each node put in any order, completion) in a seeded random order, writers
    /// stalled and aborted, collections between; every published snapshot compared with a
    /// per-byte model. `--clients` writers, `--ops` writes each.
    #[arg(long)]
    versioning: bool,
    /// With `--versioning`: a negative control that must be caught — publish-out-of-order
    /// (readers see a version as soon as its writer completes) or gc-frees-shared (a
    /// collector that frees every node of a dropped snapshot).
    #[arg(long)]
    version_fault: Option<String>,
    /// Ranges a lock server grants or releases per step (default: drawn per server from
    /// the seed, mostly tiny, so long requests run in slices between other messages).
    #[arg(long)]
    work_slice: Option<u64>,
    /// Lock simulation: the order two-phase rounds visit sub-requests in — `offset` (the
    /// paper's), `server` (interval I/O's: server by server) or `per-seed` (either,
    /// drawn from each seed; the default).
    #[arg(long, default_value = "per-seed", value_parser = parse_tiers)]
    tiers: atomio_lock::sim::Tiers,
}

fn parse_tiers(s: &str) -> Result<atomio_lock::sim::Tiers, String> {
    use atomio_lock::sim::Tiers;
    match s {
        "offset" => Ok(Tiers::Offset),
        "server" => Ok(Tiers::ByServer),
        "per-seed" => Ok(Tiers::PerSeed),
        _ => Err(format!("'{s}': expected offset, server or per-seed")),
    }
}

#[derive(Subcommand)]
enum SimCmd {
    /// Measure the scale model's costs on this machine (messages, lock work, copies,
    /// writes) through the product's own code; writes the cost file.
    Calibrate(crate::sim_scale::CalibrateArgs),
    /// Predict real benchmarks at 4 and 8 clients with the scale model and run them beside
    /// it: predicted vs measured, error per row.
    Validate(crate::sim_scale::ValidateArgs),
    /// Pings one server one at a time and prints its CPU and wall time (a process of
    /// `calibrate`).
    #[command(hide = true)]
    PingClient(crate::sim_scale::PingClientArgs),
    /// Makes atomic calls (`--plain`: the same writes without locks) of `--bytes` on a
    /// direct file one at a time and prints its CPU and wall time (a process of
    /// `calibrate`).
    #[command(hide = true)]
    CallClient(crate::sim_scale::PingClientArgs),
}

pub fn run(a: SimArgs) -> anyhow::Result<()> {
    match a.cmd {
        Some(SimCmd::Calibrate(c)) => return crate::sim_scale::calibrate(c),
        Some(SimCmd::Validate(v)) => return crate::sim_scale::validate(v),
        Some(SimCmd::PingClient(p)) => return crate::sim_scale::ping_client(p, false),
        Some(SimCmd::CallClient(p)) => return crate::sim_scale::ping_client(p, true),
        None => {}
    }
    if a.scale {
        return crate::sim_scale::scale(&a.scale_args);
    }
    if a.stack {
        return run_stack(&a);
    }
    if a.seqdlm {
        return run_seqdlm(&a);
    }
    if a.dlm_stack {
        return run_dlm_stack(&a);
    }
    if a.versioning {
        return run_versioning(&a);
    }
    let mut total = atomio_lock::sim::SimReport::default();
    let started = std::time::Instant::now();
    for (i, seed) in (a.seed..a.seed + a.seeds).enumerate() {
        let mut cfg = if a.faults {
            SimConfig::with_faults(seed)
        } else {
            SimConfig::new(seed)
        };
        cfg.clients = a.clients;
        cfg.servers = a.servers;
        cfg.ops_per_client = a.ops;
        if let Some(p) = a.protocol {
            cfg.protocols = vec![p];
        }
        if let Some(n) = a.work_slice {
            cfg.work_slice = n.max(1);
        }
        cfg.tiers = a.tiers;
        match run_sim(&cfg) {
            Ok(r) => {
                total.ops += r.ops;
                total.sliced += r.sliced;
                total.freezes += r.freezes;
                total.resets += r.resets;
                total.lapses += r.lapses;
                total.abandoned += r.abandoned;
                total.partitions += r.partitions;
                total.crashes += r.crashes;
            }
            Err(f) => bail!("{f}"),
        }
        progress(i + 1, a.seeds, started);
    }
    println!(
        "{} seeds from {}: {} lock operations, no conflict, no deadlock; \
         {} grants or releases continued in a later step (work slices)",
        a.seeds, a.seed, total.ops, total.sliced
    );
    if a.faults {
        println!(
            "faults: {} freezes, {} connection resets, {} partitions, {} server crashes, {} \
             leases lapsed, {} operations abandoned",
            total.freezes,
            total.resets,
            total.partitions,
            total.crashes,
            total.lapses,
            total.abandoned
        );
    }
    Ok(())
}

fn run_stack(a: &SimArgs) -> anyhow::Result<()> {
    use atomio_sim::stack::{run as run_stack_sim, StackSimConfig};
    let (mut calls, mut crashes, mut committed) = (0, 0, 0);
    for seed in a.seed..a.seed + a.seeds {
        let mut cfg = StackSimConfig::new(seed);
        cfg.clients = a.clients.min(64);
        cfg.servers = a.servers;
        cfg.calls_per_client = a.ops;
        cfg.crashes = a.faults;
        match run_stack_sim(&cfg) {
            Ok(r) => {
                calls += r.calls;
                crashes += r.crashes;
                committed += r.crashed_writes_visible;
            }
            Err(f) => bail!("{f}"),
        }
    }
    let faults = if a.faults {
        format!(", {crashes} clients killed mid-call ({committed} cut-short writes committed, whole; the rest left nothing)")
    } else {
        String::new()
    };
    println!(
        "{} seeds from {}: {calls} atomic calls (locks and data), verified atomic, no deadlock{faults}",
        a.seeds, a.seed
    );
    Ok(())
}

fn run_seqdlm(a: &SimArgs) -> anyhow::Result<()> {
    use atomio_lock::seqdlm::Config;
    use atomio_sim::seqdlm::{run as run_seq, Modes, SeqSimConfig, SeqSimReport};
    let (dlm, pw) = match a.dlm.as_str() {
        "seqdlm" => (Config::SEQDLM, false),
        "seqdlm-no-er" => (
            Config {
                early_revocation: false,
                contention_revocation: false,
                ..Config::SEQDLM
            },
            false,
        ),
        "seqdlm-no-cr" => (
            Config {
                contention_revocation: false,
                ..Config::SEQDLM
            },
            false,
        ),
        "dlm-basic" => (Config::DLM_BASIC, true),
        "dlm-lustre" => (Config::DLM_LUSTRE, true),
        other => bail!(
            "unknown --dlm '{other}' (seqdlm, seqdlm-no-er, seqdlm-no-cr, dlm-basic, dlm-lustre)"
        ),
    };
    let mut t = SeqSimReport::default();
    let started = std::time::Instant::now();
    for (i, seed) in (a.seed..a.seed + a.seeds).enumerate() {
        let mut cfg = SeqSimConfig::new(seed);
        cfg.clients = a.clients.clamp(1, 64);
        cfg.stripes = a.servers.clamp(1, 64) as usize;
        cfg.writes_per_client = a.ops;
        cfg.dlm = dlm;
        cfg.modes = match (pw, a.nbw_everywhere) {
            (true, _) => Modes::AllPw,
            (false, true) => Modes::AllNbw,
            (false, false) => Modes::Fig10,
        };
        match run_seq(&cfg) {
            Ok(r) => {
                t.writes += r.writes;
                t.grants += r.grants;
                t.revocations += r.revocations;
                t.early_grants += r.early_grants;
                t.flushes += r.flushes;
                t.bytes_discarded += r.bytes_discarded;
            }
            Err(f) => bail!("{f}"),
        }
        progress(i + 1, a.seeds, started);
    }
    println!(
        "{} seeds from {} ({}): {} writes across {} stripes, each stripe in SN order, the file verified atomic, no deadlock; {} \
         grants ({} early), {} revocations, {} flushes ({} bytes discarded as older by SN)",
        a.seeds,
        a.seed,
        a.dlm,
        t.writes,
        a.servers,
        t.grants,
        t.early_grants,
        t.revocations,
        t.flushes,
        t.bytes_discarded
    );
    Ok(())
}

fn run_versioning(a: &SimArgs) -> anyhow::Result<()> {
    use atomio_version::sim::{run as run_v, Control, SimConfig as VConfig};
    let control = match a.version_fault.as_deref() {
        None => Control::None,
        Some("publish-out-of-order") => Control::PublishOutOfOrder,
        Some("gc-frees-shared") => Control::GcFreesShared,
        Some(other) => {
            bail!("unknown --version-fault '{other}' (publish-out-of-order, gc-frees-shared)")
        }
    };
    let cfg = VConfig {
        writers: a.clients.clamp(1, 64),
        writes_each: a.ops.max(1),
        servers: a.servers.clamp(1, 64),
        stalls: control == Control::None || a.faults,
        control,
        ..VConfig::default()
    };
    let (mut published, mut aborted, mut collected, mut reads) = (0, 0, 0, 0);
    let started = std::time::Instant::now();
    for (i, seed) in (a.seed..a.seed + a.seeds).enumerate() {
        match run_v(seed, &cfg) {
            Ok(r) => {
                published += r.published;
                aborted += r.aborted;
                collected += r.collected;
                reads += r.reads_checked;
            }
            Err(e) => bail!("seed {seed}: {e} (replay: atomio-lab sim --versioning --seed {seed})"),
        }
        progress(i + 1, a.seeds, started);
    }
    println!(
        "{} seeds from {}: {published} versions published, each read through its tree equal \
         to the model ({reads} snapshot reads); {aborted} aborted (stalled writers), \
         {collected} collected with every kept snapshot intact",
        a.seeds, a.seed
    );
    Ok(())
}

fn run_dlm_stack(a: &SimArgs) -> anyhow::Result<()> {
    use atomio_client::dlm::DlmSpec;
    use atomio_sim::dlm::{run as run_dlm, DlmSimConfig, DlmSimReport, Fault};
    let spec = match DlmSpec::parse(&a.dlm) {
        Some(Ok(s)) => s,
        Some(Err(e)) => bail!("{e}"),
        None => bail!("--dlm {}: not a DLM strategy", a.dlm),
    };
    let fault = match a.dlm_fault.as_deref() {
        None => Fault::None,
        Some("nbw-across-stripes") => Fault::NbwAcrossStripes,
        Some("sn-blind") => Fault::SnBlindServers,
        Some(o) => bail!("--dlm-fault {o}: expected nbw-across-stripes or sn-blind"),
    };
    let mut t = DlmSimReport::default();
    let started = std::time::Instant::now();
    for (i, seed) in (a.seed..a.seed + a.seeds).enumerate() {
        let cfg = DlmSimConfig {
            clients: a.clients.clamp(1, 64),
            servers: a.servers.clamp(1, 16),
            stripes: a.servers.clamp(1, 16),
            calls_per_client: a.ops,
            spec,
            fault,
            ..DlmSimConfig::new(seed)
        };
        match run_dlm(&cfg) {
            Ok(r) => {
                t.steps += r.steps;
                t.writes += r.writes;
                t.reads += r.reads;
                t.grants += r.grants;
                t.revocations += r.revocations;
                t.flushes += r.flushes;
            }
            Err(f) if fault != Fault::None => {
                println!(
                    "negative control {fault:?} caught after {} seeds: {f}",
                    i + 1
                );
                return Ok(());
            }
            Err(f) => bail!("{f}"),
        }
        progress(i + 1, a.seeds, started);
    }
    if fault != Fault::None {
        bail!(
            "negative control {fault:?} was not caught in {} seeds",
            a.seeds
        );
    }
    println!(
        "{} seeds from {} ({}): {} writes and {} reads by the product's DLM client machines \
         over {} stripes, file and reads verified atomic, server invariants held at every \
         step, no deadlock; {} lock requests, {} revocations (and hurries), {} flushes, {} \
         steps ({:.0} s)",
        a.seeds,
        a.seed,
        spec.name(),
        t.writes,
        t.reads,
        a.servers,
        t.grants,
        t.revocations,
        t.flushes,
        t.steps,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A line every 1,000 seeds: sweeps of 10,000 run for minutes.
fn progress(done: usize, seeds: u64, started: std::time::Instant) {
    if done.is_multiple_of(1000) {
        eprintln!(
            "  {done} of {seeds} seeds clean ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
}
