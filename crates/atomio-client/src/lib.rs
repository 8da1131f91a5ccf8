//! atomio's client API: open files on an atomio cluster and read or write noncontiguous
//! accesses with a chosen atomicity strategy (`File`), or do the same on one ordinary POSIX
//! file with `fcntl` locks (`PosixFile`, the baseline).

pub mod file;
pub mod posix;
pub mod strategy;

pub use file::{File, IoStats};
pub use posix::PosixFile;
pub use strategy::{lock_plan, BlockSize, Strategy};
