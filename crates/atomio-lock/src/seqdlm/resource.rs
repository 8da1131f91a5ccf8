//! One cached-lock resource (one stripe), sans-IO: the traditional DLMs of Chen et al. §II
//! (`dlm-basic`, `dlm-lustre`) and SeqDLM (§III) as one state machine with switches.
//!
//! Clients cache granted locks and give them back only when asked (a *revocation*
//! callback, `Out::Revoke`): the holder answers (`revoked`: the lock is now CANCELING — no
//! new I/O under it), flushes its dirty data, then releases. A holder may hold back the
//! flush of a CANCELING NBW lock (nobody early grant serves waits for its release); a
//! request that does have to wait for a CANCELING lock's release *hurries* its holder once
//! (another `Out::Revoke` for the same lock). Requests are served in arrival
//! order (the head waits; nobody overtakes it), and a grant's range is *expanded*: greedily
//! to the first conflicting granted lock after it (or EOF), or — Lustre's policy — at most
//! 32 MiB past the request once more than 32 locks are granted.
//!
//! SeqDLM adds (each a switch, for the paper's ablations):
//! * **early grant** — an NBW/BW request is granted beside conflicting NBW locks as soon as
//!   they are CANCELING, before their data are flushed (Table II's N/Y);
//! * **early revocation** — a grant that conflicts with a request queued behind it is sent
//!   already CANCELING (the revocation rides on the grant: no round trip);
//! * **sequence numbers** — the resource's SN is given to every grant and incremented by
//!   every *write* grant, so write grants are ordered by unique SNs (data carry them; data
//!   servers apply by SN whatever the arrival order); a read grant carries the SN below
//!   which every write was granted before it;
//! * **conversion** — a request that conflicts only with its own client's GRANTED locks is
//!   granted *upgraded* (Fig. 9) over their hull, absorbing them (first revoking other
//!   clients' locks the upgraded mode conflicts with) — unless a revocation of one is on
//!   its way (its holder may be giving it back already; found by the DLM simulation). The client re-tags their cached data
//!   with the new SN, which is safe only because nobody wrote their bytes since they were
//!   granted; a CANCELING own lock may have been early-granted over, so it is never
//!   absorbed — it blocks until released, like anyone's; a CANCELING lock may be *downgraded* by its
//!   holder (BW/PW → NBW, PW → PR) so conflicting writers can be granted early.
//!
//! **Invariants** (`check`): for any two overlapping granted locks, the newer is compatible
//! with the older's current mode and state (Table II, with or without early grant); write
//! grants' SNs strictly increase with grant order and are below the resource's SN; a read
//! grant's SN is at most the SN of any write granted after it; the queue's head is blocked
//! by another client's lock (or, upgraded, by one); revocations are outstanding only for
//! GRANTED locks; without SeqDLM's switches only PR and PW are granted.

use super::modes::{Mode, State};
use atomio_layout::{ByteRange, MAX_OFFSET};
use atomio_proto::ClientId;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How far a grant's range is expanded past the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expand {
    /// Exactly the request (datatype locking does not expand).
    None,
    /// To the first conflicting granted lock after it, or EOF (`dlm-basic`, SeqDLM).
    Greedy,
    /// Greedy, but at most `max_past` bytes past the request's end once more than
    /// `crowded` locks are granted (Lustre: 32 MiB, 32).
    Lustre { crowded: usize, max_past: u64 },
}

impl Expand {
    pub const LUSTRE: Expand = Expand::Lustre {
        crowded: 32,
        max_past: 32 << 20,
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub expand: Expand,
    pub early_grant: bool,
    pub early_revocation: bool,
    /// Upgrading (a conflict with one's own lock) and downgrading (of CANCELING locks).
    pub conversion: bool,
    /// Beyond the paper: early revocation also when the requested range overlaps
    /// another client's lock that is already CANCELING — the range is being written by
    /// several clients right now, so this grant would be revoked as soon as the next
    /// writer asks. The paper revokes early only when a conflicting request is already
    /// queued; at full speed the queue is often empty at the instant of a grant (early
    /// grant empties it), and the next writer then pays a revocation round trip.
    pub contention_revocation: bool,
}

impl Config {
    /// The traditional DLM of §II-A (PR and PW only).
    pub const DLM_BASIC: Config = Config {
        expand: Expand::Greedy,
        early_grant: false,
        early_revocation: false,
        conversion: false,
        contention_revocation: false,
    };
    pub const DLM_LUSTRE: Config = Config {
        expand: Expand::LUSTRE,
        ..Config::DLM_BASIC
    };
    pub const SEQDLM: Config = Config {
        expand: Expand::Greedy,
        early_grant: true,
        early_revocation: true,
        conversion: true,
        contention_revocation: true,
    };

