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

mod admission;
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

/// What the write index says about a range `w` that request `me` wants.
#[derive(Clone, Copy, Default)]
struct WriteCheck {
    /// The first byte of `w` another request's granted write bytes occupy.
    conflict: Option<u64>,
    /// The hull covering `w.start`, if any: (start, hull).
    covering: Option<(u64, Hull)>,
    /// The first hull start in `(w.start, w.end)`: a piece granted outside every hull ends
    /// there, so hulls stay disjoint.
    next_start: Option<u64>,
}

/// `owner`'s first granted byte in `[lo, hi)`: its description's, below its cursor.
fn granted_in(owner: &LockRequest, lo: u64, hi: u64) -> Option<u64> {
    let hi = hi.min(owner.cursor);
    if lo >= hi {
        return None;
    }
    owner.desc.first_at_or_after(lo).filter(|&b| b < hi)
}

/// Checks `w` against the write hulls it meets (see `WriteCheck`). Hulls are disjoint and
/// met in order, so the first hull with a conflict holds the first conflicting byte.
fn write_conflict(
    writes: &WriteHulls,
    others: &HashMap<LockId, LockRequest>,
    me: LockId,
    w: ByteRange,
) -> WriteCheck {
    let mut out = WriteCheck::default();
    for (start, hull) in writes.overlapping(w) {
        if start <= w.start {
            out.covering = Some((start, hull));
        } else if out.next_start.is_none() {
            out.next_start = Some(start);
        }
        let (lo, hi) = (w.start.max(start), w.end.min(hull.end));
        out.conflict = hull
            .owners()
            .iter()
            .filter(|&&o| o != me)
            .filter_map(|o| granted_in(&others[o], lo, hi))
            .min();
        if out.conflict.is_some() {
            break;
        }
    }
    out
}

