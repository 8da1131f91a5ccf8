//! `atomio`: the operator's program — run a server, see what running servers hold, read a
//! cluster file's bytes and snapshots, inspect interval files, and explain what `auto` would
//! choose for a workload (the commands are `atomio_cli::Command`). Benchmarks, simulations
//! and the verifier are the lab's program, `atomio-lab` (`lab/atomio-lab`).

use clap::Parser;

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
    command: atomio_cli::Command,
}

fn main() -> std::process::ExitCode {
    atomio_cli::closed_stdout::exit_quietly_when_the_reader_is_gone();
    let cli = Cli::parse();
    atomio_cli::init_logging(cli.command.default_log_level());
    match cli.command.run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("atomio: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
