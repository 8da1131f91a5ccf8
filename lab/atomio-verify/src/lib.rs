//! Proves from a file's bytes whether a run of concurrent noncontiguous writes (and reads)
//! was *atomic*: whether the final file, and what every read returned, equal the result of
//! some serial order of whole operations (MPI-IO atomic mode).
//!
//! How:
//! 1. Every test write fills its bytes with self-describing tags (`tag`): the byte at offset
//!    `o` written by (writer, op) is `tag_byte(writer, op, o)`, so each byte names its write.
//! 2. One sweep in offset order (`intervals`, driven by a k-way merge in `merge`) cuts the
//!    file into elementary intervals (constant set of covering writes) and finds which
//!    covering writes' tags match each interval whole, and what each read saw.
//! 3. `order` decides whether a serial order explains all of it: exactly for writes,
//!    soundly (with an honest `Inconclusive`) for reads.
//!
//! ```
//! use atomio_layout::{ByteRange, RangeList};
//! use atomio_verify::{verify, TagKey, Write};
//!
//! let ranges = |v: &[(u64, u64)]| {
//!     RangeList::from_ranges(v.iter().map(|&(s, e)| ByteRange::new(s, e).unwrap()).collect())
//! };
//! let a = Write::new(0, 1, ranges(&[(0, 64), (128, 192)]));
//! let b = Write::new(1, 1, ranges(&[(32, 160)]));
//! // The run: b, then a, each whole.
//! let mut file = vec![0u8; 192];
//! for w in [&b, &a] {
//!     let tag = TagKey::DEFAULT.op(w.id.writer, w.id.op);
//!     for r in w.ranges.iter() {
//!         tag.fill_at(r.start, &mut file[r.start as usize..r.end as usize]);
//!     }
//! }
//! let report = verify(&file[..], &[a, b], &[]).unwrap();
//! assert!(report.ok(), "{report}");
//! ```
//!
//! Scope decisions, stated once here:
//! * Bytes covered by no write are not checked in the file (the run does not define them);
//!   reads must see zeros there (the file must start empty).
//! * An input problem (unreadable or short file, malformed manifest, duplicate ids) is an
//!   `Error`, never a verdict: "could not check" must not read as "not atomic". A file
//!   shorter than the writes' extent is therefore an error, reported before any byte is read.
//! * Reads are linearization-free: a read may be placed anywhere in the order its data
//!   allows; real-time order between operations is not known to the verifier.

pub mod error;
mod intervals;
pub mod manifest;
mod merge;
pub mod op;
mod order;
pub mod report;
pub mod source;
pub mod tag;

pub use error::Error;
pub use manifest::{manifest_path_for, verify_manifest, Manifest, Observed};
pub use op::{OpId, Ranges, Read, ReadId, Write, WriteId};
pub use report::{Edge, EdgeReason, Evidence, Report, Verdict, Violation, ViolationKind};
pub use source::{ByteSource, SubSource};
pub use tag::{fill, tag_byte, OpTag, TagKey};

use order::Outcome;
use std::collections::HashSet;

/// Most operations (writes + reads) in one verification; node ids are u32 with one
/// value reserved.
pub const MAX_OPS: usize = 1 << 24;

/// Tuning of a verification.
#[derive(Clone, Debug)]
pub struct Options {
    /// The run's tag key.
    pub key: TagKey,
    /// How many violations are diagnosed and kept in the report (all are counted).
    pub max_detailed: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            key: TagKey::DEFAULT,
            max_detailed: 16,
        }
    }
}

/// Verifies `source` (the final file) against the run's writes and reads, with the default
/// tag key. See `verify_with`.
pub fn verify<S: ByteSource + ?Sized>(
    source: &S,
    writes: &[Write],
    reads: &[Read<'_>],
) -> Result<Report, Error> {
    verify_with(&Options::default(), source, writes, reads)
}

/// Verifies `source` against the run's writes and reads.
///
/// Returns `Err` only when the inputs cannot be checked; every finding about atomicity is
/// in the `Report`.
pub fn verify_with<S: ByteSource + ?Sized>(
    opts: &Options,
    source: &S,
    writes: &[Write],
    reads: &[Read<'_>],
) -> Result<Report, Error> {
    let count = writes.len() + reads.len();
    if count > MAX_OPS {
        return Err(Error::TooMany {
            count,
            limit: MAX_OPS,
        });
    }
    let mut seen = HashSet::new();
    for op in writes
        .iter()
        .map(|w| OpId::Write(w.id))
        .chain(reads.iter().map(|r| OpId::Read(r.id)))
    {
        if !seen.insert(op) {
            return Err(Error::Duplicate { op });
        }
    }
    let len = source
        .size()
        .map_err(|e| Error::io("reading the size of the file", e))?;
    for w in writes {
        if let Some(h) = w.ranges.hull() {
            if h.end > len {
                return Err(Error::ShortFile {
                    len,
                    needed: h.end,
                    op: OpId::Write(w.id),
                });
            }
        }
    }
    for r in reads {
        let op = OpId::Read(r.id);
        let got = r
            .observed
            .size()
            .map_err(|e| Error::io(format!("reading the size of {op}'s data"), e))?;
        let expected = r.ranges.size();
        if got != expected {
            return Err(Error::ObservedSize { op, expected, got });
        }
    }

    let sw = intervals::sweep(source, writes, reads, opts.key, opts.max_detailed)?;
    let ids: Vec<OpId> = writes
        .iter()
        .map(|w| OpId::Write(w.id))
        .chain(reads.iter().map(|r| OpId::Read(r.id)))
        .collect();
    let ambiguous_intervals = sw.constraints.ambiguous_intervals;
    let solved = sw.constraints.solve(&ids);
    let mut report = Report {
        verdict: Verdict::Atomic,
        writes: writes.len(),
        reads: reads.len(),
        intervals: sw.intervals,
        ambiguous_intervals,
        bytes_checked: sw.bytes_checked,
        read_bytes_checked: sw.read_bytes_checked,
        edges: solved.edges,
        inferred_edges: solved.inferred,
        violations: sw.violations,
        violation_count: sw.violation_count,
        inconclusive: None,
        order: Vec::new(),
    };
    match solved.outcome {
        Outcome::Violation(v) => {
            report.violation_count += 1;
            if report.violations.len() < opts.max_detailed.max(1) {
                report.violations.push(v);
            }
        }
        Outcome::Inconclusive(why) => report.inconclusive = Some(why),
        Outcome::Order(order) => {
            report.order = order.iter().map(|&u| ids[u as usize]).collect();
        }
    }
    report.verdict = if report.violation_count > 0 {
        report.order.clear();
        report.inconclusive = None;
        Verdict::Violated
    } else if report.inconclusive.is_some() {
        Verdict::Inconclusive
    } else {
        Verdict::Atomic
    };
    Ok(report)
}
