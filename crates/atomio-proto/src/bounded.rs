//! Limits checked while a frame is decoded, before memory is committed.
//!
//! A list's length comes first on the wire (postcard), so the decoder knows how many items
//! a peer *claims* before it reads one. The fields below decode through `seq`, which
//! refuses a claim over the list's limit at once, reserves at most `PREALLOCATE` items up
//! front (the claim is not trusted) and counts items as they arrive. Without this a 64 MiB
//! frame of 33 M two-byte ranges decoded into ~1 GiB of `ByteRange`s before
//! `LockDesc::validate` said "4,096 at most".
//!
//! postcard reduces a deserializer's custom error to one without its text, so the refusal's
//! text is kept aside (per thread: `frame::decode` runs on one) and `frame::decode` turns
//! it into a `LimitExceeded` error that names the list and its limit.

use crate::limits::{
    MAX_NODES_PER_REQUEST, MAX_OBJECT_SERVERS, MAX_PIECES_PER_REQUEST, MAX_RANGES_PER_REQUEST,
};
use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
use std::cell::RefCell;
use std::marker::PhantomData;

/// Items reserved before they arrive, at most.
const PREALLOCATE: usize = 4096;

thread_local! {
    static REFUSED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Forgets an earlier refusal (before a decode starts).
pub(crate) fn reset() {
    REFUSED.with(|r| r.borrow_mut().take());
}

/// The refusal of the decode that just failed, if a limit failed it.
pub(crate) fn take_refusal() -> Option<String> {
    REFUSED.with(|r| r.borrow_mut().take())
}

fn refuse<E: Error>(what: &str, claimed: usize, max: usize) -> E {
    let text = format!("{claimed} {what} in one message; the limit is {max}");
    REFUSED.with(|r| *r.borrow_mut() = Some(text.clone()));
    E::custom(text)
}

struct Bounded<T> {
    max: usize,
    what: &'static str,
    _t: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Bounded<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a list of at most {} {}", self.max, self.what)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let claimed = seq.size_hint().unwrap_or(0);
        if claimed > self.max {
            return Err(refuse(self.what, claimed, self.max));
        }
        let mut v = Vec::with_capacity(claimed.min(PREALLOCATE));
        while let Some(x) = seq.next_element()? {
            if v.len() == self.max {
                return Err(refuse(self.what, v.len() + 1, self.max));
            }
            v.push(x);
        }
        Ok(v)
    }
}

/// A `Vec` of at most `max` items (`what` names them in the refusal).
pub fn seq<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
    max: usize,
    what: &'static str,
) -> Result<Vec<T>, D::Error> {
    d.deserialize_seq(Bounded {
        max,
        what,
        _t: PhantomData,
    })
}

/// A lock request's explicit ranges (`MAX_RANGES_PER_REQUEST`).
pub fn ranges<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    seq(d, MAX_RANGES_PER_REQUEST, "ranges")
}

/// A data request's object pieces, blocks or ranges (`MAX_PIECES_PER_REQUEST`).
pub fn pieces<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    seq(d, MAX_PIECES_PER_REQUEST, "pieces")
}

/// Tree nodes, node keys, versions or pattern nodes (`MAX_NODES_PER_REQUEST`).
pub fn nodes<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    seq(d, MAX_NODES_PER_REQUEST, "nodes")
}

/// A layout's object servers (`MAX_OBJECT_SERVERS`).
pub fn servers<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    seq(d, MAX_OBJECT_SERVERS, "object servers")
}

/// A versioned write's regions: at most `MAX_PIECES_PER_REQUEST` ranges, each validated and
/// then normalized, as `RangeList`'s own decoding does.
pub fn regions<'de, D: Deserializer<'de>>(d: D) -> Result<atomio_layout::RangeList, D::Error> {
    let v: Vec<atomio_layout::ByteRange> = seq(d, MAX_PIECES_PER_REQUEST, "regions")?;
    atomio_layout::RangeList::try_from(v).map_err(D::Error::custom)
}

thread_local! {
    /// Items a pattern being decoded may still have (nodes + blocks + fields).
    static PATTERN_ITEMS_LEFT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A list of a pattern's items drawing on the pattern's budget of `MAX_PATTERN_ITEMS`.
fn pattern_items<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    let left = PATTERN_ITEMS_LEFT.with(|l| l.get());
    let v: Vec<T> = seq(d, left, "pattern items (nodes + blocks + fields) left")?;
    PATTERN_ITEMS_LEFT.with(|l| l.set(left - v.len()));
    Ok(v)
}

