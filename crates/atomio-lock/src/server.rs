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
//! Storage per file: granted *write* bytes as disjoint hulls (`WriteHulls`), each naming up
//! to `MAX_HULL_OWNERS` requests; an owner's bytes inside are its description's bytes there
//! below its cursor. A structured request that nobody interleaves with costs one index
//! entry, not one per range, and releases in O(entries). A writer whose ranges fall between
//! another's inside its hull (x-neighbours' rows of a subarray) *joins* that hull instead of
//! splitting it at every range, and its ranges there are checked by walking the other
//! owners' descriptions alongside its own (`walk_shared_hull`); a partial release of a
//! shared hull only moves the cursor. A writer that finds a hull full carves its piece out. Read locks overlap each other and stay exact, range by
//! range, in a coverage map (`ReadIndex`) plus a per-request chain. Blocked requests are
//! keyed by (the byte they wait for, arrival sequence); a release re-examines only those
//! whose byte lies in what it freed, in arrival order, and notifies their clients.
//!
//! Granting runs a fast path: the *horizon* is the first byte at or after the cursor where
//! any other lock's hull or read segment begins; ranges below it are granted by extending a
//! local run, with no index lookup per range. Past it, each range is checked precisely
//! against the owners' descriptions; a piece stays within one hull or one gap between hulls
//! (the rest of its range is checked as a range of its own).
//!
//! Work is sliced: one step (a message handled, or a call of `work`) grants or releases at
//! most `DEFAULT_WORK_SLICE` ranges (`with_work_slice`). A request that has more left is
//! queued (`runnable`) and continued by `work`, which the driver calls between messages:
//! a grant stops on a range boundary, which is a granted prefix like any other; a release
//! is cut back from the top, so what it still holds is always a prefix too. A request of
//! millions of runs thus delays a ping by one slice, not by seconds.
//!
//! **Invariants** (checked by `check_invariants`, which the tests and simulator call):
//! * a request's granted bytes are exactly its own bytes below `cursor`; `last` is one past
//!   the highest of them (0 if none); `next` is its first byte at or after `cursor`;
//! * write hulls are disjoint; each names 1 to `MAX_HULL_OWNERS` distinct owners, starts
//!   below every owner's cursor, and is listed in each owner's entries (and only theirs);
//!   together a write request's hulls cover all its granted bytes; a read request's chain
//!   lists exactly its granted bytes (hull bounds need not be tight: every conflict check
//!   asks the owners' descriptions and cursors, so a loose hull costs only speed);
//! * no two requests hold conflicting bytes (overlapping, one of them a writer);
//! * a request is queued as a waiter iff it has a pending blocking acquire, keyed by its
//!   `next` byte, and that byte conflicts with a granted lock;
//! * the run queue holds exactly the requests with work left (`Granting`, `Releasing`),
//!   each once;
//! * counters (`entries`, `waiting`, per-client requests) match the tables; a request
//!   whose client is gone (an orphan, still being released) counts for nobody.

mod acquire;
mod admission;
mod grant;
mod inspect;
mod release;
mod session;
use grant::{cut_held, grant_into, granted_in, write_conflict, LEAP_AFTER};
pub mod dlm;

use crate::chain::Chain;
use crate::index::{Hull, ReadIndex, WriteHulls, MAX_HULL_OWNERS};
use crate::lease::{LeaseConfig, Leases};
use atomio_layout::{grid_box, ByteRange, GridBox, RangeCursor, RangeList, ServerId, MAX_OFFSET};
use atomio_proto::limits::{
    MAX_LOCKS_PER_CLIENT, MAX_LOCKS_PER_SERVER, MAX_REQUESTS_PER_CLIENT, MAX_WAITING_PER_CLIENT,
    MAX_WAITING_REQUESTS,
};
use atomio_proto::{
    ClientId, DescCursor, ErrorCode, FileId, LockDesc, LockId, LockMode, LockProgress, Reply,
    Request, ServerReport, ValidDesc, Wait, WireError,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// A reply addressed to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub to: ClientId,
    pub tag: u64,
    pub reply: Reply,
}

