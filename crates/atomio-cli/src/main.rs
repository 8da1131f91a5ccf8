//! `atomio`: run servers, benchmarks and simulations.

mod bench_locks;
mod bench_mpi;
mod bench_rma;
mod bench_seqdlm;
mod bench_versions;
mod bench_workload;
mod closed_stdout;
mod demo;
mod demo_sharedfs;
mod explain;
mod files;
mod interval;
mod output;
mod probe;
mod server;
mod sim;
mod sim_scale;
mod stats;

use clap::{Parser, Subcommand};

/// Servers and clients allocate a megabyte buffer per data message; glibc's malloc maps and
/// unmaps each one (page faults, zeroing). mimalloc keeps freed memory for reuse (so a
/// server's memory stays near its peak; `MIMALLOC_PURGE_DELAY=0` returns it at once).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "atomio",
    version,
    about = "Fast, correct atomic I/O for parallel programs writing one shared file"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: overlapping tiles on an embedded cluster under every kind of atomicity,
    /// verified, with a table and a chart.
    Demo(demo::DemoArgs),
    /// Run a server (locks and data).
    Server(server::ServerArgs),
    /// Run a benchmark; prints a table, writes JSON and a chart.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
    /// Run the seeded deterministic lock-protocol simulation.
    Sim(sim::SimArgs),
    /// Write a cluster file's logical bytes (or one snapshot's) as one ordinary file.
    Export(files::ExportArgs),
    /// List the snapshots of a file written with strategy `versioning`.
    Versions(files::VersionsArgs),
    /// Free the snapshots of a versioned file no longer kept (newest K, or newer than T).
    Gc(files::GcArgs),
    /// Write a versioned file's newest snapshot into the file itself (its base).
    Materialize(files::MaterializeArgs),
    /// Decide from a file's bytes (and its manifest) whether its writes were atomic.
    Verify(files::VerifyArgs),
    /// What running servers hold: lock table, waiters, leases, queue depths.
    Stats(stats::StatsArgs),
    /// The interval analysis of a workload, and what `auto` would choose for it and why.
    Explain(explain::ExplainArgs),
    /// Interval files (Logan & Dickens): inspect one, translate to flat or another set.
    Interval {
        #[command(subcommand)]
        which: interval::IntervalCmd,
    },
    /// A benchmark client process (started by `atomio bench`).
    #[command(hide = true)]
    Worker,
    /// A client that locks, writes and holds until told to go on (the fault probes'
    /// subject).
    #[command(hide = true)]
    ProbeHold(probe::ProbeHoldArgs),
    /// A client that overwrites one range again and again, one byte value per write (the
    /// all-or-nothing probes kill it, or a server, mid-write).
    #[command(hide = true)]
    ProbeWrite(probe::ProbeWriteArgs),
}

