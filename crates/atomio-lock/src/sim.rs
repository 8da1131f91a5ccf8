//! A seeded, deterministic simulation of lock clients and servers.
//!
//! Clients run lock operations on random overlapping noncontiguous accesses, each with a
//! random method, protocol and mode; servers are real `LockServer`s. The network holds every
//! message in flight and, at each step, the seeded RNG picks which event happens next: any
//! in-flight message may be delivered (no FIFO, not even per link), or a client holding its
//! locks may release them. Same seed, same run.
//!
//! Checked continuously:
//! * **safety**: no two clients hold conflicting operations at once (their accesses overlap
//!   and one writes), judged from the clients' own view (`Status::Held`), which is what
//!   atomic I/O relies on; and every server's invariants (`check_invariants`), including
//!   that each granted byte sits at the server that owns it;
//! * **liveness**: whenever no message is in flight and nobody holds locks, every client
//!   has finished — otherwise the clients are deadlocked. A step budget catches livelock.
//!
//! **Faults** (`SimConfig::faults`): time passes (one virtual ms per step) and servers keep
//! leases (`lease_ms`). Clients renew every fifth of a lease while they run; a client may
//! *freeze* (as under `SIGSTOP`: it neither acts, renews nor reads; what it already sent is
//! still delivered) for up to two leases, and a client's connection to one server may
//! *reset* (the server drops its session; the client abandons its operation and frees
//! what it holds elsewhere with `LockOp::cleanup`, releasing orphaned requests when their
//! answers come). Safety is then judged in lease time: a client counts as holding only
//! while its own lease view is valid (its last renewal was at most 3/4 of a lease ago,
//! the rule `ClusterClient::check_lease` applies before I/O); a woken client whose view
//! lapsed drops its operation and reconnects. Liveness: frozen clients wake, lapsed
//! leases expire, so every waiter eventually gets its lock or an error.
//!
//! Two more faults: a client may be **cut off** (a partition: it runs on, but nothing it
//! sends arrives and nothing reaches it — renewals included — until the partition heals;
//! then it goes on if its lease view held, else drops its operation and reconnects), and a
//! **server may crash** (its table and every message to or from it are lost; every client's
//! session there is gone: operations in progress are abandoned and cleaned up elsewhere, and
//! a client that *held* its locks goes on acting on them — it is in its I/O and does not
//! know yet, and its lease view lapses by itself since renewals at the crashed server now
//! fail; when it releases, it frees what it holds at the other servers).
//! The server restarts empty after a while and serves nothing for one lease (the **grace
//! period**, as `atomio server` does after a restart), so no old holder's view can still be
//! valid when the new table grants its bytes. Message loss or duplication inside a live
//! connection is not modelled: over TCP a lost message surfaces as a reset, which is.
//!
//! A failure carries the seed; `atomio sim --seed N` (or `SimConfig { seed: N, .. }`)
//! replays it exactly.

mod access;
mod faults;

use access::random_access;
use faults::{new_server, time_passes, World};

use crate::plan::{plan, Method};
use crate::protocol::{LockOp, Protocol, Send, Start, Status};
use crate::server::LockServer;
use atomio_layout::{Layout, RangeList, ServerId};
use atomio_proto::{ClientId, FileId, LockMode, Reply, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub clients: usize,
    pub servers: u32,
    pub ops_per_client: usize,
    /// Bytes of the shared file region the accesses fall in (small = more conflicts).
    pub file_bytes: u64,
    pub stripe_size: u64,
    pub methods: Vec<Method>,
    pub protocols: Vec<Protocol>,
    /// Fraction of operations that take read (shared) locks.
    pub read_fraction: f64,
    /// Check every server's invariants every this many steps (they are O(locks)).
    pub check_every: u64,
    /// A deliberate bug, to prove the checks can fail (negative controls).
    pub fault: SimFault,
    /// Inject freezes and connection resets under leases (see the module comment).
    pub faults: bool,
    /// The servers' lease, in steps (virtual ms).
    pub lease_ms: u64,
    /// Crash and restart servers, and cut clients off (partitions); needs `faults`.
    pub crashes: bool,
    /// Ranges a server grants or releases per step; 0: drawn per server from the seed,
    /// mostly tiny, so long requests are continued by `work` between other messages.
    pub work_slice: u64,
    /// How plans order their sub-requests (`SubRequest::tier`).
    pub tiers: Tiers,
}

