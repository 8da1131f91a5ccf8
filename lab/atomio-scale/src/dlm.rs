//! The cached-lock DLMs in the model: SeqDLM (Chen et al., SC'22) against the traditional
//! `dlm-lustre` / `dlm-basic`, on atomio's data servers (each server a lock actor and a
//! data actor, as the product runs them).
//!
//! Every lock decision is the product's: one `seqdlm::Resource` per object (stripe) at its
//! server — grants, expansion, early grant, early revocation, SNs, conversion. The client
//! follows the product's rules (`dlm/machine.rs`) at the level of messages and bytes:
//! one lock per object a call touches, in object order, on the hull of its pieces there,
//! in Fig. 10's mode (NBW inside one object, BW across objects; PW for a traditional DLM);
//! a cached lock that serves the mode and covers the hull is reused without a message;
//! with every lock held the bytes are copied into the client's cache and the call returns
//! (the paper's PIO); a lock is given back when revoked (after the call if in use):
//! cancel (BW/PW with dirty bytes downgraded to NBW), flush its bytes to the data actor,
//! release once acknowledged — an NBW lock's flush is deferred under early grant until the
//! server hurries it or the file is flushed. After every client's calls (the PIO phase)
//! every client flushes everything (the F phase).
//!
//! Checked as it runs: every resource's invariants (`Resource::check`: no two overlapping
//! grants incompatible by Table II, write SNs in grant order) after its steps, and at the
//! end, for every two writes whose lock hulls overlap at two or more objects, the same SN
//! order at each of them (MPI atomicity across stripes; Fig. 8's anomaly breaks it).
//!
//! Not modelled: reads, the cache's soft limit (256 MiB: runs here cache less), the
//! data servers' extent-cache cleaning and log, upgrade re-tagging costs.
//!
//! **Invariants:** a client copies a call's bytes only with every lock of the call held;
//! a lock is released only after its bytes' flush was acknowledged; a run returns only
//! when every write was copied and every byte flushed, every lock released.

use crate::costs::Costs;
use crate::engine::{ActorId, Engine, EngineStats, Model, Ns, Out, JITTER_SEED};
use crate::platform::Platform;
use atomio_layout::{ByteRange, Layout};
use atomio_lock::seqdlm::{Config, GrantId, Mode, Out as ROut, ReqId, Resource, State};
use atomio_proto::ClientId;
use atomio_workloads::{CallKind, WorkloadPlan};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Which DLM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Dlm {
    SeqDlm,
    DlmLustre,
    DlmBasic,
}

impl Dlm {
    pub fn name(self) -> &'static str {
        match self {
            Dlm::SeqDlm => "seqdlm",
            Dlm::DlmLustre => "dlm-lustre",
            Dlm::DlmBasic => "dlm-basic",
        }
    }

    fn config(self) -> Config {
        match self {
            Dlm::SeqDlm => Config::SEQDLM,
            Dlm::DlmLustre => Config::DLM_LUSTRE,
            Dlm::DlmBasic => Config::DLM_BASIC,
        }
    }
}

/// Deliberate bugs the checks must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DlmFault {
    None,
    /// Resources grant NBW/BW over GRANTED NBW locks (early grant without waiting for
    /// CANCELING): `Resource::check` must refuse the state.
    GrantOverGranted,
    /// NBW even across objects (Fig. 8): writes across stripes may be ordered differently
    /// at different stripes.
    NbwAcrossStripes,
}

#[derive(Clone, Debug, Serialize)]
pub struct DlmResult {
    pub dlm: &'static str,
    pub clients: u32,
    pub servers: u32,
    pub stripes: u32,
    pub bytes: u64,
    /// Until every call returned (the paper's PIO time), and until everything is flushed.
    pub pio_seconds: f64,
    pub total_seconds: f64,
    pub pio_mib_per_s: f64,
    pub total_mib_per_s: f64,
    pub lock_requests: u64,
    pub revocations: u64,
    pub flushes: u64,
    pub events: u64,
    /// Resource invariant checks run, and pairs of cross-stripe writes checked for order.
    pub resource_checks: u64,
    pub order_checks: u64,
}

