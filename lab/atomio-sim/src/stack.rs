//! A seeded, deterministic simulation of whole atomic calls: locks *and* data.
//!
//! Clients run `CallOp`s — the very machines `File` drives over TCP — with a technique
//! chosen per call (every Ching method × protocol and block locks, or bounding-extent and
//! whole-file: one lock space per run, see `strategies`) on
//! random overlapping noncontiguous accesses of one file striped over the servers; writes
//! carry verifier tags, reads record what they saw. Servers are real `LockServer`s and
//! `DataService`s over in-memory stores. Every message is held in flight and the seeded RNG
//! picks which one is delivered next (no FIFO, not even per link). Same seed, same run.
//!
//! At the end the file's bytes are read back from the servers and the verifier decides:
//! every write must appear whole and the writes and reads must be serializable. Liveness:
//! nothing in flight while a client has unfinished calls is a deadlock; a step budget
//! catches livelock. Server invariants are checked as the lock simulator does.
//!
//! Negative controls (`StackFault`): clients that take no locks, or that release their
//! locks as soon as the data messages are sent, must be caught by the verifier on some
//! seed — proving the check can fail.
//!
//! **Crashes** (`crashes`): now and then a client dies in the middle of a call, as under
//! `kill -9`: each message it had in flight to a server is delivered or lost (a coin flip),
//! replies to it are lost, every server learns it is gone (data service first, then locks,
//! as a server's actors do), and it comes back as a new client (a new id) with its next
//! call. A write cut short this way must appear whole or not at all: after the run its
//! decider says whether it committed; a committed one is handed to the verifier like any
//! other (it must appear whole, or overwritten by later writes), an aborted one is not (none
//! of its bytes may appear).
//! Negative control `StackFault::NoStaging`: crashes with plain (unstaged) writes are caught.
//!
//! A failure names its seed; `atomio-lab sim --stack --seed N` replays it.

use atomio_client::call::{CallIo, CallOp};
use atomio_client::strategy::Strategy;
use atomio_client::technique::{LockGeometry, Locks};
use atomio_data::{DataService, MemStore};
use atomio_layout::{Access, ByteRange, Layout, RangeList, ServerId};
use atomio_lock::{LockOp, LockServer, Method, Outgoing, Protocol, Send};
use atomio_net::{DataOp, Machine, Progress};
use atomio_proto::{metadata_server, ClientId, LockMode, Reply, Request, RequestClass};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;

#[derive(Clone, Debug)]
pub struct StackSimConfig {
    pub seed: u64,
    pub clients: usize,
    pub servers: u32,
    pub calls_per_client: usize,
    /// Bytes of the file the accesses fall in (small = more conflicts).
    pub file_bytes: u64,
    pub stripe_size: u64,
    /// Fraction of calls that read.
    pub read_fraction: f64,
    pub fault: StackFault,
    /// Clients crash mid-call now and then (see the module comment).
    pub crashes: bool,
    /// Servers admit changes of bytes through their lock service (mandatory locks, as
    /// real servers do); off, they apply whatever arrives (to show what the check stops).
    pub mandatory_locks: bool,
}

/// Deliberate bugs; the verifier must catch each on some seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackFault {
    None,
    /// Calls take no locks at all.
    NoLocks,
    /// Calls release their locks as soon as the data messages are sent.
    EarlyRelease,
    /// Atomic writes are sent as plain writes, not staged: a crash mid-write must then be
    /// caught as a torn write (run with `crashes`).
    NoStaging,
}

impl StackSimConfig {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            clients: 8,
            servers: 4,
            calls_per_client: 4,
            file_bytes: 1536,
            stripe_size: 64,
            read_fraction: 0.3,
            fault: StackFault::None,
            crashes: false,
            mandatory_locks: true,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackSimReport {
    pub steps: u64,
    pub calls: u64,
    pub messages: u64,
    /// Clients that crashed mid-call, and how many of their cut-short writes committed.
    pub crashes: u64,
    pub crashed_writes_visible: u64,
}

#[derive(Clone, Debug)]
pub struct StackSimFailure {
    pub seed: u64,
    pub step: u64,
    pub what: String,
}

impl fmt::Display for StackSimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stack simulation failed at step {} with seed {}: {}\n  replay: atomio-lab sim --stack --seed {}",
            self.step, self.seed, self.what, self.seed
        )
    }
}

impl std::error::Error for StackSimFailure {}

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

struct Call {
    access: Access,
    mode: LockMode,
    strategy: Strategy,
}

