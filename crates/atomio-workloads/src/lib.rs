//! Exact descriptions of the I/O workloads the atomicity papers measure.
//!
//! [`plan`] turns a [`Workload`] and a client count into a [`WorkloadPlan`]: for every client
//! (MPI rank) its ordered calls — `Write`, `Read` or `Sync` — each write or read an
//! [`atomio_layout::Access`] whose structure is the MPI datatype the application would use
//! (a subarray for a tile, a vector for FLASH's variables, an hindexed list only for
//! S3aSim's genuinely unstructured results). Nothing here does I/O or reads a clock; the
//! benchmark harness executes plans. Same parameters → identical plan.
//!
//! | name | paper | layout (N clients, client c) | default per run |
//! |---|---|---|---|
//! | `ior-segmented` | SeqDLM §V-C | transfer t of segment s at `(s·N+c)·block + t·xfer` | 16 MiB/client |
//! | `ior-strided` (`ior-hard`) | SeqDLM §V-C | k-th transfer at `(k·N+c)·xfer` | 16 MiB/client |
//! | `tile` (`tile-large`) | Tran §6.5, SeqDLM §V-D | mpi-tile-io tile `(c mod tx, c div tx)`, one 2-D subarray | 16 MiB/client |
//! | `row` | Tran §6.4 | subdomain c of one row, overlap width/8, one subarray | 16 MiB/client |
//! | `s3d` | Ching §6.2 | 4 Fortran-order arrays (11,3,1,1 comps), block³ partition | 108 MiB total |
//! | `s3asim` | Ching §6.3 | seeded results, prefix-sum offsets, hindexed per worker per query + sync | ≈130 MiB total |
//! | `flash` | Logan §5.1 | variable v at `(v·N+c)·B`, one hvector of 24 | 7.5 MiB/client |
//! | `regions` | Tran §6.3 | R equal regions of one client, gap = region | 64 MiB/client |
//! | `vpic` | SeqDLM §V-E | variable v, iteration i at `v·N·I·W + (i·N+c)·W`, W = 4·particles | 16 MiB/client |
//!
//! Defaults are scaled for one 2-core machine with 24 GiB of RAM: a run moves roughly
//! 32–256 MiB at 4–16 clients, a few seconds at 100–500 MiB/s. Each module states its exact
//! formulas, its defaults, and the scale factor against the paper.

#![forbid(unsafe_code)]

pub mod error;
pub mod flash;
pub mod grid;
pub mod ior;
pub mod plan;
pub mod regions;
pub mod row;
pub mod s3asim;
pub mod s3d;
pub mod tile;
pub mod vpic;
pub mod workload;

pub use error::WorkloadError;
pub use flash::FlashParams;
pub use ior::{IorParams, IOR_HARD_XFER_BYTES};
pub use plan::{Call, CallKind, ClientPlan, WorkloadPlan, MAX_CALLS, MAX_CLIENTS};
pub use regions::RegionsParams;
pub use row::RowParams;
pub use s3asim::{s3asim_results, S3asimParams, SimResult};
pub use s3d::S3dParams;
pub use tile::{OverlapMode, TileParams};
pub use vpic::{VpicParams, VPIC_VALUE_BYTES, VPIC_VARIABLES};
pub use workload::{plan, Workload, WorkloadInfo, WORKLOADS};
