//! The lock server: Ching et al.'s server (section 5.2) as a state machine.
//!
//! `LockServer::handle` takes one client message and appends the replies it causes, to that
//! client and to others whose waiting requests progressed. No sockets, threads or clocks:
//! the drivers in `atomio-net` and the simulator call it.
//!
//! A *request* is one client's lock request at this server: a description of bytes (explicit
//! ranges or a structured pattern cut to this server's strips) and how far it has been
//! granted. Grants always form a *prefix in offset order*: every byte of the request below
//! `cursor` is locked, none at or above it. Acquires extend the prefix, stopping at the first
//! conflicting byte (locks are split there: byte granularity, no false sharing); partial
//! releases cut it back to an offset. That is what makes `last_abs_offset` /
//! `next_abs_offset` exact and the clients' ordered protocols deadlock-free.
//!
//! Data structures per file: a write index and a read index (see `index`), and the blocked
//! requests keyed by (the byte they wait for, arrival sequence). A release re-examines only
//! the blocked requests whose byte it freed, in arrival order, and notifies their clients.
//!
//! **Invariants** (checked by `check_invariants`, which the tests and simulator call):
//! * for every request, `granted` is sorted, disjoint, lies below `cursor`, equals the
//!   request's own bytes below `cursor`, and each range is in the index of its mode with its
//!   id;
//! * no write lock overlaps another lock of any mode;
//! * a request is in the wait queue iff it has a pending blocking acquire, keyed by its
//!   `next` byte, and that byte conflicts with a granted lock;
//! * counters (`granted_locks`, `waiting`, per-client requests) match the tables.

use crate::index::{ReadIndex, WriteIndex};
use atomio_layout::{ByteRange, RangeCursor, ServerId, MAX_OFFSET};
use atomio_proto::limits::{MAX_LOCKS_PER_SERVER, MAX_REQUESTS_PER_CLIENT, MAX_WAITING_REQUESTS};
use atomio_proto::{
    ClientId, ErrorCode, FileId, LockDesc, LockId, LockMode, LockProgress, Reply, Request,
    ValidDesc, Wait, WireError,
};
use std::collections::{BTreeMap, HashMap};

/// A reply addressed to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub to: ClientId,
    pub tag: u64,
    pub reply: Reply,
}

#[derive(Debug)]
struct Blocked {
    tag: u64,
    until: Option<u64>,
    seq: u64,
}

#[derive(Debug)]
struct LockRequest {
    owner: ClientId,
    file: FileId,
    mode: LockMode,
    desc: ValidDesc,
    /// Every byte of the request below `cursor` is granted; none at or above it.
    cursor: u64,
    /// The first byte of the request at or after `cursor`; `None` when fully granted.
    next: Option<u64>,
    /// The granted ranges in order (the paper's per-request lock chain).
    granted: Vec<ByteRange>,
    blocked: Option<Blocked>,
}

impl LockRequest {
    fn progress(&self, lock: LockId) -> LockProgress {
        LockProgress {
            lock,
            last_abs_offset: self.granted.last().map_or(0, |r| r.end),
            next_abs_offset: self.next,
        }
    }
}

#[derive(Debug, Default)]
struct FileTable {
    writes: WriteIndex,
    reads: ReadIndex,
    /// Blocked requests by (byte waited for, arrival sequence).
    waiters: BTreeMap<(u64, u64), LockId>,
    requests: usize,
}

