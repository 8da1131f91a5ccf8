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
    let (msg, rest) = postcard::take_from_bytes(body)
        .map_err(|e| WireError::new(ErrorCode::Malformed, format!("undecodable message: {e}")))?;
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