struct Client {
    calls: Vec<Call>,
    next: usize,
    /// The call in flight and its sequence number (the tag's high half).
    current: Option<(CallOp, u64)>,
    seq: u64,
    /// Incremented at each crash: the client's id at the servers changes with it.
    incarnation: u64,
}

/// A client's id at the servers in its current incarnation.
fn server_id(client: usize, incarnation: u64) -> ClientId {
    ClientId((incarnation << 20) + client as u64 + 1)
}

fn client_of(id: ClientId) -> (usize, u64) {
    let v = id.0 - 1;
    ((v & ((1 << 20) - 1)) as usize, v >> 20)
}

struct Server {
    locks: LockServer,
    data: DataService<MemStore>,
    mandatory_locks: bool,
}

/// The techniques calls choose from. Every client of one file must lock in the same lock
/// space: the striped one (Ching methods and protocols, block locks — freely mixed) or the
/// central one (bounding-extent, whole-file). A bounding-extent lock at the central server
/// does not exclude a Ching lock on the striped servers; a run takes one space.
fn strategies(striped: bool) -> Vec<Strategy> {
    if striped {
        let mut v = Strategy::ching_all();
        v.push(Strategy::ching(
            Method::List { max_ranges: 3 },
            Protocol::OneTry,
        ));
        v.push("block:48".parse().expect("a valid name"));
        v
    } else {
        vec![Strategy::bounding_extent(), Strategy::whole_file()]
    }
}

/// A random monotone access within `[0, file)`: a few ranges or a vector.
fn random_access(rng: &mut ChaCha8Rng, file: u64) -> Access {
    if rng.gen_bool(0.5) {
        let count = rng.gen_range(2..12u64);
        let block = rng.gen_range(1..24u64);
        let stride = block + rng.gen_range(1..40u64);
        let span = (count - 1) * stride + block;
        let start = rng.gen_range(0..file.saturating_sub(span).max(1));
        let p = atomio_layout::Pattern::hvector(
            count,
            1,
            stride,
            &atomio_layout::Pattern::bytes(block).expect("non-empty"),
        )
        .expect("a valid vector");
        Access::new(start, p).expect("within the file")
    } else {
        let n = rng.gen_range(1..6);
        let ranges = (0..n)
            .map(|_| {
                let s = rng.gen_range(0..file - 1);
                let e = (s + rng.gen_range(1..200)).min(file);
                ByteRange::new(s, e).expect("s < e")
            })
            .collect();
        Access::from_list(&RangeList::from_ranges(ranges)).expect("disjoint after merging")
    }
}

/// One message at a server: lock requests to the lock service, the rest to the data
/// service, as `client` — changes of bytes admitted by the lock service first (mandatory
/// locks), as a real server's lock actor does.
fn deliver(s: &mut Server, client: ClientId, tag: u64, request: Request, out: &mut Vec<Outgoing>) {
    if request.class() == RequestClass::Lock {
        s.locks.handle(client, tag, request, out);
    } else {
        let admitted = if s.mandatory_locks && request.needs_admission() {
            s.locks.admit(client, &request)
        } else {
            Ok(())
        };
        let reply = match admitted {
            Ok(()) => s.data.handle_from(client, request),
            Err(e) => Reply::Error(e),
        };
        out.push(Outgoing {
            to: client,
            tag,
            reply,
        });
    }
}

