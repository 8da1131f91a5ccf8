//! The model of `atomio-lab bench locks` (Ching et al. §6.1): every client acquires, then
//! releases, `locks` one-byte locks `spacing` bytes apart with one method and protocol.
//!
//! * **scaling**: client `i` locks its own region; all start together, meet at a barrier
//!   once they hold everything, then all release (the paper's procedure);
//! * **contention**: client `i`'s region starts `i · (1 − overlap) · region` in, and each
//!   releases as soon as it holds everything.
//!
//! Rates are computed as the benchmark computes them: total locks over the length of the
//! union of the clients' acquire (release) intervals. The servers are real `LockServer`s
//! and the clients real `LockOp`s (see `lock_service`); every `Held` is checked against
//! every other holder (`held`), so a run is also a safety check at that scale.
//!
//! **Invariants:** a run either returns rates with every client done and every server
//! empty, or an error (a conflict, a failed operation, a stall) — never a partial result.

use crate::costs::Costs;
use crate::engine::{ActorId, Engine, EngineStats, HostSpec, Model, Ns, Out, JITTER_SEED};
use crate::held::{Holders, Owner};
use crate::lock_service::{ClientLocks, SimServer, Wire};
use crate::platform::Platform;
use atomio_layout::{Access, Layout, Pattern, ServerId};
use atomio_lock::{plan, Method, Protocol, Status};
use atomio_proto::{FileId, LockMode, Reply, Request};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct LockBenchSpec {
    pub clients: u32,
    pub servers: u32,
    pub locks: u64,
    pub spacing: u64,
    /// `None`: the scaling variant; `Some(pct)`: contention with this overlap.
    pub overlap_pct: Option<u32>,
    pub method: Method,
    pub protocol: Protocol,
    pub stripe_size: u64,
    /// Odd-numbered clients take read locks (even ones write).
    pub odd_clients_read: bool,
    pub fault: Fault,
}

/// Deliberate bugs the safety check must catch (negative controls).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Fault {
    None,
    /// Servers grant writes over read locks (the product's `ignore_conflicts` control).
    ServersIgnoreReadConflicts,
    /// Clients believe they hold everything after the optimistic round.
    HeldAfterOptimistic,
}

impl LockBenchSpec {
    pub fn label(&self) -> String {
        format!("{}-{}", self.method, self.protocol)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct LockBenchResult {
    pub acquire_locks_per_s: f64,
    pub release_locks_per_s: f64,
    /// Messages one client sent (mean).
    pub messages_per_client: f64,
    /// Virtual seconds until the last release.
    pub sim_seconds: f64,
    pub events: u64,
    /// Takes the safety check judged.
    pub safety_checks: u64,
}

enum Msg {
    /// A client starts acquiring (the benchmark's start barrier).
    Start,
    /// A client passed the barrier after acquiring: release.
    Release,
    Lock {
        client: u32,
        tag: u64,
        request: Request,
    },
    Reply {
        tag: u64,
        reply: Reply,
    },
    /// A server continues sliced work.
    Work,
}

crate::lock_service::impl_lock_messages!(Msg);

#[derive(Default)]
struct Client {
    locks: ClientLocks,
    access: Option<Access>,
    acquire: (Ns, Ns),
    release: (Ns, Ns),
    held: bool,
    done: bool,
}

struct LockBench<'a> {
    spec: &'a LockBenchSpec,
    costs: &'a Costs,
    layout: Layout,
    clients: Vec<Client>,
    servers: Vec<SimServer>,
    client_actors: Vec<ActorId>,
    server_actors: Vec<ActorId>,
    holders: Holders,
    held_count: u32,
    wires: Vec<Wire>,
}

const FILE: FileId = FileId(7);

impl LockBench<'_> {
    fn mode(&self, client: u32) -> LockMode {
        if self.spec.odd_clients_read && client % 2 == 1 {
            LockMode::Read
        } else {
            LockMode::Write
        }
    }