    /// A traditional DLM: only read and write (PR, PW) locks.
    pub fn traditional(&self) -> bool {
        !self.early_grant
            && !self.early_revocation
            && !self.conversion
            && !self.contention_revocation
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GrantId(pub u64);

/// A client's own name for one request (echoed in its grant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqId(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub client: ClientId,
    pub mode: Mode,
    pub range: ByteRange,
    pub state: State,
    pub sn: u64,
}

/// What the resource tells clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    /// `req` is granted as `id`; `absorbed`: the client's own locks this grant replaces
    /// (an upgrade; their cached data now belong to it).
    Grant {
        to: ClientId,
        req: ReqId,
        id: GrantId,
        grant: Grant,
        absorbed: Vec<GrantId>,
    },
    /// Give `id` back: answer `revoked`, flush, then `release`.
    Revoke { to: ClientId, id: GrantId },
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    req: ReqId,
    client: ClientId,
    mode: Mode,
    range: ByteRange,
}

/// Why a call was refused (a client's mistake; the state is unchanged).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    #[error("no granted lock {0:?} of this client")]
    Unknown(GrantId),
    #[error("mode {0} is not served by this lock manager")]
    Mode(Mode),
    #[error("an empty range")]
    Empty,
    #[error("{from} cannot be downgraded to {to} (or the lock is not CANCELING)")]
    Downgrade { from: Mode, to: Mode },
}

#[derive(Debug)]
pub struct Resource {
    cfg: Config,
    /// The SN the next grant gets; every write grant increments it.
    sn: u64,
    next_grant: u64,
    granted: BTreeMap<GrantId, Grant>,
    queue: VecDeque<Waiting>,
    /// Revocations sent and not yet answered.
    revoking: BTreeSet<GrantId>,
    /// CANCELING locks whose holder was hurried (asked again to give them back: a request
    /// that must wait for their release is blocked by them).
    hurried: BTreeSet<GrantId>,
    /// Negative control for tests: NBW/BW see GRANTED NBW locks as compatible too (early
    /// grant without waiting for CANCELING).
    pub fault_grant_over_granted: bool,
}

impl Resource {
    pub fn new(cfg: Config) -> Self {
        Self::with_first_sn(cfg, 0)
    }

    /// A resource whose first grant gets SN `sn` (a server makes a dropped resource again
    /// above every SN it gave before: SNs of one object never repeat).
    pub fn with_first_sn(cfg: Config, sn: u64) -> Self {
        Self {
            cfg,
            sn,
            next_grant: 0,
            granted: BTreeMap::new(),
            queue: VecDeque::new(),
            revoking: BTreeSet::new(),
            hurried: BTreeSet::new(),
            fault_grant_over_granted: false,
        }
    }

    pub fn config(&self) -> Config {
        self.cfg
    }

    pub fn granted(&self) -> impl Iterator<Item = (GrantId, &Grant)> + '_ {
        self.granted.iter().map(|(&id, g)| (id, g))
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The SN the next grant gets (every SN given so far is below it).
    pub fn next_sn(&self) -> u64 {
        self.sn
    }

    /// No lock granted and no request waiting.
    pub fn is_idle(&self) -> bool {
        self.granted.is_empty() && self.queue.is_empty()
    }

    /// Drops every lock and waiting request of `client` (it disconnected, or its lease
    /// lapsed and it was fenced); returns the requests that were waiting.
    pub fn forget(&mut self, client: ClientId, out: &mut Vec<Out>) -> Vec<ReqId> {
        let waiting: Vec<ReqId> = self
            .queue
            .iter()
            .filter(|w| w.client == client)
            .map(|w| w.req)
            .collect();
        self.queue.retain(|w| w.client != client);
        let mine: Vec<GrantId> = self
            .granted
            .iter()
            .filter(|(_, g)| g.client == client)
            .map(|(&id, _)| id)
            .collect();
        for id in mine {
            self.granted.remove(&id);
            self.revoking.remove(&id);
            self.hurried.remove(&id);
        }
        self.pump(out);
        waiting
    }

    /// The smallest SN of an unreleased write lock overlapping `range` (the data server's
    /// mSN: extents with SNs below it can no longer be overwritten by a late flush).
    pub fn min_unreleased_write_sn(&self, range: ByteRange) -> Option<u64> {
        self.granted
            .values()
            .filter(|g| g.mode.is_write() && g.range.overlaps(&range))
            .map(|g| g.sn)
            .min()
    }

    fn compatible(&self, new: Mode, held: &Grant) -> bool {
        Mode::compatible(new, held.mode, held.state, self.cfg.early_grant)
            || (self.fault_grant_over_granted
                && matches!((new, held.mode), (Mode::Nbw | Mode::Bw, Mode::Nbw)))
    }