/// The first byte at or after `pos` where another request's lock could be: the start of a
/// write hull or (for writers) of a read segment, or `pos` itself if one covers it.
/// `ignore_cross` is the simulator's fault: readers and writers do not see each other.
fn horizon(table: &FileTable, pos: u64, mode: LockMode, ignore_cross: bool) -> u64 {
    let see_writes = mode == LockMode::Write || !ignore_cross;
    let see_reads = mode == LockMode::Write && !ignore_cross;
    let mut h = MAX_OFFSET;
    if see_writes {
        if table.writes.covering(pos).is_some() {
            return pos;
        }
        h = table
            .writes
            .next_at_or_after(pos)
            .map_or(MAX_OFFSET, |(s, _)| s);
    }
    if see_reads {
        if let Some(b) = table.reads.first_overlap(ByteRange {
            start: pos,
            end: h.max(pos + 1),
        }) {
            h = h.min(b);
        }
    }
    h
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

    /// The lease length, if this server keeps leases.
    pub fn lease_ms(&self) -> Option<u64> {
        self.leases.as_ref().map(Leases::duration_ms)
    }

    /// The driver's clock (ms, monotonic); messages handled after this call happen at `now`.
    pub fn set_now(&mut self, now: u64) {
        self.now = self.now.max(now);
    }

    fn holds_anything(&self, client: ClientId) -> bool {
        self.per_client.get(&client).is_some_and(|&n| n > 0) || self.dlm.holds_anything(client)
    }

    /// Clients whose lease lapsed (silent past the lease while holding or waiting for
    /// locks) as of `set_now`. They keep their locks until `release_lapsed`: the driver
    /// must first make sure their later writes are refused (fencing).
    pub fn expire(&mut self) -> Vec<ClientId> {
        let Some(leases) = &mut self.leases else {
            return Vec::new();
        };
        let mut holders: Vec<ClientId> = self
            .per_client
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&c, _)| c)
            .collect();
        holders.extend(self.dlm.clients().filter(|&c| c != dlm::SERVER_SELF));
        holders.sort_unstable();
        holders.dedup();
        leases.expire(self.now, holders.into_iter())
    }

    /// Releases everything a lapsed (and fenced) client holds; its waiting acquires are
    /// answered `LeaseExpired`, so it learns why when it wakes up. It stays lapsed: its
    /// later lock requests are refused until it disconnects.
    pub fn release_lapsed(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        self.new_step();
        let waiting: Vec<u64> = self
            .requests
            .values()
            .filter(|r| r.owner == client)
            .filter_map(|r| match r.pending {
                Some(Pending::Waiting(a) | Pending::Granting(a)) => Some(a.tag),
                _ => None,
            })
            .collect();
        self.release_all(client, out);
        let mut waiting = waiting;
        waiting.extend(self.dlm.forget(client, out));
        self.stats.lapses += 1;
        let ms = self.lease_ms().unwrap_or(0);
        for tag in waiting {
            out.push(error(
                client,
                tag,
                ErrorCode::LeaseExpired,
                format!(
                    "silent for more than the {ms} ms lease: this client's locks were released"
                ),
            ));
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
                reply: match &self.leases {
                    Some(l) => Reply::Session {
                        client,
                        proof: l.proof(client),
                        lease_ms: l.duration_ms(),
                    },
                    None => Reply::Session {
                        client,
                        proof: 0,
                        lease_ms: 0,
                    },
                },
            }),
            Request::Renew {
                client: session,
                proof,
            } => {
                let holds = self.holds_anything(session);
                let reply = match &mut self.leases {
                    None => Reply::Renewed,
                    Some(l) if l.proof(session) != proof => Reply::Error(WireError::new(
                        ErrorCode::NotOwner,
                        format!("wrong proof for the lease of {session}"),
                    )),
                    Some(l) if l.renewable(session, self.now, holds) => {
                        l.heard(session, self.now, holds);
                        Reply::Renewed
                    }
                    Some(l) if l.is_lapsed(session) || holds => Reply::Error(WireError::new(
                        ErrorCode::LeaseExpired,
                        format!(
                            "the lease of {session} lapsed (more than {} ms without a \
                                 renewal); its locks were released",
                            l.duration_ms()
                        ),
                    )),
                    Some(_) => Reply::Error(WireError::new(
                        ErrorCode::NotFound,
                        format!("{session} has no session here (disconnected?)"),
                    )),
                };
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
            Request::LockMore { lock, wait } => match self.owned(client, lock) {
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
            },
            Request::LockRelease { lock, from } => match self.owned(client, lock) {
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
            },
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

    /// Releases everything a vanished client held or waited for.
    pub fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        self.new_step();
        self.release_all(client, out);
        self.dlm.forget(client, out);
        if let Some(l) = &mut self.leases {
            l.forget(client);
        }
    }

    /// Releases every request of `client`; replies to it are dropped, notifications to
    /// others kept.
    fn release_all(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        let mut mine: Vec<LockId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.owner == client)
            .map(|(&id, _)| id)
            .collect();
        mine.sort_unstable();
        // Its requests stop counting as its own now (a later session under the same id
        // starts empty), even those whose release continues in later steps.
        self.per_client.remove(&client);
        let mut scratch = Vec::new();
        for lock in mine {
            self.release(lock, 0, None, true, &mut scratch);
        }
        // Replies to the departed client are dropped; notifications to others are kept.
        out.extend(scratch.into_iter().filter(|o| o.to != client));
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
                last: 0,
                held: match mode {
                    LockMode::Write => Held::Write(BTreeSet::new()),
                    LockMode::Read => Held::Read(Chain::new()),
                },
                pending: None,
            },
        );
        *self.per_client.entry(client).or_default() += 1;
        self.files.entry(file).or_default().requests += 1;
        self.stats.requests_opened += 1;
        self.acquire(lock, tag, wait, out);
    }

    /// Extends `lock`'s granted prefix as `wait` allows and replies now, or parks it.
    fn acquire(&mut self, lock: LockId, tag: u64, wait: Wait, out: &mut Vec<Outgoing>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let acq = Acquire { tag, wait, seq };
        let outcome = self.grant(lock, acq.until());
        self.settle(lock, acq, outcome, out);
    }

    /// After a grant attempt for `acq` (which is not pending any more): answers it, queues
    /// it as a waiter, or queues it to continue in a later step.
    fn settle(&mut self, lock: LockId, acq: Acquire, outcome: Grant, out: &mut Vec<Outgoing>) {
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let owner = req.owner;
        match outcome {
            Grant::Paused => {
                req.pending = Some(Pending::Granting(acq));
                self.runnable.push_back(lock);
                self.stats.sliced += 1;
            }
            Grant::Blocked(at) if acq.wait != Wait::NonBlocking => {
                if self.waiting >= MAX_WAITING_REQUESTS {
                    return out.push(error(
                        owner,
                        acq.tag,
                        ErrorCode::LimitExceeded,
                        format!(
                            "{MAX_WAITING_REQUESTS} requests are already waiting at this server"
                        ),
                    ));
                }
                let mine = self.waiting_of.entry(owner).or_default();
                if *mine >= MAX_WAITING_PER_CLIENT {
                    return out.push(error(
                        owner,
                        acq.tag,
                        ErrorCode::LimitExceeded,
                        format!(
                            "this client already has {MAX_WAITING_PER_CLIENT} requests waiting \
                             at this server, its limit"
                        ),
                    ));
                }
                *mine += 1;
                req.pending = Some(Pending::Waiting(acq));
                let file = req.file;
                self.files
                    .get_mut(&file)
                    .expect("open request has a table")
                    .waiters
                    .insert((at, acq.seq), lock);
                self.waiting += 1;
                self.stats.waits += 1;
            }
            Grant::Full => out.push(error(
                owner,
                acq.tag,
                ErrorCode::LimitExceeded,
                format!("the server holds {MAX_LOCKS_PER_SERVER} lock entries, its limit"),
            )),
            Grant::ClientFull => out.push(error(
                owner,
                acq.tag,
                ErrorCode::LimitExceeded,
                format!(
                    "this client holds {} lock entries (byte ranges) at this server, its \
                     limit; what is granted stays granted (release it, or lock fewer \
                     separate ranges: a coarser or bounding-extent lock)",
                    self.entries.client_limit
                ),
            )),
            Grant::Reached | Grant::Complete | Grant::Blocked(_) => out.push(Outgoing {
                to: owner,
                tag: acq.tag,
                reply: Reply::Lock(req.progress(lock)),
            }),
        }
    }

    /// Grants `lock`'s bytes in offset order from its cursor until a conflict, the bound
    /// `until` (exclusive) or the end of the request.
    fn grant(&mut self, lock: LockId, until: Option<u64>) -> Grant {
        // The request is taken out of the map so the others can be read (and, for hull
        // carves, updated) while it is being extended.
        let mut req = self.requests.remove(&lock).expect("caller checked");
        let table = self
            .files
            .get_mut(&req.file)
            .expect("open request has a table");
        let mut ranges = 0u64;
        let mut checked = 0u64;
        let mut owners = 0u64;
        let before = req.held.entries();
        let outcome = if req.next.is_none() {
            Grant::Complete
        } else {
            grant_into(
                &mut req,
                lock,
                until.unwrap_or(MAX_OFFSET),
                table,
                &mut self.requests,
                &mut self.entries,
                (&mut ranges, &mut checked, &mut owners),
                &mut self.budget,
                self.ignore_conflicts,
                match self.hull_owners {
                    0 => MAX_HULL_OWNERS,
                    n => n,
                },
                match self.leap_after {
                    0 => LEAP_AFTER,
                    n => n,
                },
            )
        };
        self.entries.moved(req.owner, before, req.held.entries());
        self.requests.insert(lock, req);
        self.stats.ranges_granted += ranges;
        self.stats.ranges_checked += checked;
        self.stats.owners_checked += owners;
        outcome
    }

    /// Starts releasing `lock` down to `from` (`None`: all of it, closing the request),
    /// cancelling a pending acquire; what does not fit in this step continues in `work`.
    /// An `orphan`'s client is gone: it is not answered.
    fn release(
        &mut self,
        lock: LockId,
        tag: u64,
        from: Option<u64>,
        orphan: bool,
        out: &mut Vec<Outgoing>,
    ) {
        self.stats.releases += 1;
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let owner = req.owner;
        let queued = match req.pending.take() {
            None => false,
            Some(Pending::Waiting(acq)) => {
                let at = req.next.expect("waiting requests have a next byte");
                self.files
                    .get_mut(&req.file)
                    .expect("open request has a table")
                    .waiters
                    .remove(&(at, acq.seq));
                self.waiting -= 1;
                waited(&mut self.waiting_of, owner);
                out.push(error(
                    owner,
                    acq.tag,
                    ErrorCode::InvalidState,
                    format!("{lock} was released while its acquire waited"),
                ));
                false
            }
            Some(Pending::Granting(acq)) => {
                out.push(error(
                    owner,
                    acq.tag,
                    ErrorCode::InvalidState,
                    format!("{lock} was released while its acquire waited"),
                ));
                true
            }
            // Only a departing client's cleanup meets a release in progress: it goes on,
            // unanswered, and down to nothing (a partial one would leave an orphan
            // holding bytes for ever).
            Some(Pending::Releasing { tag, .. }) => {
                debug_assert!(orphan && from.is_none());
                req.pending = Some(Pending::Releasing {
                    tag,
                    to: None,
                    orphan: true,
                });
                return;
            }
        };
        req.pending = Some(Pending::Releasing {
            tag,
            to: from,
            orphan,
        });
        if !queued && !self.continue_release(lock, out) {
            self.runnable.push_back(lock);
            self.stats.sliced += 1;
        }
    }

    /// A full release (tag `tag`) arrives while a partial one down to `x` (tag `partial`)
    /// is still being carried out — a client abandoning an operation frees everything it
    /// knows of. The partial release is answered now as if done (the client then believes
    /// it holds less than it does until the slices finish, which is never unsafe) and the
    /// release goes on down to nothing.
    fn supersede_release(
        &mut self,
        lock: LockId,
        partial: u64,
        x: u64,
        tag: u64,
        out: &mut Vec<Outgoing>,
    ) {
        self.stats.releases += 1;
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let progress = if req.cursor > x {
            LockProgress {
                lock,
                last_abs_offset: req.desc.last_before(x, 0).map_or(0, |b| b + 1),
                next_abs_offset: req.desc.first_at_or_after(x),
            }
        } else {
            req.progress(lock)
        };
        out.push(Outgoing {
            to: req.owner,
            tag: partial,
            reply: Reply::Released(progress),
        });
        req.pending = Some(Pending::Releasing {
            tag,
            to: None,
            orphan: false,
        });
    }

    /// Releases as much of a `Pending::Releasing` request as the step's budget allows, from
    /// the top; returns whether the release is complete (and answered).
    fn continue_release(&mut self, lock: LockId, out: &mut Vec<Outgoing>) -> bool {
        let req = &self.requests[&lock];
        let Some(Pending::Releasing { tag, to, orphan }) = req.pending else {
            unreachable!("continue_release on a request that is not releasing")
        };
        let left = req.held.above(to.unwrap_or(0));
        if left as u64 <= self.budget {
            self.budget -= left as u64;
            self.requests.get_mut(&lock).expect("just seen").pending = None;
            self.release_now(lock, tag, to, orphan, out);
            return true;
        }
        let k = self.budget as usize;
        if k > 0 {
            self.budget = 0;
            let cut = req.held.cut_below_top(k);
            // One slice of a longer release: nobody is answered yet.
            self.release_now(lock, tag, Some(cut), true, out);
        }
        false
    }

    /// Releases `lock` down to `from`, or all of it and closes the request. `quiet`: nobody
    /// is answered (a slice of a longer release, or an orphan's — whose closing then counts
    /// for no client).
    fn release_now(
        &mut self,
        lock: LockId,
        tag: u64,
        from: Option<u64>,
        quiet: bool,
        out: &mut Vec<Outgoing>,
    ) {
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let table = self
            .files
            .get_mut(&req.file)
            .expect("open request has a table");
        let owner = req.owner;
        let file = req.file;
        let before = req.held.entries();
        // What was freed, as ranges in increasing order (hulls may include bytes that were
        // not the request's own; re-examining a waiter there is merely wasted effort).
        let mut freed: Vec<ByteRange> = Vec::new();
        match from {
            None => {
                match &mut req.held {
                    Held::Write(starts) => {
                        for &s in starts.iter() {
                            let h = table.writes.leave(s, lock);
                            freed.push(ByteRange {
                                start: s,
                                end: h.end,
                            });
                        }
                        starts.clear();
                    }
                    Held::Read(chain) => {
                        freed = chain.take_all();
                        for &r in &freed {
                            table.reads.remove(r);
                        }
                    }
                }
                if !quiet {
                    out.push(Outgoing {
                        to: owner,
                        tag,
                        reply: Reply::Released(LockProgress {
                            lock,
                            last_abs_offset: 0,
                            next_abs_offset: None,
                        }),
                    });
                    if let Some(n) = self.per_client.get_mut(&owner) {
                        *n -= 1;
                        if *n == 0 {
                            self.per_client.remove(&owner);
                        }
                    }
                }
                self.requests.remove(&lock);
                table.requests -= 1;
                self.entries.total -= before;
                self.stats.entries_released += before as u64;
                self.entries.moved(owner, before, 0);
            }
            Some(x) => {
                freed = cut_held(req, lock, table, x);
                self.entries.total = self.entries.total + req.held.entries() - before;
                self.stats.entries_released += (before - req.held.entries()) as u64;
                self.entries.moved(owner, before, req.held.entries());
                if !quiet {
                    out.push(Outgoing {
                        to: owner,
                        tag,
                        reply: Reply::Released(req.progress(lock)),
                    });
                }
            }
        }
        if self.files.get(&file).is_some_and(|t| t.requests == 0) {
            let t = self.files.remove(&file).expect("just checked");
            debug_assert!(t.writes.is_empty() && t.reads.is_empty() && t.waiters.is_empty());
        } else if !freed.is_empty() {
            self.reexamine(file, &freed, out);
        }
    }

    /// Retries, in arrival order, the blocked requests waiting on a byte in `freed`.
    fn reexamine(&mut self, file: FileId, freed: &[ByteRange], out: &mut Vec<Outgoing>) {
        let table = self.files.get_mut(&file).expect("caller checked");
        if table.waiters.is_empty() {
            return;
        }
        let mut candidates: Vec<(u64, u64, LockId)> = if table.waiters.len() <= freed.len() {
            table
                .waiters
                .iter()
                .filter(|((at, _), _)| {
                    let i = freed.partition_point(|r| r.end <= *at);
                    freed.get(i).is_some_and(|r| r.start <= *at)
                })
                .map(|(&(at, seq), &id)| (seq, at, id))
                .collect()
        } else {
            freed
                .iter()
                .flat_map(|r| table.waiters.range((r.start, 0)..(r.end, 0)))
                .map(|(&(at, seq), &id)| (seq, at, id))
                .collect()
        };
        candidates.sort_unstable();
        candidates.dedup();
        for (seq, at, lock) in candidates {
            self.files
                .get_mut(&file)
                .expect("still open")
                .waiters
                .remove(&(at, seq));
            let req = self.requests.get_mut(&lock).expect("waiters are open");
            let Some(Pending::Waiting(acq)) = req.pending else {
                unreachable!("waiters are waiting")
            };
            let owner = req.owner;
            let outcome = self.grant(lock, acq.until());
            if let Grant::Blocked(at2) = outcome {
                // Still waiting (now perhaps for a later byte), in its old place in line.
                self.files
                    .get_mut(&file)
                    .expect("still open")
                    .waiters
                    .insert((at2, seq), lock);
                continue;
            }
            self.waiting -= 1;
            waited(&mut self.waiting_of, owner);
            self.requests.get_mut(&lock).expect("open").pending = None;
            self.settle(lock, acq, outcome, out);
        }
    }

    /// Every open request: (lock, owner, owed an answer?). For the simulator's leak reports.
    pub fn open(&self) -> Vec<(LockId, ClientId, bool)> {
        let mut v: Vec<_> = self
            .requests
            .iter()
            .map(|(&id, r)| (id, r.owner, r.pending.is_some()))
            .collect();
        v.sort_unstable_by_key(|x| x.0);
        v
    }

    /// Every granted range: (lock, owner, mode, range). For tests and the simulator.
    pub fn granted(&self) -> Vec<(LockId, ClientId, LockMode, ByteRange)> {
        let mut v: Vec<_> = self
            .requests
            .iter()
            .flat_map(|(&id, r)| {
                r.granted_ranges()
                    .into_iter()
                    .map(move |g| (id, r.owner, r.mode, g))
            })
            .collect();
        v.sort_unstable_by_key(|x| (x.3, x.0));
        v
    }

    /// Verifies every invariant in the module docs; O(everything). Returns the first
    /// violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.dlm.check()?;
        let mut entries = 0usize;
        let mut waiting = 0usize;
        let mut per_client: HashMap<ClientId, usize> = HashMap::new();
        let mut waiting_per: HashMap<ClientId, usize> = HashMap::new();
        let mut entries_of: HashMap<ClientId, usize> = HashMap::new();
        let mut per_file: HashMap<FileId, usize> = HashMap::new();
        // Granted ranges keyed by file first: locks on different files never conflict.
        let mut all: Vec<(FileId, ByteRange, LockMode, LockId)> = Vec::new();
        let mut to_run: Vec<LockId> = Vec::new();
        for (&id, r) in &self.requests {
            if r.held.entries() > 0 {
                *entries_of.entry(r.owner).or_default() += r.held.entries();
            }
            if !matches!(r.pending, Some(Pending::Releasing { orphan: true, .. })) {
                *per_client.entry(r.owner).or_default() += 1;
            }
            if matches!(
                r.pending,
                Some(Pending::Granting(_) | Pending::Releasing { .. })
            ) {
                to_run.push(id);
            }
            *per_file.entry(r.file).or_default() += 1;
            let table = self
                .files
                .get(&r.file)
                .ok_or_else(|| format!("{id} has no file table"))?;
            let granted = r.granted_ranges();
            let want_last = granted.last().map_or(0, |g| g.end);
            if r.last != want_last {
                return Err(format!(
                    "{id}: last {} but granted bytes end at {want_last}",
                    r.last
                ));
            }
            let want_next = r.desc.first_at_or_after(r.cursor);
            if r.next != want_next {
                return Err(format!("{id}: next {:?}, expected {:?}", r.next, want_next));
            }
            match &r.held {
                Held::Write(starts) => {
                    if r.mode != LockMode::Write {
                        return Err(format!("{id}: read request holds write hulls"));
                    }
                    let mut hulls = Vec::new();
                    for &s in starts {
                        let h = table
                            .writes
                            .get(s)
                            .ok_or_else(|| format!("{id}: hull at {s} missing"))?;
                        if !h.has(id) {
                            return Err(format!("{id}: hull at {s} is not its own"));
                        }
                        if s >= r.cursor {
                            return Err(format!(
                                "{id}: hull at {s} starts above cursor {}",
                                r.cursor
                            ));
                        }
                        hulls.push(ByteRange {
                            start: s,
                            end: h.end,
                        });
                    }
                    let hulls = RangeList::from_ranges(hulls);
                    for g in &granted {
                        let i = hulls.first_ending_after(g.start);
                        if !hulls
                            .as_slice()
                            .get(i)
                            .is_some_and(|h| h.start <= g.start && g.end <= h.end)
                        {
                            return Err(format!("{id}: granted {g:?} lies outside its hulls"));
                        }
                    }
                    entries += starts.len();
                }
                Held::Read(chain) => {
                    if r.mode != LockMode::Read {
                        return Err(format!("{id}: write request holds read ranges"));
                    }
                    let chain: Vec<ByteRange> = chain.iter().copied().collect();
                    if chain.windows(2).any(|w| w[0].end > w[1].start) {
                        return Err(format!("{id}: chain not sorted/disjoint {chain:?}"));
                    }
                    if RangeList::from_ranges(chain.clone())
                        != RangeList::from_ranges(granted.clone())
                    {
                        return Err(format!(
                            "{id}: chain {chain:?} but granted bytes {granted:?}"
                        ));
                    }
                    for &g in &chain {
                        if table.reads.count_at(g.start) == 0 {
                            return Err(format!("{id}: read lock {g:?} missing from the index"));
                        }
                    }
                    entries += chain.len();
                }
            }
            for g in granted {
                all.push((r.file, g, r.mode, id));
            }
            if let Some(Pending::Waiting(b)) = &r.pending {
                waiting += 1;
                *waiting_per.entry(r.owner).or_default() += 1;
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
                let conflict = write_conflict(&table.writes, &self.requests, id, probe)
                    .conflict
                    .is_some()
                    || (r.mode == LockMode::Write
                        && !self.ignore_conflicts
                        && table.reads.first_overlap(probe).is_some());
                if !conflict {
                    return Err(format!("{id} waits at {at}, which nothing holds"));
                }
            }
        }
        all.sort_unstable_by_key(|x| (x.0, x.1));
        if !self.ignore_conflicts {
            for (i, a) in all.iter().enumerate() {
                for b in &all[i + 1..] {
                    if b.0 != a.0 || b.1.start >= a.1.end {
                        break;
                    }
                    if a.3 != b.3 && (a.2 == LockMode::Write || b.2 == LockMode::Write) {
                        return Err(format!("conflicting grants {a:?} and {b:?}"));
                    }
                }
            }
        }
        for (f, t) in &self.files {
            t.reads.check()?;
            if per_file.get(f).copied().unwrap_or(0) != t.requests || t.requests == 0 {
                return Err(format!("{f}: request count {} is wrong", t.requests));
            }
            let mut prev_end = 0;
            for (s, h) in t.writes.iter() {
                if s < prev_end {
                    return Err(format!("{f}: hull at {s} overlaps the previous one"));
                }
                prev_end = h.end;
                let owners = h.owners();
                if owners
                    .iter()
                    .enumerate()
                    .any(|(i, o)| owners[..i].contains(o))
                {
                    return Err(format!("{f}: hull at {s} names an owner twice"));
                }
                for o in owners {
                    match self.requests.get(o).map(|r| &r.held) {
                        Some(Held::Write(starts)) if starts.contains(&s) => {}
                        _ => return Err(format!("{f}: hull at {s} is not listed by {o}")),
                    }
                }
            }
        }
        let queued: usize = self.files.values().map(|t| t.waiters.len()).sum();
        if entries != self.entries.total || waiting != self.waiting || queued != waiting {
            return Err(format!(
                "counters: entries {entries}/{} waiting {waiting}/{} queued {queued}",
                self.entries.total, self.waiting
            ));
        }
        if per_client != self.per_client {
            return Err("per-client request counts are wrong".into());
        }
        if entries_of != self.entries.of_client {
            return Err(format!(
                "per-client entry counts are wrong: {entries_of:?} in the tables, {:?} counted",
                self.entries.of_client
            ));
        }
        if waiting_per != self.waiting_of {
            return Err("per-client waiting counts are wrong".into());
        }
        let mut queued_to_run: Vec<LockId> = self.runnable.iter().copied().collect();
        queued_to_run.sort_unstable();
        to_run.sort_unstable();
        if queued_to_run != to_run {
            return Err(format!(
                "run queue {queued_to_run:?} but requests with work left {to_run:?}"
            ));
        }
        Ok(())
    }
}

