//! The lock service inside the model: the product's `LockServer` (server side) and
//! `LockOp` (client side) run for real, and each step is charged what the calibration
//! measured for the work it did.
//!
//! A server step costs the message's transport CPU (and the batch's pick-up if it is the
//! first of one), the table's work (per request or release, per range granted — the
//! table's own counter says how many, at the rate of the request's kind: explicit list or
//! structured pattern), the decoding of explicit ranges, and a send per reply (to the
//! caller, and to waiters a release wakes). A client step costs the transport CPU of what
//! it receives and sends, the protocol's own work per message, and per explicit range it
//! plans.
//!
//! **Invariants:** nothing here decides anything the state machines do not; costs depend
//! only on what they did (deterministic); a reply for an operation the client no longer
//! runs (a detached release's answer) is charged and ignored.

use crate::costs::Costs;
use crate::engine::{ActorId, Ns, Out};
use crate::held::Holders;
use atomio_layout::ServerId;
use atomio_lock::{
    Contention, LockOp, LockServer, Outgoing, Protocol, Send, ServerStats, Status, SubRequest,
};
use atomio_proto::{ClientId, FileId, LockDesc, LockId, LockMode, Reply, Request};
use std::collections::HashMap;

/// One lock server of the model.
#[derive(Debug)]
pub struct SimServer {
    pub table: LockServer,
    work_queued: bool,
    /// Negative control: this server grants without checking conflicts.
    pub faulty: bool,
    /// Whether each open request is a structured pattern (what its ranges cost).
    patterns: HashMap<LockId, bool>,
    /// New requests whose lock id is not known yet: (client, tag) → pattern.
    opening: HashMap<(u64, u64), bool>,
    id: ServerId,
    /// Scratch for a step's replies (kept to reuse its allocation).
    replies: Vec<Outgoing>,
}

fn ns(x: f64) -> Ns {
    x.max(0.0).round() as Ns
}

/// What a table step did between two snapshots of its counters.
struct IndexWork {
    /// Ranges granted on the fast path.
    fast: f64,
    /// Ranges checked one by one (past the horizon: interleaved writers).
    checked: f64,
    /// Other owners those were checked against, summed.
    owners: f64,
    /// Index entries its releases removed.
    released: f64,
}

impl IndexWork {
    fn between(before: &ServerStats, after: &ServerStats) -> Self {
        let checked = after.ranges_checked - before.ranges_checked;
        let granted = after.ranges_granted - before.ranges_granted;
        IndexWork {
            fast: (granted - checked) as f64,
            checked: checked as f64,
            owners: (after.owners_checked - before.owners_checked) as f64,
            released: (after.entries_released - before.entries_released) as f64,
        }
    }

    /// Its CPU, `range` per fast range.
    fn cost(&self, l: &crate::costs::LockCosts, range: f64) -> f64 {
        self.fast * range
            + self.checked * l.server_checked_range_ns
            + self.owners * l.server_owner_check_ns
            + self.released * l.server_entry_release_ns
    }
}

/// Explicit ranges a request carries (POSIX and list methods; a pattern counts none).
pub fn explicit_ranges(request: &Request) -> u64 {
    match request {
        Request::LockNew {
            desc: LockDesc::Ranges(r),
            ..
        } => r.len() as u64,
        _ => 0,
    }
}

impl SimServer {
    pub fn new(id: ServerId, faulty: bool) -> Self {
        let table = LockServer::with_id(id);
        Self {
            table: if faulty {
                table.ignoring_conflicts_for_negative_control()
            } else {
                table
            },
            work_queued: false,
            faulty,
            patterns: HashMap::new(),
            opening: HashMap::new(),
            id,
            replies: Vec::new(),
        }
    }

    /// Learns lock ids from replies; whether any request that progressed is a pattern.
    fn learn(&mut self, out: &[Outgoing]) -> bool {
        let mut pattern = false;
        for o in out {
            if let Reply::Lock(p) = &o.reply {
                if let Some(k) = self.opening.remove(&(o.to.0, o.tag)) {
                    self.patterns.insert(p.lock, k);
                }
                pattern |= self.patterns.get(&p.lock).copied().unwrap_or(false);
            }
        }
        pattern
    }

