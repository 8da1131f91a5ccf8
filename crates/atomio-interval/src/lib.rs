//! Interval I/O (Logan & Dickens, "Interval Based I/O"): the file views of all ranks,
//! intersected, say before any write which bytes can ever conflict.
//!
//! * `family` — strided families of intervals; lowering access patterns (MPI datatypes)
//!   into them without expanding repetitions.
//! * `analysis` — elementary intervals with their owner sets (private / shared), computed
//!   on the families' structure (periodic segments folded), with its cost.
//! * `set` — the interval set: search tree, and the split of one call into lock-free
//!   (private to the caller) and locked (shared, undeclared) pieces.
//! * `ifile` — interval files: a flat file's bytes reorganized by an interval set (every
//!   rank's intervals contiguous; all metadata in one read), and their layout.
//! * `translate` — streaming translation between interval files and flat files.
//! * `views` — interval sets from per-rank calls or from MPI views (bounded analysis).
//! * `choose` — the `auto` strategy's decision and its explanation.
//!
//! `family`, `analysis` and `set` are pure computation (no I/O, no clocks except the
//! analysis's own timing); `ifile` and `translate` do blocking std file I/O.

pub mod analysis;
pub mod choose;
pub mod family;
pub mod ifile;
pub mod set;
pub mod translate;
pub mod views;

pub use analysis::{analyze, Analysis, AnalysisStats, Entry, Limits, Owner, Rank};
pub use choose::{choose, Choice};
pub use family::{lower, lower_tiled, Family, LowerError, TooComplex};
pub use ifile::{Header, IfileError, IntervalFile, IntervalLayout, Region, Segment};
pub use set::{IntervalSet, PieceClass, Split};
pub use translate::{
    flat_to_set, translate_to_flat, translate_to_set, Options as TranslateOptions, Progress,
    TranslateReport,
};
pub use views::{from_accesses, from_views, View};