/// An acquire the server has not answered yet.
#[derive(Clone, Copy, Debug)]
struct Acquire {
    tag: u64,
    wait: Wait,
    /// Arrival order: waiters on one byte are served oldest first.
    seq: u64,
}

impl Acquire {
    fn until(&self) -> Option<u64> {
        match self.wait {
            Wait::Until(x) => Some(x),
            Wait::NonBlocking | Wait::All => None,
        }
    }
}

/// What the server still owes a request's client.
#[derive(Clone, Copy, Debug)]
enum Pending {
    /// A blocking acquire waiting for the request's `next` byte (in the file's waiters).
    Waiting(Acquire),
    /// An acquire that used up a step's work budget; continued from `runnable`.
    Granting(Acquire),
    /// A release cut back from the top in slices, down to `to` (`None`: the whole
    /// request, which then closes); continued from `runnable`. An `orphan`'s client is
    /// gone (or lapsed): nobody is answered and it no longer counts as the client's.
    Releasing {
        tag: u64,
        to: Option<u64>,
        orphan: bool,
    },
}

/// What a request holds in the indexes.
#[derive(Debug)]
enum Held {
    /// Starts of the write hulls this request owns (alone or with others). A set, not a
    /// vector: another request's grant can carve one of these hulls anywhere
    /// (`carve_hull`), and interleaved writers past the owner limit carve thousands (a
    /// sorted vector's inserts cost O(n) each: 24 % of the lock server's time with 8
    /// interleaved clients of 128 Ki locks, before hulls were shared).
    Write(BTreeSet<u64>),
    /// This request's read ranges, ascending (the paper's per-request lock chain).
    Read(Chain),
}

impl Held {
    fn entries(&self) -> usize {
        match self {
            Held::Write(v) => v.len(),
            Held::Read(v) => v.len(),
        }
    }

    /// Entries a release down to `floor` removes or trims (for writes, counting the hull
    /// below `floor` even when it ends before it: a budget estimate, never short).
    fn above(&self, floor: u64) -> usize {
        match self {
            Held::Write(v) => {
                v.range(floor..).count() + usize::from(v.range(..floor).next_back().is_some())
            }
            Held::Read(v) => v.len() - v.partition_point(|r| r.end <= floor),
        }
    }

    /// Where to cut so that exactly the top `k` entries (1 ≤ k < entries) go.
    fn cut_below_top(&self, k: usize) -> u64 {
        match self {
            Held::Write(v) => *v.iter().nth_back(k - 1).expect("1 ≤ k < entries"),
            Held::Read(v) => v.get(v.len() - k).expect("1 ≤ k < entries").start,
        }
    }
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
    /// One past the highest granted byte; 0 when none is granted.
    last: u64,
    held: Held,
    pending: Option<Pending>,
}

impl LockRequest {
    fn progress(&self, lock: LockId) -> LockProgress {
        LockProgress {
            lock,
            last_abs_offset: self.last,
            next_abs_offset: self.next,
        }
    }

    /// The granted bytes, from the description (for checks and tests).
    fn granted_ranges(&self) -> Vec<ByteRange> {
        let mut c = self.desc.cursor();
        let mut out = Vec::new();
        while let Some(r) = c.next_range() {
            if r.start >= self.cursor {
                break;
            }
            out.push(ByteRange {
                start: r.start,
                end: r.end.min(self.cursor),
            });
        }
        out
    }
}

#[derive(Debug, Default)]
struct FileTable {
    writes: WriteHulls,
    reads: ReadIndex,
    /// Blocked requests by (byte waited for, arrival sequence).
    waiters: BTreeMap<(u64, u64), LockId>,
    requests: usize,
}

/// How a grant attempt ended.
enum Grant {
    /// Every byte below the bound is granted; more remain above it.
    Reached,
    /// The whole request is granted.
    Complete,
    /// Stopped at a conflicting byte.
    Blocked(u64),
    /// The step's work budget ran out before `next`; continue in a later step.
    Paused,
    /// The server's lock table is full.
    Full,
    /// The request's client holds its share of the table.
    ClientFull,
}

