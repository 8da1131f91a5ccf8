//! The client's data plane as a sans-IO state machine, beside `LockOp`: one list I/O call
//! on a file striped over atomio's data servers.
//!
//! `DataOp::write` / `DataOp::read` cut the call's ranges (increasing, disjoint) at strip
//! boundaries into object pieces (a piece longer than a message is cut too) and group them
//! per object into messages of at most `MAX_MESSAGE_DATA` bytes and `MAX_MESSAGE_PIECES`
//! pieces — one message per object (and
//! so per server) for calls up to a MiB per object, never one per piece. `start` emits
//! every message at once; `on_reply` takes the answers in any order. A read assembles the
//! returned bytes into the caller's offset order (`take_data`).
//!
//! `DataOp::write_atomic` writes all or nothing (see `atomio_data::txn`): every message is
//! a `Stage`; once all are staged, `Decide` goes to the decider (the server of the first
//! message) — the commit point — and then `Finish(Commit)` to the other participants. A
//! failed stage aborts (`Finish(Abort)` everywhere); a decider that does not answer leaves
//! the participants in doubt (`Finish(Unknown)`), to be resolved by whoever touches those
//! bytes next. After the commit point the write has happened: a participant that misses
//! its `Finish` applies it when resolved, so the call succeeds but is not *settled*.
//!
//! Any access answered `InDoubt` (bytes a vanished writer left staged) is resolved here:
//! `Resolve` at the named decider, its outcome handed down with `Finish`, then the
//! message is sent again (at most `MAX_RESOLUTIONS` times per call).
//!
//! The async driver (`ClusterClient::drive`) runs it over TCP or in-process links; the
//! seeded simulator runs it against real `DataService`s with random delivery.
//!
//! **Invariants:** data order is the ranges' order; the op is `Done` only when every
//! message was answered with success (atomic writes: when the decider committed and every
//! `Finish` was answered or lost); no `Decide` before every `Stage` succeeded, no
//! `Finish(Commit)` before the decider committed; the first error fails it, but it still
//! counts the other answers so nothing is left in flight when it reports `Failed`; a reply
//! of the wrong kind or length is an error, never a panic.

use crate::machine::{Machine, Progress};
use atomio_layout::{ByteRange, Layout, ServerId};
use atomio_lock::Send;
use atomio_proto::data::Bytes;
use atomio_proto::{
    ErrorCode, FileId, ObjPiece, Reply, Request, Striping, TxnId, TxnOutcome, WireError,
};
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

/// Cuts `ranges` (increasing, disjoint) into per-object chunks of at most one message each.
pub fn chunks(layout: &Layout, ranges: impl Iterator<Item = ByteRange>) -> Vec<Chunk> {
    chunks_within(layout, ranges, MAX_MESSAGE_DATA, MAX_MESSAGE_PIECES)
}

/// All of a call's pieces in each object, one chunk per object, in object order: what a
/// client on a server's host uses to reach the object files directly, where no message
/// bounds a chunk (one mapping per object per call instead of one per MiB: S3D's 384-byte
/// pieces cut at 1 MiB gave hulls just sparse enough to skip the populate and fault page
/// by page).
pub fn object_chunks(layout: &Layout, ranges: impl Iterator<Item = ByteRange>) -> Vec<Chunk> {
    chunks_within(layout, ranges, usize::MAX, usize::MAX)
}