/// `atomio_layout::Node` as it travels, with its lists bounded (same wire form: the
/// variants and fields in the same order).
#[derive(serde::Deserialize)]
enum WireNode {
    Bytes {
        len: u64,
    },
    Vector {
        count: u64,
        blocklen: u64,
        stride: u64,
        elem: u32,
    },
    Indexed {
        #[serde(deserialize_with = "pattern_items")]
        blocks: Vec<atomio_layout::Block>,
        elem: u32,
    },
    Struct {
        #[serde(deserialize_with = "pattern_items")]
        fields: Vec<atomio_layout::Field>,
    },
    Resized {
        extent: u64,
        elem: u32,
    },
}

impl From<WireNode> for atomio_layout::Node {
    fn from(n: WireNode) -> Self {
        use atomio_layout::Node;
        match n {
            WireNode::Bytes { len } => Node::Bytes { len },
            WireNode::Vector {
                count,
                blocklen,
                stride,
                elem,
            } => Node::Vector {
                count,
                blocklen,
                stride,
                elem,
            },
            WireNode::Indexed { blocks, elem } => Node::Indexed { blocks, elem },
            WireNode::Struct { fields } => Node::Struct { fields },
            WireNode::Resized { extent, elem } => Node::Resized { extent, elem },
        }
    }
}

/// A pattern's nodes: at most `MAX_PATTERN_ITEMS` nodes, blocks and fields together,
/// counted as they arrive.
pub fn pattern_nodes<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<atomio_layout::Node>, D::Error> {
    let max = atomio_layout::MAX_PATTERN_ITEMS;
    PATTERN_ITEMS_LEFT.with(|l| l.set(max));
    let nodes: Vec<WireNode> = seq(d, max, "pattern nodes")?;
    let left = PATTERN_ITEMS_LEFT.with(|l| l.get());
    if nodes.len() > left {
        return Err(refuse(
            "pattern items (nodes + blocks + fields)",
            max - left + nodes.len(),
            max,
        ));
    }
    Ok(nodes.into_iter().map(Into::into).collect())
}

#[cfg(test)]
mod tests {
    use crate::frame::{encode, max_request_frame, LENGTH_BYTES};
    use crate::limits::*;
    use crate::messages::{ClientFrame, LockDesc, LockMode, Request, Wait, WirePattern};
    use crate::{decode, ErrorCode, FileId, ObjPiece, WireError};
    use atomio_layout::{Block, ByteRange, Node, ServerId};

    fn body(request: Request) -> Vec<u8> {
        let mut buf = Vec::new();
        encode(&ClientFrame { tag: 77, request }, &mut buf).unwrap();
        buf.split_off(LENGTH_BYTES)
    }