    fn send_wires(&mut self, client: u32, out: &mut Vec<Out<Msg>>) {
        for (server, tag, request) in self.wires.drain(..) {
            out.push(Out::net(
                self.server_actors[server.0 as usize],
                Msg::Lock {
                    client,
                    tag,
                    request,
                },
            ));
        }
    }

    fn client_step(
        &mut self,
        now: Ns,
        c: u32,
        msg: Msg,
        first: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Result<Ns, String> {
        let costs = self.costs;
        let mode = self.mode(c);
        let cl = &mut self.clients[c as usize];
        let mut cost = match msg {
            Msg::Start => {
                let access = cl.access.as_ref().expect("set up");
                let subs = plan(access, &self.layout, self.spec.method);
                cl.acquire.0 = now;
                cl.locks
                    .start(costs, FILE, mode, self.spec.protocol, subs, &mut self.wires)
            }
            Msg::Release => {
                cl.held = false;
                cl.release.0 = now;
                cl.locks.release(costs, false, &mut self.wires)
            }
            Msg::Reply { tag, reply } => {
                cl.locks.on_reply(costs, tag, reply, first, &mut self.wires)
            }
            _ => return Err("a client got a server's message".into()),
        };
        let status = cl.locks.status();
        match status {
            Some(Status::Held) if !cl.held => {
                cl.held = true;
                cl.acquire.1 = now + cost;
                let access = cl.access.clone().expect("set up");
                let write = mode == LockMode::Write;
                self.holders.take(
                    cl.locks.holder_id(c),
                    c,
                    &access,
                    write,
                    Owner::Striped(self.layout.clone()),
                    cl.locks.servers(),
                )?;
                if self.spec.overlap_pct.is_some() {
                    // Contention: release at once (no barrier).
                    let cl = &mut self.clients[c as usize];
                    cl.held = false;
                    cl.release.0 = now + cost;
                    cost += cl.locks.release(costs, false, &mut self.wires);
                } else {
                    self.held_count += 1;
                    if self.held_count == self.spec.clients {
                        // The last one at the barrier lets everyone go.
                        for &a in &self.client_actors {
                            out.push(Out::local(a, Msg::Release));
                        }
                    }
                }
            }
            Some(Status::Released) => {
                let cl = &mut self.clients[c as usize];
                cl.release.1 = now + cost;
                cl.done = true;
                cl.locks.finish();
            }
            Some(Status::Failed(e)) => return Err(format!("client {c}: {e}")),
            _ => {}
        }
        self.send_wires(c, out);
        Ok(cost)
    }

    fn server_step(
        &mut self,
        s: u32,
        msg: Msg,
        first: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Result<Ns, String> {
        self.servers[s as usize].step(
            self.server_actors[s as usize],
            self.costs,
            &mut self.holders,
            msg,
            first,
            &self.client_actors,
            out,
        )
    }
}

impl Model for LockBench<'_> {
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
        // Actors are numbered clients first, then servers.
        if actor.0 < self.spec.clients {
            self.client_step(now, actor.0, msg, first, out)
        } else {
            self.server_step(actor.0 - self.spec.clients, msg, first, out)
        }
    }
}

/// Places clients and servers on the platform's hosts; returns (client actors, server
/// actors), created in that order (so actor ids are clients first, then servers).
pub fn place<M>(
    engine: &mut Engine<M>,
    platform: &Platform,
    clients: u32,
    servers: u32,
) -> (Vec<ActorId>, Vec<ActorId>) {
    let shared = platform.shared_cores.map(|cores| {
        engine.add_host(HostSpec {
            cores,
            nic_bytes_per_s: None,
            switch_ns: 0,
            wake_ns: platform.wake_ns,
            placement: platform.placement,
        })
    });
    let mut make = |cores: u32, n: u32| -> Vec<ActorId> {
        (0..n)
            .map(|_| {
                let h = shared.unwrap_or_else(|| {
                    engine.add_host(HostSpec {
                        cores,
                        nic_bytes_per_s: platform.nic_bytes_per_s,
                        switch_ns: 0,
                        wake_ns: platform.wake_ns,
                        placement: crate::engine::Placement::Shared,
                    })
                });
                engine.add_actor(h)
            })
            .collect()
    };
    let c = make(platform.client_cores, clients);
    let s = make(platform.server_cores, servers);
    (c, s)
}