/// Counters a driver may report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub requests_opened: u64,
    /// Ranges granted (a range split at a conflict counts once per piece).
    pub ranges_granted: u64,
    /// Of those, ranges granted past the horizon: checked one by one against other
    /// requests' hulls and descriptions (interleaved writers), not on the fast path.
    pub ranges_checked: u64,
    /// Of those, walked inside a hull shared with other requests: the other owners each
    /// was checked against, summed (a walk costs more the more owners its hull has).
    pub owners_checked: u64,
    /// Index entries (write hulls, read ranges) removed by releases: what a release costs
    /// beyond its message (a hull other grants carved releases piece by piece).
    pub entries_released: u64,
    pub releases: u64,
    pub waits: u64,
    /// Clients released because their lease lapsed.
    pub lapses: u64,
    /// Times a grant or release ran out of its step's slice and was queued to continue.
    pub sliced: u64,
    /// Changes of bytes admitted, and refused `Locked` (mandatory locks).
    pub changes_admitted: u64,
    pub changes_refused: u64,
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
    /// Index entries (write hulls plus read ranges), in all and per client.
    entries: Entries,
    waiting: usize,
    /// Waiting requests per client (only clients with some), against one client taking
    /// every wait slot.
    waiting_of: HashMap<ClientId, usize>,
    stats: ServerStats,
    /// Client leases (`None`: locks end only when their client disconnects).
    leases: Option<Leases>,
    /// The driver's clock, in ms (see `set_now`).
    now: u64,
    /// Requests with work left over from an earlier step (`Pending::Granting` or
    /// `Pending::Releasing`), each once, served in order by `work`.
    runnable: VecDeque<LockId>,
    /// Ranges one step may grant or release (0: `DEFAULT_WORK_SLICE`).
    slice: u64,
    /// What is left of the current step's slice.
    budget: u64,
    /// Negative-control fault for the simulator: readers and writers ignore each other.
    pub(crate) ignore_conflicts: bool,
    /// Owners a write hull may name before a grant inside it carves it instead (0:
    /// `MAX_HULL_OWNERS`; tests lower it to exercise carving).
    hull_owners: usize,
    /// Ranges granted one by one before a `leap` (0: `LEAP_AFTER`; tests lower it).
    leap_after: u64,
    /// Each file's striping as first named by a write here (mandatory locks map object
    /// pieces to file bytes with it; see `admission`).
    stripings: HashMap<FileId, atomio_proto::Striping>,
    /// The cached-lock DLMs' resources (SeqDLM, dlm-basic, dlm-lustre; see `dlm`).
    dlm: dlm::DlmTable,
}

/// Index entries in use: each costs memory (about 60 B), so they are bounded in all and per
/// client (a client's share costs only that client).
#[derive(Debug)]
struct Entries {
    total: usize,
    /// Entries of each client's requests (only clients with some).
    of_client: HashMap<ClientId, usize>,
    client_limit: usize,
}

impl Default for Entries {
    fn default() -> Self {
        Self {
            total: 0,
            of_client: HashMap::new(),
            client_limit: MAX_LOCKS_PER_CLIENT,
        }
    }
}

impl Entries {
    fn of(&self, client: ClientId) -> usize {
        self.of_client.get(&client).copied().unwrap_or(0)
    }

    /// `client`'s requests went from `before` to `after` entries.
    fn moved(&mut self, client: ClientId, before: usize, after: usize) {
        let n = self.of_client.entry(client).or_default();
        *n = *n + after - before;
        if *n == 0 {
            self.of_client.remove(&client);
        }
    }
}

/// Ranges granted or released per step unless `with_work_slice` says otherwise: ≤ ~5 ms
/// of index work on this project's 2-core test machine (read-index updates of structured
/// requests cost up to ~2.5 µs per range), so a request of the largest size the limits
/// admit (2²⁴ runs) delays others by one slice at a time, not by seconds. A message that
/// arrives during long work waits a few slices (its connection's task and the reply's
/// writer run between them on a single-threaded server): 8,192-range slices gave pings of
/// 25 ms median, 110 ms worst behind huge read locks; 2,048 gave 7 ms and 36 ms.
pub const DEFAULT_WORK_SLICE: u64 = 1 << 11;

