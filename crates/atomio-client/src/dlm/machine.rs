//! The cached-lock client, sans-IO: one process's side of SeqDLM (Chen et al., SC'22) and of
//! the traditional DLMs `dlm-basic` / `dlm-lustre` on atomio's servers. Commands in
//! (`write`, `read`, `flush`), frames in (`on_frame`), time passed in; frames out
//! (`take_sends`) and finished commands out (`take_done`). The agent (`agent`) runs it on a
//! thread of its own over TCP or in-process links; the simulator (`sim`) runs the very same
//! machine against real lock resources and data services with messages in random order.
//!
//! A call acquires one lock per object (lock resource) it touches, in object order (no
//! deadlock: everyone waits in the same order, and a lock in use is given back only after
//! the call), on the hull of its pieces in that object, in the mode the rules give (Fig. 10:
//! NBW inside one object, BW across objects — MPI atomicity across stripes; PR for reads;
//! a traditional DLM: PW and PR). A cached lock that serves the mode and covers the hull is
//! reused without a message. Once all are held, a write copies its bytes into the write-back
//! caches tagged with the locks' SNs (nothing goes to the servers yet), a read reads from
//! the servers and lays its own dirty bytes over the result. Then the locks are free again,
//! cached.
//!
//! Giving a lock back (the server revoked it, it was granted CANCELING — early revocation —,
//! the cache is over its limit, or the file is flushed): `DlmCancel` (the lock is CANCELING;
//! with conversion a BW/PW lock with dirty bytes is downgraded to NBW so conflicting writers
//! are granted early), then the bytes still tagged with its SN go out as `SeqWrite`s, and
//! once every one is acknowledged, `DlmRelease`. A lock in use by the call answers its
//! revocation only after the call.
//!
//! **Invariants:** one command runs at a time, the others queue; no byte enters a cache
//! before every lock of its call is held, and each byte is tagged with the SN of the lock of
//! its object; a lock is released only after every flush of its bytes was acknowledged; a
//! CANCELING lock is never used again; `cached + in_flight` counts every dirty byte the
//! client still owes the servers; after a lost server or a refused flush the client is
//! broken (dirty bytes may be lost) and fails every later command with that error.

use super::{DlmSpec, ModeRule};
use crate::write_cache::WriteCache;
use atomio_layout::{ByteRange, Layout, ServerId};
use atomio_lock::seqdlm::Mode;
use atomio_net::data_op::chunks;
use atomio_net::{DataOp, Machine, Progress};
use atomio_proto::dlm::SnBlock;
use atomio_proto::{DlmPolicy, ErrorCode, FileId, Reply, Request, WireError, DLM_CALLBACK_TAG};
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Most bytes one flush message carries.
pub const MAX_FLUSH_BYTES: usize = 8 << 20;
/// Most blocks one flush message carries.
pub const MAX_FLUSH_BLOCKS: usize = 8192;
/// Dirty bytes (cached and in flight) past which idle locks are given back (their bytes
/// flushed), and past which a call waits for acknowledgements before it returns.
pub const DEFAULT_SOFT_LIMIT: u64 = 256 << 20;
pub const DEFAULT_HARD_LIMIT: u64 = 1 << 30;

type Key = (FileId, u32);

/// A frame to send.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub server: ServerId,
    pub tag: u64,
    pub request: Request,
}

/// A finished command.
#[derive(Debug)]
pub enum Done {
    Write(Result<(), WireError>),
    Read(Result<ReadDone, WireError>),
    Flush(Result<(), WireError>),
}

/// A finished read: its bytes, and one past the last file byte this client still caches
/// (of the file read; 0 if none) — the file is at least that long, though the servers do
/// not know it yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadDone {
    pub data: Vec<u8>,
    pub cached_end: u64,
}

/// What the client did, for statistics and the breakdown benchmark (times in ns of the
/// clock passed in).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DlmClientStats {
    /// Flush messages sent while a call was running (the rest went out between calls or
    /// at the final flush).
    pub flushes_during_calls: u64,
    pub calls: u64,
    pub lock_requests: u64,
    /// Locks of a call found in the cache (no message).
    pub cache_hits: u64,
    pub grants_canceling: u64,
    pub revocations: u64,
    pub flush_messages: u64,
    pub flushed_bytes: u64,
    /// Time calls waited for grants.
    pub lock_wait_ns: u64,
    /// Time from a revocation's arrival to its answer (a lock in use answers after the
    /// call), and from the answer to the release (the flush).
    pub revoke_to_cancel_ns: u64,
    pub cancel_to_release_ns: u64,
}

#[derive(Debug)]
struct Held {
    mode: Mode,
    range: ByteRange,
    sn: u64,
    canceling: bool,
    in_use: bool,
    give_back_after_use: bool,
    /// Flush messages sent and not yet acknowledged.
    flushing: usize,
    /// CANCELING with its flush not started (deferred: see `give_back`).
    deferred: bool,
    /// Granted CANCELING (early revocation): the server sees it CANCELING from the start.
    granted_canceling: bool,
    /// The server asked for it while it saw it CANCELING: someone waits for its release,
    /// so its flush must not be deferred.
    hurried: bool,
    revoked_at: Option<u64>,
    canceled_at: u64,
    /// When the call that asked for it sent the request, and when the grant came.
    requested_at: u64,
    granted_at: u64,
}

