//! Wire types of the cached-lock DLMs: SeqDLM (Chen et al., SC'22) and the traditional
//! DLMs it is measured against (`dlm-basic`, `dlm-lustre`). Locks are taken per *lock
//! resource* — one object (stripe) of a server file, at the server that holds it — on
//! byte ranges in that object's offsets, kept by the client (cached) until the server asks
//! for them back (`Reply::DlmRevoke`, a server-initiated frame on `DLM_CALLBACK_TAG`).
//! Every grant carries the resource's sequence number (SN); flushed data carry it too
//! (`Request::SeqWrite`), so data servers apply writes in grant order whatever order they
//! arrive in.
//!
//! The lock-side semantics live in `atomio_lock::seqdlm` (modes, Table II, the resource
//! state machine); these are their raw wire forms, validated by the receiver.

use crate::error::{ErrorCode, WireError};
use atomio_layout::{ByteRange, MAX_OFFSET};
use serde::{Deserialize, Serialize};

/// The tag of server-initiated DLM frames (revocations). Clients never use it for a
/// request (it is just below the liveness ping's `u64::MAX`).
pub const DLM_CALLBACK_TAG: u64 = u64::MAX - 1;

/// SeqDLM's lock modes (the traditional DLMs use only `Pr` and `Pw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DlmMode {
    Pr,
    Nbw,
    Bw,
    Pw,
}

/// How a resource expands a grant's range past the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DlmExpand {
    None,
    Greedy,
    Lustre { crowded: u32, max_past: u64 },
}

/// Which DLM a lock resource runs: the first request at a resource sets it, and every later
/// request there must name the same (a file is served by one DLM at a time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DlmPolicy {
    pub expand: DlmExpand,
    pub early_grant: bool,
    pub early_revocation: bool,
    pub conversion: bool,
    /// Early revocation also when the requested bytes overlap another client's lock
    /// that is already CANCELING (an extension of the paper's; see `atomio-lock`).
    pub contention_revocation: bool,
}

/// `len` bytes at `offset` of one object, written under the lock whose SN is `sn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnBlock {
    pub offset: u64,
    pub len: u64,
    pub sn: u64,
}

/// Checks a lock range in object offsets: non-empty, within `MAX_OFFSET`.
pub fn validate_dlm_range(range: ByteRange) -> Result<ByteRange, WireError> {
    if range.start >= range.end || range.end > MAX_OFFSET {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!(
                "a DLM lock range must be non-empty and end by {MAX_OFFSET}: got {}..{}",
                range.start, range.end
            ),
        ));
    }
    Ok(range)
}

/// Checks flush blocks against their data: each non-empty, within `MAX_OFFSET`, at most
/// `MAX_PIECES_PER_REQUEST` of them, their lengths summing to `data_len`.
pub fn validate_sn_blocks(blocks: &[SnBlock], data_len: usize) -> Result<(), WireError> {
    use crate::limits::MAX_PIECES_PER_REQUEST;
    if blocks.is_empty() || blocks.len() > MAX_PIECES_PER_REQUEST {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!(
                "a flush carries 1 to {MAX_PIECES_PER_REQUEST} blocks, not {}",
                blocks.len()
            ),
        ));
    }
    let mut total = 0u64;
    for (i, b) in blocks.iter().enumerate() {
        let end = b.offset.checked_add(b.len).filter(|&e| e <= MAX_OFFSET);
        if b.len == 0 || end.is_none() {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "flush block {i} ({} + {}) is empty or too far",
                    b.offset, b.len
                ),
            ));
        }
        total = total.saturating_add(b.len);
    }
    if total != data_len as u64 {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!("flush blocks hold {total} bytes but {data_len} came"),
        ));
    }
    Ok(())
}

impl DlmExpand {
    pub fn validate(self) -> Result<Self, WireError> {
        match self {
            DlmExpand::Lustre { crowded: 0, .. } | DlmExpand::Lustre { max_past: 0, .. } => {
                Err(WireError::new(
                    ErrorCode::InvalidArgument,
                    "Lustre expansion needs a positive crowd and distance",
                ))
            }
            e => Ok(e),
        }
    }
}
