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
//! A failure carries the seed; `atomio sim --seed N` (or `SimConfig { seed: N, .. }`)
//! replays it exactly.

use crate::plan::{plan, Method};
use crate::protocol::{LockOp, Protocol, Send, Status};
use crate::server::LockServer;
use atomio_layout::{Access, Block, Layout, Order, Pattern, RangeList, ServerId};
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
}

#[derive(Clone, Debug)]
pub struct SimFailure {
    pub seed: u64,
    pub step: u64,
    pub what: String,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation failed at step {} with seed {}: {}\n  replay: atomio sim --seed {}",
            self.step, self.seed, self.what, self.seed
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
}

/// A random monotone access inside `[0, span)`.
fn random_access(rng: &mut ChaCha8Rng, span: u64) -> Access {
    loop {
        let base = rng.gen_range(0..span / 2);
        let room = span - base;
        let one = Pattern::bytes(1).expect("valid");
        let p = match rng.gen_range(0..4) {
            0 => Pattern::bytes(rng.gen_range(1..=room.min(700))),
            1 => {
                let blocklen = rng.gen_range(1..=8u64);
                let stride = blocklen + rng.gen_range(0..40u64);
                let count = rng.gen_range(1..=(room / stride).clamp(1, 40));
                Pattern::hvector(count, blocklen, stride, &one)
            }
            2 => {
                let mut at = 0u64;
                let mut blocks = Vec::new();
                for _ in 0..rng.gen_range(1..12) {
                    at += rng.gen_range(0..60u64);
                    let len = rng.gen_range(1..30u64);
                    if at + len > room {
                        break;
                    }
                    blocks.push(Block {
                        disp: at,
                        blocklen: len,
                    });
                    at += len;
                }
                if blocks.is_empty() {
                    continue;
                }
                Pattern::hindexed(blocks, &one)
            }
            _ => {
                let (rows, cols) = (rng.gen_range(2..12u64), rng.gen_range(2..64u64));
                let (sr, sc) = (rng.gen_range(1..=rows), rng.gen_range(1..=cols));
                let (r0, c0) = (rng.gen_range(0..=rows - sr), rng.gen_range(0..=cols - sc));
                let order = if rng.gen_bool(0.5) {
                    Order::C
                } else {
                    Order::Fortran
                };
                Pattern::subarray(&[rows, cols], &[sr, sc], &[r0, c0], order, &one)
            }
        };
        let Ok(p) = p else { continue };
        if let Ok(a) = Access::new(base, p) {
            if a.hull().is_some_and(|h| h.end <= span) {
                return a;
            }
        }
    }
}

const FILE: FileId = FileId(1);

