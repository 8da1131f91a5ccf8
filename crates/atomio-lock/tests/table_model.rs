//! The lock server against a brute-force per-byte model under random operations.
//!
//! The model keeps, for every request, the set of bytes it holds, and implements the
//! policy literally: grant own bytes in increasing order while no *other* request holds a
//! conflicting lock on the byte; after any release, retry every blocked request in the
//! order it blocked. Every reply (including later notifications) and every granted byte
//! must match, after every operation. This covers: never two conflicting grants, releases
//! free exactly what they should, and a blocked request is granted as soon as nothing
//! conflicts (the model retries all of them; the server only those whose byte was freed).

use atomio_layout::ByteRange;
use atomio_lock::{LockServer, Outgoing};
use atomio_proto::{
    ClientId, ErrorCode, FileId, LockDesc, LockId, LockMode, LockProgress, Reply, Request, Wait,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const SPACE: u64 = 48;

#[derive(Clone, Debug)]
struct MReq {
    owner: ClientId,
    mode: LockMode,
    bytes: Vec<u64>,
    held: Vec<bool>,
    cursor: u64,
    next: Option<u64>,
    blocked: Option<(u64, Option<u64>, u64)>, // (tag, until, seq)
}

#[derive(Default)]
struct Model {
    reqs: BTreeMap<u64, MReq>,
    next_lock: u64,
    next_seq: u64,
}

enum Outcome {
    Reached,
    Complete,
    Blocked,
}

impl Model {
    fn conflict(&self, id: u64, b: u64) -> bool {
        let me = &self.reqs[&id];
        self.reqs.iter().any(|(&q, r)| {
            q != id
                && r.bytes.iter().zip(&r.held).any(|(&x, &h)| h && x == b)
                && (r.mode == LockMode::Write || me.mode == LockMode::Write)
        })
    }

    fn progress(&self, id: u64) -> LockProgress {
        let r = &self.reqs[&id];
        let last = r
            .bytes
            .iter()
            .zip(&r.held)
            .filter(|(_, &h)| h)
            .map(|(&b, _)| b + 1)
            .max()
            .unwrap_or(0);
        LockProgress {
            lock: LockId(id),
            last_abs_offset: last,
            next_abs_offset: r.next,
        }
    }

    fn grant(&mut self, id: u64, until: Option<u64>) -> Outcome {
        let limit = until.unwrap_or(u64::MAX);
        let n = self.reqs[&id].bytes.len();
        for k in 0..n {
            let (b, held, cursor) = {
                let r = &self.reqs[&id];
                (r.bytes[k], r.held[k], r.cursor)
            };
            if b < cursor || held {
                continue;
            }
            if b >= limit {
                let r = self.reqs.get_mut(&id).unwrap();
                r.next = Some(b);
                return Outcome::Reached;
            }
            if self.conflict(id, b) {
                let r = self.reqs.get_mut(&id).unwrap();
                r.next = Some(b);
                r.cursor = b;
                return Outcome::Blocked;
            }
            let r = self.reqs.get_mut(&id).unwrap();
            r.held[k] = true;
            r.cursor = b + 1;
        }
        let r = self.reqs.get_mut(&id).unwrap();
        r.next = None;
        r.cursor = u64::MAX;
        Outcome::Complete
    }

    fn err(to: ClientId, tag: u64, code: ErrorCode) -> Outgoing {
        Outgoing {
            to,
            tag,
            reply: Reply::Error(atomio_proto::WireError::new(code, "")),
        }
    }

    fn acquire(&mut self, id: u64, tag: u64, wait: Wait, out: &mut Vec<Outgoing>) {
        let until = match wait {
            Wait::Until(x) => Some(x),
            _ => None,
        };
        let o = self.grant(id, until);
        let owner = self.reqs[&id].owner;
        match (o, wait) {
            (Outcome::Blocked, Wait::Until(_) | Wait::All) => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.reqs.get_mut(&id).unwrap().blocked = Some((tag, until, seq));
            }
            _ => out.push(Outgoing {
                to: owner,
                tag,
                reply: Reply::Lock(self.progress(id)),
            }),
        }
    }

    fn reexamine(&mut self, out: &mut Vec<Outgoing>) {
        let mut blocked: Vec<(u64, u64)> = self
            .reqs
            .iter()
            .filter_map(|(&id, r)| r.blocked.map(|(_, _, seq)| (seq, id)))
            .collect();
        blocked.sort();
        for (_, id) in blocked {
            let (tag, until, _) = self.reqs[&id].blocked.unwrap();
            match self.grant(id, until) {
                Outcome::Blocked => {}
                _ => {
                    self.reqs.get_mut(&id).unwrap().blocked = None;
                    out.push(Outgoing {
                        to: self.reqs[&id].owner,
                        tag,
                        reply: Reply::Lock(self.progress(id)),
                    });
                }
            }
        }
    }

    fn release(&mut self, id: u64, tag: u64, from: Option<u64>, out: &mut Vec<Outgoing>) {
        let owner = self.reqs[&id].owner;
        match from {
            None => {
                let r = self.reqs.remove(&id).unwrap();
                if let Some((btag, _, _)) = r.blocked {
                    out.push(Self::err(owner, btag, ErrorCode::InvalidState));
                }
                out.push(Outgoing {
                    to: owner,
                    tag,
                    reply: Reply::Released(LockProgress {
                        lock: LockId(id),
                        last_abs_offset: 0,
                        next_abs_offset: None,
                    }),
                });
            }
            Some(x) => {
                let r = self.reqs.get_mut(&id).unwrap();
                for k in 0..r.bytes.len() {
                    if r.bytes[k] >= x {
                        r.held[k] = false;
                    }
                }
                if r.cursor > x {
                    r.cursor = x;
                    r.next = r.bytes.iter().copied().find(|&b| b >= x);
                }
                out.push(Outgoing {
                    to: owner,
                    tag,
                    reply: Reply::Released(self.progress(id)),
                });
            }
        }
        self.reexamine(out);
    }

    fn handle(&mut self, client: ClientId, tag: u64, req: &Op, out: &mut Vec<Outgoing>) {
        match req {
            Op::New {
                mode, ranges, wait, ..
            } => {
                let id = self.next_lock;
                self.next_lock += 1;
                let bytes: Vec<u64> = ranges.iter().flat_map(|r| r.start..r.end).collect();
                self.reqs.insert(
                    id,
                    MReq {
                        owner: client,
                        mode: *mode,
                        held: vec![false; bytes.len()],
                        next: bytes.first().copied(),
                        bytes,
                        cursor: 0,
                        blocked: None,
                    },
                );
                self.acquire(id, tag, *wait, out);
            }
            Op::More { lock, wait, .. } => match self.check(client, *lock) {
                Err(c) => out.push(Self::err(client, tag, c)),
                Ok(()) if self.reqs[lock].blocked.is_some() => {
                    out.push(Self::err(client, tag, ErrorCode::InvalidState))
                }
                Ok(()) => self.acquire(*lock, tag, *wait, out),
            },
            Op::Release { lock, from, .. } => match self.check(client, *lock) {
                Err(c) => out.push(Self::err(client, tag, c)),
                Ok(()) if from.is_some() && self.reqs[lock].blocked.is_some() => {
                    out.push(Self::err(client, tag, ErrorCode::InvalidState))
                }
                Ok(()) => self.release(*lock, tag, *from, out),
            },
            Op::Disconnect { .. } => {
                let mine: Vec<u64> = self
                    .reqs
                    .iter()
                    .filter(|(_, r)| r.owner == client)
                    .map(|(&id, _)| id)
                    .collect();
                let mut scratch = Vec::new();
                for id in mine {
                    self.release(id, 0, None, &mut scratch);
                }
                out.extend(scratch.into_iter().filter(|o| o.to != client));
            }
        }
    }

    fn check(&self, client: ClientId, lock: u64) -> Result<(), ErrorCode> {
        match self.reqs.get(&lock) {
            None => Err(ErrorCode::NotFound),
            Some(r) if r.owner != client => Err(ErrorCode::NotOwner),
            Some(_) => Ok(()),
        }
    }

    fn held_bytes(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .reqs
            .iter()
            .flat_map(|(&id, r)| {
                r.bytes
                    .iter()
                    .zip(&r.held)
                    .filter(|(_, &h)| h)
                    .map(move |(&b, _)| (b, id))
            })
            .collect();
        v.sort();
        v
    }
}