/// One lock's life, for the breakdown benchmark (ns of the clock passed in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockRecord {
    pub object: u32,
    pub sn: u64,
    pub requested_at: u64,
    pub granted_at: u64,
    pub canceled_at: Option<u64>,
    pub released_at: Option<u64>,
}

#[derive(Debug)]
struct Res {
    server: ServerId,
    policy: DlmPolicy,
    held: BTreeMap<u64, Held>,
    cache: WriteCache,
}

/// What an outstanding tag is for.
#[derive(Debug)]
enum TagUse {
    Lock,
    Flush {
        key: Key,
        id: u64,
        bytes: u64,
    },
    Read(u32),
    Sync,
    /// Cancels and releases: answered only when refused.
    Quiet,
}

/// One lock a call needs: the object's hull.
#[derive(Debug, Clone, Copy)]
struct Need {
    key: Key,
    server: ServerId,
    hull: ByteRange,
}

#[derive(Debug)]
enum Kind {
    Write {
        /// Per object: (object offset, the bytes).
        pieces: Vec<(u32, u64, Bytes)>,
    },
    Read {
        layout: Layout,
        ranges: Vec<ByteRange>,
        len: usize,
        data: Option<Box<DataOp>>,
        result: Option<ReadDone>,
    },
    Flush {
        file: Option<FileId>,
        durable: bool,
        /// Syncs sent and not answered.
        syncing: usize,
        started: bool,
    },
}

#[derive(Debug)]
struct Active {
    id: u64,
    kind: Kind,
    spec: Option<DlmSpec>,
    mode: Mode,
    needs: Vec<Need>,
    next: usize,
    waiting: Option<(u64, u64)>,
    using: Vec<(Key, u64)>,
    /// All locks held and the I/O done: waiting only for the cache to drain below the
    /// hard limit (writes) before reporting.
    finished: bool,
    error: Option<WireError>,
}

#[derive(Debug)]
enum Cmd {
    Write {
        file: FileId,
        layout: Layout,
        ranges: Vec<ByteRange>,
        /// The ranges' bytes in order, as consecutive parts (see `pool::copy`).
        data: Vec<Bytes>,
        spec: DlmSpec,
    },
    Read {
        file: FileId,
        layout: Layout,
        ranges: Vec<ByteRange>,
        len: usize,
        spec: DlmSpec,
    },
    Flush {
        file: Option<FileId>,
        durable: bool,
    },
}

#[derive(Debug)]
pub struct DlmClient {
    res: BTreeMap<Key, Res>,
    queue: VecDeque<(u64, Cmd)>,
    op: Option<Active>,
    tags: HashMap<u64, TagUse>,
    next_tag: u64,
    out: Vec<Outgoing>,
    done: Vec<(u64, Done)>,
    cached: u64,
    in_flight: u64,
    soft: u64,
    hard: u64,
    now: u64,
    broken: Option<WireError>,
    stats: DlmClientStats,
    /// Every lock's life, when asked for (`with_log`).
    log: Option<Vec<LockRecord>>,
}

impl Default for DlmClient {
    fn default() -> Self {
        Self::new()
    }
}

impl DlmClient {
    pub fn new() -> Self {
        Self {
            res: BTreeMap::new(),
            queue: VecDeque::new(),
            op: None,
            tags: HashMap::new(),
            next_tag: 1,
            out: Vec::new(),
            done: Vec::new(),
            cached: 0,
            in_flight: 0,
            soft: DEFAULT_SOFT_LIMIT,
            hard: DEFAULT_HARD_LIMIT,
            now: 0,
            broken: None,
            stats: DlmClientStats::default(),
            log: None,
        }
    }

    /// Keeps a record of every lock's life (`lock_log`).
    pub fn with_log(mut self) -> Self {
        self.log = Some(Vec::new());
        self
    }

    /// The records of released locks, and of those still held (not released).
    pub fn lock_log(&self) -> Vec<LockRecord> {
        let mut out = self.log.clone().unwrap_or_default();
        if self.log.is_some() {
            for (&k, r) in &self.res {
                out.extend(r.held.values().map(|h| record(k, h, None)));
            }
        }
        out
    }

    /// Dirty-byte limits (see `DEFAULT_SOFT_LIMIT`); tests use tiny ones.
    pub fn with_limits(mut self, soft: u64, hard: u64) -> Self {
        self.soft = soft;
        self.hard = hard.max(soft);
        self
    }

    pub fn stats(&self) -> &DlmClientStats {
        &self.stats
    }

    /// Dirty bytes cached, and flushed but not acknowledged.
    pub fn dirty(&self) -> (u64, u64) {
        (self.cached, self.in_flight)
    }

    /// Locks cached (held) now.
    pub fn locks_held(&self) -> usize {
        self.res.values().map(|r| r.held.len()).sum()
    }

    /// Nothing running, queued or owed (every flush acknowledged).
    pub fn idle(&self) -> bool {
        self.op.is_none() && self.queue.is_empty() && self.in_flight == 0
    }

    /// The clock (ns, monotonic); events after this call happen at `now`.
    pub fn set_now(&mut self, now: u64) {
        self.now = self.now.max(now);
    }

    pub fn take_sends(&mut self) -> Vec<Outgoing> {
        std::mem::take(&mut self.out)
    }

    pub fn take_done(&mut self) -> Vec<(u64, Done)> {
        std::mem::take(&mut self.done)
    }

