//! The model of `atomio-lab bench <workload>` with lock strategies on a direct file: every
//! client runs its plan's calls in order (the very plan `atomio-workloads` gives the real
//! benchmark); each call takes the locks the strategy's own `Technique::locks` computes,
//! through a real `LockOp` against real `LockServer`s, writes its bytes, and releases
//! without waiting (the product's detached release).
//!
//! The bytes move as the product moves them on a direct file: one `pwrite` per contiguous
//! run, or copies through a shared mapping when the call has many small pieces (the
//! product's own `worth` rule). On one host (`Platform::shared_file_lock`) the `pwrite`s
//! into the one file queue at the file — an actor of their own, whose jobs use the host's
//! cores — as ext4 serializes them on the inode lock (the calibration measures whether it
//! does), each slowed as much as the calibration's writers at once slowed each other, and
//! a writer waiting for the file spins on a core of its own meanwhile. Copies through the
//! mapping take no such lock: each writer copies on its own core, at the core time per
//! byte the calibration's writers sharing pages took together.
//!
//! On atomio's data servers (`DataPath::Servers`, for projections) a call's bytes go to
//! each server it touches as messages over the NICs; an atomic call's are *staged* and
//! committed (the product's all-or-nothing writes: stage everywhere, decide at one server,
//! finish at the others, then release), a `none` call's written at once. A server's data
//! actor (beside its lock actor, on its host) receives, writes and applies them.
//!
//! Not modelled: `posix-fcntl`, `romio` (the kernel's `fcntl` and data sieving), reads'
//! own costs (a read is charged as a write of its bytes), cached-lock DLMs (see `dlm`)
//! and versioning (see `versioning`), the coordinator's go/done messages, lease renewals.
//!
//! **Invariants:** every call's locks are held (checked by `held`) while its bytes move;
//! a run returns only when every client finished every call and every server's table is
//! empty; errors (a conflict, a failed operation, a stall) are returned, never hidden.

use crate::costs::Costs;
use crate::engine::{ActorId, Engine, EngineStats, HostSpec, Model, Ns, Out, JITTER_SEED};
use crate::held::{Holders, Owner};
use crate::lock_service::{ClientLocks, SimServer, Wire};
use crate::lockbench::{place, Fault};
use crate::platform::Platform;
use atomio_client::{LockGeometry, Locks, Strategy};
use atomio_layout::{Access, Layout, ServerId};
use atomio_proto::{FileId, LockMode, Reply, Request};
use atomio_workloads::{CallKind, WorkloadPlan};
use serde::Serialize;

/// Bytes per page (the mapping's unit).
const PAGE: u64 = 4096;

/// Where the bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DataPath {
    /// The user's file, written by each client (direct placement).
    Direct,
    /// atomio's data servers, the file striped in `stripe_size` over all of them; locks
    /// live with the stripes.
    Servers { stripe_size: u64 },
}

/// A step of a call's bytes on the servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// A non-atomic write.
    Write,
    /// All-or-nothing: staged at every participant, decided at one, finished at the rest.
    Stage,
    Decide,
    Finish,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResult {
    pub workload: String,
    pub strategy: String,
    pub clients: u32,
    pub servers: u32,
    pub bytes: u64,
    /// Virtual seconds until the last client's last call returned.
    pub seconds: f64,
    pub mib_per_s: f64,
    pub calls: u64,
    pub lock_requests: u64,
    pub events: u64,
    /// CPU the model charged, summed over every actor (virtual seconds), and the part of
    /// it the clients (with their copies through mappings), the lock servers and the file
    /// (the `pwrite`s under its inode lock; the data servers with servers placement) took.
    pub cpu_seconds: f64,
    pub client_cpu_seconds: f64,
    pub server_cpu_seconds: f64,
    pub io_cpu_seconds: f64,
    pub safety_checks: u64,
}

enum Msg {
    /// A client starts its next call.
    Next,
    Lock {
        client: u32,
        tag: u64,
        request: Request,
    },
    Reply {
        tag: u64,
        reply: Reply,
    },
    Work,
    /// To the file: `client`'s `pwrite`s, which take the file `cost` (`pwrite_file_cost`).
    FileWrite {
        client: u32,
        cost: Ns,
    },
    /// The `pwrite`s of the current call returned.
    Written,
    /// To a data server: `bytes` of `client`'s call in `phase`.
    Data {
        client: u32,
        phase: Phase,
        bytes: u64,
    },
    /// A data server's answer.
    DataDone,
}

