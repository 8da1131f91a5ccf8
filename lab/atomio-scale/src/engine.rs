//! The discrete-event engine: virtual time, hosts with cores, single-threaded actors,
//! links with latency and bandwidth.
//!
//! An *actor* (a client process, a lock server, the kernel's lock on one file) handles
//! one message at a time, in arrival order. Handling costs CPU: the engine asks the model
//! to handle the message when a core of the actor's host is free (the model runs the real
//! state machine then and says how many ns of CPU that took), holds the core for that
//! long, and sends what the handling produced when the job ends. Cores are shared by every
//! actor of a host, first come first served, without preemption: on one 2-core machine
//! eight processes queue for two cores, which is what makes loopback benchmarks slow.
//!
//! Messages are handled in *batches by sender*: when an actor gets a core it takes every
//! message queued from the sender whose message has waited longest (up to `MAX_BATCH`),
//! as one read of one connection returns every frame that arrived on it, and runs them as
//! one job. `first` tells the model which message starts a batch: that one pays the
//! pick-up (a wake-up, a poll, a read); the others only their own handling. So messages
//! from one peer that queue up while an actor works cost little each, messages from many
//! peers cost a pick-up each — measured so on this machine (see `calibrate`) — and
//! batching emerges from the load instead of being assumed.
//!
//! Messages between hosts cross a link: the sender's NIC (bytes / bandwidth, one message
//! after another), the latency, then the receiver's NIC. Messages within a host (`Via::Local`)
//! arrive when sent.
//!
//! A job that finds its core idle (no job ended on it at this very instant) starts
//! `wake_ns` late: a halted virtual CPU takes that long to come back, and in that time
//! the core runs nobody (not counted as busy). A job that takes over a core as the one
//! before it ends pays no wake.
//!
//! How ready actors find cores is the host's `Placement`: one shared queue (an ideal
//! scheduler), or a queue per core as Linux keeps them — a woken actor waits for the core
//! it last ran on even while another idles, a core out of work takes only a cold actor
//! from another's queue, and an idle core takes queued work at the next tick. Work a
//! *floating* actor does for a caller (the kernel's inode lock) runs on the caller's core
//! as its job ends and hands the core back with its answer.
//!
//! Job costs may be spread (`Engine::with_jitter`): each times a log-normal factor of mean
//! 1 from a seeded generator, as real calls of one kind differ; without it a model whose
//! jobs all cost the same can settle into a schedule with no idle gap that no real run
//! keeps, and a few percent more CPU flipped a prediction by 60 %.
//!
//! **Invariants:** time never goes back; events at the same time run in the order they
//! were scheduled (a sequence number breaks ties), and the spread is seeded, so a run is a
//! pure function of the model and its inputs — deterministic; a host never runs more jobs than it has cores; an actor
//! never runs two jobs at once; an actor is queued in at most one place (its core's
//! queue or its host's shared queue) and only while `Ready`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Virtual time and durations, in nanoseconds.
pub type Ns = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostId(pub u32);

/// A machine: cores shared by its actors, a NIC of some bandwidth.
#[derive(Clone, Copy, Debug)]
pub struct HostSpec {
    pub cores: u32,
    /// Bytes per second each way; `None`: messages take no time on the NIC.
    pub nic_bytes_per_s: Option<f64>,
    /// CPU a core loses when it runs an actor other than the one it ran last (a context
    /// switch between processes); jobs prefer the core their actor last ran on.
    pub switch_ns: Ns,
    /// Time a core that sat idle takes to start a job (a halted virtual CPU woken by an
    /// interrupt): the core is taken, nobody's CPU runs. 0 on bare metal as modelled.
    pub wake_ns: Ns,
    /// How ready actors find cores.
    pub placement: Placement,
}

/// How a host's cores pick up ready actors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Placement {
    /// One run queue: a ready actor takes any free core at once (an ideal scheduler).
    Shared,
    /// A run queue per core, as Linux keeps them: a woken actor queues on the core it last
    /// ran on, even while another core idles (a wake-up goes to the wakee's previous or
    /// the waker's core; on a small, busy machine the kernel does not search for an idle
    /// one). A core that runs out of work takes another core's queued actor only if that
    /// actor last ran `hot_ns` or longer ago (the kernel leaves cache-hot tasks where they
    /// are); a core left idle while actors wait elsewhere takes them at the next scheduler
    /// tick (`tick_ns`, the idle balance the busy core's tick kicks off).
    PerCore { hot_ns: Ns, tick_ns: Ns },
}

/// How a message travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Between processes or machines: latency, and the NICs for its bytes.
    Net,
    /// Inside a host (the kernel, a timer, the process itself): no delay.
    Local,
}

/// A message an actor's job sends when it ends.
#[derive(Debug)]
pub struct Out<M> {
    pub to: ActorId,
    pub msg: M,
    pub via: Via,
    /// Payload bytes (for the NICs).
    pub bytes: u64,
    /// Sent this long after the job ends (a timer).
    pub after: Ns,
    /// Sent at this time, within its job, instead of at the job's end: a message the
    /// actor sends before going on with work of the same job (a release written to the
    /// socket before the next call is prepared).
    pub at: Option<Ns>,
}