    /// Queues a write of `data` (the ranges' bytes in order, as consecutive parts) to
    /// `ranges` (increasing, disjoint) of a server file; `Done::Write` when it is in the
    /// caches (or failed).
    pub fn write(
        &mut self,
        id: u64,
        file: FileId,
        layout: Layout,
        ranges: Vec<ByteRange>,
        data: Vec<Bytes>,
        spec: DlmSpec,
    ) {
        self.queue.push_back((
            id,
            Cmd::Write {
                file,
                layout,
                ranges,
                data,
                spec,
            },
        ));
        self.advance();
    }

    /// Queues a read of `ranges` (`len` bytes in all; holes read as zeros).
    pub fn read(
        &mut self,
        id: u64,
        file: FileId,
        layout: Layout,
        ranges: Vec<ByteRange>,
        len: usize,
        spec: DlmSpec,
    ) {
        self.queue.push_back((
            id,
            Cmd::Read {
                file,
                layout,
                ranges,
                len,
                spec,
            },
        ));
        self.advance();
    }

    /// Queues a flush: every cached lock (of `file`, or of every file) is given back with
    /// its bytes; `durable`: the servers then `fsync` (`Sync`) the file.
    pub fn flush(&mut self, id: u64, file: Option<FileId>, durable: bool) {
        self.queue.push_back((id, Cmd::Flush { file, durable }));
        self.advance();
    }

    fn tag(&mut self, use_: TagUse) -> u64 {
        let t = self.next_tag;
        self.next_tag += 1;
        if self.next_tag >= DLM_CALLBACK_TAG - 1 {
            self.next_tag = 1;
        }
        self.tags.insert(t, use_);
        t
    }

    fn send(&mut self, server: ServerId, use_: TagUse, request: Request) -> u64 {
        let tag = self.tag(use_);
        self.out.push(Outgoing {
            server,
            tag,
            request,
        });
        tag
    }

    /// A frame from `server`.
    pub fn on_frame(&mut self, server: ServerId, tag: u64, reply: Reply) {
        if tag == DLM_CALLBACK_TAG {
            if let Reply::DlmRevoke { file, object, id } = reply {
                self.on_revoke((file, object), id);
            }
            return self.advance();
        }
        let Some(use_) = self.tags.remove(&tag) else {
            return; // an answer to nothing we wait for (e.g. a liveness ping)
        };
        match use_ {
            TagUse::Lock => self.on_grant(tag, reply),
            TagUse::Flush { key, id, bytes } => self.on_flushed(key, id, bytes, reply),
            TagUse::Read(sub) => {
                let mut more = Vec::new();
                if let Some(Active {
                    kind: Kind::Read { data: Some(op), .. },
                    ..
                }) = &mut self.op
                {
                    op.on_reply(sub, reply, &mut more);
                }
                for s in more {
                    self.send(s.server, TagUse::Read(s.sub), s.request);
                }
            }
            TagUse::Sync => {
                if let Some(Active {
                    kind: Kind::Flush { syncing, .. },
                    error,
                    ..
                }) = &mut self.op
                {
                    *syncing -= 1;
                    if let Reply::Error(e) = reply {
                        error.get_or_insert(e);
                    }
                }
            }
            TagUse::Quiet => {
                if let Reply::Error(e) = reply {
                    self.break_with(WireError::new(
                        e.code,
                        format!("{server} refused a lock cancel or release: {}", e.message),
                    ));
                }
            }
        }
        self.advance();
    }

    /// The connection to `server` is gone: its locks went with it, and so did the dirty
    /// bytes cached under them.
    pub fn on_lost(&mut self, server: ServerId, e: WireError) {
        let mine: Vec<Key> = self
            .res
            .iter()
            .filter(|(_, r)| r.server == server)
            .map(|(&k, _)| k)
            .collect();
        let mut lost_dirty = 0;
        for k in &mine {
            let r = self.res.remove(k).expect("listed");
            lost_dirty += r.cache.dirty_bytes();
        }
        self.cached -= lost_dirty.min(self.cached);
        // Flushes to it will never be answered.
        let mut unanswered = 0;
        self.tags.retain(|_, u| match u {
            TagUse::Flush { key, bytes, .. } if mine.contains(key) => {
                unanswered += *bytes;
                false
            }
            _ => true,
        });
        self.in_flight -= unanswered.min(self.in_flight);
        let e = WireError::new(
            e.code,
            format!(
                "lost {server} ({}); {lost_dirty} cached bytes under its locks are lost",
                e.message
            ),
        );
        if let Some(op) = &mut self.op {
            if op.waiting.is_some() && op.needs.get(op.next).is_some_and(|n| n.server == server) {
                op.waiting = None;
            }
            if let Kind::Read { data: Some(d), .. } = &mut op.kind {
                d.abandon(e.clone());
            }
        }
        self.break_with(e);
        self.advance();
    }

    fn break_with(&mut self, e: WireError) {
        if let Some(op) = &mut self.op {
            op.error.get_or_insert(e.clone());
        }
        self.broken.get_or_insert(e);
    }

    fn on_revoke(&mut self, key: Key, id: u64) {
        self.stats.revocations += 1;
        let now = self.now;
        let Some(h) = self.res.get_mut(&key).and_then(|r| r.held.get_mut(&id)) else {
            return; // released (or absorbed) meanwhile: nothing to give back
        };
        if h.canceling || h.granted_canceling {
            // The server hurries a lock it sees CANCELING: someone waits for its release.
            h.hurried = true;
            let (deferred, canceling) = (h.deferred, h.canceling);
            if deferred {
                self.flush_out(key, id);
            }
            if canceling {
                return;
            }
        }
        let Some(h) = self.res.get_mut(&key).and_then(|r| r.held.get_mut(&id)) else {
            return;
        };
        h.revoked_at = Some(now);
        if h.in_use {
            h.give_back_after_use = true;
        } else {
            self.give_back(key, id);
        }
    }