#[derive(Clone, Debug)]
enum Op {
    New {
        client: u64,
        mode: LockMode,
        ranges: Vec<ByteRange>,
        wait: Wait,
    },
    More {
        client: u64,
        lock: u64,
        wait: Wait,
    },
    Release {
        client: u64,
        lock: u64,
        from: Option<u64>,
    },
    Disconnect {
        client: u64,
    },
}

fn arb_wait() -> impl Strategy<Value = Wait> {
    prop_oneof![
        Just(Wait::NonBlocking),
        Just(Wait::All),
        (0..SPACE + 4).prop_map(Wait::Until)
    ]
}

fn arb_ranges() -> impl Strategy<Value = Vec<ByteRange>> {
    prop::collection::vec((0u64..8, 1u64..6), 1..5).prop_map(|parts| {
        let mut at = 0;
        let mut v = Vec::new();
        for (gap, len) in parts {
            let start = at + gap;
            let end = (start + len).min(SPACE);
            if start >= end {
                break;
            }
            v.push(ByteRange { start, end });
            at = end + 1;
        }
        if v.is_empty() {
            v.push(ByteRange { start: 0, end: 1 });
        }
        v
    })
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..4, prop_oneof![Just(LockMode::Read), Just(LockMode::Write)], arb_ranges(), arb_wait())
            .prop_map(|(client, mode, ranges, wait)| Op::New { client, mode, ranges, wait }),
        2 => (0u64..4, 0u64..24, arb_wait()).prop_map(|(client, lock, wait)| Op::More { client, lock, wait }),
        3 => (0u64..4, 0u64..24, prop_oneof![Just(None), (0..SPACE).prop_map(Some)])
            .prop_map(|(client, lock, from)| Op::Release { client, lock, from }),
        1 => (0u64..4).prop_map(|client| Op::Disconnect { client }),
    ]
}