/// The grant loop (see the module docs for the fast and slow paths).
#[allow(clippy::too_many_arguments)]
fn grant_into(
    req: &mut LockRequest,
    lock: LockId,
    limit: u64,
    table: &mut FileTable,
    others: &mut HashMap<LockId, LockRequest>,
    entries: &mut Entries,
    (ranges, checked, owners): (&mut u64, &mut u64, &mut u64),
    budget: &mut u64,
    ignore_conflicts: bool,
    hull_owners: usize,
    leap_after: u64,
) -> Grant {
    let mode = req.mode;
    // What this request may still add before its client reaches its share.
    let room = entries.client_limit.saturating_sub(entries.of(req.owner));
    let held_before = req.held.entries();
    let desc = &req.desc;
    let mut src = desc.cursor();
    src.seek(req.cursor);
    let mut horizon = horizon(table, req.cursor, mode, ignore_conflicts);
    // Write bytes granted on the fast path, not yet in the index.
    let mut run: Option<ByteRange> = None;
    // The next horizon, when a slow-path grant already knows it.
    let mut known_horizon: Option<u64> = None;
    // The rest of a range cut at a hull boundary, checked next as a range of its own.
    let mut carry: Option<ByteRange> = None;
    // Write ranges granted on the fast path in a row (see `leap`).
    let mut streak = 0u64;
    let outcome = loop {
        let Some(r) = carry.take().or_else(|| src.next_range()) else {
            req.cursor = MAX_OFFSET;
            req.next = None;
            break Grant::Complete;
        };
        if r.start >= limit {
            req.cursor = limit.max(req.cursor);
            req.next = Some(r.start);
            break Grant::Reached;
        }
        if *budget == 0 {
            // `r` is the request's first byte at or after the cursor (the source was
            // sought there and is clipped): the state is exactly a granted prefix.
            req.next = Some(r.start);
            break Grant::Paused;
        }
        *budget -= 1;
        let want = ByteRange {
            start: r.start,
            end: r.end.min(limit),
        };
        let slow = want.end > horizon;
        let (end, conflict, inside) = if !slow {
            // Fast path: nobody else holds anything in [cursor, horizon).
            match mode {
                LockMode::Write => {
                    if run.is_none() {
                        if let Some(full) =
                            full(entries.total, 1, req.held.entries() - held_before, room)
                        {
                            req.next = Some(want.start);
                            break full;
                        }
                    }
                    run = Some(run.map_or(want, |x| ByteRange {
                        start: x.start,
                        end: want.end,
                    }));
                }
                LockMode::Read => {
                    if let Some(full) =
                        full(entries.total, 1, req.held.entries() - held_before, room)
                    {
                        req.next = Some(want.start);
                        break full;
                    }
                    add_read(table, &mut req.held, want, &mut entries.total);
                }
            }
            (want.end, None, None)
        } else {
            if let Some(x) = run.take() {
                add_write_hull(table, &mut req.held, lock, x, &mut entries.total);
            }
            // The hull this piece lies in, when the request owns it (with others).
            let mut inside: Option<Hull> = None;
            let check = if mode == LockMode::Write || !ignore_conflicts {
                write_conflict(&table.writes, others, lock, want)
            } else {
                WriteCheck::default()
            };
            let mut conflict = check.conflict;
            if mode == LockMode::Write && !ignore_conflicts {
                if let Some(b) = table.reads.first_overlap(want) {
                    conflict = Some(conflict.map_or(b, |c| c.min(b)));
                }
            }
            let mut end = conflict.unwrap_or(want.end);
            if mode == LockMode::Write {
                // A write piece stays inside one hull or between hulls (the index stays
                // disjoint); the rest of the range is checked as a range of its own.
                let stop = match check.covering {
                    Some((_, h)) => h.end,
                    None => check.next_start.unwrap_or(MAX_OFFSET),
                };
                if stop < end {
                    end = stop;
                    conflict = None;
                }
            }
            if end > want.start {
                if let Some(full) = full(entries.total, 2, req.held.entries() - held_before, room) {
                    req.next = Some(want.start);
                    break full;
                }
                let piece = ByteRange {
                    start: want.start,
                    end,
                };
                match (mode, check.covering) {
                    // Inside a hull this request already owns: its bytes there are
                    // recorded by its cursor alone.
                    (LockMode::Write, Some((_, h))) if h.has(lock) => inside = Some(h),
                    // Inside another request's hull (interleaved patterns): join it.
                    (LockMode::Write, Some((s, h))) if h.owners().len() < hull_owners => {
                        table.writes.join(s, lock);
                        write_starts(&mut req.held).insert(s);
                        entries.total += 1;
                        inside = Some(h);
                    }
                    (LockMode::Write, Some((s, h))) => {
                        // No room for another owner: cut the piece out of the hull. Past
                        // `piece`, no write hull starts before the remainder's start, which
                        // is the next horizon when no reader could be in between.
                        let rest = carve_hull(table, others, (s, h), piece, entries);
                        new_write_hull(table, &mut req.held, lock, piece, &mut entries.total);
                        if let Some(rs) = rest.filter(|_| table.reads.is_empty()) {
                            known_horizon = Some(rs);
                        }
                    }
                    (LockMode::Write, None) => {
                        add_write_hull(table, &mut req.held, lock, piece, &mut entries.total)
                    }
                    (LockMode::Read, _) => {
                        add_read(table, &mut req.held, piece, &mut entries.total)
                    }
                }
            }
            (end, conflict, inside)
        };
        if end > want.start {
            *ranges += 1;
            *checked += u64::from(slow);
            req.last = end;
        }
        req.cursor = end;
        if let Some(at) = conflict {
            req.next = Some(at);
            break Grant::Blocked(at);
        }
        if end < want.end {
            carry = Some(ByteRange {
                start: end,
                end: r.end,
            });
        } else if want.end < r.end {
            // The bound cut this range: the rest waits for a later acquire.
            req.next = Some(want.end);
            break Grant::Reached;
        }
        if !slow && mode == LockMode::Write && end == r.end && !ignore_conflicts {
            streak += 1;
            let bound = horizon.min(limit).min(desc.end_bound());
            if streak >= leap_after && bound > req.cursor && *budget > 0 {
                // Nobody else holds anything below the horizon: the request's bytes up to
                // it join the run at once.
                leap(desc, &mut src, (&mut req.cursor, &mut req.last), bound);
                if let Some(x) = run.as_mut() {
                    x.end = req.last;
                }
                *budget -= 1;
                *ranges += 1;
                streak = 0;
            }
        } else {
            streak = 0;
        }
        if let Some(h) = inside.filter(|_| {
            carry.is_none() && end == r.end && !ignore_conflicts && table.reads.is_empty()
        }) {
            let walked = walk_shared_hull(
                (&mut req.cursor, &mut req.last),
                desc,
                &mut src,
                lock,
                h,
                (limit, leap_after),
                others,
                budget,
            );
            *ranges += walked.granted;
            *checked += walked.granted;
            *owners += walked.owners_checked;
            carry = walked.rest;
        }
        if slow {
            horizon = known_horizon
                .take()
                .unwrap_or_else(|| self::horizon(table, req.cursor, mode, ignore_conflicts));
        }
    };
    if let Some(x) = run.take() {
        add_write_hull(table, &mut req.held, lock, x, &mut entries.total);
    }
    outcome
}