    fn on_grant(&mut self, tag: u64, reply: Reply) {
        let Some(op) = self.op.as_mut() else {
            return;
        };
        let Some((want, asked)) = op.waiting.filter(|w| w.0 == tag) else {
            return;
        };
        op.waiting = None;
        let need = op.needs[op.next];
        let (id, mode, range, canceling, sn, absorbed) = match reply {
            Reply::DlmGrant {
                id,
                mode,
                range,
                canceling,
                sn,
                absorbed,
            } => (id, Mode::from(mode), range, canceling, sn, absorbed),
            Reply::Error(e) => {
                op.error = Some(e);
                return;
            }
            other => {
                op.error = Some(WireError::new(
                    ErrorCode::Malformed,
                    format!("a lock request ({want}) was answered {other:?}"),
                ));
                return;
            }
        };
        self.stats.lock_wait_ns += self.now.saturating_sub(asked);
        if canceling {
            self.stats.grants_canceling += 1;
        }
        op.using.push((need.key, id));
        op.next += 1;
        let Some(res) = self.res.get_mut(&need.key) else {
            return;
        };
        for old in absorbed {
            // Only a write lock has bytes to hand over. (A read grant carries the SN the
            // next write grant gets: re-tagging by a read lock's SN would move another
            // lock's bytes — found by the DLM simulation.)
            if let Some(h) = res.held.remove(&old).filter(|h| h.mode.is_write()) {
                res.cache.retag(h.sn, sn);
            }
        }
        res.held.insert(
            id,
            Held {
                mode,
                range,
                sn,
                canceling: false,
                in_use: true,
                give_back_after_use: canceling,
                flushing: 0,
                deferred: false,
                granted_canceling: canceling,
                hurried: false,
                revoked_at: None,
                canceled_at: 0,
                requested_at: asked,
                granted_at: self.now,
            },
        );
    }

    fn on_flushed(&mut self, key: Key, id: u64, bytes: u64, reply: Reply) {
        self.in_flight -= bytes.min(self.in_flight);
        if let Reply::Error(e) = reply {
            return self.break_with(WireError::new(
                e.code,
                format!("a flush of object {} was refused: {}", key.1, e.message),
            ));
        }
        let Some(res) = self.res.get_mut(&key) else {
            return;
        };
        let server = res.server;
        let Some(h) = res.held.get_mut(&id) else {
            return;
        };
        h.flushing -= 1;
        if h.flushing == 0 && h.canceling {
            res_release(self, key, id, server);
        }
    }

    /// Answers (CANCELING, downgraded to NBW if that lets writers in early), then flushes
    /// and releases once acknowledged — or, for an NBW lock at a resource with early grant,
    /// *defers* the flush: no writer waits for its release (they are granted beside a
    /// CANCELING NBW lock), so its bytes stay cached (write-back) until the server hurries
    /// it (someone who must wait for the release is blocked: a second `DlmRevoke`), the
    /// cache is over its soft limit, or the file is flushed. On a machine where the flush
    /// competes with the writers for the same cores this keeps it off the writers' path,
    /// as the paper's separate flush daemon does.
    fn give_back(&mut self, key: Key, id: u64) {
        let now = self.now;
        let Some(res) = self.res.get_mut(&key) else {
            return;
        };
        let server = res.server;
        let (conversion, early_grant) = (res.policy.conversion, res.policy.early_grant);
        let Some(h) = res.held.get_mut(&id) else {
            return;
        };
        h.canceling = true;
        h.canceled_at = now;
        let revoked_at = h.revoked_at;
        let has_dirty = h.mode.is_write() && res.cache.has(h.sn);
        let downgrade =
            (conversion && has_dirty && matches!(h.mode, Mode::Bw | Mode::Pw)).then_some(Mode::Nbw);
        if let Some(m) = downgrade {
            h.mode = m;
        }
        let defer =
            early_grant && has_dirty && h.mode == Mode::Nbw && !h.hurried && defer_flushes();
        h.deferred = defer;
        let granted_canceling = h.granted_canceling;
        if let Some(at) = revoked_at {
            self.stats.revoke_to_cancel_ns += now.saturating_sub(at);
        }
        // A lock granted CANCELING (early revocation) is CANCELING at the server already:
        // the answer says nothing new unless it downgrades (one message less per write).
        if !granted_canceling || downgrade.is_some() {
            let cancel = Request::DlmCancel {
                file: key.0,
                object: key.1,
                id,
                downgrade: downgrade.map(Into::into),
            };
            self.send(server, TagUse::Quiet, cancel);
        }
        if !defer {
            self.flush_out(key, id);
        }
    }