/// Client `ci` dies mid-call (see the module comment) and comes back as a new client.
#[allow(clippy::too_many_arguments)]
fn crash(
    ci: usize,
    clients: &mut [Client],
    servers: &mut [Server],
    net: &mut Vec<Envelope>,
    rng: &mut ChaCha8Rng,
    crashed: &mut Vec<(u32, u64, Access, atomio_proto::TxnId)>,
    writes: &mut Vec<atomio_verify::Write>,
) {
    let id = server_id(ci, clients[ci].incarnation);
    let mut ignored = Vec::new();
    let mut kept = Vec::with_capacity(net.len());
    for e in net.drain(..) {
        match e {
            Envelope::ToServer {
                client,
                server,
                tag,
                request,
            } if client == ci => {
                // Already on the wire: it arrives before the connection is seen to close,
                // or it is lost with the process.
                if rng.gen_bool(0.5) {
                    deliver(
                        &mut servers[server.0 as usize],
                        id,
                        tag,
                        request,
                        &mut ignored,
                    );
                }
            }
            Envelope::ToClient { client, .. } if client == ci => {}
            other => kept.push(other),
        }
    }
    *net = kept;
    for s in servers.iter_mut() {
        s.data.forget(id);
        s.locks.disconnect(id, &mut ignored);
    }
    // Grants the releases made possible go to their (live) clients.
    for o in ignored.drain(..) {
        let (to, incarnation) = client_of(o.to);
        if to != ci && incarnation == clients[to].incarnation {
            net.push(Envelope::ToClient {
                client: to,
                tag: o.tag,
                reply: o.reply,
            });
        }
    }
    let c = &mut clients[ci];
    c.current = None;
    c.incarnation += 1;
    let op = (c.next - 1) as u64;
    let call = &c.calls[c.next - 1];
    if call.mode == LockMode::Write {
        // Judged after the run: it may have left all of its bytes or none.
        if let Some(k) = writes
            .iter()
            .position(|w| w.id == atomio_verify::WriteId::new(ci as u32, op))
        {
            writes.swap_remove(k);
        }
        let txn = atomio_proto::TxnId {
            origin: id.0,
            seq: c.seq,
        };
        crashed.push((ci as u32, op, call.access.clone(), txn));
    }
}

fn fail(cfg: &StackSimConfig, step: u64, what: impl Into<String>) -> StackSimFailure {
    StackSimFailure {
        seed: cfg.seed,
        step,
        what: what.into(),
    }
}