/// The order two-phase rounds visit sub-requests in (see `protocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiers {
    /// Every sub-request in tier 0: the paper's offset order.
    Offset,
    /// Each server its own tier: server by server (interval I/O's plans).
    ByServer,
    /// One of the two, drawn per seed for every operation of the run.
    PerSeed,
}

/// Deliberate bugs the simulator can inject; a correct checker must catch each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimFault {
    None,
    /// Clients keep out-of-order locks after optimistic rounds: deadlocks become possible.
    SkipTruncation,
    /// Clients believe they hold everything after one optimistic round: unsafe.
    HeldAfterOptimistic,
    /// Servers grant without checking conflicts: unsafe.
    ServerIgnoresConflicts,
    /// Servers expire leases after half the lease clients count on: a frozen holder's
    /// locks go while it still believes it holds them (unsafe; needs `faults`).
    ServerLeaseTooShort,
    /// A client that abandons an operation frees nothing at the other servers: its locks
    /// leak while it lives on (deadlock; needs `faults`).
    NoCleanup,
    /// A restarted server serves at once, without waiting out a lease: it grants bytes an
    /// old holder still acts on (unsafe; needs `crashes`).
    NoGrace,
    /// Each operation draws its own tiering: a byte no longer has one place in the global
    /// order, so waits can form a cycle (deadlock).
    MixedTiers,
}

impl SimConfig {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            clients: 32,
            servers: 4,
            ops_per_client: 4,
            file_bytes: 4096,
            stripe_size: 128,
            methods: vec![
                Method::Posix,
                Method::List { max_ranges: 3 },
                Method::List { max_ranges: 64 },
                Method::Datatype,
            ],
            protocols: Protocol::ALL.to_vec(),
            read_fraction: 0.25,
            check_every: 16,
            fault: SimFault::None,
            faults: false,
            lease_ms: 300,
            crashes: false,
            work_slice: 0,
            tiers: Tiers::PerSeed,
        }
    }

    /// `new` with freezes, resets, partitions, server crashes and leases.
    pub fn with_faults(seed: u64) -> Self {
        Self {
            faults: true,
            crashes: true,
            ..Self::new(seed)
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimReport {
    pub steps: u64,
    pub ops: u64,
    pub messages: u64,
    pub waits: u64,
    pub truncations: u64,
    /// Injected faults: freezes, resets, leases that lapsed, operations abandoned.
    pub freezes: u64,
    pub resets: u64,
    pub lapses: u64,
    pub abandoned: u64,
    /// Clients cut off (partitions) and server crashes.
    pub partitions: u64,
    pub crashes: u64,
    /// Grants and releases the servers continued in a later step (work slices).
    pub sliced: u64,
}

#[derive(Clone, Debug)]
pub struct SimFailure {
    pub seed: u64,
    pub step: u64,
    pub what: String,
    /// The flags beyond `--seed` that replay it (`--faults`, `--protocol P`).
    pub flags: String,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation failed at step {} with seed {}: {}\n  replay: atomio sim --seed {}{}",
            self.step, self.seed, self.what, self.seed, self.flags
        )
    }
}

impl std::error::Error for SimFailure {}

enum Envelope {
    ToServer {
        client: usize,
        server: ServerId,
        tag: u64,
        request: Request,
    },
    ToClient {
        client: usize,
        server: ServerId,
        tag: u64,
        reply: Reply,
    },
}

struct SimClient {
    op: Option<LockOp>,
    op_seq: u64,
    bytes: RangeList,
    mode: LockMode,
    done_ops: usize,
    label: String,
    /// Frozen (paused) until this time.
    frozen_until: Option<u64>,
    /// When its lease was last renewed at every server (renewals arrive at once).
    renewed: u64,
    /// (server, tag) of opening requests of abandoned operations: release what they name.
    orphans: Vec<(ServerId, u64)>,
    /// Cut off from every server (a partition) until this time.
    cut_off_until: Option<u64>,
    /// Its session at a crashed server is gone: renewals fail until it reconnects (at its
    /// next operation).
    stale: bool,
    /// Servers that crashed while it held its operation's locks: it goes on (it is in its
    /// I/O and does not know), and when it releases, it frees what it holds elsewhere.
    lost: Vec<ServerId>,
}

impl SimClient {
    fn new() -> Self {
        SimClient {
            op: None,
            op_seq: 0,
            bytes: RangeList::new(),
            mode: LockMode::Write,
            done_ops: 0,
            label: String::new(),
            frozen_until: None,
            renewed: 0,
            orphans: Vec::new(),
            cut_off_until: None,
            stale: false,
            lost: Vec::new(),
        }
    }