crate::lock_service::impl_lock_messages!(Msg);

#[derive(Default)]
struct Client {
    next: usize,
    locks: ClientLocks,
    /// The current call's bytes, and whether it writes.
    access: Option<Access>,
    write: bool,
    holding: bool,
    finished: Option<Ns>,
    calls: u64,
    requests: u64,
    /// Servers placement: the call's bytes per server, its phase, answers still due.
    shares: Vec<(u32, u64)>,
    phase: Option<Phase>,
    due: usize,
}

struct WorkloadModel<'a> {
    plan: &'a WorkloadPlan,
    strategy: &'a Strategy,
    costs: &'a Costs,
    geometry: LockGeometry,
    shared_file_lock: bool,
    clients: Vec<Client>,
    servers: Vec<SimServer>,
    client_actors: Vec<ActorId>,
    server_actors: Vec<ActorId>,
    file_actor: Option<ActorId>,
    /// When the writes sent to the file so far end, as far as the clients can tell, and
    /// when the writer spinning for it stops.
    file_free_at: Ns,
    spinning_until: Ns,
    data: DataPath,
    data_actors: Vec<ActorId>,
    disk_bytes_per_s: Option<f64>,
    /// Clients that write the file (what the calibration's writers at once are read at),
    /// and how many of them write each page it has (mean over the pages written: whether
    /// they share pages at all).
    writers: f64,
    page_sharing: f64,
    holders: Holders,
    wires: Vec<Wire>,
}

const FILE: FileId = FileId(11);

fn ns(x: f64) -> Ns {
    x.max(0.0).round() as Ns
}

/// CPU to move `access`'s bytes on a direct file for a writer alone, and whether it is
/// `pwrite`s or copies through a mapping.
pub fn io_cost(costs: &Costs, access: &Access, mapped_ok: bool) -> (Ns, bool) {
    let io = &costs.io;
    let bytes = access.size();
    let hull = access.hull().map_or(0, |h| h.len());
    let runs = access.pattern().run_count_upper();
    if mapped_ok && atomio_client::mapped_worth(atomio_client::MappedWay::Write, runs, bytes, hull)
    {
        let pages = pages_touched(access);
        (
            ns(pages as f64 * io.mmap_page_ns + bytes as f64 * io.mmap_byte_ns),
            false,
        )
    } else {
        let cpu: f64 = access.ranges().map(|r| costs.pwrite_ns(r.len())).sum();
        (ns(cpu), true)
    }
}

/// How many clients write each page the plan writes, on average over those pages.
fn page_sharing(plan: &WorkloadPlan) -> f64 {
    // Page → (the last client seen writing it, how many clients did): clients are walked
    // one after another, so a page's writers are counted once each.
    let mut pages: std::collections::HashMap<u64, (usize, u32)> = Default::default();
    for (i, c) in plan.clients.iter().enumerate() {
        let writes = c.calls.iter().filter(|c| c.kind == CallKind::Write);
        for r in writes
            .filter_map(|c| c.access.as_ref())
            .flat_map(Access::ranges)
        {
            for p in r.start / PAGE..=(r.end - 1) / PAGE {
                let e = pages.entry(p).or_insert((i, 0));
                if e.1 == 0 || e.0 != i {
                    *e = (i, e.1 + 1);
                }
            }
        }
    }
    let writers: u64 = pages.values().map(|&(_, n)| u64::from(n)).sum();
    writers as f64 / pages.len().max(1) as f64
}

/// Distinct pages the access's runs touch.
fn pages_touched(access: &Access) -> u64 {
    let mut pages = 0;
    let mut last: Option<u64> = None;
    for r in access.ranges() {
        let (first, end) = (r.start / PAGE, (r.end - 1) / PAGE);
        let first = match last {
            Some(l) if l >= first => l + 1,
            _ => first,
        };
        if end >= first {
            pages += end - first + 1;
        }
        last = Some(last.map_or(end, |l| l.max(end)));
    }
    pages
}