/// Runs one seeded simulation; `Err` says what went wrong and how to replay it.
pub fn run(cfg: &StackSimConfig) -> Result<StackSimReport, StackSimFailure> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let n = cfg.servers.max(1);
    let path = "/sim";
    let central = metadata_server(path, n);
    let layout = Layout::round_robin(cfg.stripe_size, n, n, central.0)
        .map_err(|e| fail(cfg, 0, format!("layout: {e}")))?;
    let geometry = LockGeometry {
        intervals: None,
        layout: layout.clone(),
        central,
    };
    let file = atomio_proto::file_id(path);
    let mut servers: Vec<Server> = (0..n)
        .map(|i| Server {
            locks: LockServer::with_id(ServerId(i)),
            data: DataService::new(MemStore::new()),
            mandatory_locks: cfg.mandatory_locks,
        })
        .collect();
    let created = servers[central.0 as usize].data.handle(Request::Create {
        path: path.into(),
        stripe_size: cfg.stripe_size,
        object_servers: layout.object_servers().to_vec(),
        exclusive: true,
    });
    if !matches!(created, Reply::File(_)) {
        return Err(fail(cfg, 0, format!("create: {created:?}")));
    }
    let choices = strategies(rng.gen_bool(0.75));
    let mut clients: Vec<Client> = (0..cfg.clients)
        .map(|_| Client {
            calls: (0..cfg.calls_per_client)
                .map(|_| Call {
                    access: random_access(&mut rng, cfg.file_bytes),
                    mode: if rng.gen_bool(cfg.read_fraction) {
                        LockMode::Read
                    } else {
                        LockMode::Write
                    },
                    strategy: match cfg.fault {
                        StackFault::NoLocks => Strategy::none(),
                        _ => choices[rng.gen_range(0..choices.len())].clone(),
                    },
                })
                .collect(),
            next: 0,
            current: None,
            seq: 0,
            incarnation: 0,
        })
        .collect();
    let mut writes = Vec::new();
    // Writes cut short by a crash: (writer, op, access, txn seq), judged after the run.
    let mut crashed: Vec<(u32, u64, Access, atomio_proto::TxnId)> = Vec::new();
    let mut reads: Vec<SeenRead> = Vec::new();
    let mut net: Vec<Envelope> = Vec::new();
    let mut report = StackSimReport::default();
    let budget = 200_000 + 20_000 * (cfg.clients * cfg.calls_per_client) as u64;
    let mut out: Vec<Send> = Vec::new();
    let mut outgoing: Vec<Outgoing> = Vec::new();
    let mut step = 0u64;
    loop {
        step += 1;
        if step > budget {
            return Err(fail(cfg, step, "step budget exhausted (livelock?)"));
        }
        // Idle clients start their next call.
        for (ci, c) in clients.iter_mut().enumerate() {
            if c.current.is_some() || c.next >= c.calls.len() {
                continue;
            }
            let call = &c.calls[c.next];
            let op_no = c.next as u64;
            c.next += 1;
            c.seq += 1;
            let locks = call
                .strategy
                .technique()
                .locks(call.mode, &call.access, &geometry)
                .map_err(|e| fail(cfg, step, format!("planning: {e}")))?;
            let lock = match locks {
                // Every other call opens with a wait (as a client that met contention
                // does): both openings meet in every run.
                Some(Locks::Service { protocol, subs }) => Some(
                    LockOp::new(file, call.mode, protocol, subs).with_start(if op_no % 2 == 1 {
                        atomio_lock::Start::WaitFirst
                    } else {
                        atomio_lock::Start::Try
                    }),
                ),
                Some(Locks::Fcntl(_)) => {
                    return Err(fail(cfg, step, "fcntl locks cannot be simulated"))
                }
                Some(Locks::Cached(_)) => return Err(fail(
                    cfg,
                    step,
                    "cached-lock DLMs run in `atomio-lab sim --seqdlm`, not in the stack simulation",
                )),
                Some(Locks::Versioned) => {
                    return Err(fail(
                        cfg,
                        step,
                        "versioning runs in `atomio-lab sim --versioning`, not in the stack simulation",
                    ))
                }
                None => None,
            };
            let io = match call.mode {
                LockMode::Write => {
                    let mut data = vec![0u8; call.access.size() as usize];
                    atomio_verify::fill(ci as u32, op_no, call.access.ranges(), &mut data)
                        .map_err(|e| fail(cfg, step, format!("tags: {e}")))?;
                    writes.push(atomio_verify::Write::new(
                        ci as u32,
                        op_no,
                        call.access.clone(),
                    ));
                    if call.strategy.is_atomic() && cfg.fault != StackFault::NoStaging {
                        // All or nothing, as `File` writes atomically on servers.
                        // A new incarnation is a new process: a new origin, so it never
                        // claims its predecessor's writes settled.
                        let txn = atomio_proto::TxnId {
                            origin: server_id(ci, c.incarnation).0,
                            seq: c.seq,
                        };
                        DataOp::write_atomic(file, &layout, call.access.ranges(), &data, txn, c.seq)
                    } else {
                        DataOp::write(file, &layout, call.access.ranges(), &data)
                    }
                }
                LockMode::Read => DataOp::read(
                    file,
                    &layout,
                    call.access.ranges(),
                    call.access.size() as usize,
                ),
            };
            let mut op = CallOp::new(lock, CallIo::Data(io));
            if cfg.fault == StackFault::EarlyRelease {
                op = op.with_early_release();
            }
            op.start(&mut out);
            for s in out.drain(..) {
                net.push(Envelope::ToServer {
                    client: ci,
                    server: s.server,
                    tag: (c.seq << 32) | u64::from(s.sub),
                    request: s.request,
                });
            }
            c.current = Some((op, c.seq));
        }
        // Finished calls are recorded; the client goes idle.
        for (ci, c) in clients.iter_mut().enumerate() {
            let done = match &c.current {
                Some((op, _)) => op.progress(),
                None => continue,
            };
            match done {
                Progress::Waiting => {}
                Progress::Failed(e) => return Err(fail(cfg, step, format!("client {ci}: {e}"))),
                Progress::Done => {
                    let (mut op, _) = c.current.take().expect("checked above");
                    report.calls += 1;
                    let call = &c.calls[c.next - 1];
                    if call.mode == LockMode::Read {
                        reads.push((
                            ci as u32,
                            (c.next - 1) as u64,
                            call.access.clone(),
                            op.take_data(),
                        ));
                    }
                }
            }
        }
        if net.is_empty() {
            if clients
                .iter()
                .all(|c| c.current.is_none() && c.next >= c.calls.len())
            {
                break;
            }
            if clients
                .iter()
                .all(|c| c.current.is_some() || c.next >= c.calls.len())
            {
                return Err(fail(
                    cfg,
                    step,
                    "deadlock: nothing in flight, calls unfinished",
                ));
            }
            continue;
        }
        // Now and then a client with a call in flight dies.
        if cfg.crashes && rng.gen_bool(0.004) {
            let busy: Vec<usize> = (0..clients.len())
                .filter(|&i| clients[i].current.is_some())
                .collect();
            if !busy.is_empty() {
                let ci = busy[rng.gen_range(0..busy.len())];
                crash(
                    ci,
                    &mut clients,
                    &mut servers,
                    &mut net,
                    &mut rng,
                    &mut crashed,
                    &mut writes,
                );
                report.crashes += 1;
                continue;
            }
        }
        // Deliver one message, chosen at random.
        let i = rng.gen_range(0..net.len());
        report.messages += 1;
        match net.swap_remove(i) {
            Envelope::ToServer {
                client,
                server,
                tag,
                request,
            } => {
                let s = &mut servers[server.0 as usize];
                let id = server_id(client, clients[client].incarnation);
                deliver(s, id, tag, request, &mut outgoing);
                for o in outgoing.drain(..) {
                    let (to, incarnation) = client_of(o.to);
                    if incarnation == clients[to].incarnation {
                        net.push(Envelope::ToClient {
                            client: to,
                            tag: o.tag,
                            reply: o.reply,
                        });
                    }
                }
                if step & 31 == 0 {
                    s.locks
                        .check_invariants()
                        .map_err(|e| fail(cfg, step, format!("{server}: {e}")))?;
                }
            }
            Envelope::ToClient { client, tag, reply } => {
                let c = &mut clients[client];
                if let Some((op, seq)) = &mut c.current {
                    if tag >> 32 == *seq {
                        op.on_reply(tag as u32, reply, &mut out);
                        for s in out.drain(..) {
                            net.push(Envelope::ToServer {
                                client,
                                server: s.server,
                                tag: (*seq << 32) | u64::from(s.sub),
                                request: s.request,
                            });
                        }
                    }
                }
            }
        }
    }
    report.steps = step;
    for (i, s) in servers.iter().enumerate() {
        if s.locks.open_requests() != 0 {
            return Err(fail(
                cfg,
                step,
                format!(
                    "server {i} still has {} open lock requests",
                    s.locks.open_requests()
                ),
            ));
        }
    }
    // Each write cut short by a crash either committed (it must then appear whole, or
    // overwritten by later writes) or did not (none of its bytes may appear): its decider —
    // the server of its first message — says which (`Resolve` records an undecided one as
    // aborted, as any later access would).
    for (w, op, access, txn) in crashed {
        let decider = atomio_net::data_op::chunks(&layout, access.ranges())
            .first()
            .map_or(ServerId(0), |c| c.server);
        let resolved = servers[decider.0 as usize]
            .data
            .handle(Request::Resolve { txn });
        let committed = matches!(resolved, Reply::Outcome { committed: true });
        if std::env::var_os("ATOMIO_SIM_DEBUG").is_some() {
            eprintln!("crashed write (w{w},op{op}) {txn}: committed {committed}");
        }
        if committed {
            report.crashed_writes_visible += 1;
            writes.push(atomio_verify::Write::new(w, op, access));
        }
    }
    // The file as the servers hold it, read with the same data plane. (Crashed writers
    // may have left writes in doubt: the read resolves them.)
    read_back_and_verify(
        file,
        &layout,
        cfg.file_bytes,
        &writes,
        &reads,
        |server, r| servers[server.0 as usize].data.handle(r),
    )
    .map_err(|e| fail(cfg, step, e))?;
    Ok(report)
}