    fn varint(mut n: u64) -> Vec<u8> {
        let mut v = Vec::new();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                v.push(b);
                return v;
            }
            v.push(b | 0x80);
        }
    }

    fn refused(frame: &[u8], what: &str) {
        let e: WireError = decode::<ClientFrame>(frame).unwrap_err();
        assert_eq!(e.code, ErrorCode::LimitExceeded, "{e}");
        assert!(e.message.contains(what), "{e}");
    }

    fn lock(desc: LockDesc) -> Request {
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc,
            wait: Wait::NonBlocking,
        }
    }

    #[test]
    fn lists_over_their_limit_are_refused_while_decoding() {
        let ranges = (0..=MAX_RANGES_PER_REQUEST as u64)
            .map(|i| ByteRange::new(2 * i, 2 * i + 1).unwrap())
            .collect();
        refused(&body(lock(LockDesc::Ranges(ranges))), "4097 ranges");
        let pieces = (0..=MAX_PIECES_PER_REQUEST as u64)
            .map(|i| ObjPiece {
                offset: 2 * i,
                len: 1,
            })
            .collect();
        let read = Request::Read {
            file: FileId(1),
            object: 0,
            pieces,
        };
        refused(&body(read), "pieces");
        // At the limit, it decodes.
        let ranges: Vec<ByteRange> = (0..MAX_RANGES_PER_REQUEST as u64)
            .map(|i| ByteRange::new(2 * i, 2 * i + 1).unwrap())
            .collect();
        let ok = lock(LockDesc::Ranges(ranges));
        assert_eq!(
            decode::<ClientFrame>(&body(ok.clone())).unwrap().request,
            ok
        );
    }

    /// A list's length is judged before any item is read or reserved: a frame of 4 M
    /// two-byte ranges (the probe sent 33 M in 64 MiB) is refused from its count, and a
    /// count the frame cannot hold is refused as malformed without reserving anything.
    #[test]
    fn a_huge_count_is_refused_before_anything_is_read() {
        let empty = body(lock(LockDesc::Ranges(Vec::new())));
        // ... desc variant 0, count 0, wait variant 0: the count is the second-last byte.
        let n = empty.len();
        assert_eq!(&empty[n - 3..], &[0, 0, 0]);
        let mut claim = empty[..n - 2].to_vec();
        claim.extend(varint(4 << 20));
        claim.extend(std::iter::repeat_n([0u8, 1], 4 << 20).flatten());
        claim.push(0);
        let t0 = std::time::Instant::now();
        refused(&claim, "4194304 ranges");
        assert!(t0.elapsed() < std::time::Duration::from_millis(100));
        let mut lie = empty[..n - 2].to_vec();
        lie.extend(varint(33_000_000));
        lie.push(0);
        let e = decode::<ClientFrame>(&lie).unwrap_err();
        assert_eq!(e.code, ErrorCode::Malformed, "{e}");

        // A pattern's indexed node claiming 2^21 blocks.
        let pattern = WirePattern {
            base: 0,
            nodes: vec![Node::Indexed {
                blocks: Vec::new(),
                elem: 0,
            }],
            stripe_size: 1,
            object_servers: vec![ServerId(0)],
            server: ServerId(0),
        };
        let empty = body(lock(LockDesc::Pattern(pattern.clone())));
        let mut p = pattern.clone();
        p.nodes = vec![Node::Indexed {
            blocks: vec![Block {
                disp: 0,
                blocklen: 1,
            }],
            elem: 0,
        }];
        let one = body(lock(LockDesc::Pattern(p)));
        // The block count is the first byte where the two encodings differ.
        let at = empty.iter().zip(&one).position(|(a, b)| a != b).unwrap();
        let mut claim = empty[..at].to_vec();
        claim.extend(varint(1 << 21));
        claim.extend(std::iter::repeat_n([0u8, 1], 1 << 21).flatten());
        claim.extend_from_slice(&empty[at + 1..]);
        refused(&claim, "pattern items");
        // Nodes, blocks and fields share one budget.
        let mut p = pattern;
        p.nodes = vec![
            Node::Indexed {
                blocks: vec![
                    Block {
                        disp: 0,
                        blocklen: 1
                    };
                    atomio_layout::MAX_PATTERN_ITEMS
                ],
                elem: 0,
            },
            Node::Bytes { len: 1 },
        ];
        refused(&body(lock(LockDesc::Pattern(p))), "pattern items");
    }

    #[test]
    fn each_kind_has_its_largest_frame() {
        let limit = |r: Request| {
            let b = body(r);
            max_request_frame(&b[..b.len().min(8)]).unwrap()
        };
        let write = Request::Write {
            file: FileId(1),
            object: 0,
            striping: crate::Striping {
                stripe_size: 1,
                objects: 1,
            },
            pieces: Vec::new(),
            data: crate::data::Bytes::from(Vec::new()),
        };
        assert_eq!(limit(write), (77, MAX_FRAME_BYTES));
        let lock = lock(LockDesc::Ranges(Vec::new()));
        assert_eq!(limit(lock), (77, MAX_LIST_FRAME_BYTES));
        let read = Request::Read {
            file: FileId(1),
            object: 0,
            pieces: Vec::new(),
        };
        assert_eq!(limit(read), (77, MAX_CONTROL_FRAME_BYTES));
        assert_eq!(
            limit(Request::Ping { nonce: 1 }),
            (77, MAX_CONTROL_FRAME_BYTES)
        );
        assert_eq!(max_request_frame(&[2, 1, 1]), None, "another version");
        assert_eq!(max_request_frame(&[]), None);
    }
}