impl WorkloadModel<'_> {
    fn send_wires(&mut self, client: u32, out: &mut Vec<Out<Msg>>) {
        self.send_wires_at(client, None, out)
    }

    /// The lock messages queued, leaving at `at` within the job (`None`: at its end).
    fn send_wires_at(&mut self, client: u32, at: Option<Ns>, out: &mut Vec<Out<Msg>>) {
        for (server, tag, request) in self.wires.drain(..) {
            let o = Out::net(
                self.server_actors[server.0 as usize],
                Msg::Lock {
                    client,
                    tag,
                    request,
                },
            );
            out.push(match at {
                Some(t) => o.sent_at(t),
                None => o,
            });
        }
    }

    /// Starts calls until one has to wait (for locks or the file); returns the CPU spent.
    fn run_calls(&mut self, now: Ns, c: u32, out: &mut Vec<Out<Msg>>) -> Result<Ns, String> {
        let mut cost = 0;
        loop {
            let cl = &mut self.clients[c as usize];
            let Some(call) = self.plan.clients[c as usize].calls.get(cl.next) else {
                cl.finished = Some(now + cost);
                return Ok(cost);
            };
            cl.next += 1;
            let Some(access) = call.access.clone() else {
                continue; // a sync: nothing cached on a direct file with these strategies
            };
            let mode = match call.kind {
                CallKind::Read => LockMode::Read,
                _ => LockMode::Write,
            };
            cl.calls += 1;
            cl.write = mode == LockMode::Write;
            if self.data == DataPath::Direct {
                cost += ns(self.costs.io.direct_call_ns);
            }
            let locks = self
                .strategy
                .technique()
                .locks(mode, &access, &self.geometry)
                .map_err(|e| format!("client {c}: {e}"))?;
            cl.access = Some(access);
            match locks {
                None => {
                    // No locks: straight to the bytes.
                    let (io, done) = self.io(now + cost, c, out);
                    cost += io;
                    if !done {
                        return Ok(cost);
                    }
                }
                Some(Locks::Service { protocol, subs }) => {
                    cl.requests += subs.len() as u64;
                    let bytes = cl.access.as_ref().map_or(0, Access::size);
                    cost += ns(self.costs.client_call_ns(bytes));
                    cost += cl
                        .locks
                        .start(self.costs, FILE, mode, protocol, subs, &mut self.wires);
                    self.send_wires(c, out);
                    return Ok(cost);
                }
                Some(other) => {
                    return Err(format!(
                        "strategy {} takes {other:?} locks, which this model does not run",
                        self.strategy
                    ))
                }
            }
        }
    }

    /// The current call's bytes, the client's job reaching them at `t`: `(cpu, true)` if
    /// the client moved them itself (the call is over), `(cpu, false)` if they wait for
    /// the file (`Written` comes back) or the data servers (`DataDone`s).
    fn io(&mut self, t: Ns, c: u32, out: &mut Vec<Out<Msg>>) -> (Ns, bool) {
        if let DataPath::Servers { .. } = self.data {
            return (self.send_shares(c, out), false);
        }
        let cl = &self.clients[c as usize];
        let access = cl.access.as_ref().expect("a call in progress");
        let mapped_ok = self.strategy.technique().io() == atomio_client::IoMethod::Pieces;
        let (cpu, pwrites) = io_cost(self.costs, access, mapped_ok);
        match self.file_actor {
            Some(f) if self.shared_file_lock && pwrites => {
                let cost = self.pwrite_file_cost(cpu);
                // Waiting for the file, the writer spins while the write before it runs
                // (up to one write's time): CPU its core does not give to anyone else.
                // One waiter spins at a time (the rwsem's spinners queue behind one,
                // and beside the owner's core one core is left on this machine).
                let spin = if self.spinning_until <= t {
                    let wait = self.file_free_at.saturating_sub(t).min(cost);
                    ns(wait as f64 * self.costs.pwrite_spin(self.writers))
                } else {
                    0
                };
                self.spinning_until = self.spinning_until.max(t + spin);
                self.file_free_at = self.file_free_at.max(t + spin) + cost;
                out.push(Out::local(f, Msg::FileWrite { client: c, cost }));
                (spin, false)
            }
            // Copies through the mapping run in parallel, each writer on its own core, at
            // the core time per byte the calibration's writers sharing pages took
            // together (page faults and zeroing contend; the cores they left idle waiting
            // on each other's faults count). A mapping nobody shares costs what one
            // writer's does.
            Some(_) if self.shared_file_lock && self.page_sharing >= 1.5 => {
                let per_byte = self.costs.mmap_shared_core_byte_ns(self.writers);
                (per_byte.map_or(cpu, |b| ns(b * access.size() as f64)), true)
            }
            _ => (cpu, true),
        }
    }

    /// What `pwrite`s that cost a writer alone `cpu` cost in the file the plan's clients
    /// write: more out of order, and where neighbours' pieces share pages.
    fn pwrite_file_cost(&self, cpu: Ns) -> Ns {
        let c = self.costs;
        ns(cpu as f64 * c.pwrite_interleaved(self.writers) * c.pwrite_shared(self.page_sharing))
    }

    /// Servers placement: sends the call's bytes to every server it touches (staged if
    /// the call holds locks); returns the client's CPU.
    fn send_shares(&mut self, c: u32, out: &mut Vec<Out<Msg>>) -> Ns {
        let layout = self.geometry.layout.clone();
        let cl = &mut self.clients[c as usize];
        let access = cl.access.as_ref().expect("a call in progress");
        let mut per: Vec<u64> = vec![0; self.data_actors.len()];
        for r in access.ranges() {
            for p in layout.pieces(r) {
                per[p.server.0 as usize] += p.range.len();
            }
        }
        cl.shares = per
            .into_iter()
            .enumerate()
            .filter(|&(_, b)| b > 0)
            .map(|(s, b)| (s as u32, b))
            .collect();
        let phase = if cl.holding {
            Phase::Stage
        } else {
            Phase::Write
        };
        self.send_phase(c, phase, 0..usize::MAX, out)
    }

    /// Sends `phase` to the call's shares in `which` (indexes); returns the client's CPU.
    fn send_phase(
        &mut self,
        c: u32,
        phase: Phase,
        which: std::ops::Range<usize>,
        out: &mut Vec<Out<Msg>>,
    ) -> Ns {
        let per_msg = self.costs.net.client_msg_ns + self.costs.lock.client_send_ns;
        let memcpy = self.costs.io.memcpy_byte_ns;
        let cl = &mut self.clients[c as usize];
        let end = which.end.min(cl.shares.len());
        let mut cpu = 0.0;
        cl.phase = Some(phase);
        cl.due = end.saturating_sub(which.start);
        for &(s, bytes) in &cl.shares[which.start.min(end)..end] {
            let carries = matches!(phase, Phase::Write | Phase::Stage);
            cpu += per_msg + if carries { bytes as f64 * memcpy } else { 0.0 };
            out.push(
                Out::net(
                    self.data_actors[s as usize],
                    Msg::Data {
                        client: c,
                        phase,
                        bytes,
                    },
                )
                .with_bytes(if carries { bytes } else { 0 }),
            );
        }
        ns(cpu)
    }

    /// A data server answered: the next phase, or the call's bytes are in place.
    fn data_done(
        &mut self,
        now: Ns,
        c: u32,
        first: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Result<Ns, String> {
        let n = &self.costs.net;
        let mut cost = ns(n.client_msg_ns + if first { n.client_batch_ns } else { 0.0 });
        let cl = &mut self.clients[c as usize];
        cl.due = cl.due.checked_sub(1).ok_or("an answer nobody waited for")?;
        if cl.due > 0 {
            return Ok(cost);
        }
        let shares = cl.shares.len();
        match cl.phase {
            Some(Phase::Stage) => cost += self.send_phase(c, Phase::Decide, 0..1, out),
            Some(Phase::Decide) if shares > 1 => {
                cost += self.send_phase(c, Phase::Finish, 1..shares, out)
            }
            _ => {
                cl.phase = None;
                cost += self.call_done(now + cost, c, out)?;
            }
        }
        Ok(cost)
    }

    /// A data server's step: receive, write (or stage), or decide / finish (apply).
    fn data_step(&mut self, msg: Msg, first: bool, out: &mut Vec<Out<Msg>>) -> Result<Ns, String> {
        let Msg::Data {
            client,
            phase,
            bytes,
        } = msg
        else {
            return Err("a data server got another message".into());
        };
        out.push(Out::net(self.client_actors[client as usize], Msg::DataDone));
        let (n, io) = (&self.costs.net, &self.costs.io);
        let fixed = 2.0 * n.server_msg_ns + if first { n.server_batch_ns } else { 0.0 };
        let b = bytes as f64;
        let work = match phase {
            Phase::Write | Phase::Stage => {
                let cpu =
                    b * (io.memcpy_byte_ns + self.costs.pwrite_ns(1 << 20) / f64::from(1 << 20));
                let disk = self.disk_bytes_per_s.map_or(0.0, |bw| b / bw * 1e9);
                cpu.max(disk)
            }
            // The staged bytes applied in the kernel (copy_file_range): a copy each.
            Phase::Decide | Phase::Finish => {
                self.costs.lock.server_request_ns + b * io.memcpy_byte_ns
            }
        };
        Ok(ns(fixed + work))
    }

    /// The call's bytes are written: release (detached) and go on. The release leaves as
    /// soon as it is written, before the next call is prepared (a server may read it
    /// alone, then the next request).
    fn call_done(&mut self, now: Ns, c: u32, out: &mut Vec<Out<Msg>>) -> Result<Ns, String> {
        let cl = &mut self.clients[c as usize];
        let mut cost = 0;
        if cl.holding {
            cl.holding = false;
            cost += cl.locks.release(self.costs, true, &mut self.wires);
            self.send_wires_at(c, Some(now + cost), out);
        }
        Ok(cost + self.run_calls(now + cost, c, out)?)
    }

    fn client_step(
        &mut self,
        now: Ns,
        c: u32,
        msg: Msg,
        first: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Result<Ns, String> {
        match msg {
            Msg::Next => self.run_calls(now, c, out),
            // Back from the file: the process was blocked in the kernel, not polling.
            Msg::Written => self.call_done(now, c, out),
            Msg::DataDone => self.data_done(now, c, first, out),
            Msg::Reply { tag, reply } => {
                let cl = &mut self.clients[c as usize];
                let mut cost = cl
                    .locks
                    .on_reply(self.costs, tag, reply, first, &mut self.wires);
                self.send_wires(c, out);
                let cl = &mut self.clients[c as usize];
                match cl.locks.status() {
                    Some(atomio_lock::Status::Held) if !cl.holding => {
                        cl.holding = true;
                        let access = cl.access.clone().expect("a call in progress");
                        self.holders.take(
                            cl.locks.holder_id(c),
                            c,
                            &access,
                            cl.write,
                            owner(&self.geometry, cl.locks.servers()),
                            cl.locks.servers(),
                        )?;
                        let (io, done) = self.io(now + cost, c, out);
                        cost += io;
                        if done {
                            cost += self.call_done(now + cost, c, out)?;
                        }
                    }
                    Some(atomio_lock::Status::Failed(e)) => return Err(format!("client {c}: {e}")),
                    _ => {}
                }
                Ok(cost)
            }
            _ => Err("a client got a server's message".into()),
        }
    }
}

/// Which server locks which byte for this strategy: one server for central locks.
fn owner(g: &LockGeometry, servers: Vec<ServerId>) -> Owner {
    match servers.as_slice() {
        [one] if *one == g.central => Owner::Central(*one),
        _ => Owner::Striped(g.layout.clone()),
    }
}

impl Model for WorkloadModel<'_> {
    type Msg = Msg;
    fn handle(
        &mut self,
        now: Ns,
        actor: ActorId,
        _from: ActorId,
        msg: Msg,
        first: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Result<Ns, String> {
        let n = self.clients.len() as u32;
        if Some(actor) == self.file_actor {
            let Msg::FileWrite { client, cost } = msg else {
                return Err("the file got a lock message".into());
            };
            out.push(Out::local(
                self.client_actors[client as usize],
                Msg::Written,
            ));
            self.file_free_at = self.file_free_at.max(now + cost);
            return Ok(cost);
        }
        if actor.0 < n {
            return self.client_step(now, actor.0, msg, first, out);
        }
        let s = actor.0 - n;
        if s as usize >= self.servers.len() {
            return self.data_step(msg, first, out);
        }
        self.servers[s as usize].step(
            actor,
            self.costs,
            &mut self.holders,
            msg,
            first,
            &self.client_actors,
            out,
        )
    }
}

/// Runs `plan` under `strategy` on `servers` lock servers in the model, the bytes going
/// where `data` says.
#[allow(clippy::too_many_arguments)]
pub fn run(
    plan: &WorkloadPlan,
    strategy: &Strategy,
    servers: u32,
    data: DataPath,
    costs: &Costs,
    platform: &Platform,
    fault: Fault,
    tick: impl FnMut(EngineStats),
) -> Result<WorkloadResult, String> {
    let clients = plan.clients.len() as u32;
    if clients == 0 || servers == 0 {
        return Err("at least one client and one server".into());
    }
    let central = ServerId(0);
    // A direct file's lock space is striped in 4 MiB over every server; a server file's
    // locks follow its data layout.
    let stripe = match data {
        DataPath::Direct => atomio_client::file::DIRECT_LOCK_STRIPE,
        DataPath::Servers { stripe_size } => stripe_size,
    };
    let geometry = LockGeometry {
        layout: Layout::round_robin(stripe, servers, servers, central.0)
            .map_err(|e| e.to_string())?,
        central,
        intervals: None,
    };
    let mut engine = Engine::new(platform.latency_ns).with_jitter(
        platform.jitter,
        platform.jitter_ns,
        JITTER_SEED,
    );
    let (client_actors, server_actors) = place(&mut engine, platform, clients, servers);
    let direct = data == DataPath::Direct;
    let file_actor = (direct && platform.shared_file_lock).then(|| {
        let h = match platform.shared_cores {
            // The file's jobs run on the shared host's cores (host 0).
            Some(_) => crate::engine::HostId(0),
            None => engine.add_host(HostSpec {
                cores: 1,
                nic_bytes_per_s: None,
                switch_ns: 0,
                wake_ns: platform.wake_ns,
                placement: crate::engine::Placement::Shared,
            }),
        };
        let file = engine.add_actor(h);
        // Its jobs are the callers' own writes, on whichever core is free.
        engine.float(file);
        file
    });
    // Servers placement: a data actor beside each lock server, on its host.
    let data_actors: Vec<ActorId> = if direct {
        Vec::new()
    } else {
        (0..servers)
            .map(|i| {
                let host = match platform.shared_cores {
                    Some(_) => crate::engine::HostId(0),
                    None => crate::engine::HostId(clients + i),
                };
                engine.add_actor(host)
            })
            .collect()
    };
    let mut model = WorkloadModel {
        plan,
        strategy,
        costs,
        geometry,
        shared_file_lock: platform.shared_file_lock,
        data,
        data_actors,
        disk_bytes_per_s: platform.server_disk_bytes_per_s,
        clients: (0..clients)
            .map(|_| {
                let mut c = Client::default();
                c.locks.believe_early = fault == Fault::HeldAfterOptimistic;
                c
            })
            .collect(),
        servers: (0..servers)
            .map(|s| SimServer::new(ServerId(s), fault == Fault::ServersIgnoreReadConflicts))
            .collect(),
        client_actors: client_actors.clone(),
        server_actors,
        file_actor,
        file_free_at: 0,
        spinning_until: 0,
        writers: plan
            .clients
            .iter()
            .filter(|c| c.calls.iter().any(|c| c.kind == CallKind::Write))
            .count() as f64,
        // Only a shared file's writes read it (projections' plans are large).
        page_sharing: file_actor.map_or(1.0, |_| page_sharing(plan)),
        holders: Holders::default(),
        wires: Vec::new(),
    };
    let calls: u64 = plan.clients.iter().map(|c| c.calls.len() as u64).sum();
    engine.max_events = 10_000 * calls.max(1) + 10_000_000;
    for &a in &client_actors {
        engine.inject(0, a, Msg::Next);
    }
    let stats = engine.run(&mut model, tick)?;
    let cpu_of = |actors: &[ActorId]| -> f64 {
        actors.iter().map(|&a| engine.busy_of(a)).sum::<Ns>() as f64 / 1e9
    };
    let io_actors: Vec<ActorId> = model
        .file_actor
        .iter()
        .chain(&model.data_actors)
        .copied()
        .collect();
    let mut end = 0;
    for (i, c) in model.clients.iter().enumerate() {
        end = end.max(
            c.finished
                .ok_or_else(|| format!("client {i} never finished (a stall)"))?,
        );
    }
    for (i, s) in model.servers.iter().enumerate() {
        if s.table.open_requests() != 0 {
            return Err(format!("server {i} still holds requests at the end"));
        }
    }
    let bytes: u64 = plan
        .clients
        .iter()
        .flat_map(|c| c.calls.iter())
        .map(|c| c.bytes())
        .sum();
    let seconds = end.max(1) as f64 / 1e9;
    Ok(WorkloadResult {
        workload: plan.workload.clone(),
        strategy: strategy.name(),
        clients,
        servers,
        bytes,
        seconds,
        mib_per_s: bytes as f64 / seconds / f64::from(1 << 20),
        calls: model.clients.iter().map(|c| c.calls).sum(),
        lock_requests: model.clients.iter().map(|c| c.requests).sum(),
        events: stats.events,
        cpu_seconds: stats.busy as f64 / 1e9,
        client_cpu_seconds: cpu_of(&model.client_actors),
        server_cpu_seconds: cpu_of(&model.server_actors),
        io_cpu_seconds: cpu_of(&io_actors),
        safety_checks: model.holders.checks,
    })
}

/// The call scenario's atomic strategy (one lock request per call).
pub const CALL_STRATEGY: &str = "ching:datatype:one-try";

/// Where client `rank` of the calibration's call scenario writes its call `k` of
/// `bytes`: page-aligned calls, in lock stripes that go round four servers (client i's
/// stripes are i, i + 4, i + 8, …), so that each client's locks live on its own server and
/// the four write one file.
pub fn call_offset(rank: u32, k: u64, bytes: u64) -> u64 {
    let stride = bytes.max(1).next_multiple_of(4096);
    let stripe = atomio_client::file::DIRECT_LOCK_STRIPE;
    let per_stripe = (stripe / stride).max(1);
    (u64::from(rank) + 4 * (k / per_stripe)) * stripe + k % per_stripe * stride
}

/// The calibration's call scenario (`calibrate`, `sim call-client`) in the model: four
/// clients, each making `calls` one-at-a-time writes of `bytes` at `call_offset`, one
/// file, four servers; atomic (strategy `ching:datatype:one-try`) unless `plain` (`none`:
/// the same writes without locks, the scenario's control).
pub fn call_scenario(
    costs: &Costs,
    calls: u64,
    bytes: u64,
    plain: bool,
) -> Result<WorkloadResult, String> {
    use atomio_workloads::plan::{Call, ClientPlan};
    let e = |e: atomio_layout::LayoutError| e.to_string();
    let piece = atomio_layout::Pattern::bytes(bytes).map_err(e)?;
    if bytes > atomio_client::file::DIRECT_LOCK_STRIPE {
        return Err("calls of at most one lock stripe".into());
    }
    let clients = (0..4u32)
        .map(|i| {
            let calls = (0..calls)
                .map(|k| {
                    Ok(Call {
                        kind: CallKind::Write,
                        access: Some(
                            Access::new(call_offset(i, k, bytes), piece.clone()).map_err(e)?,
                        ),
                        op: k as u32,
                    })
                })
                .collect::<Result<_, String>>()?;
            Ok(ClientPlan { rank: i, calls })
        })
        .collect::<Result<_, String>>()?;
    let plan = WorkloadPlan {
        workload: "call-client".into(),
        params: serde_json::Value::Null,
        clients,
        file_bytes: (0..4)
            .map(|i| call_offset(i, calls, bytes))
            .max()
            .unwrap_or(0),
        overlapping: false,
    };
    let strategy: Strategy = if plain { "none" } else { CALL_STRATEGY }.parse()?;
    run(
        &plan,
        &strategy,
        4,
        DataPath::Direct,
        costs,
        &Platform::here(costs),
        Fault::None,
        |_| {},
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_workloads::Workload;

    fn plan(name: &str, args: &[&str], clients: u32) -> WorkloadPlan {
        Workload::from_name(name, args)
            .unwrap()
            .plan(clients)
            .unwrap()
    }

    #[test]
    fn pages_touched_counts_each_page_once() {
        let one = atomio_layout::Pattern::bytes(1).unwrap();
        let p = atomio_layout::Pattern::hvector(4, 100, 1000, &one).unwrap();
        // Runs at 0, 1000, 2000, 3000 (page 0) — one page.
        assert_eq!(pages_touched(&Access::new(0, p).unwrap()), 1);
        let p = atomio_layout::Pattern::hvector(3, 10, 5000, &one).unwrap();
        assert_eq!(pages_touched(&Access::new(4090, p).unwrap()), 4);
    }

    #[test]
    fn page_sharing_counts_each_pages_writers_once() {
        let tiles = |element: &str, overlap: &str| {
            plan(
                "tile",
                &[
                    "--element-bytes",
                    element,
                    "--overlap-x",
                    overlap,
                    "--overlap-y",
                    overlap,
                ],
                4,
            )
        };
        // 128 KiB rows, page-aligned and disjoint: every page has one writer.
        assert_eq!(page_sharing(&tiles("1024", "0")), 1.0);
        // 8-byte elements: a tile row is 1 KiB, so X neighbours' rows share every page
        // (two writers), and Y neighbours' blocks do not meet.
        let small = page_sharing(&tiles("8", "0"));
        assert!((small - 2.0).abs() < 1e-9, "{small}");
    }

    /// Four clients writing 32 × 32 tiles that overlap their neighbours by 4.
    fn overlapping_tiles() -> WorkloadPlan {
        overlapping_tiles_of("1024")
    }

    /// 2 × 2 tiles of 32 × 32 elements of `element_bytes`, sharing 4 along each axis.
    fn overlapping_tiles_of(element_bytes: &str) -> WorkloadPlan {
        plan(
            "tile",
            &[
                "--tile-x",
                "32",
                "--tile-y",
                "32",
                "--overlap-x",
                "4",
                "--overlap-y",
                "4",
                "--element-bytes",
                element_bytes,
            ],
            4,
        )
    }

    #[test]
    fn overlapping_tiles_are_safe_and_a_broken_protocol_is_caught() {
        let c = Costs::for_tests();
        let p = Platform::here(&c);
        let tile = overlapping_tiles();
        for s in [
            "ching:datatype:one-try",
            "ching:posix:two-phase",
            "bounding-extent",
        ] {
            let st: Strategy = s.parse().unwrap();
            let r = run(&tile, &st, 4, DataPath::Direct, &c, &p, Fault::None, |_| {}).unwrap();
            assert_eq!(r.safety_checks, 4, "{s}");
            assert!(r.mib_per_s > 0.0);
        }
        // Negative control: clients that believe they hold after the optimistic round
        // write their overlapping tiles at once. A call with one lock server has no
        // optimistic round (it waits at once), so the tiles are made large enough (32 KiB
        // elements: 112.5 MiB) that the lower ones span two direct lock stripes.
        let large = overlapping_tiles_of("32768");
        for s in ["ching:datatype:one-try", "ching:list:alt-try"] {
            let st: Strategy = s.parse().unwrap();
            let e = run(
                &large,
                &st,
                4,
                DataPath::Direct,
                &c,
                &p,
                Fault::HeldAfterOptimistic,
                |_| {},
            )
            .unwrap_err();
            assert!(e.contains("conflicting locks"), "{s}: {e}");
        }
        // `none` takes no locks: nothing to check, nothing held.
        let none = Strategy::none();
        let r = run(
            &tile,
            &none,
            4,
            DataPath::Direct,
            &c,
            &p,
            Fault::None,
            |_| {},
        )
        .unwrap();
        assert_eq!(r.safety_checks, 0);
    }

    #[test]
    fn servers_placement_stages_atomic_writes_and_is_safe() {
        let c = Costs::for_tests();
        let p = Platform::ching07(&c);
        let tile = overlapping_tiles();
        let servers = DataPath::Servers {
            stripe_size: 64 << 10,
        };
        let none = run(
            &tile,
            &Strategy::none(),
            4,
            servers,
            &c,
            &p,
            Fault::None,
            |_| {},
        )
        .unwrap();
        let dt: Strategy = "ching:datatype:one-try".parse().unwrap();
        let locked = run(&tile, &dt, 4, servers, &c, &p, Fault::None, |_| {}).unwrap();
        assert_eq!(locked.safety_checks, 4);
        // Staged writes pay two more round trips and a second copy at the servers.
        assert!(locked.seconds > none.seconds, "{none:?} {locked:?}");
        // The NICs bound it: 2 Gb/s per client.
        assert!(
            none.mib_per_s < 4.0 * 250e6 / f64::from(1 << 20),
            "{none:?}"
        );
        let e = run(
            &tile,
            &dt,
            4,
            servers,
            &c,
            &p,
            Fault::HeldAfterOptimistic,
            |_| {},
        );
        assert!(e.unwrap_err().contains("conflicting locks"));
    }

    #[test]
    fn locking_costs_show_on_many_small_calls() {
        let c = Costs::for_tests();
        let p = Platform::here(&c);
        let ior = plan("ior-hard", &["--segments", "8"], 4);
        let none = run(
            &ior,
            &Strategy::none(),
            4,
            DataPath::Direct,
            &c,
            &p,
            Fault::None,
            |_| {},
        )
        .unwrap();
        let dt: Strategy = "ching:datatype:one-try".parse().unwrap();
        let locked = run(&ior, &dt, 4, DataPath::Direct, &c, &p, Fault::None, |_| {}).unwrap();
        assert!(locked.seconds > none.seconds, "{none:?} {locked:?}");
        assert_eq!(locked.calls, none.calls);
    }
}