/// Runs one simulation. `Err` describes the first violation, with the seed.
pub fn run(cfg: &SimConfig) -> Result<SimReport, SimFailure> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let layout = Layout::round_robin(cfg.stripe_size, cfg.servers, cfg.servers, 0)
        .expect("valid sim layout");
    let mut servers: Vec<LockServer> = (0..cfg.servers)
        .map(|s| {
            let mut srv = LockServer::with_id(ServerId(s));
            srv.ignore_conflicts = cfg.fault == SimFault::ServerIgnoresConflicts;
            srv
        })
        .collect();
    let faults = crate::protocol::Faults {
        skip_truncation: cfg.fault == SimFault::SkipTruncation,
        held_after_optimistic: cfg.fault == SimFault::HeldAfterOptimistic,
    };
    let mut clients: Vec<SimClient> = (0..cfg.clients)
        .map(|_| SimClient {
            op: None,
            op_seq: 0,
            bytes: RangeList::new(),
            mode: LockMode::Write,
            done_ops: 0,
            label: String::new(),
        })
        .collect();
    let mut inflight: Vec<Envelope> = Vec::new();
    let mut report = SimReport::default();
    let mut step = 0u64;
    let fail = |step: u64, what: String| SimFailure {
        seed: cfg.seed,
        step,
        what,
    };
    let max_steps = 200_000 + 20_000 * (cfg.clients * cfg.ops_per_client) as u64;
    let mut sends: Vec<Send> = Vec::new();
    let mut outgoing = Vec::new();

    loop {
        step += 1;
        if step > max_steps {
            return Err(fail(
                step,
                format!("no completion after {max_steps} steps (livelock?)"),
            ));
        }
        // Events: deliver any in-flight message, or act for a client that is idle (start
        // its next op) or holding (release). Acquiring/releasing clients wait for messages.
        let actors: Vec<usize> = (0..clients.len())
            .filter(|&c| {
                let cl = &clients[c];
                match &cl.op {
                    None => cl.done_ops < cfg.ops_per_client,
                    Some(op) => op.status() == Status::Held,
                }
            })
            .collect();
        let events = inflight.len() + actors.len();
        if events == 0 {
            if clients
                .iter()
                .all(|c| c.done_ops == cfg.ops_per_client && c.op.is_none())
            {
                break;
            }
            let stuck: Vec<String> = clients
                .iter()
                .enumerate()
                .filter(|(_, c)| c.op.is_some())
                .map(|(i, c)| format!("client {i} ({})", c.label))
                .collect();
            return Err(fail(
                step,
                format!("deadlock: nothing in flight, waiting: {}", stuck.join(", ")),
            ));
        }
        let pick = rng.gen_range(0..events);
        sends.clear();
        let mut acted: Option<usize> = None;
        if pick < inflight.len() {
            match inflight.swap_remove(pick) {
                Envelope::ToServer {
                    client,
                    server,
                    tag,
                    request,
                } => {
                    outgoing.clear();
                    servers[server.0 as usize].handle(
                        ClientId(client as u64),
                        tag,
                        request,
                        &mut outgoing,
                    );
                    for o in outgoing.drain(..) {
                        inflight.push(Envelope::ToClient {
                            client: o.to.0 as usize,
                            tag: o.tag,
                            reply: o.reply,
                        });
                    }
                    report.messages += 1;
                }
                Envelope::ToClient { client, tag, reply } => {
                    let cl = &mut clients[client];
                    let op = cl.op.as_mut().filter(|_| tag >> 32 == cl.op_seq).ok_or_else(|| {
                        fail(step, format!("client {client} got a reply for an operation it does not run: {reply:?}"))
                    })?;
                    op.on_reply(tag as u32, reply, &mut sends);
                    acted = Some(client);
                }
            }
        } else {
            let c = actors[pick - inflight.len()];
            let cl = &mut clients[c];
            match &mut cl.op {
                None => {
                    let access = random_access(&mut rng, cfg.file_bytes);
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
                    let mut op = LockOp::new(FILE, mode, protocol, plan(&access, &layout, method));
                    op.inject(faults);
                    op.start(&mut sends);
                    cl.op = Some(op);
                }
                Some(op) => op.release(&mut sends),
            }
            acted = Some(c);
        }
        if let Some(c) = acted {
            let cl = &mut clients[c];
            for s in sends.drain(..) {
                inflight.push(Envelope::ToServer {
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
                    report.truncations += st.truncations;
                    report.ops += 1;
                    cl.done_ops += 1;
                }
                Some(Status::Failed(e)) => {
                    return Err(fail(step, format!("client {c} ({}) failed: {e}", cl.label)));
                }
                Some(Status::Held) => {
                    // Safety from the clients' view: nobody else holds a conflicting op.
                    for (o, other) in clients.iter().enumerate() {
                        if o == c
                            || !matches!(other.op.as_ref().map(LockOp::status), Some(Status::Held))
                        {
                            continue;
                        }
                        let me = &clients[c];
                        if (me.mode == LockMode::Write || other.mode == LockMode::Write)
                            && overlap(&me.bytes, &other.bytes)
                        {
                            return Err(fail(
                                step,
                                format!(
                                    "clients {c} ({}) and {o} ({}) hold conflicting locks at once",
                                    me.label, other.label
                                ),
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        if step.is_multiple_of(cfg.check_every) {
            check_servers(&servers, &layout).map_err(|w| fail(step, w))?;
        }
    }
    check_servers(&servers, &layout).map_err(|w| fail(step, w))?;
    for (i, s) in servers.iter().enumerate() {
        if s.open_requests() != 0 || s.index_entries() != 0 {
            return Err(fail(
                step,
                format!(
                    "server {i} still holds {} requests after everyone released",
                    s.open_requests()
                ),
            ));
        }
        report.waits += s.stats().waits;
    }
    report.steps = step;
    Ok(report)
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