/// Runs one configuration of the lock benchmark in the model.
pub fn run(
    spec: &LockBenchSpec,
    costs: &Costs,
    platform: &Platform,
    tick: impl FnMut(EngineStats),
) -> Result<LockBenchResult, String> {
    if spec.clients == 0 || spec.servers == 0 || spec.locks == 0 || spec.spacing == 0 {
        return Err("clients, servers, locks and spacing must be at least 1".into());
    }
    let layout = Layout::round_robin(spec.stripe_size, spec.servers, spec.servers, 0)
        .map_err(|e| e.to_string())?;
    let one = Pattern::bytes(1).map_err(|e| e.to_string())?;
    let pattern = Pattern::hvector(spec.locks, 1, spec.spacing, &one).map_err(|e| e.to_string())?;
    let region = spec.locks * spec.spacing;
    let shift = match spec.overlap_pct {
        None => region,
        Some(ov) => region / 100 * u64::from(100 - ov.min(100)),
    };
    let mut engine = Engine::new(platform.latency_ns).with_jitter(
        platform.jitter,
        platform.jitter_ns,
        JITTER_SEED,
    );
    let (client_actors, server_actors) = place(&mut engine, platform, spec.clients, spec.servers);
    // `bench locks`' clients are tasks of one multi-threaded tokio runtime, whose worker
    // threads take them from shared queues (work stealing); its servers are processes,
    // which the kernel keeps on per-core queues where the platform says so.
    for &c in &client_actors {
        engine.task(c);
    }
    let mut clients = Vec::new();
    for i in 0..spec.clients {
        let mut c = Client {
            access: Some(
                Access::new(u64::from(i) * shift, pattern.clone()).map_err(|e| e.to_string())?,
            ),
            ..Client::default()
        };
        c.locks.believe_early = spec.fault == Fault::HeldAfterOptimistic;
        clients.push(c);
    }
    let mut model = LockBench {
        spec,
        costs,
        layout,
        clients,
        servers: (0..spec.servers)
            .map(|s| SimServer::new(ServerId(s), spec.fault == Fault::ServersIgnoreReadConflicts))
            .collect(),
        client_actors: client_actors.clone(),
        server_actors,
        holders: Holders::default(),
        held_count: 0,
        wires: Vec::new(),
    };
    // Server i's actor id is clients + i: `handle` relies on that numbering.
    debug_assert!(model
        .server_actors
        .iter()
        .enumerate()
        .all(|(i, a)| a.0 == spec.clients + i as u32));
    engine.max_events = 64 * spec.clients as u64 * spec.locks.max(64) + 1_000_000;
    for &a in &client_actors {
        engine.inject(0, a, Msg::Start);
    }
    let stats = engine.run(&mut model, tick)?;
    if let Some(c) = model.clients.iter().position(|c| !c.done) {
        return Err(format!(
            "client {c} never finished (a stall: nothing left to happen)"
        ));
    }
    for (i, s) in model.servers.iter().enumerate() {
        if s.table.open_requests() != 0 {
            return Err(format!(
                "server {i} still holds requests after every release"
            ));
        }
    }
    let total = (spec.locks * u64::from(spec.clients)) as f64;
    let acq = union_ns(model.clients.iter().map(|c| c.acquire));
    let rel = union_ns(model.clients.iter().map(|c| c.release));
    let msgs: u64 = model.clients.iter().map(|c| c.locks.messages).sum();
    Ok(LockBenchResult {
        acquire_locks_per_s: total / (acq.max(1) as f64 / 1e9),
        release_locks_per_s: total / (rel.max(1) as f64 / 1e9),
        messages_per_client: msgs as f64 / f64::from(spec.clients),
        sim_seconds: stats.now as f64 / 1e9,
        events: stats.events,
        safety_checks: model.holders.checks,
    })
}

