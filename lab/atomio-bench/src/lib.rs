//! atomio's benchmarks. Each is a library function returning rows (the CLI prints them as
//! a table, writes JSON and draws charts), so they can also run from tests at small scale.
//! `rma` and `mpi_bench` drive the C MPI programs under `mpi/` through `mpi_run`.

pub mod chart;
pub mod locks;
pub mod mpi_bench;
pub mod mpi_run;
pub mod page_warm;
pub mod progress;
pub mod rma;
pub mod seqdlm;
pub mod stats;
pub mod versions;
pub mod worker;
pub mod workload;
