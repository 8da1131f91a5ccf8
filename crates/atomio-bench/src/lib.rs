//! atomio's benchmarks. Each is a library function returning rows (the CLI prints them as
//! a table, writes JSON and draws charts), so they can also run from tests at small scale.

pub mod chart;
pub mod locks;
pub mod progress;
pub mod stats;
pub mod table;
pub mod worker;
pub mod workload;
