//! Client lock protocols (Ching et al. §4, §5.1) as a state machine: `LockOp`.
//!
//! An operation is a set of sub-requests (see `plan`), each at one server. The client keeps,
//! for every sub-request still incomplete, the first byte it has not yet been granted
//! (`next_abs_offset`) in an ordered set: the paper's heap. Two kinds of round:
//!
//! * **optimistic**: send a non-blocking acquire to every incomplete sub-request at once and
//!   wait for all replies. Let `m` = min `next_abs_offset`. Every byte below `m` is then
//!   held. Any sub-request holding bytes at or above `m` (`last_abs_offset > m`) holds them
//!   out of order, so it is cut back to `m` with a partial release (and we wait for that).
//! * **two-phase**: send one blocking acquire to the sub-request with the smallest
//!   `next_abs_offset`, bounded by the second smallest (so it never holds beyond the next
//!   byte another server must grant), and wait for it.
//!
//! `TwoPhase` repeats two-phase rounds; `OneTry` does one optimistic round then two-phase
//! rounds; `AltTry` alternates, starting optimistic. An operation of a single sub-request
//! starts with a two-phase round under every protocol: holding nothing else, it may wait
//! at once, and a try that fails would only add a round trip before the same wait.
//!
//! **Starting with a wait.** Under contention an opening try fails: every server answers,
//! the out-of-order grants are cut back, and the client waits anyway. With
//! `Start::WaitFirst` a one-try or alt-try operation instead opens with the two-phase
//! round it would end up in (a blocking acquire at its first sub-request in order) and
//! tries the rest once that is granted: waiting clients queue at their first server, and
//! whoever holds it finds the rest free. `Contention` picks the start per file from what
//! the previous operations met. A try after the wait is still followed by truncation, so
//! the argument below is unchanged.
//!
//! **Tiers.** Bytes are ordered by (tier, offset), where a sub-request's `tier` is given by
//! its plan. Tier 0 everywhere is the paper's offset order. atomio's plans give each server
//! its own tier (`plan::server_tier`): sub-requests interleave finely in offset across
//! servers (stripe units; interval I/O's managers by rank group), and by server a blocked
//! client waits server by server, one round trip each, instead of one per interleaving,
//! and keeps what it got from earlier servers. Every client must give a byte the same tier
//! (a byte is always locked at the same server, and tiers are a function of the server).
//!
//! **Why no deadlock:** a client only ever *waits* (blocking acquire) for byte `x` while it
//! holds nothing at or above `x` in (tier, offset) order — the optimistic round's
//! out-of-order locks are released before any wait, and a blocking acquire is bounded by the
//! next byte owed elsewhere in its tier (or unbounded when that byte is in a later tier). So
//! in any chain "A waits for B" the waited-for keys strictly increase; no cycle is possible.
//! Non-blocking acquires never wait, so they cannot join a cycle.
//!
//! **Invariants:** at most one message is outstanding per sub-request; a round starts only
//! when no message is outstanding; `order` holds exactly the incomplete sub-requests, keyed
//! by their (tier, current `next_abs_offset`).

use crate::plan::SubRequest;
use atomio_layout::ServerId;
use atomio_proto::{
    ErrorCode, FileId, LockId, LockMode, LockProgress, Reply, Request, Wait, WireError,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Protocol {
    TwoPhase,
    OneTry,
    AltTry,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::TwoPhase, Protocol::OneTry, Protocol::AltTry];

    pub fn name(&self) -> &'static str {
        match self {
            Protocol::TwoPhase => "two-phase",
            Protocol::OneTry => "one-try",
            Protocol::AltTry => "alt-try",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!("unknown lock protocol '{s}' (expected two-phase, one-try or alt-try)")
            })
    }
}

/// A message the operation wants sent to `server`; its reply must come back to
/// `LockOp::on_reply` with the same `sub`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Send {
    pub server: ServerId,
    pub sub: u32,
    pub request: Request,
}

/// How an operation of several sub-requests opens (single sub-requests always wait).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Start {
    /// The protocol's own opening: one-try and alt-try try every sub-request at once.
    #[default]
    Try,
    /// Wait at the first sub-request in (tier, offset) order, then try the rest.
    WaitFirst,
}

/// Operations that open with a wait after one whose try failed, before a try is made
/// again to notice that the contention has passed.
pub const WAIT_FIRST_OPS: u32 = 16;

/// What one client has recently met on one file, and so how its next operation opens.
///
/// A try that fails (the operation then had to wait) makes the next `WAIT_FIRST_OPS`
/// operations open with a wait; each of them that needs no further wait counts one down;
/// then an operation tries again. Under steady contention that costs one failed try in
/// `WAIT_FIRST_OPS + 1` operations; without contention, nothing (no try fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contention {
    wait_first_left: u32,
    adapt: bool,
}