impl FileTable {
    /// The first byte of `r` that a lock of `mode` cannot take now.
    #[inline]
    fn first_conflict(&self, r: ByteRange, mode: LockMode) -> Option<u64> {
        let w = self.writes.first_overlap(r);
        match mode {
            LockMode::Read => w,
            LockMode::Write => match (w, self.reads.first_overlap(r)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    #[inline]
    fn insert(&mut self, r: ByteRange, mode: LockMode, lock: LockId) {
        match mode {
            LockMode::Read => self.reads.add(r),
            LockMode::Write => self.writes.insert(r, lock),
        }
    }

    #[inline]
    fn remove(&mut self, r: ByteRange, mode: LockMode) {
        match mode {
            LockMode::Read => self.reads.remove(r),
            LockMode::Write => self.writes.remove(r),
        }
    }
}

/// How a grant attempt ended.
enum Grant {
    /// Every byte below the bound is granted; more remain above it.
    Reached,
    /// The whole request is granted.
    Complete,
    /// Stopped at a conflicting byte.
    Blocked(u64),
    /// The server's lock table is full.
    Full,
}

/// Counters a driver may report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub requests_opened: u64,
    pub locks_granted: u64,
    pub releases: u64,
    pub waits: u64,
}

/// One server's lock manager for all files.
#[derive(Debug, Default)]
pub struct LockServer {
    me: Option<ServerId>,
    files: HashMap<FileId, FileTable>,
    requests: HashMap<LockId, LockRequest>,
    per_client: HashMap<ClientId, usize>,
    next_lock: u64,
    next_seq: u64,
    granted_locks: usize,
    waiting: usize,
    stats: ServerStats,
    /// Negative-control fault for the simulator: grant without checking conflicts.
    pub(crate) ignore_conflicts: bool,
}

fn error(to: ClientId, tag: u64, code: ErrorCode, message: impl Into<String>) -> Outgoing {
    Outgoing {
        to,
        tag,
        reply: Reply::Error(WireError::new(code, message)),
    }
}

impl LockServer {
    /// A server that does not know its index in the cluster (it trusts the index a
    /// structured request names).
    pub fn new() -> Self {
        Self::default()
    }

    /// A server that knows its index and rejects structured requests addressed elsewhere.
    pub fn with_id(me: ServerId) -> Self {
        Self {
            me: Some(me),
            ..Self::default()
        }
    }

    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Granted byte-range locks currently held.
    pub fn granted_locks(&self) -> usize {
        self.granted_locks
    }

    /// Open lock requests.
    pub fn open_requests(&self) -> usize {
        self.requests.len()
    }

    /// Handles one lock-service message from `client`.
    pub fn handle(
        &mut self,
        client: ClientId,
        tag: u64,
        request: Request,
        out: &mut Vec<Outgoing>,
    ) {
        match request {
            Request::LockNew {
                file,
                mode,
                desc,
                wait,
            } => self.lock_new(client, tag, file, mode, desc, wait, out),
            Request::LockMore { lock, wait } => match self.owned(client, lock) {
                Err(e) => out.push(error(client, tag, e.code, e.message)),
                Ok(req) if req.blocked.is_some() => out.push(error(
                    client,
                    tag,
                    ErrorCode::InvalidState,
                    format!("{lock} already has an acquire waiting"),
                )),
                Ok(_) => self.acquire(lock, tag, wait, out),
            },
            Request::LockRelease { lock, from } => match self.owned(client, lock) {
                Err(e) => out.push(error(client, tag, e.code, e.message)),
                Ok(req) if from.is_some() && req.blocked.is_some() => out.push(error(
                    client,
                    tag,
                    ErrorCode::InvalidState,
                    format!("{lock} has an acquire waiting; only a full release can cancel it"),
                )),
                Ok(_) => self.release(lock, tag, from, out),
            },
            Request::Ping { nonce } => out.push(Outgoing {
                to: client,
                tag,
                reply: Reply::Pong { nonce },
            }),
        }
    }

    /// Releases everything a vanished client held or waited for.
    pub fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        let mut mine: Vec<LockId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.owner == client)
            .map(|(&id, _)| id)
            .collect();
        mine.sort_unstable();
        let mut scratch = Vec::new();
        for lock in mine {
            self.release(lock, 0, None, &mut scratch);
        }
        // Replies to the departed client are dropped; notifications to others are kept.
        out.extend(scratch.into_iter().filter(|o| o.to != client));
        self.per_client.remove(&client);
    }

    fn owned(&self, client: ClientId, lock: LockId) -> Result<&LockRequest, WireError> {
        let req = self.requests.get(&lock).ok_or_else(|| {
            WireError::new(ErrorCode::NotFound, format!("no open lock request {lock}"))
        })?;
        if req.owner != client {
            return Err(WireError::new(
                ErrorCode::NotOwner,
                format!("{lock} belongs to another client"),
            ));
        }
        Ok(req)
    }

    #[allow(clippy::too_many_arguments)]
    fn lock_new(
        &mut self,
        client: ClientId,
        tag: u64,
        file: FileId,
        mode: LockMode,
        desc: LockDesc,
        wait: Wait,
        out: &mut Vec<Outgoing>,
    ) {
        let open = self.per_client.get(&client).copied().unwrap_or(0);
        if open >= MAX_REQUESTS_PER_CLIENT {
            return out.push(error(
                client,
                tag,
                ErrorCode::LimitExceeded,
                format!(
                    "client has {open} open lock requests; the limit is {MAX_REQUESTS_PER_CLIENT}"
                ),
            ));
        }
        let desc = match desc.validate(self.me) {
            Ok(d) => d,
            Err(e) => return out.push(error(client, tag, e.code, e.message)),
        };
        let Some(first) = desc.first_at_or_after(0) else {
            return out.push(error(
                client,
                tag,
                ErrorCode::InvalidArgument,
                "the request covers no byte held by this server",
            ));
        };
        let lock = LockId(self.next_lock);
        self.next_lock += 1;
        self.requests.insert(
            lock,
            LockRequest {
                owner: client,
                file,
                mode,
                desc,
                cursor: 0,
                next: Some(first),
                granted: Vec::new(),
                blocked: None,
            },
        );
        *self.per_client.entry(client).or_default() += 1;
        self.files.entry(file).or_default().requests += 1;
        self.stats.requests_opened += 1;
        self.acquire(lock, tag, wait, out);
    }

