//! The atomio wire protocol: messages, frames, limits and error codes. No I/O here; the
//! drivers in `atomio-net` move these bytes.

pub mod bounded;
pub mod data;
pub mod dlm;
pub mod error;
pub mod frame;
pub mod limits;
pub mod messages;

pub use data::{file_id, metadata_server, FileMeta, ObjPiece, Striping, TxnId, TxnOutcome};
pub use dlm::{DlmExpand, DlmMode, DlmPolicy, SnBlock, DLM_CALLBACK_TAG};
pub use error::{ErrorCode, WireError};
pub use frame::{decode, encode, PROTOCOL_VERSION};
pub use messages::*;

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_layout::{Access, ByteRange, Layout, Pattern, ServerId};

    fn roundtrip<
        T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    >(
        m: T,
    ) {
        let mut buf = Vec::new();
        encode(&m, &mut buf).unwrap();
        let len = frame::frame_length(&buf).unwrap();
        assert_eq!(len, buf.len() - frame::LENGTH_BYTES);
        let back: T = decode(&buf[frame::LENGTH_BYTES..]).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn frames_round_trip() {
        let access = Access::new(
            7,
            Pattern::hvector(131_072, 1, 64, &Pattern::bytes(1).unwrap()).unwrap(),
        )
        .unwrap();
        let layout = Layout::round_robin(65536, 4, 4, 0).unwrap();
        roundtrip(ClientFrame {
            tag: 42,
            request: Request::LockNew {
                file: FileId(3),
                mode: LockMode::Write,
                desc: LockDesc::Pattern(WirePattern::new(&access, &layout, ServerId(2))),
                wait: Wait::Until(99),
            },
        });
        roundtrip(ServerFrame {
            tag: 1,
            reply: Reply::Error(WireError::new(ErrorCode::NotOwner, "no")),
        });
    }

    #[test]
    fn a_datatype_description_is_a_few_dozen_bytes() {
        let access = Access::new(
            0,
            Pattern::hvector(131_072, 1, 64, &Pattern::bytes(1).unwrap()).unwrap(),
        )
        .unwrap();
        let layout = Layout::round_robin(65536, 4, 4, 0).unwrap();
        let mut buf = Vec::new();
        let desc = LockDesc::Pattern(WirePattern::new(&access, &layout, ServerId(0)));
        encode(&desc, &mut buf).unwrap();
        assert!(buf.len() < 40, "{} bytes", buf.len());
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        assert_eq!(
            decode::<ClientFrame>(&[]).unwrap_err().code,
            ErrorCode::Malformed
        );
        assert_eq!(
            decode::<ClientFrame>(&[9, 0]).unwrap_err().code,
            ErrorCode::Version
        );
        assert_eq!(
            decode::<ClientFrame>(&[PROTOCOL_VERSION, 0, 200])
                .unwrap_err()
                .code,
            ErrorCode::Malformed
        );
        // A vector length of 2^60 with no bytes behind it must not allocate.
        let frame = [
            PROTOCOL_VERSION,
            0,
            0,
            0,
            0,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0x0f,
        ];
        assert!(decode::<ClientFrame>(&frame).is_err());
    }

    #[test]
    fn validation_names_the_problem() {
        let e = LockDesc::Ranges(vec![ByteRange { start: 10, end: 5 }])
            .validate(None)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert!(e.message.contains("before its start"), "{}", e.message);
        let e = LockDesc::Ranges(vec![ByteRange { start: 0, end: 1 }; MAX_RANGES + 1])
            .validate(None)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::LimitExceeded);
        let e = LockDesc::Pattern(WirePattern {
            base: u64::MAX - 10,
            nodes: vec![atomio_layout::Node::Bytes { len: 100 }],
            stripe_size: 10,
            object_servers: vec![ServerId(0)],
            server: ServerId(0),
        })
        .validate(None)
        .unwrap_err();
        assert!(e.message.contains("overflows"), "{}", e.message);
    }

    const MAX_RANGES: usize = limits::MAX_RANGES_PER_REQUEST;
}