impl Default for Contention {
    fn default() -> Self {
        Self {
            wait_first_left: 0,
            adapt: true,
        }
    }
}

impl Contention {
    /// One that always opens with the protocol's own try (the paper's protocols as
    /// written; for comparisons).
    pub fn never_wait_first() -> Self {
        Self {
            wait_first_left: 0,
            adapt: false,
        }
    }

    /// `never_wait_first` when the environment says `ATOMIO_LOCK_WAIT_FIRST=0`, else the
    /// default.
    pub fn from_env() -> Self {
        match std::env::var("ATOMIO_LOCK_WAIT_FIRST").as_deref() {
            Ok("0") => Self::never_wait_first(),
            _ => Self::default(),
        }
    }

    /// How the next operation should open.
    pub fn start(&self) -> Start {
        if self.wait_first_left > 0 {
            Start::WaitFirst
        } else {
            Start::Try
        }
    }

    /// Learns from an operation that has finished acquiring (held or failed).
    pub fn observe(&mut self, op: &LockOp) {
        if !self.adapt || op.protocol == Protocol::TwoPhase || op.subs.len() < 2 {
            return; // it never tries: nothing to learn
        }
        let st = op.stats;
        let waited_after_try = match op.start {
            Start::Try => st.two_phase_rounds > 0,
            // Its opening wait is one two-phase round; a second means its try failed.
            Start::WaitFirst => st.two_phase_rounds > 1 || st.truncations > 0,
        };
        if waited_after_try {
            self.wait_first_left = WAIT_FIRST_OPS;
        } else {
            self.wait_first_left = self.wait_first_left.saturating_sub(1);
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Acquiring,
    /// Every byte is locked.
    Held,
    Releasing,
    Released,
    /// The operation failed; every lock it had obtained has been released.
    Failed(WireError),
}

/// Counters for benchmarks and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpStats {
    /// Messages sent (acquires and releases).
    pub messages: u64,
    pub optimistic_rounds: u64,
    pub two_phase_rounds: u64,
    /// Partial releases of out-of-order locks.
    pub truncations: u64,
}

#[derive(Debug)]
struct Sub {
    req: SubRequest,
    lock: Option<LockId>,
    last: u64,
    next: Option<u64>,
    busy: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Optimistic,
    Truncating,
    InOrder,
    Held,
    Releasing,
    Released,
    /// An error arrived; waiting for outstanding replies, then releasing everything.
    Failing,
    Failed,
}

/// One lock operation: acquire all its bytes, hold, release.
#[derive(Debug)]
pub struct LockOp {
    file: FileId,
    mode: LockMode,
    protocol: Protocol,
    start: Start,
    subs: Vec<Sub>,
    /// Incomplete sub-requests by (tier, `next_abs_offset`, index).
    order: BTreeSet<(u32, u64, u32)>,
    outstanding: usize,
    phase: Phase,
    error: Option<WireError>,
    stats: OpStats,
    faults: Faults,
    /// Sub-requests whose opening acquire was unanswered when the operation was abandoned.
    orphans: Vec<u32>,
}

/// Deliberate protocol bugs, for the simulator's negative controls only.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Faults {
    /// Keep out-of-order locks after an optimistic round (breaks deadlock freedom).
    pub skip_truncation: bool,
    /// Report `Held` right after the first optimistic round, complete or not (breaks safety).
    pub held_after_optimistic: bool,
}

impl LockOp {
    pub(crate) fn inject(&mut self, faults: Faults) {
        self.faults = faults;
    }

    /// Negative controls only (simulators outside this crate must prove their safety
    /// checks catch it): the operation reports `Held` right after its first optimistic
    /// round, complete or not.
    #[doc(hidden)]
    pub fn believe_held_after_optimistic_for_negative_control(&mut self) {
        self.faults.held_after_optimistic = true;
    }

    pub fn new(file: FileId, mode: LockMode, protocol: Protocol, plan: Vec<SubRequest>) -> Self {
        let order = plan
            .iter()
            .enumerate()
            .map(|(i, s)| (s.tier, s.first, i as u32))
            .collect();
        let subs = plan
            .into_iter()
            .map(|req| Sub {
                next: Some(req.first),
                req,
                lock: None,
                last: 0,
                busy: false,
            })
            .collect();
        Self {
            file,
            mode,
            protocol,
            start: Start::Try,
            subs,
            order,
            outstanding: 0,
            phase: Phase::Optimistic,
            error: None,
            orphans: Vec::new(),
            stats: OpStats::default(),
            faults: Faults::default(),
        }
    }

    /// Opens with `start` instead of the protocol's own try (see `Contention`).
    pub fn with_start(mut self, start: Start) -> Self {
        self.start = start;
        self
    }

    pub fn sub_requests(&self) -> usize {
        self.subs.len()
    }

