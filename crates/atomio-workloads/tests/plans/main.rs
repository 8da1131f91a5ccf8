//! Behavioural tests of the workload plans: byte coverage, overlap, structure, determinism
//! and parameter errors, computed from the expanded byte ranges at small sizes.

mod common;
mod defaults;
mod errors;
mod flash;
mod ior;
mod regions;
mod robust;
mod row;
mod s3asim;
mod s3d;
mod tile;
mod vpic;