enum Msg {
    /// A client starts (or goes on with) its calls.
    Next,
    /// Every client's calls returned: flush everything.
    FlushAll,
    Request {
        client: u32,
        object: u32,
        req: ReqId,
        mode: Mode,
        range: ByteRange,
    },
    Cancel {
        client: u32,
        object: u32,
        id: GrantId,
        downgrade: bool,
    },
    Release {
        client: u32,
        object: u32,
        id: GrantId,
    },
    Grant {
        object: u32,
        req: ReqId,
        id: GrantId,
        mode: Mode,
        range: ByteRange,
        state: State,
        sn: u64,
        absorbed: Vec<GrantId>,
    },
    Revoke {
        object: u32,
        id: GrantId,
    },
    Flush {
        client: u32,
        object: u32,
        id: GrantId,
        bytes: u64,
    },
    Flushed {
        object: u32,
        id: GrantId,
    },
}

#[derive(Debug)]
struct Lock {
    id: GrantId,
    object: u32,
    mode: Mode,
    range: ByteRange,
    state: State,
    sn: u64,
    dirty: u64,
    in_use: bool,
    revoke_pending: bool,
    giving_back: bool,
    deferred: bool,
    /// A flush of its bytes is on its way (its answer releases it).
    flushing: bool,
}

/// One call: per object it touches, (object, hull in object offsets, bytes).
type Pieces = Vec<(u32, ByteRange, u64)>;

#[derive(Default)]
struct Client {
    calls: Vec<Pieces>,
    next: usize,
    /// The call in progress: index of the next object to lock, locks held so far.
    at: usize,
    held: Vec<GrantId>,
    waiting: Option<ReqId>,
    req_seq: u64,
    locks: Vec<Lock>,
    pio_end: Option<Ns>,
    flushing_all: bool,
    done: Option<Ns>,
    /// SN of each object's lock, per call (for the order check).
    sns: Vec<Vec<(u32, ByteRange, u64)>>,
}

struct DlmModel<'a> {
    costs: &'a Costs,
    cfg: Config,
    fault: DlmFault,
    disk_bytes_per_s: Option<f64>,
    clients: Vec<Client>,
    /// Per object: its resource and the server it lives on.
    resources: Vec<Resource>,
    object_server: Vec<u32>,
    client_actors: Vec<ActorId>,
    lock_actors: Vec<ActorId>,
    data_actors: Vec<ActorId>,
    pio_left: u32,
    requests: u64,
    revocations: u64,
    flushes: u64,
    resource_steps: u64,
    resource_checks: u64,
    /// Steps per object since its resource was last checked.
    since_check: Vec<u64>,
}

fn ns(x: f64) -> Ns {
    x.max(0.0).round() as Ns
}

/// Fig. 10's rule (the product's `serves`).
fn serves(held: Mode, want: Mode) -> bool {
    match want {
        Mode::Pr => matches!(held, Mode::Pr | Mode::Pw),
        Mode::Nbw => held.is_write(),
        Mode::Bw => matches!(held, Mode::Bw | Mode::Pw),
        Mode::Pw => held == Mode::Pw,
    }
}

fn covers(outer: &ByteRange, inner: &ByteRange) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