    /// A client asks for `mode` over `range`.
    pub fn request(
        &mut self,
        client: ClientId,
        req: ReqId,
        mode: Mode,
        range: ByteRange,
        out: &mut Vec<Out>,
    ) -> Result<(), ResourceError> {
        if range.is_empty() {
            return Err(ResourceError::Empty);
        }
        if self.cfg.traditional() && !matches!(mode, Mode::Pr | Mode::Pw) {
            return Err(ResourceError::Mode(mode));
        }
        self.queue.push_back(Waiting {
            req,
            client,
            mode,
            range,
        });
        self.pump(out);
        Ok(())
    }

    /// The holder answered a revocation: the lock is CANCELING (no new I/O under it).
    pub fn revoked(
        &mut self,
        client: ClientId,
        id: GrantId,
        out: &mut Vec<Out>,
    ) -> Result<(), ResourceError> {
        let g = self.own_mut(client, id)?;
        g.state = State::Canceling;
        self.revoking.remove(&id);
        self.pump(out);
        Ok(())
    }

    /// The holder of a CANCELING lock downgrades it (Fig. 9) before flushing.
    pub fn downgrade(
        &mut self,
        client: ClientId,
        id: GrantId,
        to: Mode,
        out: &mut Vec<Out>,
    ) -> Result<(), ResourceError> {
        let conversion = self.cfg.conversion;
        let g = self.own_mut(client, id)?;
        if !conversion || g.state != State::Canceling || !g.mode.may_downgrade_to(to) {
            return Err(ResourceError::Downgrade { from: g.mode, to });
        }
        g.mode = to;
        self.pump(out);
        Ok(())
    }

    /// The holder gives the lock back (its data flushed).
    pub fn release(
        &mut self,
        client: ClientId,
        id: GrantId,
        out: &mut Vec<Out>,
    ) -> Result<(), ResourceError> {
        self.own_mut(client, id)?;
        self.granted.remove(&id);
        self.revoking.remove(&id);
        self.hurried.remove(&id);
        self.pump(out);
        Ok(())
    }

    fn own_mut(&mut self, client: ClientId, id: GrantId) -> Result<&mut Grant, ResourceError> {
        self.granted
            .get_mut(&id)
            .filter(|g| g.client == client)
            .ok_or(ResourceError::Unknown(id))
    }

    /// What granting `head` now would take: its (possibly upgraded) mode and range, the
    /// client's own locks it would absorb, and the other locks that block it.
    fn plan_head(&self, head: &Waiting) -> (Mode, ByteRange, Vec<GrantId>, Vec<GrantId>) {
        let mut mode = head.mode;
        let mut range = head.range;
        let mut own = Vec::new();
        if self.cfg.conversion {
            // To a fixpoint: an upgraded mode or a grown hull may conflict with more of
            // the client's own locks.
            loop {
                let more: Vec<GrantId> = self
                    .granted
                    .iter()
                    .filter(|(id, g)| {
                        // A lock whose revocation is on its way is being given back: its
                        // holder may already be canceling and flushing it, so it cannot
                        // be absorbed (it blocks like anyone's until released).
                        g.client == head.client
                            && g.state == State::Granted
                            && !self.revoking.contains(*id)
                            && !own.contains(*id)
                            && g.range.overlaps(&range)
                            && !self.compatible(mode, g)
                    })
                    .map(|(&id, _)| id)
                    .collect();
                if more.is_empty() {
                    break;
                }
                for id in more {
                    let g = &self.granted[&id];
                    mode = mode.upgrade(g.mode);
                    range = hull(range, g.range);
                    own.push(id);
                }
            }
        }
        let blockers = self
            .granted
            .iter()
            .filter(|(id, g)| {
                !own.contains(id) && g.range.overlaps(&range) && !self.compatible(mode, g)
            })
            .map(|(&id, _)| id)
            .collect();
        (mode, range, own, blockers)
    }