    /// Handles one lock message from `client`; the replies go to `out`.
    pub fn handle(
        &mut self,
        costs: &Costs,
        client: u32,
        tag: u64,
        request: Request,
        first: bool,
        out: &mut Vec<Outgoing>,
    ) -> Ns {
        let explicit = explicit_ranges(&request) as f64;
        let (release, mut pattern) = match &request {
            Request::LockNew { desc, .. } => {
                let p = matches!(desc, LockDesc::Pattern(_));
                self.opening.insert((u64::from(client), tag), p);
                (false, p)
            }
            Request::LockMore { lock, .. } => {
                (false, self.patterns.get(lock).copied().unwrap_or(false))
            }
            Request::LockRelease { lock, from } => {
                if from.is_none() {
                    self.patterns.remove(lock);
                }
                (true, false)
            }
            _ => (false, false),
        };
        let before = self.table.stats();
        self.table
            .handle(ClientId(u64::from(client)), tag, request, out);
        let work = IndexWork::between(&before, &self.table.stats());
        // A release grants to the waiters it wakes: their kind decides.
        pattern |= self.learn(out) && release;
        let (l, n) = (&costs.lock, &costs.net);
        let table = if release {
            l.server_release_ns
        } else {
            l.server_request_ns
        };
        let range = if pattern {
            l.server_pattern_range_ns
        } else {
            l.server_list_range_ns
        };
        let pick_up = if first { n.server_batch_ns } else { 0.0 };
        ns(n.server_msg_ns * (1 + out.len()) as f64
            + table
            + work.cost(l, range)
            + explicit * l.server_decode_range_ns
            + pick_up)
    }

    /// One slice of left-over work (long grants and releases run in slices: only
    /// structured requests are that long).
    pub fn work(&mut self, costs: &Costs, out: &mut Vec<Outgoing>) -> Ns {
        self.work_queued = false;
        let before = self.table.stats();
        self.table.work(out);
        self.learn(out);
        let work = IndexWork::between(&before, &self.table.stats());
        ns(work.cost(&costs.lock, costs.lock.server_pattern_range_ns)
            + out.len() as f64 * costs.net.server_msg_ns)
    }

    /// Whether the driver should queue a work step now (once until it runs).
    pub fn wants_work(&mut self) -> bool {
        if self.table.has_work() && !self.work_queued {
            self.work_queued = true;
            true
        } else {
            false
        }
    }
}

/// A model's message type, as far as its lock servers are concerned.
pub trait LockMessages: Sized {
    /// A client's lock message as `(client, tag, request)`, `Ok(None)` for the server's own
    /// work tick, or the message back when it is not a lock server's.
    fn lock_input(self) -> Result<Option<(u32, u64, Request)>, Self>;
    /// The work tick a server queues to itself (`wants_work`).
    fn work() -> Self;
    /// A server's reply to a client.
    fn reply(tag: u64, reply: Reply) -> Self;
}

/// `LockMessages` for a model's message enum `$msg` whose lock variants are spelled
/// `Lock { client, tag, request }`, `Work` and `Reply { tag, reply }` (every model's).
macro_rules! impl_lock_messages {
    ($msg:ident) => {
        impl $crate::lock_service::LockMessages for $msg {
            fn lock_input(self) -> Result<Option<(u32, u64, atomio_proto::Request)>, Self> {
                match self {
                    $msg::Lock {
                        client,
                        tag,
                        request,
                    } => Ok(Some((client, tag, request))),
                    $msg::Work => Ok(None),
                    other => Err(other),
                }
            }
            fn work() -> Self {
                $msg::Work
            }
            fn reply(tag: u64, reply: atomio_proto::Reply) -> Self {
                $msg::Reply { tag, reply }
            }
        }
    };
}
pub(crate) use impl_lock_messages;

impl SimServer {
    /// One step of this server, actor `me`: a full release first clears its holder from
    /// the safety check, then the table runs; a work tick is queued when the table wants
    /// one, and the replies (to the caller and to waiters a release wakes) go to
    /// `client_actors`. Returns the step's cost.
    #[allow(clippy::too_many_arguments)]
    pub fn step<M: LockMessages>(
        &mut self,
        me: ActorId,
        costs: &Costs,
        holders: &mut Holders,
        msg: M,
        first: bool,
        client_actors: &[ActorId],
        out: &mut Vec<Out<M>>,
    ) -> Result<Ns, String> {
        let mut replies = std::mem::take(&mut self.replies);
        replies.clear();
        let cost = match msg.lock_input() {
            Ok(Some((client, tag, request))) => {
                if let Some(id) = released_holder(client, tag, &request) {
                    holders.release(id, self.id);
                }
                self.handle(costs, client, tag, request, first, &mut replies)
            }
            Ok(None) => self.work(costs, &mut replies),
            Err(_) => return Err("a server got a client's message".into()),
        };
        if self.wants_work() {
            out.push(Out::local(me, M::work()));
        }
        for o in replies.drain(..) {
            out.push(Out::net(
                client_actors[o.to.0 as usize],
                M::reply(o.tag, o.reply),
            ));
        }
        self.replies = replies;
        Ok(cost)
    }
}