fn error(to: ClientId, tag: u64, code: ErrorCode, message: impl Into<String>) -> Outgoing {
    Outgoing {
        to,
        tag,
        reply: Reply::Error(WireError::new(code, message)),
    }
}

/// What a lapsed client is told, whatever it asks.
fn lapsed(lease_ms: u64) -> WireError {
    WireError::new(
        ErrorCode::LeaseExpired,
        format!(
            "this client was silent for more than the {lease_ms} ms lease while holding \
             locks; they were released and its requests are refused: reconnect"
        ),
    )
}

fn request_name(r: &Request) -> &'static str {
    match r {
        Request::LockNew { .. } => "LockNew",
        Request::LockMore { .. } => "LockMore",
        Request::LockRelease { .. } => "LockRelease",
        Request::Ping { .. } => "Ping",
        Request::Hello => "Hello",
        Request::Renew { .. } => "Renew",
        Request::Create { .. } => "Create",
        Request::Open { .. } => "Open",
        Request::Remove { .. } => "Remove",
        Request::DropObjects { .. } => "DropObjects",
        Request::Write { .. } => "Write",
        Request::Stage { .. } => "Stage",
        Request::Decide { .. } => "Decide",
        Request::Finish { .. } => "Finish",
        Request::Resolve { .. } => "Resolve",
        Request::Read { .. } => "Read",
        Request::Sync { .. } => "Sync",
        Request::ObjectSizes { .. } => "ObjectSizes",
        Request::SetObjectSize { .. } => "SetObjectSize",
        Request::Locate => "Locate",
        Request::Stats => "Stats",
        Request::AuthStart => "AuthStart",
        Request::Auth { .. } => "Auth",
        Request::DlmLock { .. } => "DlmLock",
        Request::DlmCancel { .. } => "DlmCancel",
        Request::DlmRelease { .. } => "DlmRelease",
        Request::SeqWrite { .. } => "SeqWrite",
        Request::VersionOpen { .. } => "VersionOpen",
        Request::VersionAssign { .. } => "VersionAssign",
        Request::VersionComplete { .. } => "VersionComplete",
        Request::VersionSnapshot { .. } => "VersionSnapshot",
        Request::VersionList { .. } => "VersionList",
        Request::VersionGcPlan { .. } => "VersionGcPlan",
        Request::VersionGcDone { .. } => "VersionGcDone",
        Request::NodePut { .. } => "NodePut",
        Request::NodeGet { .. } => "NodeGet",
        Request::NodeDrop { .. } => "NodeDrop",
        Request::NodeDropVersions { .. } => "NodeDropVersions",
        Request::Punch { .. } => "Punch",
        Request::VersionBase { .. } => "VersionBase",
    }
}