/// Ranges granted one by one (on the fast path, or in a shared hull with no other owner to
/// check) before the rest up to the bound is granted at once by `leap`: a leap costs a
/// binary search of ~20–60 seeks, which a few ranges do not repay.
const LEAP_AFTER: u64 = 16;

/// Grants every byte of a writer's description in `[cursor, bound)` at once (nobody else
/// holds any there): its cursor moves to `bound`, `last` to one past its last byte below it,
/// and its source past it. O(log · depth) instead of one step per range.
fn leap(
    desc: &ValidDesc,
    src: &mut DescCursor<'_>,
    (cursor, last): (&mut u64, &mut u64),
    bound: u64,
) {
    if let Some(x) = desc.last_before(bound, *cursor) {
        *last = x + 1;
    }
    *cursor = bound;
    src.seek(bound);
}

/// What `walk_shared_hull` did.
struct Walked {
    /// Ranges granted.
    granted: u64,
    /// Other owners' walkers the granted ranges were checked against, summed.
    owners_checked: u64,
    /// The range it stopped at (taken from the source), for the caller's checks.
    rest: Option<ByteRange>,
}

/// Grants a writer's next ranges inside hull `h`, which it owns with other requests
/// (interleaved patterns: neighbours' rows of one subarray), checking each against the
/// other owners' descriptions walked alongside: no index lookups, no hash lookups, no
/// seeks from the root. The other owners' granted bytes in `h` are exactly their
/// descriptions' bytes there below their cursors, and nobody else has any there (hulls are
/// disjoint and name every owner). Stops, handing the range back, at the first range that
/// leaves the hull, reaches `limit`, may conflict (the caller checks it precisely), or when
/// the budget is spent. The caller makes sure no read lock exists in the file.
#[allow(clippy::too_many_arguments)]
fn walk_shared_hull(
    (cursor, last): (&mut u64, &mut u64),
    desc: &ValidDesc,
    src: &mut DescCursor<'_>,
    me: LockId,
    h: Hull,
    (limit, leap_after): (u64, u64),
    others: &HashMap<LockId, LockRequest>,
    budget: &mut u64,
) -> Walked {
    // Owners whose whole access provably shares no byte with this one's (block-partitioned
    // subarrays: `GridBox`) need no walk.
    let mine = desc.access().and_then(GridBox::of);
    let apart = |q: &LockRequest| {
        mine.as_ref().is_some_and(|m| {
            q.desc
                .access()
                .and_then(GridBox::of)
                .is_some_and(|b| grid_box::boxes_disjoint(m, &b))
        })
    };
    // Per other owner: its cursor over its description, its range at or after ours, and
    // its granted prefix's end.
    let mut walkers: Vec<(DescCursor<'_>, Option<ByteRange>, u64)> = h
        .owners()
        .iter()
        .filter(|&&o| o != me)
        .map(|o| &others[o])
        .filter(|q| !apart(q))
        .map(|q| {
            let mut c = q.desc.cursor();
            c.seek(*cursor);
            let first = c.next_range();
            (c, first, q.cursor)
        })
        .collect();
    let mut granted = 0;
    let mut owners_checked = 0;
    while *budget > 0 {
        if walkers.is_empty() && granted >= leap_after {
            // Nobody else's bytes can be in this hull's rest: take it at once.
            let bound = h.end.min(limit).min(desc.end_bound());
            if bound > *cursor {
                leap(desc, src, (cursor, last), bound);
                *budget -= 1;
                granted += 1;
            }
            return Walked {
                granted,
                owners_checked,
                rest: None,
            };
        }
        let Some(n) = src.next_range() else {
            return Walked {
                granted,
                owners_checked,
                rest: None,
            };
        };
        let clear = n.end <= h.end
            && n.end <= limit
            && walkers.iter_mut().all(|(c, cur, top)| {
                while let Some(x) = *cur {
                    if x.end > n.start {
                        break;
                    }
                    *cur = c.next_range();
                }
                cur.is_none_or(|x| x.start.max(n.start) >= n.end.min(*top))
            });
        if !clear {
            return Walked {
                granted,
                owners_checked,
                rest: Some(n),
            };
        }
        *budget -= 1;
        granted += 1;
        owners_checked += walkers.len() as u64;
        *cursor = n.end;
        *last = n.end;
    }
    Walked {
        granted,
        owners_checked,
        rest: None,
    }
}

/// Releases `req`'s granted bytes at or above `x` from the indexes and moves its cursor
/// back; returns what was freed, in increasing order.
fn cut_held(req: &mut LockRequest, lock: LockId, table: &mut FileTable, x: u64) -> Vec<ByteRange> {
    let mut freed = Vec::new();
    match &mut req.held {
        Held::Write(starts) => {
            let above = starts.split_off(&x);
            if let Some(&s) = starts.last() {
                let h = table.writes.get(s).expect("listed hulls exist");
                if h.end > x {
                    // A shared hull keeps its bounds: this request's bytes there end at its
                    // cursor, which moves back below.
                    if h.is_only(lock) {
                        table.writes.set_end(s, x);
                    }
                    freed.push(ByteRange {
                        start: x,
                        end: h.end,
                    });
                }
            }
            for s in above {
                let h = table.writes.leave(s, lock);
                freed.push(ByteRange {
                    start: s,
                    end: h.end,
                });
            }
        }
        Held::Read(chain) => {
            let cut = chain.partition_point(|r| r.end <= x);
            let mut tail = chain.split_off(cut);
            if let Some(first) = tail.first_mut() {
                if first.start < x {
                    let kept = ByteRange {
                        start: first.start,
                        end: x,
                    };
                    table.reads.remove(*first);
                    table.reads.add(kept);
                    chain.push(kept);
                    first.start = x;
                } else {
                    table.reads.remove(*first);
                }
            }
            for r in tail.iter().skip(1) {
                table.reads.remove(*r);
            }
            freed = tail;
        }
    }
    if req.cursor > x {
        req.cursor = x;
        match &req.held {
            // The chain is exactly the granted bytes, and a freed range starting at `x`
            // means `x` is the request's own byte: no walk of the description (which would
            // cost a sliced release of millions of runs a seek per slice).
            Held::Read(chain) => {
                req.last = chain.last().map_or(0, |r| r.end);
                req.next = if freed.first().is_some_and(|r| r.start == x) {
                    Some(x)
                } else {
                    req.desc.first_at_or_after(x)
                };
            }
            Held::Write(_) => {
                req.next = req.desc.first_at_or_after(x);
                req.last = req.desc.last_before(x, 0).map_or(0, |b| b + 1);
            }
        }
    }
    freed
}

/// `Some` limit a grant would pass by adding `n` entries: the server's (with `total` in use)
/// or the client's (this request added `added` of the `room` its client had).
fn full(total: usize, n: usize, added: usize, room: usize) -> Option<Grant> {
    if total + n > MAX_LOCKS_PER_SERVER {
        Some(Grant::Full)
    } else if added + n > room {
        Some(Grant::ClientFull)
    } else {
        None
    }
}

fn add_read(table: &mut FileTable, held: &mut Held, r: ByteRange, entries: &mut usize) {
    table.reads.add(r);
    if let Held::Read(chain) = held {
        chain.push(r);
    }
    *entries += 1;
}

/// Records granted write bytes `r` (above every hull the request has): extends the request's
/// last hull when no other hull lies between, else starts a new one.
fn add_write_hull(
    table: &mut FileTable,
    held: &mut Held,
    lock: LockId,
    r: ByteRange,
    entries: &mut usize,
) {
    if let Some(&tail) = write_starts(held).last() {
        let h = table.writes.get(tail).expect("listed hulls exist");
        debug_assert!(h.end <= r.start);
        // A shared hull is not stretched: its other owners would check their later grants
        // there against this request for nothing.
        if h.is_only(lock)
            && table
                .writes
                .next_after(tail)
                .is_none_or(|(s, _)| s >= r.end)
        {
            table.writes.set_end(tail, r.end);
            return;
        }
    }
    new_write_hull(table, held, lock, r, entries);
}

/// Records granted write bytes `r` as a hull of their own (another request's hull lies
/// between them and the request's last one).
fn new_write_hull(
    table: &mut FileTable,
    held: &mut Held,
    lock: LockId,
    r: ByteRange,
    entries: &mut usize,
) {
    table.writes.insert(r.start, Hull::new(r.end, lock));
    write_starts(held).insert(r.start);
    *entries += 1;
}

/// A write request's hull starts.
fn write_starts(held: &mut Held) -> &mut BTreeSet<u64> {
    match held {
        Held::Write(starts) => starts,
        Held::Read(_) => unreachable!("write grants go to write requests"),
    }
}

/// Before granting write bytes `w` inside the hull `(s, h)`, none of whose owners has a
/// byte there, when the hull has no room for another owner: cuts `w` out of it so hulls
/// stay disjoint. The part below `w` keeps the entry and its owners (or goes, if empty);
/// the part above starts at the owners' first granted byte past `w`, if any, names only
/// the owners with granted bytes in it (so a hull never starts above an owner's cursor),
/// and its start is returned.
fn carve_hull(
    table: &mut FileTable,
    others: &mut HashMap<LockId, LockRequest>,
    (s, h): (u64, Hull),
    w: ByteRange,
    entries: &mut Entries,
) -> Option<u64> {
    debug_assert!(s <= w.start && w.end <= h.end);
    let mut above: Vec<LockId> = Vec::new();
    let mut rest: Option<u64> = None;
    for o in h.owners() {
        if let Some(b) = granted_in(&others[o], w.end, h.end) {
            above.push(*o);
            rest = Some(rest.map_or(b, |r| r.min(b)));
        }
    }
    let below = s < w.start;
    if below {
        table.writes.set_end(s, w.start);
    } else {
        table.writes.remove(s);
    }
    if let Some(rs) = rest {
        let mut upper = Hull::new(h.end, above[0]);
        for &o in &above[1..] {
            upper.add(o);
        }
        table.writes.insert(rs, upper);
    }
    // The entries are the owners' (they go when the owners release), counted in their
    // shares though this request caused them.
    for o in h.owners() {
        let owner = others.get_mut(o).expect("hulls have owners");
        let starts = write_starts(&mut owner.held);
        let (before, mut after) = (1usize, 1usize);
        if !below {
            starts.remove(&s);
            after -= 1;
        }
        if let Some(rs) = rest.filter(|_| above.contains(o)) {
            starts.insert(rs);
            after += 1;
        }
        entries.total = entries.total + after - before;
        entries.moved(owner.owner, before, after);
    }
    rest
}