    /// Cancels a BW lock in use by a write that holds all its locks, downgrading it to NBW
    /// (see `step_op`); its flush is deferred until the bytes are in the cache.
    fn cancel_before_copy(&mut self, key: Key, id: u64) {
        let now = self.now;
        let Some(res) = self.res.get_mut(&key) else {
            return;
        };
        let server = res.server;
        let Some(h) = res.held.get_mut(&id) else {
            return;
        };
        h.canceling = true;
        h.canceled_at = now;
        h.mode = Mode::Nbw;
        h.deferred = true;
        if let Some(at) = h.revoked_at {
            self.stats.revoke_to_cancel_ns += now.saturating_sub(at);
        }
        let cancel = Request::DlmCancel {
            file: key.0,
            object: key.1,
            id,
            downgrade: Some(Mode::Nbw.into()),
        };
        self.send(server, TagUse::Quiet, cancel);
    }

    /// Sends a CANCELING lock's bytes (then its release once acknowledged; at once when it
    /// has none).
    fn flush_out(&mut self, key: Key, id: u64) {
        let Some(res) = self.res.get_mut(&key) else {
            return;
        };
        let server = res.server;
        let Some(h) = res.held.get_mut(&id) else {
            return;
        };
        h.deferred = false;
        // Only a write lock owns cached bytes. (A read grant carries the SN the next write
        // grant gets: taking by a read lock's SN would take that write lock's bytes — found
        // by the DLM simulation as a torn read.)
        let blocks = if h.mode.is_write() {
            res.cache.take(h.sn)
        } else {
            Vec::new()
        };
        let messages = flush_messages(key, blocks);
        h.flushing = messages.len();
        let flushed: u64 = messages.iter().map(|m| m.1).sum();
        self.cached -= flushed.min(self.cached);
        self.in_flight += flushed;
        if messages.is_empty() {
            return res_release(self, key, id, server);
        }
        let during_call = self.op.is_some();
        for (request, bytes) in messages {
            self.stats.flush_messages += 1;
            if during_call {
                self.stats.flushes_during_calls += 1;
            }
            self.stats.flushed_bytes += bytes;
            self.send(server, TagUse::Flush { key, id, bytes }, request);
        }
    }

    /// Every deferred flush (of `file`, or all) starts now.
    fn flush_deferred(&mut self, file: Option<FileId>) {
        let ids: Vec<(Key, u64)> = self
            .res
            .iter()
            .filter(|(k, _)| file.is_none_or(|f| f == k.0))
            .flat_map(|(&k, r)| {
                r.held
                    .iter()
                    .filter(|(_, h)| h.deferred)
                    .map(move |(&id, _)| (k, id))
            })
            .collect();
        for (k, id) in ids {
            self.flush_out(k, id);
        }
    }

    /// Runs the queue: starts the next command, moves the current one on.
    fn advance(&mut self) {
        loop {
            if self.op.is_none() {
                let Some((id, cmd)) = self.queue.pop_front() else {
                    return;
                };
                if let Some(e) = &self.broken {
                    self.done.push((id, fail_of(&cmd, e.clone())));
                    continue;
                }
                self.start(id, cmd);
            }
            if !self.step() {
                return;
            }
        }
    }

    fn start(&mut self, id: u64, cmd: Cmd) {
        self.stats.calls += 1;
        let (kind, spec, needs, mode) = match cmd {
            Cmd::Write {
                file,
                layout,
                ranges,
                data,
                spec,
            } => {
                let mut pieces = Vec::new();
                let parts = Parts::new(data);
                let needs = self.needs_of(file, &layout, &ranges, spec.policy, |c| {
                    for (p, &(at, len)) in c.pieces.iter().zip(&c.spans) {
                        for (skip, b) in parts.slice(at, len) {
                            pieces.push((c.object, p.offset + skip, b));
                        }
                    }
                });
                let mode = match spec.modes {
                    ModeRule::Always(m) => m,
                    ModeRule::Fig10 if needs.len() > 1 => Mode::Bw,
                    ModeRule::Fig10 => Mode::Nbw,
                };
                (Kind::Write { pieces }, Some(spec), needs, mode)
            }
            Cmd::Read {
                file,
                layout,
                ranges,
                len,
                spec,
            } => {
                let needs = self.needs_of(file, &layout, &ranges, spec.policy, |_| {});
                let kind = Kind::Read {
                    layout,
                    ranges,
                    len,
                    data: None,
                    result: None,
                };
                (kind, Some(spec), needs, Mode::Pr)
            }
            Cmd::Flush { file, durable } => (
                Kind::Flush {
                    file,
                    durable,
                    syncing: 0,
                    started: false,
                },
                None,
                Vec::new(),
                Mode::Pr,
            ),
        };
        self.op = Some(Active {
            id,
            kind,
            spec,
            mode,
            needs,
            next: 0,
            waiting: None,
            using: Vec::new(),
            finished: false,
            error: None,
        });
    }

    /// The locks a call needs: per object it touches (in object order), the hull of its
    /// pieces there; `each` sees every chunk.
    fn needs_of(
        &mut self,
        file: FileId,
        layout: &Layout,
        ranges: &[ByteRange],
        policy: DlmPolicy,
        mut each: impl FnMut(&atomio_net::data_op::Chunk),
    ) -> Vec<Need> {
        let mut hulls: BTreeMap<u32, (ServerId, ByteRange)> = BTreeMap::new();
        for c in chunks(layout, ranges.iter().copied()) {
            each(&c);
            let (Some(first), Some(last)) = (c.pieces.first(), c.pieces.last()) else {
                continue;
            };
            let r = ByteRange {
                start: first.offset,
                end: last.offset + last.len,
            };
            let e = hulls.entry(c.object).or_insert((c.server, r));
            e.1.start = e.1.start.min(r.start);
            e.1.end = e.1.end.max(r.end);
        }
        hulls
            .into_iter()
            .map(|(object, (server, hull))| {
                let key = (file, object);
                self.res.entry(key).or_insert_with(|| Res {
                    server,
                    policy,
                    held: BTreeMap::new(),
                    cache: WriteCache::new(),
                });
                Need { key, server, hull }
            })
            .collect()
    }