/// One of `client`'s waiting requests stopped waiting.
fn waited(waiting_of: &mut HashMap<ClientId, usize>, client: ClientId) {
    if let Some(n) = waiting_of.get_mut(&client) {
        *n -= 1;
        if *n == 0 {
            waiting_of.remove(&client);
        }
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

    /// Holds locks under client leases (see `lease`): the driver passes time in with
    /// `set_now`, calls `expire` periodically, fences each client it returns and then calls
    /// `release_lapsed`.
    pub fn with_leases(mut self, cfg: LeaseConfig) -> Self {
        self.leases = Some(Leases::new(cfg));
        self
    }

    /// Grants or releases at most `ranges` ranges per step (a message handled, or one call
    /// of `work`); what is left waits in the run queue. Tests and the simulator use tiny
    /// slices to interleave long requests with everything else.
    pub fn with_work_slice(mut self, ranges: u64) -> Self {
        self.slice = ranges.max(1);
        self
    }

    /// Negative controls only (the simulators outside this crate must prove their safety
    /// checks catch it): a server that grants without checking for conflicts. Never set in
    /// a real server.
    #[doc(hidden)]
    pub fn ignoring_conflicts_for_negative_control(mut self) -> Self {
        self.ignore_conflicts = true;
        self
    }

    /// Owners one write hull may name, 1 to `MAX_HULL_OWNERS` (the default); tests lower it
    /// so that grants inside interleaved hulls carve them (1: every interleaving carves), and
    /// the scale model's calibration to measure releases of one entry per range.
    pub fn with_hull_owner_limit(mut self, owners: usize) -> Self {
        self.hull_owners = owners.clamp(1, MAX_HULL_OWNERS);
        self
    }

    /// Ranges granted one by one before the rest up to the next other lock is granted at
    /// once (default `LEAP_AFTER`; tests lower it so that small requests leap too).
    pub fn with_leap_after(mut self, ranges: u64) -> Self {
        self.leap_after = ranges.max(1);
        self
    }

    /// Index entries one client may hold (default `MAX_LOCKS_PER_CLIENT`; tests lower it).
    pub fn with_client_entry_limit(mut self, entries: usize) -> Self {
        self.entries.client_limit = entries;
        self
    }

    /// Starts a step: a fresh slice of work.
    fn new_step(&mut self) {
        self.budget = if self.slice == 0 {
            DEFAULT_WORK_SLICE
        } else {
            self.slice
        };
    }

    /// Whether requests have work left over from earlier steps: the driver must call
    /// `work` (between messages, so long requests never hold the others up).
    pub fn has_work(&self) -> bool {
        !self.runnable.is_empty()
    }

    /// One step of left-over work: continues queued grants and releases, oldest first,
    /// until the slice is used up. Answers go to `out` as for `handle`.
    pub fn work(&mut self, out: &mut Vec<Outgoing>) {
        self.new_step();
        while self.budget > 0 {
            let Some(lock) = self.runnable.pop_front() else {
                break;
            };
            match self.requests.get(&lock).and_then(|r| r.pending) {
                Some(Pending::Granting(acq)) => {
                    self.requests.get_mut(&lock).expect("just seen").pending = None;
                    let outcome = self.grant(lock, acq.until());
                    self.settle(lock, acq, outcome, out);
                }
                Some(Pending::Releasing { .. }) => {
                    if !self.continue_release(lock, out) {
                        self.runnable.push_back(lock);
                        self.stats.sliced += 1;
                    }
                }
                Some(Pending::Waiting(_)) | None => {
                    debug_assert!(false, "{lock} queued to run with nothing to do");
                }
            }
        }
    }

    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// The lock table's part of a `Stats` answer.
    pub fn report(&self) -> ServerReport {
        let st = self.stats;
        ServerReport {
            lock_clients: self.per_client.values().filter(|&&n| n > 0).count() as u64,
            files: self.files.len() as u64,
            open_requests: self.requests.len() as u64,
            waiting: self.waiting as u64,
            index_entries: self.entries.total as u64,
            lease_ms: self.lease_ms().unwrap_or(0),
            leases_lapsed: st.lapses,
            requests_opened: st.requests_opened,
            ranges_granted: st.ranges_granted,
            releases: st.releases,
            waits: st.waits,
            changes_admitted: st.changes_admitted,
            changes_refused: st.changes_refused,
            dlm_resources: self.dlm.resources() as u64,
            dlm_locks: self.dlm.totals().0 as u64,
            dlm_waiting: self.dlm.totals().1 as u64,
            dlm_grants: self.dlm.stats().grants,
            dlm_early_revocations: self.dlm.stats().early_revocations,
            dlm_revocations: self.dlm.stats().revocations,
            ..ServerReport::default()
        }
    }

    /// Every DLM sequence number given from now on is at least `sn` (a restarted server:
    /// above every SN its data store logged).
    pub fn raise_dlm_floor(&mut self, sn: u64) {
        self.dlm.raise_floor(sn);
    }

    /// The data service cannot clean the extent cache of `(file, object)`: synchronize its
    /// writers (see `dlm::DlmTable::synchronize`).
    pub fn synchronize_object(&mut self, file: FileId, object: u32, out: &mut Vec<Outgoing>) {
        self.new_step();
        self.dlm.synchronize(file, object, out);
    }

    /// The cached-lock DLMs' counters.
    pub fn dlm_stats(&self) -> dlm::DlmStats {
        self.dlm.stats()
    }

    /// Index entries in use (write hulls + read ranges): what the memory limit counts.
    pub fn index_entries(&self) -> usize {
        self.entries.total
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
        self.new_step();
        // Without leases nothing needs to know (one lookup less per lock frame).
        let holds = self.leases.is_some() && self.holds_anything(client);
        if let Some(leases) = &mut self.leases {
            leases.heard(client, self.now, holds);
            if leases.is_lapsed(client) && !matches!(request, Request::Ping { .. }) {
                return out.push(Outgoing {
                    to: client,
                    tag,
                    reply: Reply::Error(lapsed(leases.duration_ms())),
                });
            }
        }
        match request {
            Request::Hello => out.push(Outgoing {
                to: client,
                tag,
                reply: self.session(client),
            }),
            Request::Renew {
                client: session,
                proof,
            } => {
                let reply = self.renew(session, proof);
                out.push(Outgoing {
                    to: client,
                    tag,
                    reply,
                });
            }
            Request::LockNew {
                file,
                mode,
                desc,
                wait,
            } => self.lock_new(client, tag, file, mode, desc, wait, out),
            Request::LockMore { lock, wait } => self.lock_more(client, tag, lock, wait, out),
            Request::LockRelease { lock, from } => self.lock_release(client, tag, lock, from, out),
            Request::Ping { nonce } => out.push(Outgoing {
                to: client,
                tag,
                reply: Reply::Pong { nonce },
            }),
            Request::DlmLock {
                file,
                object,
                policy,
                mode,
                range,
            } => self
                .dlm
                .lock(client, tag, file, object, policy, mode, range, out),
            Request::DlmCancel {
                file,
                object,
                id,
                downgrade,
            } => self
                .dlm
                .cancel(client, tag, file, object, id, downgrade, out),
            Request::DlmRelease { file, object, id } => {
                self.dlm.release(client, tag, file, object, id, out)
            }
            // A server that requires a token authenticates a connection before any frame
            // reaches this table; one that does not says so.
            Request::AuthStart => out.push(Outgoing {
                to: client,
                tag,
                reply: Reply::Done,
            }),
            // The driver adds what only it knows (connections, queues).
            Request::Stats => out.push(Outgoing {
                to: client,
                tag,
                reply: Reply::Stats(self.report()),
            }),
            other => out.push(error(
                client,
                tag,
                ErrorCode::Unsupported,
                format!("a lock server does not serve {}", request_name(&other)),
            )),
        }
    }

    /// A further acquire of an open request, refused while one waits or it is released.
    fn lock_more(
        &mut self,
        client: ClientId,
        tag: u64,
        lock: LockId,
        wait: Wait,
        out: &mut Vec<Outgoing>,
    ) {
        match self.owned(client, lock) {
            Err(e) => out.push(error(client, tag, e.code, e.message)),
            Ok(req) => match req.pending {
                None => self.acquire(lock, tag, wait, out),
                Some(Pending::Releasing { .. }) => out.push(error(
                    client,
                    tag,
                    ErrorCode::InvalidState,
                    format!("{lock} is being released"),
                )),
                Some(_) => out.push(error(
                    client,
                    tag,
                    ErrorCode::InvalidState,
                    format!("{lock} already has an acquire waiting"),
                )),
            },
        }
    }

    /// A release, whole (`from` None) or down to `from`; a whole release supersedes a
    /// partial one in progress.
    fn lock_release(
        &mut self,
        client: ClientId,
        tag: u64,
        lock: LockId,
        from: Option<u64>,
        out: &mut Vec<Outgoing>,
    ) {
        match self.owned(client, lock) {
            Err(e) => out.push(error(client, tag, e.code, e.message)),
            Ok(req) => match req.pending {
                Some(Pending::Releasing {
                    tag: partial,
                    to: Some(x),
                    orphan: false,
                }) if from.is_none() => self.supersede_release(lock, partial, x, tag, out),
                Some(Pending::Releasing { .. }) => out.push(error(
                    client,
                    tag,
                    ErrorCode::InvalidState,
                    format!("{lock} is already being released"),
                )),
                Some(_) if from.is_some() => out.push(error(
                    client,
                    tag,
                    ErrorCode::InvalidState,
                    format!("{lock} has an acquire waiting; only a full release can cancel it"),
                )),
                _ => self.release(lock, tag, from, false, out),
            },
        }
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
}