impl<M> Out<M> {
    pub fn net(to: ActorId, msg: M) -> Self {
        Self {
            to,
            msg,
            via: Via::Net,
            bytes: 0,
            after: 0,
            at: None,
        }
    }

    pub fn local(to: ActorId, msg: M) -> Self {
        Self {
            to,
            msg,
            via: Via::Local,
            bytes: 0,
            after: 0,
            at: None,
        }
    }

    pub fn with_bytes(mut self, bytes: u64) -> Self {
        self.bytes = bytes;
        self
    }

    /// Sent at `at` (clamped into its job) rather than when the job ends.
    pub fn sent_at(mut self, at: Ns) -> Self {
        self.at = Some(at);
        self
    }
}

/// The seed of every model's cost spread (`Engine::with_jitter`): runs stay a pure
/// function of their inputs.
pub const JITTER_SEED: u64 = 0x005e_eda7_0e10;

/// Most messages from one sender handled as one batch.
pub const MAX_BATCH: usize = 512;

/// What the engine drives.
pub trait Model {
    type Msg;
    /// Handles `msg` from `from` at `actor` at `now`; pushes what it sends to `out` and
    /// returns the CPU time it took. `first`: the message starts a batch (see the module
    /// docs). The messages of one batch are handled in a row, each at the time the one
    /// before it ended; what they send leaves when the batch's job ends. An error stops
    /// the run (a safety violation, a protocol failure).
    fn handle(
        &mut self,
        now: Ns,
        actor: ActorId,
        from: ActorId,
        msg: Self::Msg,
        first: bool,
        out: &mut Vec<Out<Self::Msg>>,
    ) -> Result<Ns, String>;
}

/// Counters of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub events: u64,
    pub jobs: u64,
    pub messages: u64,
    pub now: Ns,
    /// CPU time of every job, summed (≤ now × cores).
    pub busy: Ns,
    /// Jobs that waited behind a busy core while another core of their host sat idle
    /// (`Placement::PerCore`), and their waits summed: what one shared queue never does.
    pub stranded: u64,
    pub stranded_ns: Ns,
}

enum Event<M> {
    Deliver {
        from: ActorId,
        to: ActorId,
        msg: M,
    },
    Done {
        actor: ActorId,
        core: usize,
        outs: Vec<Out<M>>,
    },
    /// A message an actor sends in the middle of its job (`Out::at`).
    Send {
        actor: ActorId,
        out: Out<M>,
    },
    /// A scheduler tick's idle balance on a host (`Placement::PerCore`).
    Balance {
        host: HostId,
    },
}

struct Scheduled<M> {
    at: Ns,
    seq: u64,
    event: Event<M>,
}

impl<M> PartialEq for Scheduled<M> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<M> Eq for Scheduled<M> {}
impl<M> PartialOrd for Scheduled<M> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<M> Ord for Scheduled<M> {
    /// Reversed: the heap pops the earliest (then the first scheduled).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// Why the engine looks for jobs to start on a host.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Why {
    /// An actor became ready.
    Wake,
    /// A job on this core ended.
    Freed(usize),
    /// A scheduler tick's idle balance.
    Tick,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Idle,
    /// Queued for a core.
    Ready,
    Running,
}

struct Actor<M> {
    host: HostId,
    /// CPU of this actor's jobs, summed.
    busy: Ns,
    /// Messages waiting, per sender.
    inbox: std::collections::HashMap<ActorId, VecDeque<M>>,
    /// Senders with messages waiting, oldest first (each once).
    senders: VecDeque<ActorId>,
    run: Run,
    /// The core it ran on last, and when that job ended (`Placement::PerCore`).
    core: Option<usize>,
    /// Runs on its caller's core, handed over as the caller's job ends, else on whichever
    /// core is free (`Engine::float`).
    floating: bool,
    /// A task of a work-stealing runtime: queued on its host's shared queue whatever the
    /// placement, taken by whichever core frees first (`Engine::task`).
    task: bool,
    ended: Ns,
    /// It became ready at this time on a busy core while another idled: a stranded wait.
    stranded_since: Option<Ns>,
}

#[derive(Clone, Default)]
struct Core {
    busy: bool,
    last: Option<ActorId>,
    /// When its last job ended: a job starting later finds it idle (halted).
    free_since: Ns,
    /// Actors queued on this core (`Placement::PerCore`).
    queue: VecDeque<ActorId>,
}

impl Core {
    /// Nothing running, nothing waiting for it.
    fn idle(&self) -> bool {
        !self.busy && self.queue.is_empty()
    }
}

struct Host {
    spec: HostSpec,
    free: u32,
    cores: Vec<Core>,
    /// The shared run queue (`Placement::Shared`; under `PerCore`, actors that never ran
    /// and floating ones that were not handed a core).
    ready: VecDeque<ActorId>,
    nic_out_free: Ns,
    nic_in_free: Ns,
    /// A `Balance` event is scheduled.
    balance_due: bool,
}