    /// The client's own view: may it act on locks it believes it holds?
    fn lease_valid(&self, now: u64, lease: u64) -> bool {
        now.saturating_sub(self.renewed) <= lease * 3 / 4
    }

    /// Whether it may act on `bytes`/`mode` as a holder now (for the safety check).
    fn acts_as_holder(&self, now: u64, lease: u64, faults: bool) -> bool {
        matches!(self.op.as_ref().map(LockOp::status), Some(Status::Held))
            && (!faults || self.lease_valid(now, lease))
    }

    /// Whether time alone can still change what it may do.
    fn waits_for_time(&self) -> bool {
        self.frozen_until.is_some() || self.cut_off_until.is_some()
    }
}

const FILE: FileId = FileId(1);

/// Runs one simulation. `Err` describes the first violation, with the seed.
pub fn run(cfg: &SimConfig) -> Result<SimReport, SimFailure> {
    let mut sim = Sim::new(cfg);
    let max_steps = 200_000 + 20_000 * (cfg.clients * cfg.ops_per_client) as u64;
    loop {
        sim.step += 1;
        if sim.step > max_steps {
            return Err(sim.fail(format!("no completion after {max_steps} steps (livelock?)")));
        }
        if cfg.faults {
            sim.now += 1;
            sim.time_passes();
        }
        let events = sim.events();
        if events.count() == 0 {
            // Time can still unblock: a frozen client wakes (or its lease lapses and its
            // locks go), and it may have answers waiting (an orphan's grant to release).
            // Only frozen clients stop renewing, so nothing else can lapse.
            if sim.clients.iter().any(SimClient::waits_for_time)
                || sim.down.iter().any(Option::is_some)
            {
                continue;
            }
            if sim
                .clients
                .iter()
                .all(|c| c.done_ops == cfg.ops_per_client && c.op.is_none())
            {
                break;
            }
            return Err(sim.deadlock());
        }
        let pick = sim.rng.gen_range(0..events.count());
        sim.sends.clear();
        if let Some(c) = sim.happen(&events, pick)? {
            sim.after_act(c)?;
        }
        if sim.step.is_multiple_of(cfg.check_every) {
            check_servers(&sim.servers, &sim.layout).map_err(|w| sim.fail(w))?;
        }
    }
    sim.finish()
}

/// What may happen next: in-flight messages that can be delivered (indices into
/// `inflight`; not to a frozen or cut-off client, not to a down server), clients that can
/// act (idle with operations left: start one; holding: release), and servers with
/// left-over work (long requests run in slices). Acquiring or releasing clients wait for
/// messages.
struct Events {
    deliverable: Vec<usize>,
    actors: Vec<usize>,
    workers: Vec<usize>,
}

impl Events {
    fn count(&self) -> usize {
        self.deliverable.len() + self.actors.len() + self.workers.len()
    }
}

/// One simulation's whole state: the servers, the clients, the network and the clock.
struct Sim<'c> {
    cfg: &'c SimConfig,
    rng: ChaCha8Rng,
    layout: Layout,
    /// Each server's work slice, kept for its restarts.
    slices: Vec<u64>,
    servers: Vec<LockServer>,
    /// Per server: down (crashed, or restarted and in its grace period) until this time.
    down: Vec<Option<u64>>,
    /// Whether plans tier their sub-requests server by server (else in offset order).
    by_server: bool,
    /// The client-side bugs injected into every operation.
    faults: crate::protocol::Faults,
    clients: Vec<SimClient>,
    now: u64,
    inflight: Vec<Envelope>,
    report: SimReport,
    step: u64,
    /// The replay flags a failure carries.
    flags: String,
    /// What the acting client sends this step.
    sends: Vec<Send>,
    /// What the server handling this step answers.
    outgoing: Vec<crate::server::Outgoing>,
}