    pub fn stats(&self) -> OpStats {
        self.stats
    }

    pub fn status(&self) -> Status {
        match self.phase {
            Phase::Optimistic | Phase::Truncating | Phase::InOrder | Phase::Failing => {
                Status::Acquiring
            }
            Phase::Held => Status::Held,
            Phase::Releasing => Status::Releasing,
            Phase::Released => Status::Released,
            Phase::Failed => {
                Status::Failed(self.error.clone().expect("failed ops keep their error"))
            }
        }
    }

    /// Starts acquiring.
    pub fn start(&mut self, out: &mut Vec<Send>) {
        match self.protocol {
            // One sub-request: the client holds nothing else, so waiting at once is
            // deadlock-free, and a conflict then costs one round trip, not a failed try
            // and a blocking one (contended single-server calls matched `bounding-extent`
            // only this way).
            Protocol::OneTry | Protocol::AltTry
                if self.subs.len() > 1 && self.start == Start::Try =>
            {
                self.optimistic_round(out)
            }
            _ => self.two_phase_round(out),
        }
    }

    /// Releases every lock. Only valid once `status()` is `Held`.
    pub fn release(&mut self, out: &mut Vec<Send>) {
        assert_eq!(
            self.phase,
            Phase::Held,
            "release called before the locks were held"
        );
        self.phase = Phase::Releasing;
        self.release_all(out);
    }

    /// After `abandon`: what frees this operation's locks at the servers still reachable
    /// (a failed server takes its own with it). Full releases of every request whose id is
    /// known go to `out`; returned are the sub-requests whose opening acquire is still
    /// unanswered — the driver must wait for each reply and release the id it names, or
    /// close that connection (the server then releases everything of this client).
    pub fn cleanup(&mut self, out: &mut Vec<Send>) -> Vec<(ServerId, u32)> {
        for (i, s) in self.subs.iter_mut().enumerate() {
            if let Some(lock) = s.lock.take() {
                out.push(Send {
                    server: s.req.server,
                    sub: i as u32,
                    request: Request::LockRelease { lock, from: None },
                });
            }
        }
        std::mem::take(&mut self.orphans)
            .into_iter()
            .map(|i| (self.subs[i as usize].req.server, i))
            .collect()
    }

    /// Gives up on a failed transport: no more replies will come. What the operation holds
    /// at servers still reachable is freed through `cleanup` (the driver's job); a failed
    /// server's locks go with it.
    pub fn abandon(&mut self, error: WireError) {
        self.outstanding = 0;
        for (i, s) in self.subs.iter_mut().enumerate() {
            if s.busy && s.lock.is_none() {
                // A request was opened (or is being) whose id we may never learn.
                self.orphans.push(i as u32);
            }
            s.busy = false;
        }
        self.error.get_or_insert(error);
        self.phase = Phase::Failed;
    }

    fn send(&mut self, i: u32, request: Request, out: &mut Vec<Send>) {
        let s = &mut self.subs[i as usize];
        debug_assert!(!s.busy, "one message per sub-request at a time");
        s.busy = true;
        self.outstanding += 1;
        self.stats.messages += 1;
        out.push(Send {
            server: s.req.server,
            sub: i,
            request,
        });
    }

    fn acquire_request(&self, i: u32, wait: Wait) -> Request {
        let s = &self.subs[i as usize];
        match s.lock {
            Some(lock) => Request::LockMore { lock, wait },
            None => Request::LockNew {
                file: self.file,
                mode: self.mode,
                desc: s.req.desc.to_wire(),
                wait,
            },
        }
    }

    fn optimistic_round(&mut self, out: &mut Vec<Send>) {
        self.phase = Phase::Optimistic;
        self.stats.optimistic_rounds += 1;
        let todo: Vec<u32> = self.order.iter().map(|&(_, _, i)| i).collect();
        for i in todo {
            let r = self.acquire_request(i, Wait::NonBlocking);
            self.send(i, r, out);
        }
        if self.outstanding == 0 {
            self.phase = Phase::Held;
        }
    }

    fn two_phase_round(&mut self, out: &mut Vec<Send>) {
        let mut it = self.order.iter();
        let Some(&(tier, _, i)) = it.next() else {
            self.phase = Phase::Held;
            return;
        };
        // Bounded by the next byte owed elsewhere in the same tier; a later tier's bytes
        // all come after every byte of this one.
        let wait = match it.next() {
            Some(&(t, bound, _)) if t == tier => Wait::Until(bound),
            _ => Wait::All,
        };
        self.phase = Phase::InOrder;
        self.stats.two_phase_rounds += 1;
        let r = self.acquire_request(i, wait);
        self.send(i, r, out);
    }