/// The safety check's name of the operation a full release from `client` with `tag`
/// belongs to (`None` for other messages); its server is the one handling it.
pub fn released_holder(client: u32, tag: u64, request: &Request) -> Option<u64> {
    match request {
        Request::LockRelease { from: None, .. } => Some((u64::from(client) << 32) | (tag >> 32)),
        _ => None,
    }
}

/// Client CPU per lock message sent: building it and the transport's share.
fn send_cost(costs: &Costs) -> f64 {
    costs.lock.client_send_ns + costs.net.client_msg_ns
}

/// A lock request on its way: (server, tag, request).
pub type Wire = (ServerId, u64, Request);

/// One client's current lock operation.
#[derive(Debug, Default)]
pub struct ClientLocks {
    op: Option<LockOp>,
    seq: u64,
    sends: Vec<Send>,
    servers: Vec<ServerId>,
    /// Negative control: operations believe they hold everything after their first
    /// optimistic round.
    pub believe_early: bool,
    /// Messages sent (acquires and releases), over all operations.
    pub messages: u64,
    /// What this client's operations met lately: how the next one opens, as in the
    /// product's clients (`atomio_lock::Contention`).
    contention: Contention,
}

impl ClientLocks {
    /// Starts acquiring `subs`; returns the CPU the client spent and what it sends.
    pub fn start(
        &mut self,
        costs: &Costs,
        file: FileId,
        mode: LockMode,
        protocol: Protocol,
        subs: Vec<SubRequest>,
        out: &mut Vec<Wire>,
    ) -> Ns {
        let explicit: u64 = subs
            .iter()
            .map(|s| match &s.desc {
                atomio_proto::ValidDesc::Ranges(r) => r.len() as u64,
                _ => 0,
            })
            .sum();
        self.seq += 1;
        self.servers = subs.iter().map(|s| s.server).collect();
        self.servers.sort_unstable();
        self.servers.dedup();
        let mut op = LockOp::new(file, mode, protocol, subs).with_start(self.contention.start());
        if self.believe_early {
            op.believe_held_after_optimistic_for_negative_control();
        }
        op.start(&mut self.sends);
        self.op = Some(op);
        let sent = self.flush(out);
        ns(costs.lock.client_op_ns
            + explicit as f64 * costs.lock.client_range_ns
            + sent as f64 * send_cost(costs))
    }

    /// A reply arrived. Stale replies (a detached release's) are charged and dropped.
    pub fn on_reply(
        &mut self,
        costs: &Costs,
        tag: u64,
        reply: Reply,
        first: bool,
        out: &mut Vec<Wire>,
    ) -> Ns {
        let pick_up = if first {
            costs.net.client_batch_ns
        } else {
            0.0
        };
        let recv = costs.net.client_msg_ns + pick_up;
        let Some(op) = self.op.as_mut().filter(|_| tag >> 32 == self.seq) else {
            return ns(recv);
        };
        op.on_reply(tag as u32, reply, &mut self.sends);
        let sent = self.flush(out);
        ns(recv + costs.lock.client_reply_ns + sent as f64 * send_cost(costs))
    }

    /// Releases everything (the operation must be `Held`). `detached`: the operation is
    /// over now, its answers will be ignored.
    pub fn release(&mut self, costs: &Costs, detached: bool, out: &mut Vec<Wire>) -> Ns {
        let Some(op) = self.op.as_mut() else {
            return 0;
        };
        self.contention.observe(op);
        op.release(&mut self.sends);
        let sent = self.flush(out);
        if detached {
            self.op = None;
        }
        ns(sent as f64 * send_cost(costs))
    }

    /// The safety check's name for the current operation of `client`.
    pub fn holder_id(&self, client: u32) -> u64 {
        (u64::from(client) << 32) | self.seq
    }

    /// The servers the current operation locks at, and which server locks which byte.
    pub fn servers(&self) -> Vec<ServerId> {
        self.servers.clone()
    }

    pub fn status(&self) -> Option<Status> {
        self.op.as_ref().map(LockOp::status)
    }

    /// Forgets a finished operation.
    pub fn finish(&mut self) {
        self.op = None;
    }

    fn flush(&mut self, out: &mut Vec<Wire>) -> usize {
        let n = self.sends.len();
        self.messages += n as u64;
        for s in self.sends.drain(..) {
            out.push((s.server, (self.seq << 32) | u64::from(s.sub), s.request));
        }
        n
    }
}