impl<'c> Sim<'c> {
    fn new(cfg: &'c SimConfig) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let layout = Layout::round_robin(cfg.stripe_size, cfg.servers, cfg.servers, 0)
            .expect("valid sim layout");
        let slices: Vec<u64> = (0..cfg.servers)
            .map(|_| {
                // Drawn even when fixed, so a replay with another slice is the same run.
                let drawn = [1, 2, 4, 16, crate::server::DEFAULT_WORK_SLICE][rng.gen_range(0..5)];
                match cfg.work_slice {
                    0 => drawn,
                    n => n,
                }
            })
            .collect();
        let servers: Vec<LockServer> = (0..cfg.servers)
            .map(|s| new_server(cfg, ServerId(s), slices[s as usize]))
            .collect();
        // From the seed's parity, not the generator, so other draws replay as before.
        let by_server = match cfg.tiers {
            Tiers::Offset => false,
            Tiers::ByServer => true,
            Tiers::PerSeed => cfg.seed % 2 == 1,
        };
        let faults = crate::protocol::Faults {
            skip_truncation: cfg.fault == SimFault::SkipTruncation,
            held_after_optimistic: cfg.fault == SimFault::HeldAfterOptimistic,
        };
        Sim {
            cfg,
            rng,
            layout,
            down: vec![None; servers.len()],
            slices,
            servers,
            by_server,
            faults,
            clients: (0..cfg.clients).map(|_| SimClient::new()).collect(),
            now: 0,
            inflight: Vec::new(),
            report: SimReport::default(),
            step: 0,
            flags: replay_flags(cfg),
            sends: Vec::new(),
            outgoing: Vec::new(),
        }
    }

    fn fail(&self, what: String) -> SimFailure {
        SimFailure {
            seed: self.cfg.seed,
            step: self.step,
            what,
            flags: self.flags.clone(),
        }
    }

    fn time_passes(&mut self) {
        let mut world = World {
            servers: &mut self.servers,
            down: &mut self.down,
            slices: &self.slices,
            clients: &mut self.clients,
            inflight: &mut self.inflight,
            report: &mut self.report,
        };
        time_passes(self.cfg, &mut self.rng, self.now, &mut world);
    }

    fn events(&self) -> Events {
        let (clients, down) = (&self.clients, &self.down);
        let deliverable = (0..self.inflight.len())
            .filter(|&i| match &self.inflight[i] {
                Envelope::ToClient { client, .. } => {
                    let c = &clients[*client];
                    c.frozen_until.is_none() && c.cut_off_until.is_none()
                }
                Envelope::ToServer { client, server, .. } => {
                    clients[*client].cut_off_until.is_none() && down[server.0 as usize].is_none()
                }
            })
            .collect();
        let actors = (0..clients.len())
            .filter(|&c| {
                let cl = &clients[c];
                cl.frozen_until.is_none()
                    && match &cl.op {
                        None => cl.done_ops < self.cfg.ops_per_client,
                        Some(op) => op.status() == Status::Held,
                    }
            })
            .collect();
        let workers = (0..self.servers.len())
            .filter(|&s| self.servers[s].has_work() && down[s].is_none())
            .collect();
        Events {
            deliverable,
            actors,
            workers,
        }
    }

    /// Nothing can happen and not everyone is done: who waits, and what servers grant.
    fn deadlock(&self) -> SimFailure {
        let stuck: Vec<String> = self
            .clients
            .iter()
            .enumerate()
            .filter(|(_, c)| c.op.is_some())
            .map(|(i, c)| format!("client {i} ({})", c.label))
            .collect();
        let mut holders: Vec<String> = Vec::new();
        for (i, srv) in self.servers.iter().enumerate() {
            for (lock, owner, mode, r) in srv.granted() {
                let c = &self.clients[owner.0 as usize];
                let state = c.op.as_ref().map(|o| format!("{:?}", o.status()));
                holders.push(format!(
                    "s{i}:{lock}@{owner}{mode:?}{r:?} op={state:?} orphans={:?}",
                    c.orphans
                ));
            }
        }
        holders.truncate(12);
        for (i, srv) in self.servers.iter().enumerate() {
            eprintln!("DEBUG s{i}: {:?}", srv.open());
            eprintln!("DEBUG inv {:?}", srv.check_invariants());
        }
        self.fail(format!(
            "deadlock: nothing in flight, waiting: {}; held: {}",
            stuck.join(", "),
            holders.join(" ")
        ))
    }

    /// Makes event `pick` of `events` happen; the client that acted, if one did (its sends
    /// are in `sends`).
    fn happen(&mut self, events: &Events, pick: usize) -> Result<Option<usize>, SimFailure> {
        let (d, a) = (events.deliverable.len(), events.actors.len());
        if pick < d {
            return self.deliver(events.deliverable[pick]);
        }
        if pick >= d + a {
            let s = events.workers[pick - d - a];
            self.outgoing.clear();
            self.servers[s].set_now(self.now);
            self.servers[s].work(&mut self.outgoing);
            push_replies(ServerId(s as u32), &mut self.outgoing, &mut self.inflight);
            return Ok(None);
        }
        let c = events.actors[pick - d];
        self.client_acts(c);
        Ok(Some(c))
    }