/// Error messages are free text; compare replies by code.
fn normalize(v: Vec<Outgoing>) -> Vec<Outgoing> {
    v.into_iter()
        .map(|mut o| {
            if let Reply::Error(e) = &mut o.reply {
                e.message.clear();
            }
            o
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn server_matches_the_per_byte_model(
        ops in prop::collection::vec(arb_op(), 1..60),
        hull_owners in 1usize..=8,
        leap_after in 1u64..=4,
    ) {
        // 1: every interleaved grant carves the hull it lands in; more: it joins the hull.
        // Leaps (granting up to the next other lock at once) after 1-4 ranges.
        let mut server = LockServer::new()
            .with_hull_owner_limit(hull_owners)
            .with_leap_after(leap_after);
        let mut model = Model::default();
        for (tag, op) in ops.iter().enumerate() {
            let tag = tag as u64 + 1;
            let mut got = Vec::new();
            let mut want = Vec::new();
            match op {
                Op::New { client, mode, ranges, wait } => server.handle(
                    ClientId(*client),
                    tag,
                    Request::LockNew { file: FileId(7), mode: *mode, desc: LockDesc::Ranges(ranges.clone()), wait: *wait },
                    &mut got,
                ),
                Op::More { client, lock, wait } => {
                    server.handle(ClientId(*client), tag, Request::LockMore { lock: LockId(*lock), wait: *wait }, &mut got)
                }
                Op::Release { client, lock, from } => server.handle(
                    ClientId(*client),
                    tag,
                    Request::LockRelease { lock: LockId(*lock), from: *from },
                    &mut got,
                ),
                Op::Disconnect { client } => server.disconnect(ClientId(*client), &mut got),
            }
            let client = match op {
                Op::New { client, .. } | Op::More { client, .. } | Op::Release { client, .. } | Op::Disconnect { client } => *client,
            };
            model.handle(ClientId(client), tag, op, &mut want);
            prop_assert_eq!(normalize(got), normalize(want), "op {:?}", op);
            server.check_invariants().map_err(TestCaseError::fail)?;
            let held: Vec<(u64, u64)> = server
                .granted()
                .into_iter()
                .flat_map(|(id, _, _, r)| (r.start..r.end).map(move |b| (b, id.0)))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            prop_assert_eq!(held, model.held_bytes(), "after {:?}", op);
        }
    }
}