/// The engine: hosts, actors, the event queue.
pub struct Engine<M> {
    now: Ns,
    seq: u64,
    heap: BinaryHeap<Scheduled<M>>,
    hosts: Vec<Host>,
    actors: Vec<Actor<M>>,
    latency: Ns,
    stats: EngineStats,
    /// A run stops with an error past this many events (a livelock, or a model bug).
    pub max_events: u64,
    /// Spread of job costs (see `with_jitter`): σ of the log of the factor for a job of
    /// `jitter_ns` or less, and the seeded generator's state.
    jitter: f64,
    jitter_ns: f64,
    rng: ChaCha8Rng,
}

impl<M> Engine<M> {
    /// An engine whose network has one-way `latency` between any two hosts.
    pub fn new(latency: Ns) -> Self {
        Self {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            hosts: Vec::new(),
            actors: Vec::new(),
            latency,
            stats: EngineStats::default(),
            max_events: u64::MAX,
            jitter: 0.0,
            jitter_ns: 1.0,
            rng: ChaCha8Rng::seed_from_u64(JITTER_SEED),
        }
    }

    /// Every job's cost times a factor drawn (seeded: runs stay deterministic) from a
    /// log-normal of mean 1 and log-σ `sigma` for jobs of up to `unit_ns` (one call as
    /// measured), σ·√(`unit_ns`/cost) for longer ones (many such calls' worth, whose
    /// spreads average out): real calls of one kind do not all cost the same, and a model
    /// whose jobs do can settle into a schedule with no idle gap that no real run keeps.
    /// 0: exact costs.
    pub fn with_jitter(mut self, sigma: f64, unit_ns: f64, seed: u64) -> Self {
        self.jitter = if sigma.is_finite() {
            sigma.max(0.0)
        } else {
            0.0
        };
        self.jitter_ns = if unit_ns.is_finite() {
            unit_ns.max(1.0)
        } else {
            1.0
        };
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        self
    }

    /// `cost` spread by the jitter (unchanged without it).
    fn spread(&mut self, cost: Ns) -> Ns {
        if self.jitter == 0.0 || cost == 0 {
            return cost;
        }
        // A standard normal by Box–Muller from the project's seeded generator (u in (0, 1]).
        let u = 1.0 - self.rng.gen::<f64>();
        let v = self.rng.gen::<f64>();
        let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
        let s = self.jitter * (self.jitter_ns / cost as f64).sqrt().min(1.0);
        (cost as f64 * (s * z - s * s / 2.0).exp()).round() as Ns
    }

    pub fn add_host(&mut self, spec: HostSpec) -> HostId {
        self.hosts.push(Host {
            spec: HostSpec {
                cores: spec.cores.max(1),
                ..spec
            },
            free: spec.cores.max(1),
            cores: vec![Core::default(); spec.cores.max(1) as usize],
            ready: VecDeque::new(),
            nic_out_free: 0,
            nic_in_free: 0,
            balance_due: false,
        });
        HostId(self.hosts.len() as u32 - 1)
    }

    /// A new actor on `host` (which must exist).
    pub fn add_actor(&mut self, host: HostId) -> ActorId {
        assert!((host.0 as usize) < self.hosts.len(), "no host {host:?}");
        self.actors.push(Actor {
            host,
            inbox: std::collections::HashMap::new(),
            senders: VecDeque::new(),
            run: Run::Idle,
            busy: 0,
            core: None,
            floating: false,
            task: false,
            ended: 0,
            stranded_since: None,
        });
        ActorId(self.actors.len() as u32 - 1)
    }

    /// `actor` runs on its caller's core, handed over as the caller's job ends, else on any
    /// free core, and pays no wake (work the kernel does for whoever calls it, such as a
    /// file's writes under its inode lock, not a process of its own).
    pub fn float(&mut self, actor: ActorId) {
        if let Some(a) = self.actors.get_mut(actor.0 as usize) {
            a.floating = true;
        }
    }

    /// `actor` is a task of a work-stealing runtime (tokio's worker threads take tasks from
    /// shared queues): under `Placement::PerCore` it still waits on its host's shared
    /// queue, not on the core it last ran on.
    pub fn task(&mut self, actor: ActorId) {
        if let Some(a) = self.actors.get_mut(actor.0 as usize) {
            a.task = true;
        }
    }

    pub fn now(&self) -> Ns {
        self.now
    }

    /// The CPU `actor`'s jobs took so far.
    pub fn busy_of(&self, actor: ActorId) -> Ns {
        self.actors.get(actor.0 as usize).map_or(0, |a| a.busy)
    }

    pub fn stats(&self) -> EngineStats {
        EngineStats {
            now: self.now,
            ..self.stats
        }
    }

    /// Delivers `msg` to `to` at time `at` (≥ now), as if `to` sent it to itself: how a
    /// run is started.
    pub fn inject(&mut self, at: Ns, to: ActorId, msg: M) {
        let at = at.max(self.now);
        self.schedule(at, Event::Deliver { from: to, to, msg });
    }

