//! `atomio`: run servers, benchmarks and simulations.

mod bench_locks;
mod server;
mod sim;

use clap::{Parser, Subcommand};

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
    /// Run a lock (and later data) server.
    Server(server::ServerArgs),
    /// Run a benchmark; prints a table, writes JSON and a chart.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
    /// Run the seeded deterministic lock-protocol simulation.
    Sim(sim::SimArgs),
}

#[derive(Subcommand)]
enum Bench {
    /// Ching et al. §6.1: acquire/release 128Ki one-byte locks per client, scaling and
    /// contention variants, every method × protocol, embedded and TCP.
    Locks(bench_locks::LockArgs),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ATOMIO_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Server(a) => server::run(a),
        Command::Bench {
            which: Bench::Locks(a),
        } => bench_locks::run(a),
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