fn chunks_within(
    layout: &Layout,
    ranges: impl Iterator<Item = ByteRange>,
    max_data: usize,
    max_pieces: usize,
) -> Vec<Chunk> {
    let mut open: HashMap<u32, Chunk> = HashMap::new();
    let mut done = Vec::new();
    let mut at = 0usize;
    for r in ranges {
        for p in layout.pieces(r) {
            let (object, mut offset) = layout.object_offset(p.range.start);
            let mut left = p.range.len() as usize;
            // A piece longer than a message (a large strip) goes in several.
            while left > 0 {
                let c = open.entry(object).or_insert_with(|| Chunk {
                    server: p.server,
                    object,
                    pieces: Vec::new(),
                    spans: Vec::new(),
                    bytes: 0,
                });
                // (A full chunk was moved out: there is room in this one.)
                let len = left.min(max_data - c.bytes);
                c.pieces.push(ObjPiece {
                    offset,
                    len: len as u64,
                });
                c.spans.push((at, len));
                c.bytes += len;
                at += len;
                offset += len as u64;
                left -= len;
                if c.bytes >= max_data || c.pieces.len() >= max_pieces {
                    done.push(open.remove(&object).expect("just used"));
                }
            }
        }
    }
    let mut rest: Vec<Chunk> = open.into_values().collect();
    rest.sort_by_key(|c| c.object);
    done.extend(rest);
    done
}

/// Most in-doubt resolutions one call performs before giving up.
pub const MAX_RESOLUTIONS: u32 = 64;

/// Where an all-or-nothing write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxnPhase {
    Staging,
    /// `Decide` sent, not answered.
    Deciding,
    /// Decided (or aborted, or unknown): `Finish` sent to the participants.
    Finishing {
        committed: bool,
    },
}

#[derive(Debug)]
struct Txn {
    id: TxnId,
    settled_below: u64,
    decider: ServerId,
    phase: TxnPhase,
    /// Every participant acknowledged its `Finish` (or the write aborted cleanly).
    settled: bool,
    /// Set by `abandon`: the `Finish` that `cleanup` must still send.
    untold: Option<(TxnOutcome, bool)>,
}

#[derive(Debug)]
enum Kind {
    Write,
    Atomic(Txn),
    /// The bytes read so far, in the caller's order.
    Read(Vec<u8>),
}

/// What one sent message was.
#[derive(Debug, Clone, Copy)]
enum Sub {
    Chunk(usize),
    /// `Resolve` at a decider, for an in-doubt write that blocked chunk `usize`.
    Resolve(usize, TxnId),
    /// `Finish` handing that outcome to the chunk's server.
    Settle(usize),
    Decide,
    Finish,
}

