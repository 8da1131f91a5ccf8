//! Data-path messages: file metadata (create, open, remove) and object I/O (write, read,
//! sync, sizes). Clients cut accesses into object pieces with the file's layout, so servers
//! need no layout to move bytes; they hold one byte array per object.

use crate::error::{ErrorCode, WireError};
use crate::limits::{MAX_PATH_BYTES, MAX_PIECES_PER_REQUEST};
use crate::messages::FileId;
use atomio_layout::{ByteRange, Layout, ServerId, MAX_OFFSET};
use serde::{Deserialize, Serialize};
use std::hash::Hasher;

/// `len` bytes at `offset` within one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjPiece {
    pub offset: u64,
    pub len: u64,
}

/// One all-or-nothing write, named by its writer: `origin` is random per client process
/// (so ids from different clients never collide without coordination) and `seq` counts
/// that client's writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TxnId {
    pub origin: u64,
    pub seq: u64,
}

impl std::fmt::Display for TxnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "txn {:x}.{}", self.origin, self.seq)
    }
}

/// How a participant finishes a staged write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnOutcome {
    /// The write committed at its decider: apply the staged bytes.
    Commit,
    /// The write did not commit: drop the staged bytes.
    Abort,
    /// The writer cannot tell (its decider did not answer): keep the bytes staged and in
    /// doubt; the next access to them resolves the write at its decider.
    Unknown,
}

/// How a file's bytes are striped over its objects: what a server needs to map a write's
/// object pieces back to the file bytes the lock table holds (mandatory locks). Sent with
/// every `Write` and `Stage`; a server keeps the first striping it sees for a file and
/// refuses writes that name another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Striping {
    pub stripe_size: u64,
    pub objects: u32,
}

impl Striping {
    pub fn of(layout: &Layout) -> Self {
        Self {
            stripe_size: layout.stripe_size(),
            objects: layout.stripe_count(),
        }
    }

    /// Checks the striping, and that `object` is one of its objects.
    pub fn validate(&self, object: u32) -> Result<(), WireError> {
        if self.stripe_size == 0
            || self.objects == 0
            || self.objects as usize > atomio_layout::MAX_STRIPE_COUNT
            || object >= self.objects
        {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "object {object} of a striping of {} objects × {} bytes: not a valid \
                     striping and object",
                    self.objects, self.stripe_size
                ),
            ));
        }
        Ok(())
    }

    /// The file bytes that `pieces` (validated) of `object` (validated) hold, piece by
    /// piece and strip by strip, in order; at most `limit` ranges, else `LimitExceeded`.
    pub fn file_ranges(
        &self,
        object: u32,
        pieces: &[ObjPiece],
        limit: usize,
        mut each: impl FnMut(ByteRange) -> Result<(), WireError>,
    ) -> Result<(), WireError> {
        let s = self.stripe_size;
        let overflow = || {
            WireError::new(
                ErrorCode::InvalidArgument,
                format!("object {object}: a piece lies past the largest file offset"),
            )
        };
        let mut n = 0usize;
        for p in pieces {
            let mut at = p.offset;
            let end = p.offset + p.len;
            while at < end {
                n += 1;
                if n > limit {
                    return Err(WireError::new(
                        ErrorCode::LimitExceeded,
                        format!(
                            "a write crossing more than {limit} strips of {s} bytes cannot be \
                             checked against the lock table; send it in smaller requests"
                        ),
                    ));
                }
                let strip_end = (at / s).saturating_add(1).saturating_mul(s).min(end);
                let row = at / s;
                let start = row
                    .checked_mul(u64::from(self.objects))
                    .and_then(|x| x.checked_add(u64::from(object)))
                    .and_then(|x| x.checked_mul(s))
                    .and_then(|x| x.checked_add(at % s))
                    .ok_or_else(overflow)?;
                let len = strip_end - at;
                let range = ByteRange::new(start, start.checked_add(len).ok_or_else(overflow)?)
                    .map_err(|_| overflow())?;
                each(range)?;
                at = strip_end;
            }
        }
        Ok(())
    }
}

/// What a file is: its id, path and layout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    pub file: FileId,
    pub path: String,
    pub stripe_size: u64,
    pub object_servers: Vec<ServerId>,
}

impl FileMeta {
    pub fn layout(&self) -> Result<Layout, WireError> {
        Ok(Layout::new(self.stripe_size, self.object_servers.clone())?)
    }
}

/// The id of the file at `path`: a stable 64-bit FNV-1a hash, so every client and server
/// agrees on it without asking. (The metadata server checks the stored path, so a collision
/// is reported, never silently shared.)
pub fn file_id(path: &str) -> FileId {
    let mut h = fnv::FnvHasher::default();
    h.write(path.as_bytes());
    FileId(h.finish())
}

/// The server holding `path`'s metadata in a cluster of `servers`.
pub fn metadata_server(path: &str, servers: u32) -> ServerId {
    ServerId((file_id(path).0 % u64::from(servers.max(1))) as u32)
}

/// Checks a path: non-empty, bounded, no NUL.
pub fn validate_path(path: &str) -> Result<(), WireError> {
    if path.is_empty() || path.len() > MAX_PATH_BYTES || path.contains('\0') {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!("a path must be 1 to {MAX_PATH_BYTES} bytes without NUL"),
        ));
    }
    Ok(())
}

/// Checks object pieces: non-empty, in order, non-overlapping, within `MAX_OFFSET`, at most
/// `MAX_PIECES_PER_REQUEST`. Returns their total length.
pub fn validate_pieces(pieces: &[ObjPiece]) -> Result<u64, WireError> {
    if pieces.len() > MAX_PIECES_PER_REQUEST {
        return Err(WireError::new(
            ErrorCode::LimitExceeded,
            format!(
                "{} pieces in one request; the limit is {MAX_PIECES_PER_REQUEST}",
                pieces.len()
            ),
        ));
    }
    let mut end = 0u64;
    let mut total = 0u64;
    for (i, p) in pieces.iter().enumerate() {
        if p.len == 0 {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("piece {i} is empty"),
            ));
        }
        let e = p
            .offset
            .checked_add(p.len)
            .filter(|&e| e <= MAX_OFFSET)
            .ok_or_else(|| {
                WireError::new(
                    ErrorCode::InvalidArgument,
                    format!(
                        "piece {i}: offset {} + length {} overflows",
                        p.offset, p.len
                    ),
                )
            })?;
        if i > 0 && p.offset < end {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "piece {i} at {} overlaps or precedes the previous piece",
                    p.offset
                ),
            ));
        }
        end = e;
        total += p.len;
    }
    Ok(total)
}

/// A byte buffer that serializes as bytes (one copy), not as a sequence of integers, and
/// clones without copying (a write kept for a retry costs a reference count).
pub type Bytes = bytes::Bytes;
