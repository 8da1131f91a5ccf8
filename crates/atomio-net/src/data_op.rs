//! The client's data plane as a sans-IO state machine, beside `LockOp`: one list I/O call
//! on a file striped over atomio's data servers.
//!
//! `DataOp::write` / `DataOp::read` cut the call's ranges (increasing, disjoint) at strip
//! boundaries into object pieces and group them per object into messages of at most
//! `MAX_MESSAGE_DATA` bytes and `MAX_MESSAGE_PIECES` pieces — one message per object (and
//! so per server) for calls up to a MiB per object, never one per piece. `start` emits
//! every message at once; `on_reply` takes the answers in any order. A read assembles the
//! returned bytes into the caller's offset order (`take_data`).
//!
//! The async driver (`ClusterClient::drive`) runs it over TCP or in-process links; the
//! seeded simulator runs it against real `DataService`s with random delivery.
//!
//! **Invariants:** data order is the ranges' order; the op is `Done` only when every
//! message was answered with success; the first error fails it, but it still counts the
//! other answers so nothing is left in flight when it reports `Failed`; a reply of the
//! wrong kind or length is an error, never a panic.

use crate::machine::{Machine, Progress};
use atomio_layout::{ByteRange, Layout, ServerId};
use atomio_lock::Send;
use atomio_proto::data::Bytes;
use atomio_proto::{ErrorCode, FileId, ObjPiece, Reply, Request, WireError};
use std::collections::HashMap;

/// Bytes of payload per data message.
pub const MAX_MESSAGE_DATA: usize = 1 << 20;
/// Pieces per data message.
pub const MAX_MESSAGE_PIECES: usize = 8192;

/// One message's worth of pieces of one object.
#[derive(Debug)]
pub struct Chunk {
    pub server: ServerId,
    pub object: u32,
    pub pieces: Vec<ObjPiece>,
    /// (offset in the caller's buffer, length) of each piece.
    pub spans: Vec<(usize, usize)>,
    pub bytes: usize,
}

/// Cuts `ranges` (increasing, disjoint) into per-object chunks (also what clients on a
/// server's host use to reach the object files directly).
pub fn chunks(layout: &Layout, ranges: impl Iterator<Item = ByteRange>) -> Vec<Chunk> {
    let mut open: HashMap<u32, Chunk> = HashMap::new();
    let mut done = Vec::new();
    let mut at = 0usize;
    for r in ranges {
        for p in layout.pieces(r) {
            let (object, offset) = layout.object_offset(p.range.start);
            let len = p.range.len() as usize;
            let c = open.entry(object).or_insert_with(|| Chunk {
                server: p.server,
                object,
                pieces: Vec::new(),
                spans: Vec::new(),
                bytes: 0,
            });
            c.pieces.push(ObjPiece {
                offset,
                len: len as u64,
            });
            c.spans.push((at, len));
            c.bytes += len;
            at += len;
            if c.bytes >= MAX_MESSAGE_DATA || c.pieces.len() >= MAX_MESSAGE_PIECES {
                done.push(open.remove(&object).expect("just used"));
            }
        }
    }
    let mut rest: Vec<Chunk> = open.into_values().collect();
    rest.sort_by_key(|c| c.object);
    done.extend(rest);
    done
}

#[derive(Debug)]
enum Kind {
    Write,
    /// The bytes read so far, in the caller's order.
    Read(Vec<u8>),
}

#[derive(Debug)]
pub struct DataOp {
    file: FileId,
    kind: Kind,
    chunks: Vec<Chunk>,
    /// The requests, taken by `start`.
    requests: Vec<Option<Request>>,
    answered: Vec<bool>,
    pending: usize,
    error: Option<WireError>,
}

impl DataOp {
    /// Writes `data` (the ranges' bytes in order) into `ranges` of the file.
    pub fn write(
        file: FileId,
        layout: &Layout,
        ranges: impl Iterator<Item = ByteRange>,
        data: &[u8],
    ) -> Self {
        let chunks = chunks(layout, ranges);
        let requests = chunks
            .iter()
            .map(|c| {
                let mut buf = Vec::with_capacity(c.bytes);
                for &(at, len) in &c.spans {
                    buf.extend_from_slice(&data[at..at + len]);
                }
                Some(Request::Write {
                    file,
                    object: c.object,
                    pieces: c.pieces.clone(),
                    data: Bytes::from(buf),
                })
            })
            .collect();
        Self::new(file, Kind::Write, chunks, requests)
    }

    /// Reads `ranges` (holes and bytes past the end read as zero) into a buffer of `len`
    /// bytes (`take_data`).
    pub fn read(
        file: FileId,
        layout: &Layout,
        ranges: impl Iterator<Item = ByteRange>,
        len: usize,
    ) -> Self {
        let chunks = chunks(layout, ranges);
        let requests = chunks
            .iter()
            .map(|c| {
                Some(Request::Read {
                    file,
                    object: c.object,
                    pieces: c.pieces.clone(),
                })
            })
            .collect();
        Self::new(file, Kind::Read(vec![0u8; len]), chunks, requests)
    }

    fn new(file: FileId, kind: Kind, chunks: Vec<Chunk>, requests: Vec<Option<Request>>) -> Self {
        let n = chunks.len();
        Self {
            file,
            kind,
            chunks,
            requests,
            answered: vec![false; n],
            pending: n,
            error: None,
        }
    }