    /// Extends `lock`'s granted prefix as `wait` allows and replies now, or parks it.
    fn acquire(&mut self, lock: LockId, tag: u64, wait: Wait, out: &mut Vec<Outgoing>) {
        let until = match wait {
            Wait::Until(x) => Some(x),
            Wait::NonBlocking | Wait::All => None,
        };
        let outcome = self.grant(lock, until);
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let owner = req.owner;
        match outcome {
            Grant::Blocked(at) if wait != Wait::NonBlocking => {
                if self.waiting >= MAX_WAITING_REQUESTS {
                    return out.push(error(
                        owner,
                        tag,
                        ErrorCode::LimitExceeded,
                        format!(
                            "{MAX_WAITING_REQUESTS} requests are already waiting at this server"
                        ),
                    ));
                }
                let seq = self.next_seq;
                self.next_seq += 1;
                req.blocked = Some(Blocked { tag, until, seq });
                let file = req.file;
                self.files
                    .get_mut(&file)
                    .expect("open request has a table")
                    .waiters
                    .insert((at, seq), lock);
                self.waiting += 1;
                self.stats.waits += 1;
            }
            Grant::Full => out.push(error(
                owner,
                tag,
                ErrorCode::LimitExceeded,
                format!("the server holds {MAX_LOCKS_PER_SERVER} locks, its limit"),
            )),
            Grant::Reached | Grant::Complete | Grant::Blocked(_) => out.push(Outgoing {
                to: owner,
                tag,
                reply: Reply::Lock(req.progress(lock)),
            }),
        }
    }

    /// Grants `lock`'s bytes in offset order from its cursor until a conflict, the bound
    /// `until` (exclusive) or the end of the request.
    fn grant(&mut self, lock: LockId, until: Option<u64>) -> Grant {
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let table = self
            .files
            .get_mut(&req.file)
            .expect("open request has a table");
        let Some(_) = req.next else {
            return Grant::Complete;
        };
        let limit = until.unwrap_or(MAX_OFFSET);
        let mut src = req.desc.cursor();
        src.seek(req.cursor);
        let mut granted = 0u64;
        let outcome = loop {
            let Some(r) = src.next_range() else {
                req.cursor = MAX_OFFSET;
                req.next = None;
                break Grant::Complete;
            };
            if r.start >= limit {
                req.cursor = limit.max(req.cursor);
                req.next = Some(r.start);
                break Grant::Reached;
            }
            let want = ByteRange {
                start: r.start,
                end: r.end.min(limit),
            };
            let conflict = if self.ignore_conflicts {
                None
            } else {
                table.first_conflict(want, req.mode)
            };
            let end = conflict.unwrap_or(want.end);
            if end > want.start {
                if self.granted_locks >= MAX_LOCKS_PER_SERVER {
                    req.cursor = want.start;
                    req.next = Some(want.start);
                    break Grant::Full;
                }
                let piece = ByteRange {
                    start: want.start,
                    end,
                };
                table.insert(piece, req.mode, lock);
                req.granted.push(piece);
                self.granted_locks += 1;
                granted += 1;
            }
            req.cursor = end;
            if let Some(at) = conflict {
                req.next = Some(at);
                break Grant::Blocked(at);
            }
            if want.end < r.end {
                // The bound cut this range: the rest waits for a later acquire.
                req.next = Some(want.end);
                break Grant::Reached;
            }
        };
        self.stats.locks_granted += granted;
        outcome
    }