    /// Grants from the head of the queue while it can be granted; a blocked head gets its
    /// blockers revoked (once each) and everyone behind it waits.
    fn pump(&mut self, out: &mut Vec<Out>) {
        while let Some(&head) = self.queue.front() {
            let (mode, range, own, blockers) = self.plan_head(&head);
            if !blockers.is_empty() {
                for id in blockers {
                    let g = &self.granted[&id];
                    let ask = match g.state {
                        State::Granted => self.revoking.insert(id),
                        // Its holder may be holding back the flush (write-back): tell it
                        // someone waits for the release.
                        State::Canceling => self.hurried.insert(id),
                    };
                    if ask {
                        out.push(Out::Revoke { to: g.client, id });
                    }
                }
                return;
            }
            self.queue.pop_front();
            for id in &own {
                self.granted.remove(id);
                self.revoking.remove(id);
                self.hurried.remove(id);
            }
            // Write-shared right now: another client's lock over the requested bytes is
            // already being given back.
            let contended = self.cfg.contention_revocation
                && mode.is_write()
                && self.granted.values().any(|g| {
                    g.client != head.client
                        && g.state == State::Canceling
                        && g.mode.is_write()
                        && g.range.overlaps(&range)
                });
            let range = self.expanded(mode, range);
            let sn = self.sn;
            if mode.is_write() {
                self.sn += 1;
            }
            // Early revocation: a grant someone queued behind already conflicts with is
            // sent CANCELING.
            let state = if contended
                || self.cfg.early_revocation
                    && self.queue.iter().any(|w| {
                        w.range.overlaps(&range)
                            && !Mode::compatible(w.mode, mode, State::Granted, false)
                            && !(self.cfg.conversion && w.client == head.client)
                    }) {
                State::Canceling
            } else {
                State::Granted
            };
            let id = GrantId(self.next_grant);
            self.next_grant += 1;
            let grant = Grant {
                client: head.client,
                mode,
                range,
                state,
                sn,
            };
            self.granted.insert(id, grant);
            out.push(Out::Grant {
                to: head.client,
                req: head.req,
                id,
                grant,
                absorbed: own,
            });
        }
    }

    /// `range` grown past its end as the policy allows: up to the first granted lock after
    /// it that a lock of `mode` would conflict with (or EOF).
    fn expanded(&self, mode: Mode, range: ByteRange) -> ByteRange {
        let mut end = match self.cfg.expand {
            Expand::None => return range,
            Expand::Greedy => MAX_OFFSET,
            Expand::Lustre { crowded, max_past } if self.granted.len() > crowded => {
                range.end.saturating_add(max_past).min(MAX_OFFSET)
            }
            Expand::Lustre { .. } => MAX_OFFSET,
        };
        for g in self.granted.values() {
            if !self.compatible(mode, g) && g.range.end > range.end && g.range.start < end {
                // Every lock overlapping the request is compatible (or was absorbed); one
                // that starts inside it but reaches past its end caps at the request.
                end = end.min(g.range.start.max(range.end));
            }
        }
        ByteRange {
            start: range.start,
            end,
        }
    }

    /// Verifies the module's invariants; O(granted² + queue · granted).
    pub fn check(&self) -> Result<(), String> {
        let all: Vec<(GrantId, &Grant)> = self.granted().collect();
        let mut last_write_sn: Option<u64> = None;
        for (i, &(a_id, a)) in all.iter().enumerate() {
            if self.cfg.traditional() && !matches!(a.mode, Mode::Pr | Mode::Pw) {
                return Err(format!("{a_id:?} is {} in a traditional DLM", a.mode));
            }
            if a.range.is_empty() {
                return Err(format!("{a_id:?} has an empty range"));
            }
            if a.mode.is_write() {
                if last_write_sn.is_some_and(|s| s >= a.sn) || a.sn >= self.sn {
                    return Err(format!("write {a_id:?} has SN {} out of order", a.sn));
                }
                last_write_sn = Some(a.sn);
            }
            for &(b_id, b) in &all[i + 1..] {
                if a.range.overlaps(&b.range)
                    && !Mode::compatible(b.mode, a.mode, a.state, self.cfg.early_grant)
                {
                    return Err(format!(
                        "{b_id:?} ({} {:?}) overlaps {a_id:?} ({} {:?}, {:?}) but conflicts",
                        b.mode, b.range, a.mode, a.range, a.state
                    ));
                }
                if !a.mode.is_write() && b.mode.is_write() && b.sn < a.sn {
                    return Err(format!("read {a_id:?} has SN above a later write {b_id:?}"));
                }
            }
        }
        for id in &self.revoking {
            match self.granted.get(id) {
                Some(g) if g.state == State::Granted => {}
                _ => return Err(format!("revocation of {id:?} outstanding but not GRANTED")),
            }
        }
        for id in &self.hurried {
            match self.granted.get(id) {
                Some(g) if g.state == State::Canceling => {}
                _ => return Err(format!("{id:?} hurried but not CANCELING")),
            }
        }
        if let Some(head) = self.queue.front() {
            if self.plan_head(head).3.is_empty() {
                return Err(format!("the queue's head {:?} is not blocked", head.req));
            }
        }
        Ok(())
    }
}

fn hull(a: ByteRange, b: ByteRange) -> ByteRange {
    ByteRange {
        start: a.start.min(b.start),
        end: a.end.max(b.end),
    }
}