impl DlmModel<'_> {
    fn mode_for(&self, objects: usize) -> Mode {
        if self.cfg.traditional() {
            Mode::Pw
        } else if objects > 1 && self.fault != DlmFault::NbwAcrossStripes {
            Mode::Bw
        } else {
            Mode::Nbw
        }
    }

    fn client_send_ns(&self) -> f64 {
        self.costs.net.client_msg_ns + self.costs.lock.client_send_ns
    }

    /// Goes on with the client's calls until one must wait; returns the CPU spent.
    fn run_calls(&mut self, now: Ns, c: u32, out: &mut Vec<Out<Msg>>) -> Result<Ns, String> {
        let mut cost = 0.0;
        loop {
            let cl = &self.clients[c as usize];
            if cl.next >= cl.calls.len() {
                if cl.pio_end.is_none() {
                    self.clients[c as usize].pio_end = Some(now + ns(cost));
                    self.pio_left -= 1;
                    if self.pio_left == 0 {
                        for &a in &self.client_actors {
                            out.push(Out::local(a, Msg::FlushAll));
                        }
                    }
                }
                return Ok(ns(cost));
            }
            let pieces = cl.calls[cl.next].clone();
            let mode = self.mode_for(pieces.len());
            // Lock each object in order: reuse a cached lock, or ask and wait.
            while self.clients[c as usize].at < pieces.len() {
                let cl = &mut self.clients[c as usize];
                let (object, hull, _) = pieces[cl.at];
                if let Some(l) = cl.locks.iter_mut().find(|l| {
                    l.object == object
                        && l.state == State::Granted
                        && !l.giving_back
                        && serves(l.mode, mode)
                        && covers(&l.range, &hull)
                }) {
                    l.in_use = true;
                    cl.held.push(l.id);
                    cl.at += 1;
                    continue;
                }
                cl.req_seq += 1;
                let req = ReqId(cl.req_seq);
                cl.waiting = Some(req);
                self.requests += 1;
                cost += self.costs.lock.client_op_ns + self.client_send_ns();
                let server = self.object_server[object as usize];
                out.push(Out::net(
                    self.lock_actors[server as usize],
                    Msg::Request {
                        client: c,
                        object,
                        req,
                        mode,
                        range: hull,
                    },
                ));
                return Ok(ns(cost));
            }
            // Every lock held: copy the bytes into the cache, tagged with the locks' SNs.
            let cl = &mut self.clients[c as usize];
            let mut sns = Vec::new();
            for &(object, hull, bytes) in &pieces {
                let l = cl
                    .locks
                    .iter_mut()
                    .find(|l| l.object == object && l.in_use)
                    .ok_or("a held lock vanished")?;
                l.dirty += bytes;
                sns.push((object, hull, l.sn));
                cost += bytes as f64 * self.costs.io.memcpy_byte_ns;
            }
            cl.sns.push(sns);
            for l in cl.locks.iter_mut() {
                l.in_use = false;
            }
            cl.held.clear();
            cl.at = 0;
            cl.next += 1;
            // Revocations that waited for the call, and grants sent CANCELING.
            let give: Vec<(u32, GrantId)> = cl
                .locks
                .iter()
                .filter(|l| (l.revoke_pending || l.state == State::Canceling) && !l.giving_back)
                .map(|l| (l.object, l.id))
                .collect();
            for (object, id) in give {
                cost += self.give_back(c, object, id, false, out) as f64;
            }
        }
    }

    /// Cancels lock `id` (downgrading a BW/PW one with dirty bytes) and flushes it — or
    /// defers the flush of an NBW lock under early grant, unless `force`.
    fn give_back(
        &mut self,
        c: u32,
        object: u32,
        id: GrantId,
        force: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Ns {
        let early = self.cfg.early_grant;
        let conversion = self.cfg.conversion;
        let send = self.client_send_ns();
        let cl = &mut self.clients[c as usize];
        let Some(l) = cl
            .locks
            .iter_mut()
            .find(|l| l.object == object && l.id == id)
        else {
            return 0;
        };
        let mut cost = 0.0;
        if !l.giving_back {
            l.giving_back = true;
            let downgrade = conversion && matches!(l.mode, Mode::Bw | Mode::Pw) && l.dirty > 0;
            if downgrade {
                l.mode = Mode::Nbw;
            }
            l.state = State::Canceling;
            l.revoke_pending = false;
            self.revocations += 1;
            cost += send;
            out.push(Out::net(
                self.lock_actors[self.object_server[l.object as usize] as usize],
                Msg::Cancel {
                    client: c,
                    object: l.object,
                    id,
                    downgrade,
                },
            ));
            if l.mode == Mode::Nbw && early && l.dirty > 0 && !force {
                l.deferred = true;
                return ns(cost);
            }
        }
        ns(cost) + self.flush_now(c, object, id, out)
    }

    /// Sends lock `id`'s bytes to its data server (or releases it if it has none).
    fn flush_now(&mut self, c: u32, object: u32, id: GrantId, out: &mut Vec<Out<Msg>>) -> Ns {
        let send = self.client_send_ns();
        let memcpy = self.costs.io.memcpy_byte_ns;
        let cl = &mut self.clients[c as usize];
        let Some(i) = cl
            .locks
            .iter()
            .position(|l| l.object == object && l.id == id)
        else {
            return 0;
        };
        let l = &mut cl.locks[i];
        l.deferred = false;
        if l.flushing {
            return 0; // its flush's answer releases it
        }
        let server = self.object_server[l.object as usize] as usize;
        if l.dirty > 0 {
            l.flushing = true;
            let bytes = std::mem::take(&mut l.dirty);
            self.flushes += 1;
            out.push(
                Out::net(
                    self.data_actors[server],
                    Msg::Flush {
                        client: c,
                        object,
                        id,
                        bytes,
                    },
                )
                .with_bytes(bytes),
            );
            ns(send + bytes as f64 * memcpy)
        } else {
            let l = cl.locks.remove(i);
            out.push(Out::net(
                self.lock_actors[server],
                Msg::Release {
                    client: c,
                    object: l.object,
                    id,
                },
            ));
            self.check_flush_done(c);
            ns(send)
        }
    }

    fn check_flush_done(&mut self, c: u32) {
        let cl = &mut self.clients[c as usize];
        if cl.flushing_all && cl.locks.is_empty() && cl.done.is_none() {
            cl.done = Some(0); // stamped by the caller's job end
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
        let n = &self.costs.net;
        let recv = ns(n.client_msg_ns + if first { n.client_batch_ns } else { 0.0 });
        let cost = match msg {
            Msg::Next => self.run_calls(now, c, out)?,
            Msg::FlushAll => {
                self.clients[c as usize].flushing_all = true;
                let ids: Vec<(u32, GrantId)> = self.clients[c as usize]
                    .locks
                    .iter()
                    .map(|l| (l.object, l.id))
                    .collect();
                let mut cost = 0;
                for (object, id) in ids {
                    cost += self.give_back(c, object, id, true, out);
                }
                self.check_flush_done(c);
                cost
            }
            Msg::Grant {
                object,
                req,
                id,
                mode,
                range,
                state,
                sn,
                absorbed,
            } => {
                let cl = &mut self.clients[c as usize];
                if cl.waiting != Some(req) {
                    return Err(format!("client {c} got a grant it did not wait for"));
                }
                cl.waiting = None;
                let mut dirty = 0;
                cl.locks.retain(|l| {
                    if l.object == object && absorbed.contains(&l.id) {
                        dirty += l.dirty;
                        false
                    } else {
                        true
                    }
                });
                cl.locks.push(Lock {
                    id,
                    object,
                    mode,
                    range,
                    state,
                    sn,
                    dirty,
                    in_use: true,
                    revoke_pending: state == State::Canceling,
                    giving_back: false,
                    deferred: false,
                    flushing: false,
                });
                cl.held.push(id);
                cl.at += 1;
                recv + ns(self.costs.lock.client_reply_ns) + self.run_calls(now, c, out)?
            }
            Msg::Revoke { object, id } => {
                let cl = &mut self.clients[c as usize];
                let mut cost = recv;
                match cl
                    .locks
                    .iter_mut()
                    .find(|l| l.object == object && l.id == id)
                {
                    None => {} // released meanwhile
                    Some(l) if l.in_use => l.revoke_pending = true,
                    // Hurried: someone waits for its release.
                    Some(l) if l.giving_back && l.deferred => {
                        cost += self.flush_now(c, object, id, out)
                    }
                    Some(l) if l.giving_back => {}
                    Some(_) => cost += self.give_back(c, object, id, false, out),
                }
                cost
            }
            Msg::Flushed { object, id } => {
                let cl = &mut self.clients[c as usize];
                let i = cl
                    .locks
                    .iter()
                    .position(|l| l.object == object && l.id == id)
                    .ok_or("a flush acknowledged for a lock not held")?;
                if cl.locks[i].dirty > 0 {
                    // Written again meanwhile (not possible: CANCELING locks are not
                    // reused); flush the rest.
                    return Err(format!("client {c}: lock {id:?} dirty after its flush"));
                }
                let l = cl.locks.remove(i);
                out.push(Out::net(
                    self.lock_actors[self.object_server[l.object as usize] as usize],
                    Msg::Release {
                        client: c,
                        object: l.object,
                        id,
                    },
                ));
                self.check_flush_done(c);
                recv + ns(self.client_send_ns())
            }
            _ => return Err("a client got a server's message".into()),
        };
        let cl = &mut self.clients[c as usize];
        if cl.done == Some(0) {
            cl.done = Some(now + cost);
        }
        Ok(cost)
    }

    fn lock_step(&mut self, msg: Msg, first: bool, out: &mut Vec<Out<Msg>>) -> Result<Ns, String> {
        let mut routs = Vec::new();
        let (object, result) = match msg {
            Msg::Request {
                client,
                object,
                req,
                mode,
                range,
            } => (
                object,
                self.resources[object as usize].request(
                    ClientId(u64::from(client)),
                    req,
                    mode,
                    range,
                    &mut routs,
                ),
            ),
            Msg::Cancel {
                client,
                object,
                id,
                downgrade,
            } => {
                let r = &mut self.resources[object as usize];
                let who = ClientId(u64::from(client));
                let mut res = r.revoked(who, id, &mut routs);
                if res.is_ok() && downgrade {
                    res = r.downgrade(who, id, Mode::Nbw, &mut routs);
                }
                (object, res)
            }
            Msg::Release { client, object, id } => (
                object,
                self.resources[object as usize].release(
                    ClientId(u64::from(client)),
                    id,
                    &mut routs,
                ),
            ),
            _ => return Err("a lock server got another message".into()),
        };
        result.map_err(|e| format!("object {object}: {e}"))?;
        self.resource_steps += 1;
        let r = &self.resources[object as usize];
        // Every step while few locks are granted; past that (the check is quadratic in
        // them) once per as many steps as locks are granted, so thousands of clients
        // sharing a stripe stay affordable.
        let since = &mut self.since_check[object as usize];
        *since += 1;
        let granted = r.granted().count() as u64;
        if granted <= 64 || *since >= granted {
            *since = 0;
            self.resource_checks += 1;
            r.check()
                .map_err(|e| format!("object {object}: resource invariant broken: {e}"))?;
        }
        let n = &self.costs.net;
        let sends = routs.len() as f64;
        for o in routs {
            match o {
                ROut::Grant {
                    to,
                    req,
                    id,
                    grant,
                    absorbed,
                } => out.push(Out::net(
                    self.client_actors[to.0 as usize],
                    Msg::Grant {
                        object,
                        req,
                        id,
                        mode: grant.mode,
                        range: grant.range,
                        state: grant.state,
                        sn: grant.sn,
                        absorbed,
                    },
                )),
                ROut::Revoke { to, id } => out.push(Out::net(
                    self.client_actors[to.0 as usize],
                    Msg::Revoke { object, id },
                )),
            }
        }
        Ok(ns(n.server_msg_ns * (1.0 + sends)
            + self.costs.lock.server_request_ns
            + if first { n.server_batch_ns } else { 0.0 }))
    }

    fn data_step(&mut self, msg: Msg, first: bool, out: &mut Vec<Out<Msg>>) -> Result<Ns, String> {
        let Msg::Flush {
            client,
            object,
            id,
            bytes,
        } = msg
        else {
            return Err("a data server got another message".into());
        };
        out.push(Out::net(
            self.client_actors[client as usize],
            Msg::Flushed { object, id },
        ));
        let n = &self.costs.net;
        // Received (a copy out of the socket), written into the object file; a disk slower
        // than that bounds it.
        let cpu = bytes as f64
            * (self.costs.io.memcpy_byte_ns + self.costs.pwrite_ns(1 << 20) / f64::from(1 << 20));
        let disk = self
            .disk_bytes_per_s
            .map_or(0.0, |bw| bytes as f64 / bw * 1e9);
        Ok(ns(2.0 * n.server_msg_ns
            + if first { n.server_batch_ns } else { 0.0 }
            + cpu.max(disk)))
    }
}

impl Model for DlmModel<'_> {
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
        let s = self.lock_actors.len() as u32;
        if actor.0 < n {
            self.client_step(now, actor.0, msg, first, out)
        } else if actor.0 < n + s {
            self.lock_step(msg, first, out)
        } else {
            self.data_step(msg, first, out)
        }
    }
}