    fn release(&mut self, lock: LockId, tag: u64, from: Option<u64>, out: &mut Vec<Outgoing>) {
        self.stats.releases += 1;
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let table = self
            .files
            .get_mut(&req.file)
            .expect("open request has a table");
        let owner = req.owner;
        let file = req.file;
        let released: Vec<ByteRange> = match from {
            None => {
                if let Some(b) = req.blocked.take() {
                    let at = req.next.expect("blocked requests have a next byte");
                    table.waiters.remove(&(at, b.seq));
                    self.waiting -= 1;
                    out.push(error(
                        owner,
                        b.tag,
                        ErrorCode::InvalidState,
                        format!("{lock} was released while its acquire waited"),
                    ));
                }
                let granted = std::mem::take(&mut req.granted);
                for &r in &granted {
                    table.remove(r, req.mode);
                }
                out.push(Outgoing {
                    to: owner,
                    tag,
                    reply: Reply::Released(LockProgress {
                        lock,
                        last_abs_offset: 0,
                        next_abs_offset: None,
                    }),
                });
                self.requests.remove(&lock);
                table.requests -= 1;
                if let Some(n) = self.per_client.get_mut(&owner) {
                    *n -= 1;
                    if *n == 0 {
                        self.per_client.remove(&owner);
                    }
                }
                granted
            }
            Some(x) => {
                let cut = req.granted.partition_point(|r| r.end <= x);
                let mut tail = req.granted.split_off(cut);
                if let Some(first) = tail.first_mut() {
                    if first.start < x {
                        // Keep the part below x.
                        req.granted.push(ByteRange {
                            start: first.start,
                            end: x,
                        });
                        table.remove(*first, req.mode);
                        table.insert(
                            ByteRange {
                                start: first.start,
                                end: x,
                            },
                            req.mode,
                            lock,
                        );
                        first.start = x;
                        // The kept part stays counted as a lock; the cut part is counted below.
                        self.granted_locks += 1;
                    } else {
                        table.remove(*first, req.mode);
                    }
                }
                for r in tail.iter().skip(1) {
                    table.remove(*r, req.mode);
                }
                if req.cursor > x {
                    req.cursor = x;
                    req.next = req.desc.first_at_or_after(x);
                }
                out.push(Outgoing {
                    to: owner,
                    tag,
                    reply: Reply::Released(req.progress(lock)),
                });
                tail
            }
        };
        self.granted_locks -= released.len();
        if self.files.get(&file).is_some_and(|t| t.requests == 0) {
            let t = self.files.remove(&file).expect("just checked");
            debug_assert!(t.writes.is_empty() && t.reads.is_empty() && t.waiters.is_empty());
        } else if !released.is_empty() {
            self.reexamine(file, &released, out);
        }
    }

    /// Retries, in arrival order, the blocked requests waiting on a byte in `released`.
    fn reexamine(&mut self, file: FileId, released: &[ByteRange], out: &mut Vec<Outgoing>) {
        let table = self.files.get_mut(&file).expect("caller checked");
        if table.waiters.is_empty() {
            return;
        }
        let mut candidates: Vec<(u64, u64, LockId)> = if table.waiters.len() <= released.len() {
            table
                .waiters
                .iter()
                .filter(|((at, _), _)| {
                    let i = released.partition_point(|r| r.end <= *at);
                    released.get(i).is_some_and(|r| r.start <= *at)
                })
                .map(|(&(at, seq), &id)| (seq, at, id))
                .collect()
        } else {
            released
                .iter()
                .flat_map(|r| table.waiters.range((r.start, 0)..(r.end, 0)))
                .map(|(&(at, seq), &id)| (seq, at, id))
                .collect()
        };
        candidates.sort_unstable();
        for (seq, at, lock) in candidates {
            self.files
                .get_mut(&file)
                .expect("still open")
                .waiters
                .remove(&(at, seq));
            let until = self.requests[&lock]
                .blocked
                .as_ref()
                .expect("waiters are blocked")
                .until;
            let outcome = self.grant(lock, until);
            let req = self.requests.get_mut(&lock).expect("waiters are open");
            match outcome {
                Grant::Blocked(at2) => {
                    self.files
                        .get_mut(&file)
                        .expect("still open")
                        .waiters
                        .insert((at2, seq), lock);
                }
                Grant::Reached | Grant::Complete => {
                    let b = req.blocked.take().expect("waiters are blocked");
                    self.waiting -= 1;
                    out.push(Outgoing {
                        to: req.owner,
                        tag: b.tag,
                        reply: Reply::Lock(req.progress(lock)),
                    });
                }
                Grant::Full => {
                    let b = req.blocked.take().expect("waiters are blocked");
                    self.waiting -= 1;
                    out.push(error(
                        req.owner,
                        b.tag,
                        ErrorCode::LimitExceeded,
                        format!("the server holds {MAX_LOCKS_PER_SERVER} locks, its limit"),
                    ));
                }
            }
        }
    }