    /// Once the optimistic replies are in: cut back whatever is held out of order.
    fn end_optimistic(&mut self, out: &mut Vec<Send>) {
        let Some(&(min_tier, min_next, _)) = self.order.first() else {
            self.phase = Phase::Held;
            return;
        };
        if self.faults.held_after_optimistic {
            self.phase = Phase::Held;
            return;
        }
        if self.faults.skip_truncation {
            return self.two_phase_round(out);
        }
        self.phase = Phase::Truncating;
        for i in 0..self.subs.len() as u32 {
            let s = &self.subs[i as usize];
            // Everything held in a later tier is out of order; in the same tier, what is
            // held at or above `min_next`.
            let from = match s.req.tier.cmp(&min_tier) {
                std::cmp::Ordering::Less => continue,
                std::cmp::Ordering::Equal => min_next,
                std::cmp::Ordering::Greater => s.req.first,
            };
            if let (Some(lock), true) = (s.lock, s.last > from) {
                self.stats.truncations += 1;
                self.send(
                    i,
                    Request::LockRelease {
                        lock,
                        from: Some(from),
                    },
                    out,
                );
            }
        }
        if self.outstanding == 0 {
            self.two_phase_round(out);
        }
    }

    fn release_all(&mut self, out: &mut Vec<Send>) {
        for i in 0..self.subs.len() as u32 {
            if let Some(lock) = self.subs[i as usize].lock {
                self.send(i, Request::LockRelease { lock, from: None }, out);
            }
        }
        if self.outstanding == 0 {
            self.phase = if self.phase == Phase::Releasing {
                Phase::Released
            } else {
                Phase::Failed
            };
        }
    }

    fn update(&mut self, i: u32, p: LockProgress) -> Result<(), WireError> {
        let s = &mut self.subs[i as usize];
        match s.lock {
            Some(l) if l != p.lock => {
                return Err(WireError::new(
                    ErrorCode::Internal,
                    format!("server answered for {} instead of {l}", p.lock),
                ))
            }
            _ => s.lock = Some(p.lock),
        }
        if let Some(n) = s.next {
            self.order.remove(&(s.req.tier, n, i));
        }
        s.last = p.last_abs_offset;
        s.next = p.next_abs_offset;
        if let Some(n) = s.next {
            self.order.insert((s.req.tier, n, i));
        }
        Ok(())
    }

    /// Feeds the reply to the message sent for sub-request `sub`.
    pub fn on_reply(&mut self, sub: u32, reply: Reply, out: &mut Vec<Send>) {
        let Some(s) = self.subs.get_mut(sub as usize).filter(|s| s.busy) else {
            // A reply nobody asked for: a server bug or a confused driver. Record it.
            self.error.get_or_insert(WireError::new(
                ErrorCode::Internal,
                format!("unexpected reply for sub-request {sub}"),
            ));
            return;
        };
        s.busy = false;
        self.outstanding -= 1;
        let result = match reply {
            Reply::Lock(p)
                if matches!(
                    self.phase,
                    Phase::Optimistic | Phase::InOrder | Phase::Failing
                ) =>
            {
                self.update(sub, p)
            }
            Reply::Released(p) if self.phase == Phase::Truncating => self.update(sub, p),
            Reply::Released(_) if matches!(self.phase, Phase::Releasing | Phase::Failing) => {
                self.subs[sub as usize].lock = None;
                Ok(())
            }
            Reply::Error(e) => Err(e),
            other => Err(WireError::new(
                ErrorCode::Internal,
                format!("unexpected reply {other:?} in phase {:?}", self.phase),
            )),
        };
        if let Err(e) = result {
            self.error.get_or_insert(e);
            if self.phase != Phase::Releasing {
                self.phase = Phase::Failing;
            }
        }
        if self.outstanding > 0 {
            return;
        }
        match self.phase {
            Phase::Optimistic => self.end_optimistic(out),
            Phase::Truncating => self.two_phase_round(out),
            Phase::InOrder => {
                if self.order.is_empty() {
                    self.phase = Phase::Held;
                } else {
                    match self.protocol {
                        // One-try's one try, when it opened with a wait instead.
                        Protocol::OneTry
                            if self.start == Start::WaitFirst
                                && self.stats.optimistic_rounds == 0 =>
                        {
                            self.optimistic_round(out)
                        }
                        Protocol::TwoPhase | Protocol::OneTry => self.two_phase_round(out),
                        Protocol::AltTry => self.optimistic_round(out),
                    }
                }
            }
            Phase::Releasing => {
                self.phase = if self.error.is_some() {
                    Phase::Failed
                } else {
                    Phase::Released
                }
            }
            Phase::Failing => {
                if self.subs.iter().any(|s| s.lock.is_some()) {
                    self.release_all(out);
                } else {
                    self.phase = Phase::Failed;
                }
            }
            Phase::Held | Phase::Released | Phase::Failed => {}
        }
    }
}
