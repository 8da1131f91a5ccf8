//! Stable numeric error codes shared by the wire protocol, the Rust API and the C ABI.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Stable numeric error codes. Values never change meaning; new codes are only appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "u16", into = "u16")]
#[repr(u16)]
pub enum ErrorCode {
    /// A frame or message could not be decoded.
    Malformed = 1,
    /// The peer speaks a protocol version this build does not.
    Version = 2,
    /// A range, pattern, layout or option is invalid (inverted, overflowing, unknown name…).
    InvalidArgument = 3,
    /// A named limit (see `limits`) would be exceeded.
    LimitExceeded = 4,
    /// The request names a lock, file or object that does not exist.
    NotFound = 5,
    /// The request names something that belongs to another client.
    NotOwner = 6,
    /// The operation is not allowed in the current state (e.g. acquiring while a call is
    /// already outstanding on the same request).
    InvalidState = 7,
    /// A storage error on a server.
    Io = 8,
    /// No answer within the allowed time.
    Timeout = 9,
    /// The connection to a peer was lost.
    Disconnected = 10,
    /// The operation is not supported by this peer or configuration.
    Unsupported = 11,
    /// A bug: an invariant did not hold. Reported, never hidden.
    Internal = 12,
    /// Something already exists.
    Exists = 13,
    /// This client's lease lapsed (it was silent for longer than the lease): the server
    /// released its locks and rejects its later requests. Reconnect to go on.
    LeaseExpired = 14,
    /// The server requires a shared-secret token (`ATOMIO_TOKEN` / `ATOMIO_TOKEN_FILE`) and
    /// this peer did not prove it holds the right one.
    Unauthorized = 15,
    /// An all-or-nothing write was aborted: none of its bytes were applied anywhere (a
    /// participant failed before the commit point, or the write was resolved as aborted
    /// while its writer was gone).
    Aborted = 16,
    /// Mandatory locks: the request would change bytes another client holds a lock on
    /// (write into them, truncate or drop their objects). Nothing was changed.
    Locked = 17,
}

impl From<u16> for ErrorCode {
    fn from(v: u16) -> Self {
        match v {
            1 => Self::Malformed,
            2 => Self::Version,
            3 => Self::InvalidArgument,
            4 => Self::LimitExceeded,
            5 => Self::NotFound,
            6 => Self::NotOwner,
            7 => Self::InvalidState,
            8 => Self::Io,
            9 => Self::Timeout,
            10 => Self::Disconnected,
            11 => Self::Unsupported,
            13 => Self::Exists,
            14 => Self::LeaseExpired,
            15 => Self::Unauthorized,
            16 => Self::Aborted,
            17 => Self::Locked,
            _ => Self::Internal,
        }
    }
}

impl From<ErrorCode> for u16 {
    fn from(c: ErrorCode) -> u16 {
        c as u16
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// An error as it travels: a stable code plus a human-readable message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
}

impl WireError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<atomio_layout::LayoutError> for WireError {
    fn from(e: atomio_layout::LayoutError) -> Self {
        use atomio_layout::LayoutError as L;
        let code = match e {
            L::PatternTooLarge { .. } => ErrorCode::LimitExceeded,
            _ => ErrorCode::InvalidArgument,
        };
        Self::new(code, e.to_string())
    }
}