    pub fn file(&self) -> FileId {
        self.file
    }

    /// Messages this call sends (one per object chunk).
    pub fn messages(&self) -> usize {
        self.chunks.len()
    }

    /// Emits every message.
    pub fn start(&mut self, out: &mut Vec<Send>) {
        for (i, (c, r)) in self.chunks.iter().zip(&mut self.requests).enumerate() {
            if let Some(request) = r.take() {
                out.push(Send {
                    server: c.server,
                    sub: i as u32,
                    request,
                });
            }
        }
    }

    /// The bytes a finished read returned (empty for writes).
    pub fn take_data(&mut self) -> Vec<u8> {
        match &mut self.kind {
            Kind::Read(buf) => std::mem::take(buf),
            Kind::Write => Vec::new(),
        }
    }

    fn answer(&mut self, sub: u32, reply: Reply) -> Result<(), WireError> {
        let c = &self.chunks[sub as usize];
        match (&mut self.kind, reply) {
            (_, Reply::Error(e)) => Err(e),
            (Kind::Write, Reply::Written { bytes }) if bytes == c.bytes as u64 => Ok(()),
            (Kind::Read(out), Reply::Data(data)) if data.len() == c.bytes => {
                let mut from = 0;
                for &(at, len) in &c.spans {
                    out[at..at + len].copy_from_slice(&data[from..from + len]);
                    from += len;
                }
                Ok(())
            }
            (_, r) => Err(WireError::new(
                ErrorCode::Internal,
                format!(
                    "{} answered a {}-byte piece list of object {} with {r:?}",
                    c.server, c.bytes, c.object
                ),
            )),
        }
    }
}

impl Machine for DataOp {
    fn on_reply(&mut self, sub: u32, reply: Reply, _out: &mut Vec<Send>) {
        let Some(seen) = self.answered.get_mut(sub as usize) else {
            return;
        };
        if std::mem::replace(seen, true) {
            return; // a duplicate answer changes nothing
        }
        self.pending -= 1;
        if let Err(e) = self.answer(sub, reply) {
            self.error.get_or_insert(e);
        }
    }

    fn progress(&self) -> Progress {
        match (&self.error, self.pending) {
            (Some(e), 0) => Progress::Failed(e.clone()),
            (_, 0) => Progress::Done,
            _ => Progress::Waiting,
        }
    }

    fn abandon(&mut self, error: WireError) {
        self.pending = 0;
        self.error.get_or_insert(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_message_per_object_and_answers_in_any_order() {
        let layout = Layout::round_robin(16, 2, 2, 0).unwrap();
        let ranges = [
            ByteRange::new(0, 10).unwrap(),
            ByteRange::new(12, 40).unwrap(),
        ];
        let data: Vec<u8> = (0..38).collect();
        let mut op = DataOp::write(FileId(1), &layout, ranges.iter().copied(), &data);
        let mut out = Vec::new();
        op.start(&mut out);
        assert_eq!(out.len(), 2, "two objects, two messages: {out:?}");
        assert_eq!(op.progress(), Progress::Waiting);
        let mut bytes: Vec<u64> = Vec::new();
        for s in &out {
            if let Request::Write { data, .. } = &s.request {
                bytes.push(data.len() as u64);
            }
        }
        // Answer in reverse order; a duplicate and an unknown sub change nothing.
        for (s, b) in out.iter().zip(bytes).rev() {
            op.on_reply(s.sub, Reply::Written { bytes: b }, &mut Vec::new());
            op.on_reply(
                s.sub,
                Reply::Error(WireError::new(ErrorCode::Io, "late")),
                &mut Vec::new(),
            );
        }
        op.on_reply(99, Reply::Done, &mut Vec::new());
        assert_eq!(op.progress(), Progress::Done);
    }

    #[test]
    fn reads_assemble_in_order_and_wrong_lengths_fail() {
        let layout = Layout::round_robin(4, 2, 2, 0).unwrap();
        let ranges = [ByteRange::new(2, 10).unwrap()];
        let mut op = DataOp::read(FileId(1), &layout, ranges.iter().copied(), 8);
        let mut out = Vec::new();
        op.start(&mut out);
        // File bytes are their own offsets: object 0 holds 2,3 and 8,9; object 1 holds 4..8.
        for s in &out {
            let Request::Read { pieces, object, .. } = &s.request else {
                panic!("{s:?}")
            };
            let mut d = Vec::new();
            for p in pieces {
                for o in p.offset..p.offset + p.len {
                    let file = layout.file_offset(*object, o).unwrap();
                    d.push(file as u8);
                }
            }
            op.on_reply(s.sub, Reply::Data(Bytes::from(d)), &mut Vec::new());
        }
        assert_eq!(op.progress(), Progress::Done);
        assert_eq!(op.take_data(), (2u8..10).collect::<Vec<_>>());

        let mut bad = DataOp::read(FileId(1), &layout, ranges.iter().copied(), 8);
        let mut out = Vec::new();
        bad.start(&mut out);
        for s in &out {
            bad.on_reply(
                s.sub,
                Reply::Data(Bytes::from(vec![0u8; 1])),
                &mut Vec::new(),
            );
        }
        assert!(matches!(bad.progress(), Progress::Failed(_)));
    }
}