/// Length of the union of intervals (the benchmark's `union_length`).
pub fn union_ns(spans: impl Iterator<Item = (Ns, Ns)>) -> Ns {
    let mut v: Vec<(Ns, Ns)> = spans.filter(|(a, b)| b > a).collect();
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(Ns, Ns)> = None;
    for (a, b) in v {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((s, e)) = cur {
        total += e - s;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(method: Method, protocol: Protocol, clients: u32) -> LockBenchSpec {
        LockBenchSpec {
            clients,
            servers: clients,
            locks: 2048,
            spacing: 64,
            overlap_pct: None,
            method,
            protocol,
            stripe_size: 65_536,
            odd_clients_read: false,
            fault: Fault::None,
        }
    }

    #[test]
    fn datatype_beats_posix_two_phase_by_orders_of_magnitude() {
        let c = Costs::for_tests();
        let p = Platform::here(&c);
        let dt = run(&spec(Method::Datatype, Protocol::OneTry, 4), &c, &p, |_| {}).unwrap();
        let px = run(&spec(Method::Posix, Protocol::TwoPhase, 4), &c, &p, |_| {}).unwrap();
        // POSIX pays a message per lock, datatype one per server.
        assert_eq!(px.messages_per_client, 2.0 * 2048.0);
        assert!(dt.messages_per_client <= 8.0, "{dt:?}");
        assert!(
            dt.acquire_locks_per_s > 50.0 * px.acquire_locks_per_s,
            "{dt:?} vs {px:?}"
        );
        assert_eq!(px.safety_checks, 4);
    }

    #[test]
    fn runs_are_deterministic() {
        let c = Costs::for_tests();
        let p = Platform::here(&c);
        let mut s = spec(Method::List { max_ranges: 64 }, Protocol::AltTry, 4);
        s.overlap_pct = Some(50);
        let a = run(&s, &c, &p, |_| {}).unwrap();
        let b = run(&s, &c, &p, |_| {}).unwrap();
        assert_eq!(a.acquire_locks_per_s, b.acquire_locks_per_s);
        assert_eq!(a.events, b.events);
    }

    #[test]
    fn contention_is_safe_and_a_server_ignoring_conflicts_is_caught() {
        let c = Costs::for_tests();
        // A host per process: clients act at once, as on a cluster.
        let p = Platform::ching07(&c);
        for protocol in Protocol::ALL {
            let mut s = spec(Method::Datatype, protocol, 6);
            s.overlap_pct = Some(100);
            s.odd_clients_read = true;
            let r = run(&s, &c, &p, |_| {}).unwrap();
            assert_eq!(r.safety_checks, 6, "{protocol}");
            // Negative control: the same run with servers that grant writes over reads.
            s.fault = Fault::ServersIgnoreReadConflicts;
            let e = run(&s, &c, &p, |_| {}).unwrap_err();
            assert!(e.contains("conflicting locks"), "{protocol}: {e}");
        }
        // Negative control: clients that believe they hold after the optimistic round.
        for protocol in [Protocol::OneTry, Protocol::AltTry] {
            let mut s = spec(Method::Datatype, protocol, 6);
            s.overlap_pct = Some(100);
            run(&s, &c, &p, |_| {}).unwrap();
            s.fault = Fault::HeldAfterOptimistic;
            let e = run(&s, &c, &p, |_| {}).unwrap_err();
            assert!(e.contains("conflicting locks"), "{protocol}: {e}");
        }
    }

    #[test]
    fn more_servers_on_their_own_hosts_scale_acquire() {
        let c = Costs::for_tests();
        let p = Platform::ching07(&c);
        let small = run(&spec(Method::Datatype, Protocol::OneTry, 2), &c, &p, |_| {}).unwrap();
        let big = run(
            &spec(Method::Datatype, Protocol::OneTry, 16),
            &c,
            &p,
            |_| {},
        )
        .unwrap();
        assert!(
            big.acquire_locks_per_s > 3.0 * small.acquire_locks_per_s,
            "{small:?} {big:?}"
        );
    }

    #[test]
    fn union_of_spans() {
        assert_eq!(union_ns([(0, 10), (5, 20), (30, 40)].into_iter()), 30);
        assert_eq!(union_ns(std::iter::empty()), 0);
    }
}
