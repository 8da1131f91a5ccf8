//! Interval I/O (Logan & Dickens, "Interval Based I/O"): the file views of all ranks,
//! intersected, say before any write which bytes can ever conflict.
//!
//! * `family` — strided families of intervals; lowering access patterns (MPI datatypes)
//!   into them without expanding repetitions.
//! * `analysis` — elementary intervals with their owner sets (private / shared), computed
//!   on the families' structure (periodic segments folded), with its cost.
//! * `set` — the interval set: search tree, and the split of one call into lock-free
//!   (private to the caller) and locked (shared, undeclared) pieces.
//! * `views` — interval sets from per-rank calls or from MPI views (bounded analysis).
//! * `choose` — the `auto` strategy's decision and its explanation.
//!
//! Pure computation: no I/O, no clocks except the analysis's own timing.

pub mod analysis;
pub mod choose;
pub mod family;
pub mod set;
pub mod views;

pub use analysis::{analyze, Analysis, AnalysisStats, Entry, Limits, Owner, Rank};
pub use choose::{choose, Choice};
pub use family::{lower, lower_tiled, Family, LowerError, TooComplex};
pub use set::{IntervalSet, PieceClass, Split};
pub use views::{from_accesses, from_views, View};