#[derive(Subcommand)]
enum Bench {
    /// Ching et al. §6.1: acquire/release 128Ki one-byte locks per client, scaling and
    /// contention variants, every method × protocol, embedded and TCP.
    Locks(bench_locks::LockArgs),
    /// Thakur et al. 2005 §4: RMA byte-range locks (paper, direct-grant) vs fcntl, µs per
    /// acquire+release pair at 2/4/8 ranks, in one mpiexec (builds mpi/rmalock).
    Rma(bench_rma::RmaArgs),
    /// mpi-tile-io style MPI program (mpi/bench/tile_io): MPICH non-atomic and atomic vs
    /// atomio strategies through a preloaded libatomio_mpiio.so.
    MpiTile(Box<bench_mpi::MpiTileArgs>),
    /// Interleaved strided MPI writes without overlap (mpi/bench/strided_io: rank r owns
    /// every P-th block of B bytes) for each B: reference rows without MPI-IO, MPICH
    /// non-atomic and atomic, atomio strategies through the preloaded library; one table
    /// per B.
    MpiStrided(Box<bench_mpi::MpiStridedArgs>),
    /// ROMIO test/noncontig's pattern (mpi/bench/noncontig_io: vector views of 4-byte
    /// elements, ranks interleaved, cmem or ncmem), timed reads and writes in atomic mode:
    /// MPICH atomic, auto and every byte-range strategy; one table per mode and memory side.
    MpiNoncontig(Box<bench_mpi::MpiNoncontigArgs>),
    /// SeqDLM §V-B, Fig. 17: round-robin conflicting writes, time split into lock
    /// revocation, cancel + flush, and other; NBW vs PW.
    SeqdlmBreakdown(bench_seqdlm::SeqArgs),
    /// SeqDLM §V-B, Fig. 18: parallel conflicting writes, writes/s for NBW, NBW+ER, PW,
    /// PW+ER.
    SeqdlmParallel(bench_seqdlm::SeqArgs),
    /// SeqDLM §V-B, Fig. 19: lock upgrading (one client, writes and reads) and
    /// downgrading (writes across two stripes).
    SeqdlmConvert(bench_seqdlm::SeqArgs),
    /// Tran §6.3: one client writes the same bytes in 1, 2, 4, …, 1024 regions and reads
    /// them back; write and read MiB/s per strategy (versioning vs locks vs plain I/O).
    RegionsSweep(bench_versions::SweepArgs),
    /// Readers read the newest data in a loop while writers write overlapping tiles: read
    /// latency with and without writers, versioning vs lock strategies.
    VersionReaders(Box<bench_versions::ReadersArgs>),
    /// One writer overwrites a file many times under versioning while a second client
    /// collects old snapshots: the servers' disk usage over time.
    VersionGc(bench_versions::GcArgs),
    /// A client process of `version-readers` (JSON lines on stdin/stdout).
    #[command(hide = true)]
    VersionClient,
    /// List the workloads.
    List,
    /// A workload: `atomio bench <workload> [options] [-- workload options]`.
    #[command(external_subcommand)]
    Workload(Vec<String>),
}

fn worker() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(atomio_bench::worker::serve(
        tokio::io::BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
    ))?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    closed_stdout::exit_quietly_when_the_reader_is_gone();
    let cli = Cli::parse();
    // A server says what happens to its clients (connects, disconnects, I/O errors) by
    // default; everything else keeps stderr for warnings, beside its tables and progress.
    let default_level = match cli.command {
        Command::Server(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ATOMIO_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Command::Server(a) => server::run(a),
        Command::Bench {
            which: Bench::Locks(a),
        } => bench_locks::run(a),
        Command::Bench {
            which: Bench::Rma(a),
        } => bench_rma::run(a),
        Command::Bench {
            which: Bench::MpiTile(a),
        } => bench_mpi::run_tile(*a),
        Command::Bench {
            which: Bench::MpiStrided(a),
        } => bench_mpi::run_strided(*a),
        Command::Bench {
            which: Bench::MpiNoncontig(a),
        } => bench_mpi::run_noncontig(*a),
        Command::Bench {
            which: Bench::SeqdlmBreakdown(a),
        } => bench_seqdlm::breakdown(a),
        Command::Bench {
            which: Bench::SeqdlmParallel(a),
        } => bench_seqdlm::parallel(a),
        Command::Bench {
            which: Bench::SeqdlmConvert(a),
        } => bench_seqdlm::convert(a),
        Command::Bench {
            which: Bench::RegionsSweep(a),
        } => bench_versions::regions_sweep(a),
        Command::Bench {
            which: Bench::VersionReaders(a),
        } => bench_versions::version_readers(*a),
        Command::Bench {
            which: Bench::VersionGc(a),
        } => bench_versions::version_gc(a),
        Command::Bench {
            which: Bench::VersionClient,
        } => bench_versions::version_client(),
        Command::Bench { which: Bench::List } => {
            bench_workload::list();
            Ok(())
        }
        Command::Bench {
            which: Bench::Workload(args),
        } => bench_workload::run(&args[0], &args[1..]),
        Command::Demo(a) => demo::run(a),
        Command::Export(a) => files::export(a),
        Command::Versions(a) => files::versions(a),
        Command::Gc(a) => files::gc(a),
        Command::Materialize(a) => files::materialize(a),
        Command::Verify(a) => files::verify(a),
        Command::Worker => worker(),
        Command::ProbeHold(a) => probe::run(a),
        Command::ProbeWrite(a) => probe::run_writes(a),
        Command::Stats(a) => stats::run(a),
        Command::Interval { which } => interval::run(which),
        Command::Explain(a) => explain::run(a),
        Command::Sim(a) => sim::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("atomio: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