    /// Moves the current command on; true when it finished (the next may start).
    fn step(&mut self) -> bool {
        let Some(mut op) = self.op.take() else {
            return false;
        };
        let finished = self.step_op(&mut op);
        if finished {
            // Locks still marked in use are freed (a failed call), then given back if asked.
            let using = std::mem::take(&mut op.using);
            self.free(using);
            let done = match (op.kind, op.error) {
                (Kind::Write { .. }, Some(e)) => Done::Write(Err(e)),
                (Kind::Write { .. }, None) => Done::Write(Ok(())),
                (Kind::Read { .. }, Some(e)) => Done::Read(Err(e)),
                (Kind::Read { result, .. }, None) => Done::Read(Ok(result.unwrap_or(ReadDone {
                    data: Vec::new(),
                    cached_end: 0,
                }))),
                (Kind::Flush { .. }, Some(e)) => Done::Flush(Err(e)),
                (Kind::Flush { .. }, None) => Done::Flush(Ok(())),
            };
            self.done.push((op.id, done));
            return true;
        }
        self.op = Some(op);
        false
    }

    fn free(&mut self, using: Vec<(Key, u64)>) {
        for (key, id) in using {
            let Some(h) = self.res.get_mut(&key).and_then(|r| r.held.get_mut(&id)) else {
                continue;
            };
            h.in_use = false;
            if h.give_back_after_use && !h.canceling {
                self.give_back(key, id);
            }
        }
    }

