//! Fuzz targets: what a hostile peer's bytes can reach on a server, as plain functions of a
//! byte slice so that AFL++ (`fuzz/`, `make fuzz`) and the test suite (which replays the
//! committed corpus) drive the same code.
//!
//! * [`decode`]: the frame decoder, both directions, as `atomio-net` uses it.
//! * [`serve`]: a storage server's two services (lock and data, with leases and fencing)
//!   fed a script of frames from several clients, time passing, expiries and disconnects.
//!
//! A target *fails* by panicking: the code under test panicked, or an invariant it states
//! does not hold (the lock table's own checks, a decoded frame that does not re-encode to
//! an equal message, a lock left behind once every client has gone).

mod script;
pub mod seeds;

pub use script::{serve, serve_timed, serve_with, Control, Script, Step, FUZZ_SLICE};

use atomio_proto::frame::{self, frame_length, LENGTH_BYTES};
use atomio_proto::{ClientFrame, ServerFrame};

/// Splits `data` into length-prefixed frames and decodes each as a client frame (what a
/// server reads) and as a server frame (what a client reads). Whatever decodes must
/// re-encode and decode to the same message; nothing may panic.
pub fn decode(data: &[u8]) {
    let mut rest = data;
    while let Some(len) = frame_length(rest) {
        let body = &rest[LENGTH_BYTES..];
        let body = &body[..len.min(body.len())];
        let _ = frame::peek_tag(body);
        if let Ok(f) = frame::decode::<ClientFrame>(body) {
            round_trip(&f);
        }
        if let Ok(f) = frame::decode::<ServerFrame>(body) {
            round_trip(&f);
        }
        rest = &rest[LENGTH_BYTES + body.len()..];
    }
}

fn round_trip<T>(msg: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let mut out = Vec::new();
    if frame::encode(msg, &mut out).is_err() {
        // Too large to send back: legal for a decoded frame only if it was near the limit.
        return;
    }
    let again: T = frame::decode(&out[LENGTH_BYTES..]).expect("an encoded frame decodes");
    assert_eq!(&again, msg, "decode(encode(m)) != m");
}