/// A read a simulated client made: (client, op, where, what it saw).
pub(crate) type SeenRead = (u32, u64, Access, Vec<u8>);

/// Reads the whole file back from the servers with the client's data plane (`handle`
/// answers one server's request) and proves it, with the reads the clients saw, a
/// serialization of whole calls. `Err` says what failed.
pub(crate) fn read_back_and_verify(
    file: atomio_proto::FileId,
    layout: &Layout,
    file_bytes: u64,
    writes: &[atomio_verify::Write],
    reads: &[SeenRead],
    mut handle: impl FnMut(ServerId, Request) -> Reply,
) -> Result<(), String> {
    let mut back = DataOp::read(
        file,
        layout,
        std::iter::once(ByteRange::new(0, file_bytes).expect("non-empty")),
        file_bytes as usize,
    );
    let mut sends = Vec::new();
    back.start(&mut sends);
    while let Some(s) = sends.pop() {
        let reply = handle(s.server, s.request);
        back.on_reply(s.sub, reply, &mut sends);
    }
    if back.progress() != Progress::Done {
        return Err(format!("reading back: {:?}", back.progress()));
    }
    let bytes = back.take_data();
    let reads: Vec<atomio_verify::Read> = reads
        .iter()
        .map(|(r, op, a, seen)| atomio_verify::Read::new(*r, *op, a.clone(), &seen[..]))
        .collect();
    let verdict =
        atomio_verify::verify(&bytes[..], writes, &reads).map_err(|e| format!("verifier: {e}"))?;
    if verdict.verdict == atomio_verify::Verdict::Violated {
        return Err(format!("not atomic: {verdict}"));
    }
    Ok(())
}