    fn step_op(&mut self, op: &mut Active) -> bool {
        if op.error.is_some() {
            // Wait for an outstanding grant (it must be freed) or reads still answered.
            return op.waiting.is_none() && !reading(op);
        }
        if let Kind::Flush { .. } = op.kind {
            return self.step_flush(op);
        }
        if op.finished {
            return self.cached + self.in_flight <= self.hard;
        }
        // Acquire the locks, in object order.
        while op.waiting.is_none() && op.next < op.needs.len() {
            let need = op.needs[op.next];
            let res = self.res.get_mut(&need.key).expect("made by needs_of");
            let cached = res.held.iter_mut().find(|(_, h)| {
                !h.canceling
                    && !h.give_back_after_use
                    && !h.in_use
                    && serves(h.mode, op.mode)
                    && h.range.start <= need.hull.start
                    && h.range.end >= need.hull.end
            });
            if let Some((&id, h)) = cached {
                h.in_use = true;
                op.using.push((need.key, id));
                op.next += 1;
                self.stats.cache_hits += 1;
                continue;
            }
            let spec = op.spec.expect("lock calls have a spec");
            self.stats.lock_requests += 1;
            let request = Request::DlmLock {
                file: need.key.0,
                object: need.key.1,
                policy: spec.policy,
                mode: op.mode.into(),
                range: need.hull,
            };
            let tag = self.send(need.server, TagUse::Lock, request);
            op.waiting = Some((tag, self.now));
        }
        if op.waiting.is_some() {
            return false;
        }
        // Every lock held: the I/O.
        match &mut op.kind {
            Kind::Write { pieces } => {
                let sns: HashMap<u32, u64> = op
                    .using
                    .iter()
                    .map(|&(k, id)| (k.1, self.res[&k].held[&id].sn))
                    .collect();
                // A write across objects holds BW locks only until it has them all: from
                // then on its SN is fixed at every object, before anyone granted later
                // there, so the order is the same on every stripe. Those someone already
                // waits for are canceled and downgraded to NBW now, before the bytes are
                // copied into the cache, so the next writers are granted early.
                let early: Vec<(Key, u64)> = if op.mode == Mode::Bw {
                    op.using
                        .iter()
                        .copied()
                        .filter(|&(k, id)| {
                            let r = &self.res[&k];
                            r.policy.early_grant
                                && r.policy.conversion
                                && r.held[&id].give_back_after_use
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                for &(k, id) in &early {
                    self.cancel_before_copy(k, id);
                }
                let file = op.needs[0].key.0;
                for (object, offset, bytes) in std::mem::take(pieces) {
                    let res = self.res.get_mut(&(file, object)).expect("needed");
                    let before = res.cache.dirty_bytes();
                    res.cache.write(offset, bytes, sns[&object]);
                    let after = res.cache.dirty_bytes();
                    self.cached = self.cached + after - before;
                }
                // Deferred locks whose bytes this write overwrote have nothing left to
                // flush: release them now (the server's table stays small).
                let emptied: Vec<(Key, u64)> = op
                    .needs
                    .iter()
                    .flat_map(|n| {
                        let r = &self.res[&n.key];
                        r.held
                            .iter()
                            .filter(|(_, h)| h.deferred && !r.cache.has(h.sn))
                            .map(move |(&id, _)| (n.key, id))
                    })
                    .collect();
                for (k, id) in emptied {
                    self.flush_out(k, id);
                }
                // Early-canceled locks flush now if someone waits for their release
                // (hurried) or flushes are not deferred.
                for &(k, id) in &early {
                    let hurried = self.res[&k].held.get(&id).is_some_and(|h| h.hurried);
                    if hurried || !defer_flushes() {
                        self.flush_out(k, id);
                    }
                }
                let using = std::mem::take(&mut op.using);
                self.free(using);
                self.relieve();
                op.finished = true;
                self.cached + self.in_flight <= self.hard
            }
            Kind::Read {
                layout,
                ranges,
                len,
                data,
                result,
            } => match data {
                None => {
                    let Some(file) = op.needs.first().map(|n| n.key.0) else {
                        // No bytes to read.
                        *result = Some(ReadDone {
                            data: vec![0; *len],
                            cached_end: 0,
                        });
                        return true;
                    };
                    let mut d = DataOp::read(file, layout, ranges.iter().copied(), *len);
                    let mut sends = Vec::new();
                    d.start(&mut sends);
                    *data = Some(Box::new(d));
                    for s in sends {
                        self.send(s.server, TagUse::Read(s.sub), s.request);
                    }
                    false
                }
                Some(d) => match d.progress() {
                    Progress::Waiting => false,
                    Progress::Failed(e) => {
                        op.error = Some(e);
                        true
                    }
                    Progress::Done => {
                        // This client's own dirty bytes are newer than the servers'.
                        let file = op.needs[0].key.0;
                        let mut buf = d.take_data();
                        for c in chunks(layout, ranges.iter().copied()) {
                            let cache = &self.res[&(file, c.object)].cache;
                            for (p, &(at, l)) in c.pieces.iter().zip(&c.spans) {
                                cache.overlay(p.offset, &mut buf[at..at + l]);
                            }
                        }
                        let cached_end = self
                            .res
                            .iter()
                            .filter(|(k, _)| k.0 == file)
                            .filter_map(|(k, r)| {
                                let end = r.cache.end()?;
                                layout.file_offset(k.1, end - 1).map(|x| x + 1)
                            })
                            .max()
                            .unwrap_or(0);
                        *result = Some(ReadDone {
                            data: buf,
                            cached_end,
                        });
                        true
                    }
                },
            },
            Kind::Flush { .. } => unreachable!("handled above"),
        }
    }

    /// A flush: give back every cached lock of the file, wait for their releases, then
    /// (durable) sync the file at its servers.
    fn step_flush(&mut self, op: &mut Active) -> bool {
        let Kind::Flush {
            file,
            durable,
            syncing,
            started,
        } = &mut op.kind
        else {
            return true;
        };
        let file = *file;
        let of_file = |k: &Key| file.is_none_or(|f| f == k.0);
        if !*started {
            *started = true;
            let ids: Vec<(Key, u64)> = self
                .res
                .iter()
                .filter(|(k, _)| of_file(k))
                .flat_map(|(&k, r)| {
                    r.held
                        .iter()
                        .filter(|(_, h)| !h.canceling && !h.in_use)
                        .map(move |(&id, _)| (k, id))
                })
                .collect();
            for (k, id) in ids {
                self.give_back(k, id);
            }
            self.flush_deferred(file);
        }
        let pending = self
            .res
            .iter()
            .any(|(k, r)| of_file(k) && r.held.values().any(|h| h.canceling));
        if pending {
            return false;
        }
        if *durable {
            *durable = false;
            let mut servers: Vec<(FileId, ServerId)> = self
                .res
                .iter()
                .filter(|(k, _)| of_file(k))
                .map(|(k, r)| (k.0, r.server))
                .collect();
            servers.sort_unstable_by_key(|(f, s)| (f.0, s.0));
            servers.dedup();
            for (f, s) in servers {
                *syncing += 1;
                self.send(s, TagUse::Sync, Request::Sync { file: f });
            }
        }
        // Resources with nothing held are forgotten.
        self.res
            .retain(|k, r| !(of_file(k) && r.held.is_empty() && r.cache.is_empty()));
        *syncing == 0
    }

    /// Over the soft limit: give back idle cached locks with dirty bytes, most first.
    fn relieve(&mut self) {
        if self.cached + self.in_flight <= self.soft {
            return;
        }
        self.flush_deferred(None);
        let mut idle: Vec<(u64, Key, u64)> = self
            .res
            .iter()
            .flat_map(|(&k, r)| {
                r.held
                    .iter()
                    .filter(|(_, h)| {
                        !h.canceling && !h.in_use && h.mode.is_write() && r.cache.has(h.sn)
                    })
                    .map(move |(&id, _)| (0, k, id))
            })
            .collect();
        for v in &mut idle {
            let r = &self.res[&v.1];
            v.0 = r.cache.dirty_bytes();
        }
        idle.sort_unstable_by_key(|v| std::cmp::Reverse(v.0));
        for (_, k, id) in idle {
            if self.cached <= self.soft / 2 {
                break;
            }
            self.give_back(k, id);
        }
    }
}

/// `ATOMIO_DLM_DEFER=0` flushes a CANCELING NBW lock at once instead of deferring it (to
/// measure what deferring does).
fn defer_flushes() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ATOMIO_DLM_DEFER").map_or(true, |v| v != "0"))
}

/// Forgets a lock and sends its release.
fn res_release(c: &mut DlmClient, key: Key, id: u64, server: ServerId) {
    if let Some(res) = c.res.get_mut(&key) {
        if let Some(h) = res.held.remove(&id) {
            c.stats.cancel_to_release_ns += c.now.saturating_sub(h.canceled_at);
            if let Some(log) = &mut c.log {
                log.push(record(key, &h, Some(c.now)));
            }
        }
    }
    let request = Request::DlmRelease {
        file: key.0,
        object: key.1,
        id,
    };
    c.send(server, TagUse::Quiet, request);
}

fn record(key: Key, h: &Held, released_at: Option<u64>) -> LockRecord {
    LockRecord {
        object: key.1,
        sn: h.sn,
        requested_at: h.requested_at,
        granted_at: h.granted_at,
        canceled_at: h.canceling.then_some(h.canceled_at),
        released_at,
    }
}

/// A write's bytes as consecutive parts (pooled chunks), sliced by call offsets.
struct Parts {
    parts: Vec<Bytes>,
    /// Where each part starts in the call's bytes.
    starts: Vec<usize>,
}

impl Parts {
    fn new(parts: Vec<Bytes>) -> Self {
        let mut starts = Vec::with_capacity(parts.len());
        let mut at = 0;
        for p in &parts {
            starts.push(at);
            at += p.len();
        }
        Self { parts, starts }
    }

    /// The bytes `[at, at + len)` of the call: (offset within that span, the slice), one
    /// per part they lie in; no copy.
    fn slice(&self, at: usize, len: usize) -> Vec<(u64, Bytes)> {
        let mut out = Vec::new();
        let end = at + len;
        let first = self.starts.partition_point(|&s| s <= at).saturating_sub(1);
        for (p, &s) in self.parts.iter().zip(&self.starts).skip(first) {
            if s >= end {
                break;
            }
            let lo = at.max(s);
            let hi = end.min(s + p.len());
            if lo < hi {
                out.push(((lo - at) as u64, p.slice(lo - s..hi - s)));
            }
        }
        out
    }
}

/// Whether a cached lock of mode `held` serves a call that asks for `want`.
fn serves(held: Mode, want: Mode) -> bool {
    match want {
        Mode::Pr => matches!(held, Mode::Pr | Mode::Pw),
        // Inside one object any write lock will do.
        Mode::Nbw => held.is_write(),
        // Across objects the lock must block (BW or PW).
        Mode::Bw => matches!(held, Mode::Bw | Mode::Pw),
        Mode::Pw => held == Mode::Pw,
    }
}

fn reading(op: &Active) -> bool {
    matches!(&op.kind, Kind::Read { data: Some(d), .. } if d.progress() == Progress::Waiting)
}

fn fail_of(cmd: &Cmd, e: WireError) -> Done {
    match cmd {
        Cmd::Write { .. } => Done::Write(Err(e)),
        Cmd::Read { .. } => Done::Read(Err(e)),
        Cmd::Flush { .. } => Done::Flush(Err(e)),
    }
}

/// The flush messages of one lock's blocks: at most `MAX_FLUSH_BYTES` and
/// `MAX_FLUSH_BLOCKS` each; (request, bytes).
fn flush_messages(key: Key, blocks: Vec<crate::write_cache::Dirty>) -> Vec<(Request, u64)> {
    let mut out = Vec::new();
    let mut sn_blocks: Vec<SnBlock> = Vec::new();
    let mut data: Vec<u8> = Vec::new();
    let mut emit = |sn_blocks: &mut Vec<SnBlock>, data: &mut Vec<u8>| {
        if sn_blocks.is_empty() {
            return;
        }
        let bytes = data.len() as u64;
        out.push((
            Request::SeqWrite {
                file: key.0,
                object: key.1,
                blocks: std::mem::take(sn_blocks),
                data: Bytes::from(std::mem::take(data)),
                msn: 0,
            },
            bytes,
        ));
    };
    // One block that fits in a message goes as it is (its buffer is shared, not copied).
    if blocks.len() == 1 && blocks[0].data.len() <= MAX_FLUSH_BYTES {
        let b = &blocks[0];
        let bytes = b.data.len() as u64;
        return vec![(
            Request::SeqWrite {
                file: key.0,
                object: key.1,
                blocks: vec![SnBlock {
                    offset: b.start,
                    len: bytes,
                    sn: b.sn,
                }],
                data: b.data.clone(),
                msn: 0,
            },
            bytes,
        )];
    }
    for b in blocks {
        let mut at = 0usize;
        while at < b.data.len() {
            let room = MAX_FLUSH_BYTES - data.len();
            let n = (b.data.len() - at).min(room);
            sn_blocks.push(SnBlock {
                offset: b.start + at as u64,
                len: n as u64,
                sn: b.sn,
            });
            data.extend_from_slice(&b.data[at..at + n]);
            at += n;
            if data.len() >= MAX_FLUSH_BYTES || sn_blocks.len() >= MAX_FLUSH_BLOCKS {
                emit(&mut sn_blocks, &mut data);
            }
        }
    }
    emit(&mut sn_blocks, &mut data);
    out
}

impl DlmClientStats {
    /// Adds another client's counters.
    pub fn add(&mut self, o: &DlmClientStats) {
        self.flushes_during_calls += o.flushes_during_calls;
        self.calls += o.calls;
        self.lock_requests += o.lock_requests;
        self.cache_hits += o.cache_hits;
        self.grants_canceling += o.grants_canceling;
        self.revocations += o.revocations;
        self.flush_messages += o.flush_messages;
        self.flushed_bytes += o.flushed_bytes;
        self.lock_wait_ns += o.lock_wait_ns;
        self.revoke_to_cancel_ns += o.revoke_to_cancel_ns;
        self.cancel_to_release_ns += o.cancel_to_release_ns;
    }
}