    fn schedule(&mut self, at: Ns, event: Event<M>) {
        self.seq += 1;
        self.heap.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    /// Runs until nothing is scheduled. `tick` is called every 2^20 events (progress).
    pub fn run<T: Model<Msg = M>>(
        &mut self,
        model: &mut T,
        mut tick: impl FnMut(EngineStats),
    ) -> Result<EngineStats, String> {
        let mut outs = Vec::new();
        while let Some(Scheduled { at, event, .. }) = self.heap.pop() {
            debug_assert!(at >= self.now, "time went back");
            self.now = at;
            self.stats.events += 1;
            if self.stats.events > self.max_events {
                return Err(format!(
                    "more than {} events (livelock?) at t = {} ns",
                    self.max_events, self.now
                ));
            }
            if self.stats.events.trailing_zeros() >= 20 {
                tick(self.stats());
            }
            match event {
                Event::Deliver { from, to, msg } => {
                    if let Some(h) = self.deliver(from, to, msg, None) {
                        self.dispatch(h, Why::Wake, model, &mut outs)?;
                    }
                }
                Event::Done {
                    actor,
                    core,
                    outs: sent,
                } => {
                    let h = self.actors[actor.0 as usize].host;
                    let host = &mut self.hosts[h.0 as usize];
                    host.free += 1;
                    host.cores[core].busy = false;
                    host.cores[core].free_since = self.now;
                    self.actors[actor.0 as usize].ended = self.now;
                    for o in sent {
                        if self.hands_off(actor, &o) {
                            self.stats.messages += 1;
                            self.deliver(actor, o.to, o.msg, Some(core));
                        } else {
                            self.send(actor, h, o);
                        }
                    }
                    let a = &mut self.actors[actor.0 as usize];
                    if a.senders.is_empty() {
                        a.run = Run::Idle;
                    } else {
                        a.run = Run::Ready;
                        self.enqueue(actor);
                    }
                    self.dispatch(h, Why::Freed(core), model, &mut outs)?;
                }
                Event::Send { actor, out } => {
                    let h = self.actors[actor.0 as usize].host;
                    self.send(actor, h, out);
                }
                Event::Balance { host } => {
                    self.hosts[host.0 as usize].balance_due = false;
                    self.dispatch(host, Why::Tick, model, &mut outs)?;
                    self.balance_later(host);
                }
            }
        }
        Ok(self.stats())
    }

    /// Puts `msg` in `to`'s inbox; returns its host if `to` became ready (the caller then
    /// dispatches). `handoff`: `to` goes first on that core (see the `Done` arm).
    fn deliver(
        &mut self,
        from: ActorId,
        to: ActorId,
        msg: M,
        handoff: Option<usize>,
    ) -> Option<HostId> {
        let a = &mut self.actors[to.0 as usize];
        let q = a.inbox.entry(from).or_default();
        if q.is_empty() {
            a.senders.push_back(from);
        }
        q.push_back(msg);
        if a.run != Run::Idle {
            return None;
        }
        a.run = Run::Ready;
        let h = a.host;
        match handoff {
            Some(k) => {
                a.core = Some(k);
                self.hosts[h.0 as usize].cores[k].queue.push_front(to);
            }
            None => self.enqueue(to),
        }
        Some(h)
    }

    /// Whether `o`, sent by `from` as its job ends, hands `from`'s core to its recipient
    /// (`Placement::PerCore`): work a floating actor does for its caller, and its answer,
    /// stay on the caller's core, since the caller does that work itself, in one run (a
    /// `pwrite` and what follows it), with no wake-up between.
    fn hands_off(&self, from: ActorId, o: &Out<M>) -> bool {
        let (a, b) = (&self.actors[from.0 as usize], &self.actors[o.to.0 as usize]);
        let host = &self.hosts[a.host.0 as usize];
        matches!(host.spec.placement, Placement::PerCore { .. })
            && o.via == Via::Local
            && o.after == 0
            && (a.floating || b.floating)
            && a.host == b.host
    }

    /// Queues a ready actor: on the core it last ran on (`Placement::PerCore`), else on
    /// its host's shared queue.
    fn enqueue(&mut self, id: ActorId) {
        let a = &self.actors[id.0 as usize];
        let host = &mut self.hosts[a.host.0 as usize];
        match (host.spec.placement, a.core) {
            (Placement::PerCore { .. }, Some(c)) if !a.floating && !a.task => {
                let stranded = host.cores[c].busy && host.cores.iter().any(Core::idle);
                host.cores[c].queue.push_back(id);
                if stranded {
                    self.actors[id.0 as usize].stranded_since = Some(self.now);
                }
            }
            _ => host.ready.push_back(id),
        }
    }

    /// Starts jobs on `h` while it has free cores and ready actors.
    fn dispatch<T: Model<Msg = M>>(
        &mut self,
        h: HostId,
        why: Why,
        model: &mut T,
        outs: &mut Vec<Out<M>>,
    ) -> Result<(), String> {
        let placement = self.hosts[h.0 as usize].spec.placement;
        match placement {
            Placement::Shared => loop {
                let host = &mut self.hosts[h.0 as usize];
                if host.free == 0 {
                    return Ok(());
                }
                let Some(id) = host.ready.pop_front() else {
                    return Ok(());
                };
                // The core it ran on last if free (no switch), else any free one.
                let core = host
                    .cores
                    .iter()
                    .position(|c| !c.busy && c.last == Some(id))
                    .or_else(|| host.cores.iter().position(|c| !c.busy))
                    .expect("a free core exists");
                self.start(h, core, id, model, outs)?;
            },
            Placement::PerCore { hot_ns, .. } => {
                // A tick's balance moves any queued actor to a core that sat idle; a core
                // that just ran out of work takes only a cold one; a wake-up moves nobody.
                for k in 0..self.hosts[h.0 as usize].cores.len() {
                    let host = &mut self.hosts[h.0 as usize];
                    if host.cores[k].busy {
                        continue;
                    }
                    let mut pick = host.cores[k].queue.pop_front();
                    if pick.is_none() {
                        pick = host.ready.pop_front();
                    }
                    if pick.is_none() {
                        let hot = match why {
                            Why::Freed(c) if c == k => Some(hot_ns),
                            Why::Tick if host.cores[k].free_since < self.now => Some(0),
                            _ => None,
                        };
                        if let Some(hot) = hot {
                            pick = self.steal(h, k, hot);
                        }
                    }
                    if let Some(id) = pick {
                        self.start(h, k, id, model, outs)?;
                    }
                }
                self.balance_later(h);
                Ok(())
            }
        }
    }

    /// Takes from the longest queue of another core than `k` the first actor that last
    /// ran `hot_ns` or longer ago.
    fn steal(&mut self, h: HostId, k: usize, hot_ns: Ns) -> Option<ActorId> {
        let now = self.now;
        let actors = &self.actors;
        let host = &mut self.hosts[h.0 as usize];
        let cold = |id: &ActorId| now.saturating_sub(actors[id.0 as usize].ended) >= hot_ns;
        // The longest queue holding a cold actor (the lowest core among equals).
        let (_, j, i) = (0..host.cores.len())
            .filter(|&j| j != k)
            .filter_map(|j| {
                let q = &host.cores[j].queue;
                q.iter().position(cold).map(|i| (q.len(), j, i))
            })
            .max_by_key(|&(len, j, _)| (len, std::cmp::Reverse(j)))?;
        host.cores[j].queue.remove(i)
    }

    /// Under `PerCore`: while a core idles and actors wait on another, the next tick
    /// balances.
    fn balance_later(&mut self, h: HostId) {
        let host = &mut self.hosts[h.0 as usize];
        let Placement::PerCore { tick_ns, .. } = host.spec.placement else {
            return;
        };
        let idle = host.cores.iter().any(Core::idle);
        let waiting = host.cores.iter().any(|c| !c.queue.is_empty());
        if host.balance_due || !idle || !waiting {
            return;
        }
        host.balance_due = true;
        let tick = tick_ns.max(1);
        let at = (self.now / tick + 1) * tick;
        self.schedule(at, Event::Balance { host: h });
    }

    /// Runs a job of ready actor `id` on free core `core` of `h`.
    fn start<T: Model<Msg = M>>(
        &mut self,
        h: HostId,
        core: usize,
        id: ActorId,
        model: &mut T,
        outs: &mut Vec<Out<M>>,
    ) -> Result<(), String> {
        let host = &mut self.hosts[h.0 as usize];
        host.free -= 1;
        let switch = match host.cores[core].last {
            Some(other) if other != id => host.spec.switch_ns,
            _ => 0,
        };
        // A core whose last job ended before now has been idle: it wakes first. A
        // floating actor's work is its caller's, who waits for it spinning, not halted.
        let floating = self.actors[id.0 as usize].floating;
        let start = if host.cores[core].free_since < self.now && !floating {
            self.now + host.spec.wake_ns
        } else {
            self.now
        };
        let c = &mut host.cores[core];
        c.busy = true;
        c.last = Some(id);
        c.free_since = start;
        let a = &mut self.actors[id.0 as usize];
        a.run = Run::Running;
        a.core = Some(core);
        if let Some(since) = a.stranded_since.take() {
            self.stats.stranded += 1;
            self.stats.stranded_ns += start - since;
        }
        let from = a.senders.pop_front().expect("a ready actor has a message");
        let q = a.inbox.get_mut(&from).expect("a queue per waiting sender");
        let n = q.len().min(MAX_BATCH);
        let batch: Vec<M> = q.drain(..n).collect();
        if q.is_empty() {
            a.inbox.remove(&from);
        } else {
            // The rest is another read, after the others waiting.
            a.senders.push_back(from);
        }
        outs.clear();
        let mut done = start + switch;
        for (i, msg) in batch.into_iter().enumerate() {
            let cost = model.handle(done, id, from, msg, i == 0, outs)?;
            done = done.saturating_add(self.spread(cost));
        }
        self.stats.jobs += 1;
        self.stats.busy += done - start;
        self.actors[id.0 as usize].busy += done - start;
        let mut sent = std::mem::take(outs);
        for o in sent.extract_if(.., |o| o.at.is_some()) {
            let at = o.at.unwrap_or(done).clamp(start, done);
            self.schedule(at, Event::Send { actor: id, out: o });
        }
        self.schedule(
            done,
            Event::Done {
                actor: id,
                core,
                outs: sent,
            },
        );
        Ok(())
    }

    /// Puts `o` on its way from `sender` on host `from` (now = the sender's job end).
    fn send(&mut self, sender: ActorId, from: HostId, o: Out<M>) {
        self.stats.messages += 1;
        let start = self.now.saturating_add(o.after);
        let to_host = self.actors[o.to.0 as usize].host;
        let at = match o.via {
            Via::Local => start,
            Via::Net => {
                let tx = |spec: HostSpec| match spec.nic_bytes_per_s {
                    Some(bw) if bw > 0.0 && o.bytes > 0 => (o.bytes as f64 / bw * 1e9) as Ns,
                    _ => 0,
                };
                let src = &mut self.hosts[from.0 as usize];
                let out_start = start.max(src.nic_out_free);
                let sent = out_start + tx(src.spec);
                src.nic_out_free = sent;
                let dst = &mut self.hosts[to_host.0 as usize];
                let rx = tx(dst.spec);
                let arrive = (sent + self.latency).max(dst.nic_in_free + rx);
                dst.nic_in_free = arrive;
                arrive
            }
        };
        self.schedule(
            at,
            Event::Deliver {
                from: sender,
                to: o.to,
                msg: o.msg,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Actors that bounce a counter to a peer, each handling costing `cost`.
    struct PingPong {
        cost: Ns,
        peer: Vec<ActorId>,
        left: u32,
        log: Vec<(Ns, u32)>,
    }

    impl Model for PingPong {
        type Msg = u32;
        fn handle(
            &mut self,
            now: Ns,
            actor: ActorId,
            _from: ActorId,
            msg: u32,
            _first: bool,
            out: &mut Vec<Out<u32>>,
        ) -> Result<Ns, String> {
            self.log.push((now, actor.0));
            if self.left > 0 {
                self.left -= 1;
                out.push(Out::net(self.peer[actor.0 as usize], msg + 1));
            }
            Ok(self.cost)
        }
    }

    /// An engine with `latency` between two one-core hosts, an actor on each.
    fn two_hosts<M>(latency: Ns) -> (Engine<M>, ActorId, ActorId) {
        let mut e = Engine::new(latency);
        let spec = one_core(0, 0);
        let (h0, h1) = (e.add_host(spec), e.add_host(spec));
        let (a, b) = (e.add_actor(h0), e.add_actor(h1));
        (e, a, b)
    }

    #[test]
    fn a_round_trip_costs_two_jobs_and_two_latencies() {
        let (mut e, a, b) = two_hosts(1_000);
        let mut m = PingPong {
            cost: 500,
            peer: vec![b, a],
            left: 2,
            log: Vec::new(),
        };
        e.inject(0, a, 0);
        let s = e.run(&mut m, |_| {}).unwrap();
        // a at 0, b at 500+1000, a at 1500+500+1000 = 3000; that job ends at 3500.
        assert_eq!(m.log, vec![(0, 0), (1_500, 1), (3_000, 0)]);
        assert_eq!(s.now, 3_500);
    }

    /// Every message costs `cost` (a batch's first twice that); nothing is sent.
    struct Sink(Ns, Vec<(Ns, bool)>);
    impl Model for Sink {
        type Msg = ();
        fn handle(
            &mut self,
            now: Ns,
            _a: ActorId,
            _f: ActorId,
            _m: (),
            first: bool,
            _o: &mut Vec<Out<()>>,
        ) -> Result<Ns, String> {
            self.1.push((now, first));
            Ok(if first { 2 * self.0 } else { self.0 })
        }
    }

    #[test]
    fn cores_are_shared_and_actors_run_one_job_at_a_time() {
        let mut e = Engine::new(0);
        let h = e.add_host(HostSpec {
            cores: 2,
            nic_bytes_per_s: None,
            switch_ns: 0,
            wake_ns: 0,
            placement: Placement::Shared,
        });
        let actors: Vec<ActorId> = (0..3).map(|_| e.add_actor(h)).collect();
        // Three actors with one message each, two cores: the third waits for a core.
        for &a in &actors {
            e.inject(0, a, ());
        }
        // A second message for actor 2 from the same sender, while it waits for a core,
        // joins its batch.
        e.inject(0, actors[2], ());
        let mut m = Sink(100, Vec::new());
        let s = e.run(&mut m, |_| {}).unwrap();
        // Actors 0 and 1 at once; actor 2's batch of two (200 + 100) when a core frees.
        assert_eq!(m.1, vec![(0, true), (0, true), (200, true), (400, false)]);
        assert_eq!(s.now, 500);
    }

    /// Two cores, one shared queue, no wake.
    fn one_core_shared_pair() -> HostSpec {
        HostSpec {
            cores: 2,
            ..one_core(0, 0)
        }
    }

    /// One core, no NIC limit, a switch and a wake of the given costs.
    fn one_core(switch_ns: Ns, wake_ns: Ns) -> HostSpec {
        HostSpec {
            cores: 1,
            nic_bytes_per_s: None,
            switch_ns,
            wake_ns,
            placement: Placement::Shared,
        }
    }

    #[test]
    fn a_core_switching_actors_pays_the_switch() {
        let mut e = Engine::new(0);
        let h = e.add_host(one_core(50, 0));
        let (a, b) = (e.add_actor(h), e.add_actor(h));
        e.inject(0, a, ());
        e.inject(0, b, ());
        e.inject(1_000, b, ());
        let mut m = Sink(100, Vec::new());
        e.run(&mut m, |_| {}).unwrap();
        // a: 0..200 (a fresh core: no switch); b after a switch: 250..450; b again, on
        // the core it ran last: no switch.
        assert_eq!(m.1, vec![(0, true), (250, true), (1_000, true)]);
    }

    #[test]
    fn a_job_that_finds_its_core_idle_waits_for_it_to_wake() {
        let mut e = Engine::new(0);
        let h = e.add_host(one_core(0, 300));
        let (a, b) = (e.add_actor(h), e.add_actor(h));
        e.inject(0, a, ());
        e.inject(100, b, ());
        e.inject(1_000, a, ());
        let mut m = Sink(100, Vec::new());
        let s = e.run(&mut m, |_| {}).unwrap();
        // a on the fresh core: 0..200; b, queued behind it, takes the core as a's job
        // ends: no wake, 200..400; a again at 1,000 finds the core idle since 400: it
        // starts 300 later.
        assert_eq!(m.1, vec![(0, true), (200, true), (1_300, true)]);
        assert_eq!(s.now, 1_500);
        // The wake is nobody's CPU.
        assert_eq!(s.busy, 600);
    }

    /// A message is a route of (actor, cost) hops: each hop costs its CPU and passes the
    /// rest on locally. Logs (start, actor).
    struct Route(Vec<(Ns, ActorId)>);
    impl Model for Route {
        type Msg = Vec<(ActorId, Ns)>;
        fn handle(
            &mut self,
            now: Ns,
            actor: ActorId,
            _f: ActorId,
            mut route: Self::Msg,
            _first: bool,
            out: &mut Vec<Out<Self::Msg>>,
        ) -> Result<Ns, String> {
            self.0.push((now, actor));
            let (_, cost) = route.remove(0);
            if let Some(&(next, _)) = route.first() {
                out.push(Out::local(next, route));
            }
            Ok(cost)
        }
    }

    /// Two cores with per-core queues: `hot_ns`, a 10,000 ns tick, a wake of `wake_ns`.
    fn per_core_host(hot_ns: Ns, wake_ns: Ns) -> HostSpec {
        HostSpec {
            cores: 2,
            nic_bytes_per_s: None,
            switch_ns: 0,
            wake_ns,
            placement: Placement::PerCore {
                hot_ns,
                tick_ns: 10_000,
            },
        }
    }

    /// a and c have run on core 0, b on core 1; c takes core 0 from 2,000 to 12,000;
    /// `busy_b`: b takes core 1 from 2,500 to 3,500. a (`task`: a runtime's task) wakes at
    /// 3,000: when does it run?
    fn wake_behind_a_busy_core(spec: HostSpec, busy_b: bool, task: bool) -> (Ns, EngineStats) {
        let mut e = Engine::new(0);
        let h = e.add_host(spec);
        let (a, b, c) = (e.add_actor(h), e.add_actor(h), e.add_actor(h));
        if task {
            e.task(a);
        }
        e.inject(0, a, vec![(a, 100)]); // core 0: 0 .. 100
        e.inject(0, b, vec![(b, 100)]); // core 1: 0 .. 100
        e.inject(0, c, vec![(c, 100)]); // no core free: the first freed, core 0
        e.inject(2_000, c, vec![(c, 10_000)]);
        if busy_b {
            e.inject(2_500, b, vec![(b, 1_000)]);
        }
        e.inject(3_000, a, vec![(a, 100)]);
        let mut m = Route(Vec::new());
        let s = e.run(&mut m, |_| {}).unwrap();
        let a_again = m.0.iter().filter(|&&(_, x)| x == a).nth(1).unwrap().0;
        (a_again, s)
    }

    #[test]
    fn per_core_a_wakee_waits_behind_its_busy_core_until_the_tick() {
        // One shared queue: a takes the idle core 1 at once.
        let (t, s) = wake_behind_a_busy_core(one_core_shared_pair(), false, false);
        assert_eq!((t, s.stranded), (3_000, 0));
        // Per-core queues: a queues on core 0 (c's) while core 1 idles, until the tick.
        let (t, s) = wake_behind_a_busy_core(per_core_host(500, 0), false, false);
        assert_eq!(t, 10_000);
        assert_eq!((s.stranded, s.stranded_ns), (1, 7_000));
    }

    #[test]
    fn per_core_a_runtimes_task_takes_the_idle_core_at_once() {
        // A task waits on the shared queue, not behind c on core 0: core 1 takes it.
        let (t, s) = wake_behind_a_busy_core(per_core_host(500, 0), false, true);
        assert_eq!((t, s.stranded), (3_000, 0));
    }

    #[test]
    fn per_core_a_core_running_out_of_work_takes_only_a_cold_actor() {
        // Core 1 frees at 3,500 (b's job ends) with a queued on core 0: a last ran at 0 ..
        // 100, cold for a 500 ns window, so core 1 takes it then.
        let (t, _) = wake_behind_a_busy_core(per_core_host(500, 0), true, false);
        assert_eq!(t, 3_500);
        // Still hot for a 5,000 ns window: core 1 idles, the tick moves a.
        let (t, _) = wake_behind_a_busy_core(per_core_host(5_000, 0), true, false);
        assert_eq!(t, 10_000);
    }

    #[test]
    fn per_core_work_for_a_caller_runs_on_its_core_without_a_wake() {
        let mut e = Engine::new(0);
        let h = e.add_host(per_core_host(500, 1_000));
        let (a, f, d) = (e.add_actor(h), e.add_actor(h), e.add_actor(h));
        e.float(f);
        // a (core 0) calls f, f answers a; d, who last ran on core 0 too, waits there.
        e.inject(0, d, vec![(d, 100)]);
        e.inject(200, a, vec![(a, 100), (f, 300), (a, 100)]);
        e.inject(250, d, vec![(d, 100)]);
        let mut m = Route(Vec::new());
        e.run(&mut m, |_| {}).unwrap();
        // d at 0 on core 0. a at 200 finds core 0 idle since 100: a wake, 1,200 .. 1,300
        // (d, waking at 250, queues on core 0 behind it). f runs a's write on a's core as
        // a's job ends, no wake (1,300 .. 1,600), and a goes on there (1,600 .. 1,700)
        // before d, queued earlier.
        assert_eq!(
            m.0,
            vec![(0, d), (1_200, a), (1_300, f), (1_600, a), (1_700, d)]
        );
    }

    #[test]
    fn jitter_spreads_costs_around_their_mean_and_runs_stay_deterministic() {
        let run = |sigma: f64, seed: u64| {
            let mut e = Engine::new(0).with_jitter(sigma, 1e9, seed);
            let h = e.add_host(one_core(0, 0));
            let a = e.add_actor(h);
            for k in 0..4_000u64 {
                // One message at a time, each a batch of its own (first: 2 × 1,000 ns).
                e.inject(k * 1_000_000, a, ());
            }
            let mut m = Sink(1_000, Vec::new());
            e.run(&mut m, |_| {}).unwrap().busy
        };
        assert_eq!(run(0.0, 1), 8_000_000, "no jitter: exact costs");
        let spread = run(0.3, 1);
        let mean = spread as f64 / 4_000.0;
        assert!((mean - 2_000.0).abs() < 60.0, "mean cost {mean}");
        assert_ne!(spread, 8_000_000);
        assert_eq!(run(0.3, 1), spread, "same seed, same run");
        assert_ne!(run(0.3, 2), spread);
        // A job many units long varies as many units' sum: far less.
        let mut e: Engine<()> = Engine::new(0).with_jitter(0.3, 10.0, 1);
        let big: Vec<Ns> = (0..1_000).map(|_| e.spread(1_000_000)).collect();
        let (lo, hi) = (big.iter().min().unwrap(), big.iter().max().unwrap());
        assert!(*lo > 990_000 && *hi < 1_010_000, "{lo} … {hi}");
    }

    #[test]
    fn nics_serialize_bytes() {
        let mut e = Engine::new(0);
        let spec = HostSpec {
            cores: 4,
            nic_bytes_per_s: Some(1e9), // 1 byte per ns
            switch_ns: 0,
            wake_ns: 0,
            placement: Placement::Shared,
        };
        let (h0, h1) = (e.add_host(spec), e.add_host(spec));
        let src = e.add_actor(h0);
        let dst = e.add_actor(h1);
        struct Fan(ActorId, Vec<Ns>);
        impl Model for Fan {
            type Msg = bool;
            fn handle(
                &mut self,
                now: Ns,
                _a: ActorId,
                _f: ActorId,
                first: bool,
                _batch: bool,
                out: &mut Vec<Out<bool>>,
            ) -> Result<Ns, String> {
                if first {
                    for _ in 0..3 {
                        out.push(Out::net(self.0, false).with_bytes(1_000));
                    }
                } else {
                    self.1.push(now);
                }
                Ok(0)
            }
        }
        let mut m = Fan(dst, Vec::new());
        e.inject(0, src, true);
        e.run(&mut m, |_| {}).unwrap();
        assert_eq!(m.1, vec![1_000, 2_000, 3_000]);
    }

    #[test]
    fn a_message_sent_within_a_job_leaves_then() {
        let (mut e, a, b) = two_hosts(1_000);
        struct Early(ActorId, Vec<(Ns, u32)>);
        impl Model for Early {
            type Msg = u32;
            fn handle(
                &mut self,
                now: Ns,
                _a: ActorId,
                _f: ActorId,
                m: u32,
                _first: bool,
                out: &mut Vec<Out<u32>>,
            ) -> Result<Ns, String> {
                if m == 0 {
                    // A 10 µs job: one message 2 µs in, one at its end; one stamped
                    // before the job started leaves when it starts.
                    out.push(Out::net(self.0, 1).sent_at(now + 2_000));
                    out.push(Out::net(self.0, 2));
                    out.push(Out::net(self.0, 3).sent_at(0));
                    return Ok(10_000);
                }
                self.1.push((now, m));
                Ok(0)
            }
        }
        let mut m = Early(b, Vec::new());
        e.inject(5_000, a, 0);
        e.run(&mut m, |_| {}).unwrap();
        assert_eq!(m.1, vec![(6_000, 3), (8_000, 1), (16_000, 2)]);
    }
}
