//! `atomio-lab`: the lab's program — the demo, the benchmarks, the seeded simulations and
//! the scale model, the verifier over a kept run, and the fault tests' probe clients.
//!
//! It also offers every command of the operator's `atomio` (`atomio_cli::Command`, the same
//! code): a benchmark or a fault test starts its servers (`atomio-lab server`) and inspects
//! them (`atomio-lab stats`) from its own executable, so one build measures one server and
//! nothing has to be found beside it.

mod bench_locks;
mod bench_mpi;
mod bench_rma;
mod bench_seqdlm;
mod bench_versions;
mod bench_workload;
mod demo;
mod demo_sharedfs;
mod probe;
mod sim;
mod sim_scale;
mod verify;

use atomio_cli::closed_stdout;
use clap::{Parser, Subcommand};

/// Servers and clients allocate a megabyte buffer per data message; glibc's malloc maps and
/// unmaps each one (page faults, zeroing). mimalloc keeps freed memory for reuse (so a
/// server's memory stays near its peak; `MIMALLOC_PURGE_DELAY=0` returns it at once).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "atomio-lab",
    version,
    about = "atomio's lab: the demo, benchmarks, simulations, the scale model and the verifier"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The operator's commands (`atomio`'s).
    #[command(flatten)]
    Product(atomio_cli::Command),
    /// The main job: overlapping tiles on an embedded cluster under every kind of atomicity,
    /// verified, with a table and a chart.
    Demo(demo::DemoArgs),
    /// Run a benchmark; prints a table, writes JSON and a chart.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
    /// Run the seeded deterministic lock-protocol simulation.
    Sim(sim::SimArgs),
    /// Decide from a file's bytes (and its manifest) whether its writes were atomic.
    Verify(verify::VerifyArgs),
    /// A benchmark client process (started by `atomio-lab bench`).
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
    /// A workload: `atomio-lab bench <workload> [options] [-- workload options]`.
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
    let default_level = match &cli.command {
        Command::Product(c) => c.default_log_level(),
        _ => "warn",
    };
    atomio_cli::init_logging(default_level);
    let result = match cli.command {
        Command::Product(c) => c.run(),
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
        Command::Verify(a) => verify::verify(a),
        Command::Worker => worker(),
        Command::ProbeHold(a) => probe::run(a),
        Command::ProbeWrite(a) => probe::run_writes(a),
        Command::Sim(a) => sim::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("atomio-lab: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
