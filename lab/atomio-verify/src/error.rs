//! Why a verification could not be carried out.
//!
//! **Invariant:** an `Error` never means "the run was not atomic" — that is a `Violation` in
//! the `Report`. Errors are about the inputs (unreadable or short files, malformed
//! manifests, inconsistent descriptions), so a CLI can tell "could not check" from "checked
//! and failed" by exit code.

use crate::op::OpId;
use atomio_layout::LayoutError;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest {path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("manifest: {what}")]
    Manifest { what: String },
    #[error("{op}: {source}")]
    Layout {
        op: OpId,
        #[source]
        source: LayoutError,
    },
    #[error("{op} appears more than once; every operation needs a distinct (id, op) pair")]
    Duplicate { op: OpId },
    #[error("too many operations: {count} (at most {limit})")]
    TooMany { count: usize, limit: usize },
    #[error("the file has {len} bytes but {op} writes up to offset {needed}")]
    ShortFile { len: u64, needed: u64, op: OpId },
    #[error("{op}: the observed data has {got} bytes but the read selects {expected}")]
    ObservedSize { op: OpId, expected: u64, got: u64 },
    #[error("{what} ended early: wanted bytes [{offset}, {end}), got {got}")]
    ShortRead {
        what: String,
        offset: u64,
        end: u64,
        got: u64,
    },
    #[error("{op}: ranges are not increasing and disjoint at offset {offset}")]
    NotMonotone { op: OpId, offset: u64 },
    #[error("fill: the buffer has {buffer} bytes but the ranges hold {ranges}")]
    FillSize { buffer: u64, ranges: u64 },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}