#[derive(Debug)]
pub struct DataOp {
    file: FileId,
    kind: Kind,
    chunks: Vec<Chunk>,
    /// The request of each chunk (cheap to clone: the data is reference-counted).
    requests: Vec<Request>,
    /// Every message sent, by sub; and whether it was answered.
    subs: Vec<Sub>,
    answered: Vec<bool>,
    pending: usize,
    resolutions: u32,
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
            .map(|c| Request::Write {
                file,
                object: c.object,
                striping: Striping::of(layout),
                pieces: c.pieces.clone(),
                data: gather(c, data),
            })
            .collect();
        Self::new(file, Kind::Write, chunks, requests)
    }

    /// Writes like `write`, all or nothing: staged everywhere, committed at one server.
    /// `settled_below`: every earlier write of `txn.origin` below this seq is settled.
    pub fn write_atomic(
        file: FileId,
        layout: &Layout,
        ranges: impl Iterator<Item = ByteRange>,
        data: &[u8],
        txn: TxnId,
        settled_below: u64,
    ) -> Self {
        let chunks = chunks(layout, ranges);
        let decider = chunks.first().map_or(ServerId(0), |c| c.server);
        let requests = chunks
            .iter()
            .map(|c| Request::Stage {
                txn,
                decider: (c.server != decider).then_some(decider),
                file,
                object: c.object,
                striping: Striping::of(layout),
                pieces: c.pieces.clone(),
                data: gather(c, data),
            })
            .collect();
        let t = Txn {
            id: txn,
            settled_below,
            decider,
            phase: TxnPhase::Staging,
            settled: false,
            untold: None,
        };
        Self::new(file, Kind::Atomic(t), chunks, requests)
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
            .map(|c| Request::Read {
                file,
                object: c.object,
                pieces: c.pieces.clone(),
            })
            .collect();
        Self::new(file, Kind::Read(vec![0u8; len]), chunks, requests)
    }

    fn new(file: FileId, kind: Kind, chunks: Vec<Chunk>, requests: Vec<Request>) -> Self {
        Self {
            file,
            kind,
            chunks,
            requests,
            subs: Vec::new(),
            answered: Vec::new(),
            pending: 0,
            resolutions: 0,
            error: None,
        }
    }

    pub fn file(&self) -> FileId {
        self.file
    }

    /// Messages this call sends in its first step (one per object chunk).
    pub fn messages(&self) -> usize {
        self.chunks.len()
    }

    /// The all-or-nothing write's id, and whether it is settled (every participant has
    /// applied or dropped its bytes); `None` for other calls.
    pub fn txn(&self) -> Option<(TxnId, bool)> {
        match &self.kind {
            Kind::Atomic(t) => Some((t.id, t.settled)),
            _ => None,
        }
    }

    fn send(&mut self, out: &mut Vec<Send>, server: ServerId, what: Sub, request: Request) {
        out.push(Send {
            server,
            sub: self.subs.len() as u32,
            request,
        });
        self.subs.push(what);
        self.answered.push(false);
        self.pending += 1;
    }

    /// Emits every message.
    pub fn start(&mut self, out: &mut Vec<Send>) {
        for i in 0..self.chunks.len() {
            self.send_chunk(i, out);
        }
    }

    fn send_chunk(&mut self, i: usize, out: &mut Vec<Send>) {
        let r = self.requests[i].clone();
        self.send(out, self.chunks[i].server, Sub::Chunk(i), r);
    }

    /// The servers of the write, each once.
    fn participants(&self) -> Vec<ServerId> {
        let mut v: Vec<ServerId> = self.chunks.iter().map(|c| c.server).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Sends `Finish(outcome)` to every participant but the decider (and to the decider
    /// too when `also_decider`).
    fn finish_all(&mut self, outcome: TxnOutcome, also_decider: bool, out: &mut Vec<Send>) {
        let Kind::Atomic(t) = &self.kind else { return };
        let (txn, decider) = (t.id, t.decider);
        for s in self.participants() {
            if s != decider || also_decider {
                self.send(out, s, Sub::Finish, Request::Finish { txn, outcome });
            }
        }
    }

    /// The next step of an atomic write once the current one is answered.
    fn advance(&mut self, out: &mut Vec<Send>) {
        if self.pending > 0 {
            return;
        }
        let Kind::Atomic(t) = &mut self.kind else {
            return;
        };
        match t.phase {
            TxnPhase::Staging if self.error.is_none() => {
                t.phase = TxnPhase::Deciding;
                let (decider, request) = (
                    t.decider,
                    Request::Decide {
                        txn: t.id,
                        settled_below: t.settled_below,
                    },
                );
                self.send(out, decider, Sub::Decide, request);
            }
            TxnPhase::Staging => {
                // Nothing was decided: drop what was staged, the decider's too.
                t.phase = TxnPhase::Finishing { committed: false };
                t.settled = true;
                self.finish_all(TxnOutcome::Abort, true, out);
            }
            TxnPhase::Deciding => {}
            TxnPhase::Finishing { .. } => {}
        }
    }

    /// The bytes a finished read returned (empty for writes).
    pub fn take_data(&mut self) -> Vec<u8> {
        match &mut self.kind {
            Kind::Read(buf) => std::mem::take(buf),
            _ => Vec::new(),
        }
    }

    fn answer(&mut self, i: usize, reply: Reply) -> Result<(), WireError> {
        let c = &self.chunks[i];
        match (&mut self.kind, reply) {
            (_, Reply::Error(e)) => Err(e),
            (Kind::Write | Kind::Atomic(_), Reply::Written { bytes })
                if bytes == c.bytes as u64 =>
            {
                Ok(())
            }
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

    fn fail(&mut self, e: WireError) {
        self.error.get_or_insert(e);
    }

    fn on_decided(&mut self, reply: Reply, out: &mut Vec<Send>) {
        let Kind::Atomic(t) = &mut self.kind else {
            return;
        };
        let (committed, outcome, error) = match reply {
            Reply::Done => (true, TxnOutcome::Commit, None),
            Reply::Error(e) if e.code == ErrorCode::Aborted => (false, TxnOutcome::Abort, Some(e)),
            other => {
                let e = match other {
                    Reply::Error(e) => e,
                    r => WireError::new(ErrorCode::Internal, format!("Decide answered {r:?}")),
                };
                let e = WireError::new(
                    e.code,
                    format!(
                        "{} did not say whether {} committed ({}); its bytes stay in doubt until resolved",
                        t.decider, t.id, e.message
                    ),
                );
                (false, TxnOutcome::Unknown, Some(e))
            }
        };
        t.phase = TxnPhase::Finishing { committed };
        t.settled = true; // until a Finish fails
        if let Some(e) = error {
            self.fail(e);
        }
        self.finish_all(outcome, false, out);
    }
}

/// The bytes of one chunk, gathered from the caller's buffer.
fn gather(c: &Chunk, data: &[u8]) -> Bytes {
    let mut buf = Vec::with_capacity(c.bytes);
    for &(at, len) in &c.spans {
        buf.extend_from_slice(&data[at..at + len]);
    }
    Bytes::from(buf)
}

impl Machine for DataOp {
    fn on_reply(&mut self, sub: u32, reply: Reply, out: &mut Vec<Send>) {
        let Some(seen) = self.answered.get_mut(sub as usize) else {
            return;
        };
        if std::mem::replace(seen, true) {
            return; // a duplicate answer changes nothing
        }
        self.pending -= 1;
        match (self.subs[sub as usize], reply) {
            (Sub::Chunk(i), Reply::InDoubt { txn, decider }) => {
                if self.resolutions >= MAX_RESOLUTIONS {
                    self.fail(WireError::new(
                        ErrorCode::InvalidState,
                        format!("still in doubt after {MAX_RESOLUTIONS} resolutions ({txn})"),
                    ));
                } else {
                    self.resolutions += 1;
                    self.send(out, decider, Sub::Resolve(i, txn), Request::Resolve { txn });
                }
            }
            (Sub::Chunk(i), reply) => {
                if let Err(e) = self.answer(i, reply) {
                    self.fail(e);
                }
            }
            (Sub::Resolve(i, txn), Reply::Outcome { committed }) => {
                let outcome = if committed {
                    TxnOutcome::Commit
                } else {
                    TxnOutcome::Abort
                };
                let server = self.chunks[i].server;
                self.send(
                    out,
                    server,
                    Sub::Settle(i),
                    Request::Finish { txn, outcome },
                );
            }
            (Sub::Resolve(_, txn), r) => self.fail(WireError::new(
                ErrorCode::InvalidState,
                format!("could not resolve {txn}, which holds bytes this call touches: {r:?}"),
            )),
            (Sub::Settle(i), Reply::Done) => self.send_chunk(i, out),
            (Sub::Settle(_), r) => self.fail(WireError::new(
                ErrorCode::InvalidState,
                format!("handing down a resolved write failed: {r:?}"),
            )),
            (Sub::Decide, reply) => self.on_decided(reply, out),
            (Sub::Finish, reply) => {
                if let (Kind::Atomic(t), false) = (&mut self.kind, reply == Reply::Done) {
                    // Decided already: the participant resolves it later.
                    t.settled = false;
                    tracing::debug!(txn = %t.id, "a participant missed its Finish: {reply:?}");
                }
            }
        }
        self.advance(out);
    }

    fn progress(&self) -> Progress {
        if self.pending > 0 {
            return Progress::Waiting;
        }
        if let Kind::Atomic(t) = &self.kind {
            if matches!(t.phase, TxnPhase::Staging | TxnPhase::Deciding) {
                return Progress::Waiting;
            }
        }
        match &self.error {
            Some(e) => Progress::Failed(e.clone()),
            None => Progress::Done,
        }
    }

    fn abandon(&mut self, error: WireError) {
        self.pending = 0;
        self.fail(error);
        if let Kind::Atomic(t) = &mut self.kind {
            // What `cleanup` must tell the participants: nothing was decided (`Abort`,
            // the decider included), or only the decider knows (`Unknown`).
            t.untold = match t.phase {
                TxnPhase::Staging => Some((TxnOutcome::Abort, true)),
                TxnPhase::Deciding => Some((TxnOutcome::Unknown, false)),
                TxnPhase::Finishing { .. } => None,
            };
            if t.untold.is_some() {
                t.phase = TxnPhase::Finishing { committed: false };
                t.settled = false;
            }
        }
    }

    /// After `abandon`: participants of an atomic write that was not finished are told —
    /// `Abort` if `Decide` was never sent, else `Unknown` (the decider alone knows).
    fn cleanup(&mut self, out: &mut Vec<Send>) -> Vec<(ServerId, u32)> {
        if let Kind::Atomic(t) = &mut self.kind {
            if let Some((outcome, also_decider)) = t.untold.take() {
                self.finish_all(outcome, also_decider, out);
                self.pending = 0; // nobody waits for these answers
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_longer_than_a_message_is_cut() {
        let layout = Layout::round_robin(64 << 20, 1, 1, 0).unwrap();
        let len = 3 * MAX_MESSAGE_DATA + 1234;
        let cs = chunks(
            &layout,
            std::iter::once(ByteRange::new(10, 10 + len as u64).unwrap()),
        );
        assert_eq!(cs.len(), 4);
        let mut at = 0usize;
        let mut offset = 10u64;
        for c in &cs {
            assert!(c.bytes <= MAX_MESSAGE_DATA);
            for (p, &(a, l)) in c.pieces.iter().zip(&c.spans) {
                assert_eq!((p.offset, p.len as usize, a), (offset, l, at));
                at += l;
                offset += p.len;
            }
        }
        assert_eq!(at, len);
    }

    /// Without message bounds a call's pieces come back as one chunk per object, in object
    /// order, every byte once with its buffer offset; the same ranges cut by message
    /// bounds give more chunks over the same pieces.
    #[test]
    fn object_chunks_hold_each_objects_pieces_whole() {
        let layout = Layout::round_robin(64 << 10, 4, 4, 0).unwrap();
        // 384-byte blocks every 768 bytes, as S3D's x-split rows: 6 MiB of pieces.
        let ranges: Vec<ByteRange> = (0..1u64 << 14)
            .map(|i| ByteRange::new(i * 768, i * 768 + 384).unwrap())
            .collect();
        let whole = object_chunks(&layout, ranges.iter().copied());
        assert_eq!(
            whole.iter().map(|c| c.object).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        let mut seen: Vec<(usize, usize)> = Vec::new();
        for c in &whole {
            assert_eq!(c.bytes, c.spans.iter().map(|s| s.1).sum::<usize>());
            for (p, &(at, len)) in c.pieces.iter().zip(&c.spans) {
                let (object, offset) = layout.object_offset(file_offset_of(&ranges, at));
                assert_eq!((object, offset, p.len as usize), (c.object, p.offset, len));
                seen.push((at, len));
            }
        }
        seen.sort_unstable();
        let mut at = 0;
        for &(a, l) in &seen {
            assert_eq!(a, at, "every buffer byte once, in order");
            at += l;
        }
        assert_eq!(at as u64, 384 << 14);
        let bounded = chunks(&layout, ranges.iter().copied());
        assert!(bounded.len() > whole.len());
        let pieces = |cs: &[Chunk]| cs.iter().map(|c| c.bytes).sum::<usize>();
        assert_eq!(pieces(&bounded), pieces(&whole));
    }

    /// The file offset of byte `at` of the packed buffer of `ranges`.
    fn file_offset_of(ranges: &[ByteRange], mut at: usize) -> u64 {
        for r in ranges {
            if (at as u64) < r.len() {
                return r.start + at as u64;
            }
            at -= r.len() as usize;
        }
        panic!("{at} is past the buffer")
    }

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