/// Each call of `plan` as pieces per object under `layout` (writes only).
fn pieces_of(plan: &WorkloadPlan, layout: &Layout) -> Vec<Vec<Pieces>> {
    plan.clients
        .iter()
        .map(|cl| {
            cl.calls
                .iter()
                .filter(|c| c.kind == CallKind::Write)
                .filter_map(|c| c.access.as_ref())
                .map(|a| {
                    let mut per: BTreeMap<u32, (u64, u64, u64)> = BTreeMap::new();
                    for r in a.ranges() {
                        for p in layout.pieces(r) {
                            let (_, s) = layout.object_offset(p.range.start);
                            let e = s + p.range.len();
                            let x = per.entry(p.object).or_insert((s, e, 0));
                            x.0 = x.0.min(s);
                            x.1 = x.1.max(e);
                            x.2 += p.range.len();
                        }
                    }
                    per.into_iter()
                        .map(|(o, (s, e, b))| (o, ByteRange { start: s, end: e }, b))
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Runs `plan`'s writes under `dlm` on a file of `stripes` objects of `stripe_size`,
/// spread over `servers` servers.
#[allow(clippy::too_many_arguments)]
pub fn run(
    plan: &WorkloadPlan,
    dlm: Dlm,
    servers: u32,
    stripes: u32,
    stripe_size: u64,
    costs: &Costs,
    platform: &Platform,
    fault: DlmFault,
    tick: impl FnMut(EngineStats),
) -> Result<DlmResult, String> {
    let clients = plan.clients.len() as u32;
    if clients == 0 || servers == 0 || stripes == 0 {
        return Err("at least one client, server and stripe".into());
    }
    let layout =
        Layout::round_robin(stripe_size, stripes, servers, 0).map_err(|e| e.to_string())?;
    let calls = pieces_of(plan, &layout);
    let mut engine = Engine::new(platform.latency_ns).with_jitter(
        platform.jitter,
        platform.jitter_ns,
        JITTER_SEED,
    );
    let (client_actors, lock_actors) =
        crate::lockbench::place(&mut engine, platform, clients, servers);
    // Each server's data actor shares its host with the lock actor.
    let data_actors: Vec<ActorId> = (0..servers)
        .map(|i| {
            let host = match platform.shared_cores {
                Some(_) => crate::engine::HostId(0),
                None => crate::engine::HostId(clients + i),
            };
            engine.add_actor(host)
        })
        .collect();
    let mut resources: Vec<Resource> = (0..stripes).map(|_| Resource::new(dlm.config())).collect();
    if fault == DlmFault::GrantOverGranted {
        for r in &mut resources {
            r.fault_grant_over_granted = true;
        }
    }
    let mut model = DlmModel {
        costs,
        cfg: dlm.config(),
        fault,
        disk_bytes_per_s: platform.server_disk_bytes_per_s,
        clients: calls
            .into_iter()
            .map(|calls| Client {
                calls,
                ..Client::default()
            })
            .collect(),
        resources,
        object_server: (0..stripes).map(|o| layout.server_of_object(o).0).collect(),
        client_actors: client_actors.clone(),
        lock_actors,
        data_actors,
        pio_left: clients,
        requests: 0,
        revocations: 0,
        flushes: 0,
        resource_steps: 0,
        resource_checks: 0,
        since_check: vec![0; stripes as usize],
    };
    let writes: u64 = model.clients.iter().map(|c| c.calls.len() as u64).sum();
    engine.max_events = 1_000 * writes.max(1) * u64::from(clients.min(64)) + 10_000_000;
    for &a in &client_actors {
        engine.inject(0, a, Msg::Next);
    }
    let stats = engine.run(&mut model, tick)?;
    let mut pio = 0;
    let mut total = 0;
    for (i, c) in model.clients.iter().enumerate() {
        pio = pio.max(
            c.pio_end
                .ok_or_else(|| format!("client {i} never finished its calls"))?,
        );
        total = total.max(
            c.done
                .ok_or_else(|| format!("client {i} never finished flushing"))?,
        );
        if !c.locks.is_empty() {
            return Err(format!("client {i} still holds locks at the end"));
        }
    }
    for (o, r) in model.resources.iter().enumerate() {
        if !r.is_idle() {
            return Err(format!(
                "object {o} still has locks or waiters at the end: {:?}, {} queued",
                r.granted().collect::<Vec<_>>(),
                r.queued()
            ));
        }
    }
    let order_checks = check_order(&model.clients)?;
    let bytes: u64 = plan
        .clients
        .iter()
        .flat_map(|c| c.calls.iter())
        .filter(|c| c.kind == CallKind::Write)
        .map(|c| c.bytes())
        .sum();
    let mib = |ns: Ns| bytes as f64 / (ns.max(1) as f64 / 1e9) / f64::from(1 << 20);
    Ok(DlmResult {
        dlm: dlm.name(),
        clients,
        servers,
        stripes,
        bytes,
        pio_seconds: pio as f64 / 1e9,
        total_seconds: total as f64 / 1e9,
        pio_mib_per_s: mib(pio),
        total_mib_per_s: mib(total),
        lock_requests: model.requests,
        revocations: model.revocations,
        flushes: model.flushes,
        events: stats.events,
        resource_checks: model.resource_checks,
        order_checks,
    })
}

/// A write: (client, call).
type WriteId = (usize, usize);

/// Writes whose lock hulls overlap at two or more objects must be in the same SN order at
/// each.
fn check_order(clients: &[Client]) -> Result<u64, String> {
    // Per object: (hull, write, id) of multi-object writes.
    let mut by_object: HashMap<u32, Vec<(ByteRange, WriteId, u64)>> = HashMap::new();
    for (c, cl) in clients.iter().enumerate() {
        for (k, sns) in cl.sns.iter().enumerate() {
            if sns.len() < 2 {
                continue;
            }
            for &(o, hull, id) in sns {
                by_object.entry(o).or_default().push((hull, (c, k), id));
            }
        }
    }
    // For each pair overlapping at an object: the order there.
    let mut order: HashMap<(WriteId, WriteId), (bool, u32)> = HashMap::new();
    let mut checks = 0;
    for (&o, v) in &by_object {
        for (i, a) in v.iter().enumerate() {
            for b in &v[i + 1..] {
                if a.1 .0 == b.1 .0 || !a.0.overlaps(&b.0) {
                    continue;
                }
                let (key, before) = if a.1 < b.1 {
                    ((a.1, b.1), a.2 < b.2)
                } else {
                    ((b.1, a.1), b.2 < a.2)
                };
                checks += 1;
                match order.get(&key) {
                    Some(&(was, at)) if was != before => {
                        return Err(format!(
                            "writes {:?} and {:?} are ordered one way at object {at} and the other at object {o}: a torn write across stripes",
                            key.0, key.1
                        ))
                    }
                    Some(_) => {}
                    None => {
                        order.insert(key, (before, o));
                    }
                }
            }
        }
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_workloads::Workload;

    fn ior(clients: u32, xfer: u64, segments: u64) -> WorkloadPlan {
        Workload::from_name(
            "ior-strided",
            &[
                "--xfer-bytes".to_string(),
                xfer.to_string(),
                "--segments".to_string(),
                segments.to_string(),
            ],
        )
        .unwrap()
        .plan(clients)
        .unwrap()
    }

    #[test]
    fn seqdlm_beats_lustre_on_strided_writes_and_flushes_everything() {
        let c = Costs::for_tests();
        let p = Platform::seqdlm22(&c);
        let plan = ior(8, 47_008, 16);
        let seq = run(
            &plan,
            Dlm::SeqDlm,
            4,
            4,
            1 << 20,
            &c,
            &p,
            DlmFault::None,
            |_| {},
        )
        .unwrap();
        let lus = run(
            &plan,
            Dlm::DlmLustre,
            4,
            4,
            1 << 20,
            &c,
            &p,
            DlmFault::None,
            |_| {},
        )
        .unwrap();
        assert!(
            seq.pio_mib_per_s > 1.5 * lus.pio_mib_per_s,
            "{seq:?} {lus:?}"
        );
        assert!(seq.total_seconds >= seq.pio_seconds);
        assert!(seq.resource_checks > 0 && lus.resource_checks > 0);
    }

    #[test]
    fn a_resource_granting_over_granted_locks_is_caught() {
        let c = Costs::for_tests();
        let p = Platform::seqdlm22(&c);
        let plan = ior(6, 47_008, 8);
        let e = run(
            &plan,
            Dlm::SeqDlm,
            2,
            2,
            1 << 20,
            &c,
            &p,
            DlmFault::GrantOverGranted,
            |_| {},
        )
        .unwrap_err();
        assert!(e.contains("invariant"), "{e}");
    }

    #[test]
    fn nbw_across_stripes_tears_writes_and_is_caught() {
        let c = Costs::for_tests();
        let p = Platform::seqdlm22(&c);
        let args = [
            "--tile-x",
            "16",
            "--tile-y",
            "16",
            "--overlap-x",
            "8",
            "--overlap-y",
            "8",
        ];
        let tile = Workload::from_name("tile", &args).unwrap().plan(9).unwrap();
        let ok = run(
            &tile,
            Dlm::SeqDlm,
            3,
            4,
            16 << 10,
            &c,
            &p,
            DlmFault::None,
            |_| {},
        )
        .unwrap();
        assert!(ok.order_checks > 0);
        // Negative control: Fig. 8's anomaly, NBW for writes across stripes.
        let e = run(
            &tile,
            Dlm::SeqDlm,
            3,
            4,
            16 << 10,
            &c,
            &p,
            DlmFault::NbwAcrossStripes,
            |_| {},
        )
        .unwrap_err();
        assert!(e.contains("torn write across stripes"), "{e}");
    }

    /// A lock given back on revocation, its flush in flight, then flushed again by the
    /// final flush: released by the flush's answer, once (the projection's tile at two
    /// clients found a second release).
    #[test]
    fn a_lock_flushing_when_the_file_is_flushed_is_released_once() {
        let c = Costs::for_tests();
        let p = Platform::seqdlm22(&c);
        let args = [
            "--tile-x",
            "2048",
            "--tile-y",
            "2048",
            "--element-bytes",
            "4",
            "--overlap-x",
            "100",
            "--overlap-y",
            "100",
        ];
        let tile = Workload::from_name("tile", &args).unwrap().plan(2).unwrap();
        let r = run(
            &tile,
            Dlm::SeqDlm,
            2,
            2,
            1 << 20,
            &c,
            &p,
            DlmFault::None,
            |_| {},
        )
        .unwrap();
        assert!(r.total_seconds >= r.pio_seconds && r.flushes > 0, "{r:?}");
    }

    #[test]
    fn overlapping_tiles_across_stripes_keep_one_order() {
        let c = Costs::for_tests();
        let p = Platform::seqdlm22(&c);
        let tile = Workload::from_name("tile", &["--tile-x", "32", "--tile-y", "32"])
            .unwrap()
            .plan(4)
            .unwrap();
        for dlm in [Dlm::SeqDlm, Dlm::DlmLustre] {
            let r = run(&tile, dlm, 2, 4, 64 << 10, &c, &p, DlmFault::None, |_| {}).unwrap();
            assert!(r.order_checks > 0, "{dlm:?}: {r:?}");
        }
    }
}