    /// Delivers in-flight message `i`; the client that acted on it, if one did.
    fn deliver(&mut self, i: usize) -> Result<Option<usize>, SimFailure> {
        match self.inflight.swap_remove(i) {
            Envelope::ToServer {
                client,
                server,
                tag,
                request,
            } => {
                self.outgoing.clear();
                let srv = &mut self.servers[server.0 as usize];
                srv.set_now(self.now);
                srv.handle(ClientId(client as u64), tag, request, &mut self.outgoing);
                push_replies(server, &mut self.outgoing, &mut self.inflight);
                self.report.messages += 1;
                Ok(None)
            }
            Envelope::ToClient {
                client,
                server,
                tag,
                reply,
            } => self.reply_reaches(client, server, tag, reply),
        }
    }

    /// Client `client` gets `reply` from `server`.
    fn reply_reaches(
        &mut self,
        client: usize,
        server: ServerId,
        tag: u64,
        reply: Reply,
    ) -> Result<Option<usize>, SimFailure> {
        let cl = &mut self.clients[client];
        if let Some(k) = cl.orphans.iter().position(|&o| o == (server, tag)) {
            // The answer to an abandoned operation's opening request: free it.
            cl.orphans.swap_remove(k);
            if let Reply::Lock(p) = reply {
                self.inflight.push(Envelope::ToServer {
                    client,
                    server,
                    tag,
                    request: Request::LockRelease {
                        lock: p.lock,
                        from: None,
                    },
                });
            }
        } else if let Some(op) = cl.op.as_mut().filter(|_| tag >> 32 == cl.op_seq) {
            op.on_reply(tag as u32, reply, &mut self.sends);
            return Ok(Some(client));
        } else if !self.cfg.faults {
            return Err(self.fail(format!(
                "client {client} got a reply for an operation it does not run: {reply:?}"
            )));
        }
        // With faults: a late answer to an abandoned operation (release acks, errors to a
        // lapsed session) — nothing to do.
        Ok(None)
    }

    /// Client `c` acts: starts its next operation, or releases what it holds.
    fn client_acts(&mut self, c: usize) {
        let cl = &mut self.clients[c];
        match &mut cl.op {
            None => self.start_op(c),
            Some(op) if cl.lost.is_empty() => op.release(&mut self.sends),
            Some(op) => {
                // A server it held locks at crashed meanwhile: free the rest.
                op.abandon(atomio_proto::WireError::new(
                    atomio_proto::ErrorCode::Disconnected,
                    "a server crashed",
                ));
                op.cleanup(&mut self.sends);
                self.sends.retain(|x| !cl.lost.contains(&x.server));
                cl.lost.clear();
                cl.op = None;
                cl.done_ops += 1;
                self.report.abandoned += 1;
            }
        }
    }

    /// Idle client `c` starts an operation on a random access, method, protocol and mode.
    fn start_op(&mut self, c: usize) {
        let (cfg, rng) = (self.cfg, &mut self.rng);
        let cl = &mut self.clients[c];
        if cl.stale {
            // A new session at the restarted server: renewals count again.
            cl.stale = false;
            cl.renewed = self.now;
        }
        let access = random_access(rng, cfg.file_bytes);
        let method = cfg.methods[rng.gen_range(0..cfg.methods.len())];
        let protocol = cfg.protocols[rng.gen_range(0..cfg.protocols.len())];
        let mode = if rng.gen_bool(cfg.read_fraction) {
            LockMode::Read
        } else {
            LockMode::Write
        };
        cl.bytes = RangeList::from_ranges(access.ranges().collect());
        cl.mode = mode;
        cl.label = format!("{method}-{protocol} {mode:?} {:?}", access.hull());
        cl.op_seq += 1;
        let by_server = if cfg.fault == SimFault::MixedTiers {
            rng.gen_bool(0.5)
        } else {
            self.by_server
        };
        let mut subs = plan(&access, &self.layout, method);
        for s in &mut subs {
            s.tier = if by_server { s.server.0 } else { 0 };
        }
        // Both openings, so that waits taken first are in every interleaving.
        let start = if rng.gen_bool(0.5) {
            Start::Try
        } else {
            Start::WaitFirst
        };
        let mut op = LockOp::new(FILE, mode, protocol, subs).with_start(start);
        op.inject(self.faults);
        op.start(&mut self.sends);
        cl.op = Some(op);
    }

