//! Interval I/O (Logan & Dickens, "Interval Based I/O"): the file views of all ranks,
//! intersected, say before any write which bytes can ever conflict.
//!
//! * `family` — strided families of intervals; lowering access patterns (MPI datatypes)
//!   into them without expanding repetitions.
//! * `analysis` — elementary intervals with their owner sets (private / shared), computed
//!   on the families' structure (periodic segments folded), with its cost.
//! * `set` — the interval set: search tree, and the split of one call into lock-free
//!   (private to the caller) and locked (shared, undeclared) pieces.
//!
//! Pure computation: no I/O, no clocks except the analysis's own timing.

pub mod analysis;
pub mod family;
pub mod set;

pub use analysis::{analyze, Analysis, AnalysisStats, Entry, Limits, Owner, Rank};
pub use family::{lower, lower_tiled, Family, LowerError, TooComplex};
pub use set::{IntervalSet, PieceClass, Split};
