//! The frame format: `u32` big-endian length, then that many bytes: one version byte and a
//! postcard-encoded body.
//!
//! **Invariant:** `decode` never panics and never allocates more than the frame it is given
//! (postcard caps collection pre-allocation by the bytes actually present).

use crate::error::{ErrorCode, WireError};
use crate::limits::MAX_FRAME_BYTES;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u8 = 1;
/// Bytes of the length prefix.
pub const LENGTH_BYTES: usize = 4;

/// Appends one complete frame (length prefix included) to `out`.
pub fn encode<T: Serialize>(msg: &T, out: &mut Vec<u8>) -> Result<(), WireError> {
    let start = out.len();
    out.extend_from_slice(&[0; LENGTH_BYTES]);
    out.push(PROTOCOL_VERSION);
    let mut buf = std::mem::take(out);
    buf = postcard::to_extend(msg, buf)
        .map_err(|e| WireError::new(ErrorCode::Internal, format!("encode: {e}")))?;
    *out = buf;
    let len = out.len() - start - LENGTH_BYTES;
    if len > MAX_FRAME_BYTES {
        out.truncate(start);
        return Err(WireError::new(
            ErrorCode::LimitExceeded,
            format!("message of {len} bytes exceeds the frame limit of {MAX_FRAME_BYTES}"),
        ));
    }
    out[start..start + LENGTH_BYTES].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

/// Decodes a frame's contents (version byte + body, length prefix already removed).
pub fn decode<T: DeserializeOwned>(frame: &[u8]) -> Result<T, WireError> {
    let (&version, body) = frame
        .split_first()
        .ok_or_else(|| WireError::new(ErrorCode::Malformed, "empty frame"))?;
    if version != PROTOCOL_VERSION {
        return Err(WireError::new(
            ErrorCode::Version,
            format!(
                "protocol version {version} is not supported (this peer speaks {PROTOCOL_VERSION})"
            ),
        ));
    }
    crate::bounded::reset();
    let (msg, rest) = postcard::take_from_bytes(body).map_err(|e| {
        match crate::bounded::take_refusal() {
            // A list longer than its limit (see `bounded`): refused before it was read.
            Some(why) => WireError::new(ErrorCode::LimitExceeded, why),
            None => WireError::new(ErrorCode::Malformed, format!("undecodable message: {e}")),
        }
    })?;
    if !rest.is_empty() {
        return Err(WireError::new(
            ErrorCode::Malformed,
            format!("{} trailing bytes after the message", rest.len()),
        ));
    }
    Ok(msg)
}

/// Reads the length prefix at the start of `buf`, if complete.
pub fn frame_length(buf: &[u8]) -> Option<usize> {
    let b: [u8; LENGTH_BYTES] = buf.get(..LENGTH_BYTES)?.try_into().ok()?;
    Some(u32::from_be_bytes(b) as usize)
}

/// The tag of a client or server frame whose body may not decode (the tag is the first
/// field of both): lets a receiver answer a bad frame on the tag the peer used.
pub fn peek_tag(frame: &[u8]) -> Option<u64> {
    let body = frame.get(1..)?;
    let (tag, _) = postcard::take_from_bytes::<u64>(body).ok()?;
    Some(tag)
}

/// The largest frame a client may send for the request that begins `head` (the first
/// bytes of a frame's contents: version, tag, the request's kind), and the tag, so that an
/// oversized frame is refused from its length prefix and first bytes before the rest is
/// buffered or decoded (see `limits::MAX_LIST_FRAME_BYTES`). `None` when `head` does not
/// say (another protocol version, too few bytes): the decoder refuses such a frame anyway.
pub fn max_request_frame(head: &[u8]) -> Option<(u64, usize)> {
    let (&version, body) = head.split_first()?;
    if version != PROTOCOL_VERSION {
        return None;
    }
    let (tag, rest) = postcard::take_from_bytes::<u64>(body).ok()?;
    let (kind, _) = postcard::take_from_bytes::<u32>(rest).ok()?;
    let limit = request_frame_limits()
        .get(kind as usize)
        .copied()
        .unwrap_or(crate::limits::MAX_CONTROL_FRAME_BYTES);
    Some((tag, limit))
}

/// Bytes of a frame's contents `max_request_frame` needs to see: the version byte and two
/// varints.
pub const REQUEST_HEAD_BYTES: usize = 1 + 10 + 5;

/// Each request kind's largest frame, by its wire number. Computed from one encoded
/// example of each large kind, so it follows the enum (no wire numbers written here).
fn request_frame_limits() -> &'static [usize] {
    use crate::limits::{MAX_CONTROL_FRAME_BYTES, MAX_LIST_FRAME_BYTES};
    use crate::messages::{LockDesc, LockMode, Request, Wait};
    use crate::{data::Bytes, FileId, Striping, TxnId};
    static LIMITS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    LIMITS.get_or_init(|| {
        let file = FileId(0);
        let striping = Striping {
            stripe_size: 1,
            objects: 1,
        };
        let payload = [
            Request::Write {
                file,
                object: 0,
                striping,
                pieces: Vec::new(),
                data: Bytes::from(Vec::new()),
            },
            Request::Stage {
                txn: TxnId { origin: 0, seq: 0 },
                decider: None,
                file,
                object: 0,
                striping,
                pieces: Vec::new(),
                data: Bytes::from(Vec::new()),
            },
            Request::SeqWrite {
                file,
                object: 0,
                blocks: Vec::new(),
                data: Bytes::from(Vec::new()),
                msn: 0,
            },
            Request::NodePut {
                file,
                nodes: Vec::new(),
            },
        ];
        let lists = [
            Request::LockNew {
                file,
                mode: LockMode::Read,
                desc: LockDesc::Ranges(Vec::new()),
                wait: Wait::NonBlocking,
            },
            Request::NodeGet {
                file,
                keys: Vec::new(),
            },
            Request::NodeDrop {
                file,
                keys: Vec::new(),
            },
            Request::NodeDropVersions {
                file,
                versions: Vec::new(),
            },
            Request::Punch {
                file,
                object: 0,
                ranges: Vec::new(),
            },
            Request::VersionGcDone {
                file,
                plan: atomio_version::GcPlan {
                    keep: 0,
                    collect: Vec::new(),
                    aborted: Vec::new(),
                },
            },
        ];
        let kind = |r: &Request| -> usize {
            let bytes = postcard::to_allocvec(r).unwrap_or_default();
            postcard::take_from_bytes::<u32>(&bytes).map_or(usize::MAX, |(k, _)| k as usize)
        };
        let mut limits = Vec::new();
        let mut set = |r: &Request, limit: usize| {
            let k = kind(r);
            if k < 1 << 10 {
                if limits.len() <= k {
                    limits.resize(k + 1, MAX_CONTROL_FRAME_BYTES);
                }
                limits[k] = limit;
            }
        };
        payload.iter().for_each(|r| set(r, MAX_FRAME_BYTES));
        lists.iter().for_each(|r| set(r, MAX_LIST_FRAME_BYTES));
        limits
    })
}