    /// After client `c` acted: its sends go out, and its operation's new status is judged
    /// (finished, refused, failed, or held: then checked for safety).
    fn after_act(&mut self, c: usize) -> Result<(), SimFailure> {
        let cl = &mut self.clients[c];
        for s in self.sends.drain(..) {
            self.inflight.push(Envelope::ToServer {
                client: c,
                server: s.server,
                tag: (cl.op_seq << 32) | u64::from(s.sub),
                request: s.request,
            });
        }
        let status = cl.op.as_ref().map(LockOp::status);
        match status {
            Some(Status::Released) => {
                let op = cl.op.take().expect("just checked");
                let st = op.stats();
                self.report.truncations += st.truncations;
                self.report.ops += 1;
                cl.done_ops += 1;
            }
            Some(Status::Failed(e))
                if self.cfg.faults && e.code == atomio_proto::ErrorCode::LeaseExpired =>
            {
                // Refused by a server where its lease lapsed: reconnect (below).
                cl.op = None;
                cl.done_ops += 1;
                self.report.abandoned += 1;
            }
            Some(Status::Failed(e)) => {
                let label = cl.label.clone();
                return Err(self.fail(format!("client {c} ({label}) failed: {e}")));
            }
            Some(Status::Held) => self.check_safety(c)?,
            _ => {}
        }
        Ok(())
    }

    /// Safety in lease time, now that client `c` holds: nobody else who may still act on
    /// its locks (its own lease view valid; a ghost of a crash included) holds a
    /// conflicting op.
    fn check_safety(&self, c: usize) -> Result<(), SimFailure> {
        let me = &self.clients[c];
        for (o, other) in self.clients.iter().enumerate() {
            if o == c || !other.acts_as_holder(self.now, self.cfg.lease_ms, self.cfg.faults) {
                continue;
            }
            if (me.mode == LockMode::Write || other.mode == LockMode::Write)
                && overlap(&me.bytes, &other.bytes)
            {
                return Err(self.fail(format!(
                    "clients {c} ({}) and {o} ({}) hold conflicting locks at once",
                    me.label, other.label
                )));
            }
        }
        Ok(())
    }

    /// Everyone is done: the servers must be consistent and hold nothing.
    fn finish(mut self) -> Result<SimReport, SimFailure> {
        check_servers(&self.servers, &self.layout).map_err(|w| self.fail(w))?;
        for (i, s) in self.servers.iter().enumerate() {
            if s.open_requests() != 0 || s.index_entries() != 0 {
                let left: Vec<String> = s
                    .open()
                    .into_iter()
                    .map(|(lock, owner, waiting)| {
                        format!("{lock}@{owner}{}", if waiting { " (waiting)" } else { "" })
                    })
                    .collect();
                return Err(self.fail(format!(
                    "server {i} still holds {} requests after everyone released: {}",
                    s.open_requests(),
                    left.join(", ")
                )));
            }
            self.report.waits += s.stats().waits;
            self.report.sliced += s.stats().sliced;
        }
        self.report.steps = self.step;
        Ok(self.report)
    }
}

/// The flags beyond `--seed` that replay a run of `cfg`.
fn replay_flags(cfg: &SimConfig) -> String {
    let mut flags = String::new();
    if cfg.faults {
        flags.push_str(" --faults");
    }
    if let [only] = cfg.protocols[..] {
        flags.push_str(&format!(" --protocol {only}"));
    }
    if cfg.work_slice != 0 {
        flags.push_str(&format!(" --work-slice {}", cfg.work_slice));
    }
    flags
}

fn push_replies(
    server: ServerId,
    out: &mut Vec<crate::server::Outgoing>,
    inflight: &mut Vec<Envelope>,
) {
    for o in out.drain(..) {
        inflight.push(Envelope::ToClient {
            client: o.to.0 as usize,
            server,
            tag: o.tag,
            reply: o.reply,
        });
    }
}

fn overlap(a: &RangeList, b: &RangeList) -> bool {
    a.as_slice().iter().any(|r| b.overlaps(r))
}

fn check_servers(servers: &[LockServer], layout: &Layout) -> Result<(), String> {
    for (i, s) in servers.iter().enumerate() {
        s.check_invariants()
            .map_err(|e| format!("server {i}: {e}"))?;
        for (lock, _, _, r) in s.granted() {
            if layout.pieces(r).any(|p| p.server != ServerId(i as u32)) {
                return Err(format!(
                    "server {i} holds {lock} over {r:?}, which it does not own"
                ));
            }
        }
    }
    Ok(())
}