    /// Every granted lock: (lock, owner, mode, range). For tests and the simulator.
    pub fn granted(&self) -> Vec<(LockId, ClientId, LockMode, ByteRange)> {
        let mut v: Vec<_> = self
            .requests
            .iter()
            .flat_map(|(&id, r)| r.granted.iter().map(move |&g| (id, r.owner, r.mode, g)))
            .collect();
        v.sort_unstable_by_key(|x| (x.3, x.0));
        v
    }

    /// Verifies every invariant in the module docs; O(everything). Returns the first
    /// violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut locks = 0usize;
        let mut waiting = 0usize;
        let mut per_client: HashMap<ClientId, usize> = HashMap::new();
        let mut per_file: HashMap<FileId, usize> = HashMap::new();
        let mut all: Vec<(ByteRange, LockMode, LockId)> = Vec::new();
        for (&id, r) in &self.requests {
            *per_client.entry(r.owner).or_default() += 1;
            *per_file.entry(r.file).or_default() += 1;
            let table = self
                .files
                .get(&r.file)
                .ok_or_else(|| format!("{id} has no file table"))?;
            let mut own = r.desc.cursor();
            let mut expect: Vec<ByteRange> = Vec::new();
            while let Some(x) = own.next_range() {
                if x.start >= r.cursor {
                    break;
                }
                expect.push(ByteRange {
                    start: x.start,
                    end: x.end.min(r.cursor),
                });
            }
            // The chain may hold adjacent pieces split at conflicts; compare by bytes.
            let chain = atomio_layout::RangeList::from_ranges(r.granted.clone());
            if chain.as_slice() != atomio_layout::RangeList::from_ranges(expect.clone()).as_slice()
            {
                return Err(format!(
                    "{id}: granted {:?} but its bytes below cursor {} are {:?}",
                    r.granted, r.cursor, expect
                ));
            }
            if r.granted.windows(2).any(|w| w[0].end > w[1].start) {
                return Err(format!("{id}: chain not sorted/disjoint {:?}", r.granted));
            }
            let want_next = r.desc.first_at_or_after(r.cursor);
            if r.next != want_next {
                return Err(format!("{id}: next {:?}, expected {:?}", r.next, want_next));
            }
            for &g in &r.granted {
                if r.mode == LockMode::Write && table.writes.holder_at(g.start) != Some(id) {
                    return Err(format!("{id}: write lock {g:?} missing from the index"));
                }
                if r.mode == LockMode::Read && table.reads.count_at(g.start) == 0 {
                    return Err(format!("{id}: read lock {g:?} missing from the index"));
                }
                all.push((g, r.mode, id));
            }
            locks += r.granted.len();
            if let Some(b) = &r.blocked {
                waiting += 1;
                let at = r
                    .next
                    .ok_or_else(|| format!("{id} blocked with nothing left"))?;
                if table.waiters.get(&(at, b.seq)) != Some(&id) {
                    return Err(format!("{id} blocked at {at} but not queued there"));
                }
                let probe = ByteRange {
                    start: at,
                    end: at + 1,
                };
                if table.first_conflict(probe, r.mode).is_none() {
                    return Err(format!("{id} waits at {at}, which nothing holds"));
                }
            }
        }
        all.sort_unstable_by_key(|x| x.0);
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                if b.0.start >= a.0.end {
                    break;
                }
                if a.2 != b.2 && (a.1 == LockMode::Write || b.1 == LockMode::Write) {
                    return Err(format!("conflicting grants {a:?} and {b:?}"));
                }
            }
        }
        for (f, t) in &self.files {
            t.reads.check()?;
            let queued: usize = t.waiters.len();
            if per_file.get(f).copied().unwrap_or(0) != t.requests || t.requests == 0 {
                return Err(format!("{f}: request count {} is wrong", t.requests));
            }
            let writes_held: usize = all
                .iter()
                .filter(|x| x.1 == LockMode::Write && self.requests[&x.2].file == *f)
                .count();
            if t.writes.len() != writes_held {
                return Err(format!(
                    "{f}: write index has {} entries, requests hold {writes_held}",
                    t.writes.len()
                ));
            }
            let _ = queued;
        }
        let queued: usize = self.files.values().map(|t| t.waiters.len()).sum();
        if locks != self.granted_locks || waiting != self.waiting || queued != waiting {
            return Err(format!(
                "counters: locks {locks}/{} waiting {waiting}/{} queued {queued}",
                self.granted_locks, self.waiting
            ));
        }
        if per_client != self.per_client {
            return Err("per-client request counts are wrong".into());
        }
        Ok(())
    }
}
