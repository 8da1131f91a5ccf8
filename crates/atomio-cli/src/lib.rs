//! The operator's commands of the `atomio` binary, as a library: each module is one command
//! (its `clap` arguments and its `run`), plus the output helpers they share. The lab binary
//! (`lab/atomio-lab`) links it and offers the same commands beside its own: its benchmarks
//! and fault tests start and inspect the very server an operator runs, and print and write
//! their results alike.
//!
//! **Invariants:** nothing here depends on a lab crate (`tests/layering.rs`); a command
//! reports failure as an error (`main` turns it into the exit status); the one exit is
//! `closed_stdout`'s, for a reader that has gone.

pub mod closed_stdout;
pub mod explain;
pub mod files;
pub mod interval;
pub mod output;
pub mod server;
pub mod stats;
pub mod table;

use clap::Subcommand;

/// The operator's commands; the lab binary offers them too (flattened into its own).
#[derive(Subcommand)]
pub enum Command {
    /// Run a server (locks and data).
    Server(server::ServerArgs),
    /// Write a cluster file's logical bytes (or one snapshot's) as one ordinary file.
    Export(files::ExportArgs),
    /// List the snapshots of a file written with strategy `versioning`.
    Versions(files::VersionsArgs),
    /// Free the snapshots of a versioned file no longer kept (newest K, or newer than T).
    Gc(files::GcArgs),
    /// Write a versioned file's newest snapshot into the file itself (its base).
    Materialize(files::MaterializeArgs),
    /// What running servers hold: lock table, waiters, leases, queue depths.
    Stats(stats::StatsArgs),
    /// The interval analysis of a workload, and what `auto` would choose for it and why.
    Explain(explain::ExplainArgs),
    /// Interval files (Logan & Dickens): inspect one, translate to flat or another set.
    Interval {
        #[command(subcommand)]
        which: interval::IntervalCmd,
    },
}

impl Command {
    /// A server says what happens to its clients (connects, disconnects, I/O errors) by
    /// default; everything else keeps stderr for warnings, beside its tables and progress.
    pub fn default_log_level(&self) -> &'static str {
        match self {
            Command::Server(_) => "info",
            _ => "warn",
        }
    }

    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Server(a) => server::run(a),
            Command::Export(a) => files::export(a),
            Command::Versions(a) => files::versions(a),
            Command::Gc(a) => files::gc(a),
            Command::Materialize(a) => files::materialize(a),
            Command::Stats(a) => stats::run(a),
            Command::Interval { which } => interval::run(which),
            Command::Explain(a) => explain::run(a),
        }
    }
}

/// Logs to stderr, filtered by `ATOMIO_LOG` (else `default_level`), in colour on a terminal.
pub fn init_logging(default_level: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ATOMIO_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
