//! Errors raised while building or validating ranges, patterns and layouts.

use thiserror::Error;

/// Why a range, pattern or layout was rejected. Every variant says what was wrong with
/// the numbers that were given, so it can be sent back to a remote peer verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    #[error("range end {end} is before its start {start}")]
    EndBeforeStart { start: u64, end: u64 },
    #[error("offset {offset} + length {len} overflows or passes the largest file offset {max}")]
    Overflow { offset: u64, len: u64, max: u64 },
    #[error("empty range at offset {offset}: zero-length ranges are not allowed here")]
    EmptyRange { offset: u64 },
    #[error("pattern arithmetic overflows: {what}")]
    PatternOverflow { what: &'static str },
    #[error("pattern is too large: {what} is {value}, the limit is {limit}")]
    PatternTooLarge {
        what: &'static str,
        value: u64,
        limit: u64,
    },
    #[error("pattern is not monotone: {what}")]
    NotMonotone { what: String },
    #[error("invalid pattern: {what}")]
    InvalidPattern { what: String },
    #[error("invalid layout: {what}")]
    InvalidLayout { what: String },
}
