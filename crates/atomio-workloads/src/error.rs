//! Errors raised while turning workload parameters into a plan, and the checked arithmetic
//! every workload uses.
//!
//! **Invariant:** planning never panics and never wraps: every product and sum of
//! user-supplied sizes goes through [`Ctx`], which reports overflow, zero sizes and offsets
//! beyond `MAX_OFFSET` as a [`WorkloadError`] naming the workload and the quantity.

use atomio_layout::{LayoutError, MAX_OFFSET};
use thiserror::Error;

/// Why a workload could not be planned. Each variant names the workload and says what was
/// wrong with the numbers given, so the CLI can print it as is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WorkloadError {
    #[error("{workload}: parameter `{param}` must be at least 1")]
    Zero {
        workload: &'static str,
        param: &'static str,
    },
    #[error("{workload}: invalid parameters: {what}")]
    Invalid {
        workload: &'static str,
        what: String,
    },
    #[error("{workload}: cannot run with {clients} clients: {why}")]
    Clients {
        workload: &'static str,
        clients: u32,
        why: String,
    },
    #[error(
        "{workload}: sizes overflow: {what} does not fit below the largest file offset 2^63-1"
    )]
    Overflow {
        workload: &'static str,
        what: &'static str,
    },
    #[error("{workload}: plan too large: {what} would be {value}, the limit is {limit}")]
    TooLarge {
        workload: &'static str,
        what: &'static str,
        value: u64,
        limit: u64,
    },
    #[error("unknown workload `{name}`; known workloads: {known}")]
    UnknownName { name: String, known: String },
    #[error("{name}: bad arguments: {message}")]
    Args { name: String, message: String },
    #[error("{workload}: access pattern rejected: {source}")]
    Layout {
        workload: &'static str,
        #[source]
        source: LayoutError,
    },
}

/// Checked arithmetic and error construction for one workload.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx(pub &'static str);

pub(crate) type Result<T> = std::result::Result<T, WorkloadError>;

impl Ctx {
    pub fn name(self) -> &'static str {
        self.0
    }

    /// `value` itself when it is at least 1.
    pub fn nonzero(self, value: u64, param: &'static str) -> Result<u64> {
        if value == 0 {
            Err(WorkloadError::Zero {
                workload: self.0,
                param,
            })
        } else {
            Ok(value)
        }
    }

    /// `a * b`, and it must be a valid file offset.
    pub fn mul(self, a: u64, b: u64, what: &'static str) -> Result<u64> {
        a.checked_mul(b)
            .filter(|&v| v <= MAX_OFFSET)
            .ok_or(self.overflow(what))
    }

    /// `a + b`, and it must be a valid file offset.
    pub fn add(self, a: u64, b: u64, what: &'static str) -> Result<u64> {
        a.checked_add(b)
            .filter(|&v| v <= MAX_OFFSET)
            .ok_or(self.overflow(what))
    }

    /// The product of all `factors`, checked.
    pub fn product(self, factors: &[u64], what: &'static str) -> Result<u64> {
        factors
            .iter()
            .try_fold(1u64, |acc, &f| self.mul(acc, f, what))
    }

    pub fn overflow(self, what: &'static str) -> WorkloadError {
        WorkloadError::Overflow {
            workload: self.0,
            what,
        }
    }

    pub fn invalid(self, what: impl Into<String>) -> WorkloadError {
        WorkloadError::Invalid {
            workload: self.0,
            what: what.into(),
        }
    }

    pub fn clients(self, clients: u32, why: impl Into<String>) -> WorkloadError {
        WorkloadError::Clients {
            workload: self.0,
            clients,
            why: why.into(),
        }
    }

    /// `value ≤ limit`, or a `TooLarge` error.
    pub fn at_most(self, value: u64, limit: u64, what: &'static str) -> Result<u64> {
        if value > limit {
            Err(WorkloadError::TooLarge {
                workload: self.0,
                what,
                value,
                limit,
            })
        } else {
            Ok(value)
        }
    }

    /// Maps a pattern/access construction error into this workload's error.
    pub fn layout<T>(self, r: std::result::Result<T, LayoutError>) -> Result<T> {
        r.map_err(|source| WorkloadError::Layout {
            workload: self.0,
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_is_checked_against_the_largest_offset() {
        let c = Ctx("t");
        assert_eq!(c.mul(3, 4, "x"), Ok(12));
        assert!(matches!(
            c.mul(u64::MAX, 2, "x"),
            Err(WorkloadError::Overflow { .. })
        ));
        assert!(c.mul(1 << 62, 2, "x").is_err(), "2^63 is past MAX_OFFSET");
        assert!(c.add(MAX_OFFSET, 1, "x").is_err());
        assert_eq!(c.product(&[2, 3, 4], "x"), Ok(24));
        assert!(matches!(
            c.nonzero(0, "p"),
            Err(WorkloadError::Zero { param: "p", .. })
        ));
    }
}
