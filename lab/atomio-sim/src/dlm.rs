//! A seeded simulation of the cached-lock DLMs as they run in the product: real
//! `DlmClient` machines (the very code each file's agent runs), real `LockServer`s (their
//! DLM resources, admission of flushes, mSN stamps) and real `DataService`s (SN-ordered
//! writes, extent caches) over in-memory stores. Messages travel on one FIFO link per
//! (client, server) and direction — TCP's order, which the client relies on (a flush is
//! admitted after the cancel sent before it) — and the seeded RNG picks which link moves
//! next and when a client issues its next call, so grants, revocations, hurries, flushes
//! and acknowledgements interleave in every way the links allow. Same seed, same run.
//!
//! Clients make random noncontiguous writes across the file's stripes (and some reads),
//! under the DLM's own mode rules, then flush. Checked: every server's lock invariants
//! after every step; every call finished (no deadlock, within the step budget); every
//! object's extent cache and bytes; and at the end the file read back from the servers and
//! the reads proven a serialization of whole calls by the verifier.
//!
//! Negative controls: `Fault::NbwAcrossStripes` (Fig. 8: NBW forced on writes that span
//! stripes) and `Fault::SnBlindServers` (data servers apply flushes as they arrive) must be
//! caught on some seed.
//!
//! Not simulated: client crashes (a crashed client's cached bytes are lost by design, as
//! in the paper's client cache, and a write spread over stripes can then be half-flushed),
//! server restarts (the extent log and SN floor have their own tests), leases.

use atomio_client::dlm::machine::{DlmClient, Done};
use atomio_client::dlm::{DlmSpec, ModeRule};
use atomio_data::{DataService, MemStore};
use atomio_layout::{Access, ByteRange, Layout, RangeList, ServerId};
use atomio_lock::seqdlm::Mode;
use atomio_lock::{LockServer, Outgoing};
use atomio_proto::{ClientId, FileId, Reply, Request, RequestClass};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::fmt;

/// A fault that must be caught (negative controls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Writes across stripes in NBW (not BW): early grants may order them differently at
    /// different stripes.
    NbwAcrossStripes,
    /// Data servers write flushes as they arrive, ignoring SNs.
    SnBlindServers,
}

#[derive(Clone, Debug)]
pub struct DlmSimConfig {
    pub seed: u64,
    pub clients: usize,
    pub servers: u32,
    pub stripes: u32,
    pub stripe_size: u64,
    pub calls_per_client: usize,
    pub read_fraction: f64,
    pub spec: DlmSpec,
    /// Dirty bytes past which a client gives locks back (small: the limit path runs).
    pub cache_limit: u64,
    /// Extent-cache entries past which a data server synchronizes an object (small: the
    /// synchronizing read lock runs).
    pub sync_threshold: usize,
    pub fault: Fault,
}

impl DlmSimConfig {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            clients: 4,
            servers: 3,
            stripes: 3,
            stripe_size: 32,
            calls_per_client: 6,
            read_fraction: 0.2,
            spec: DlmSpec::seqdlm(),
            cache_limit: 256,
            sync_threshold: 6,
            fault: Fault::None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DlmSimReport {
    pub steps: u64,
    pub writes: u64,
    pub reads: u64,
    pub grants: u64,
    pub revocations: u64,
    pub flushes: u64,
}

#[derive(Clone, Debug)]
pub struct DlmSimFailure {
    pub seed: u64,
    pub step: u64,
    pub what: String,
}

impl fmt::Display for DlmSimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DLM simulation failed at step {} with seed {}: {} (replay: the same `atomio-lab sim \
             --dlm-stack` flags with --seed {} --seeds 1)",
            self.step, self.seed, self.what, self.seed
        )
    }
}

const FILE: FileId = FileId(7);

struct Server {
    locks: LockServer,
    data: DataService<MemStore>,
}

/// A client's view of one pending call.
enum Pending {
    Write,
    Read(Access),
    Flush,
}

struct Client {
    m: DlmClient,
    todo: VecDeque<(Access, bool)>,
    pending: Option<(u64, Pending)>,
    next_op: u64,
    flushed: bool,
}

fn random_access(rng: &mut ChaCha8Rng, file: u64) -> Access {
    let n = rng.gen_range(1..4);
    let ranges = (0..n)
        .map(|_| {
            let s = rng.gen_range(0..file - 1);
            let e = (s + rng.gen_range(1..file / 2)).min(file);
            ByteRange::new(s, e).expect("s < e")
        })
        .collect();
    Access::from_list(&RangeList::from_ranges(ranges)).expect("disjoint after merging")
}

/// One message at a server, as a server's actors handle it: lock requests at the lock
/// service; flushes admitted there (and stamped with the mSN) before the data service.
fn serve(
    s: &mut Server,
    client: ClientId,
    tag: u64,
    mut request: Request,
    out: &mut Vec<Outgoing>,
) {
    if request.class() == RequestClass::Lock {
        s.locks.handle(client, tag, request, out);
        return;
    }
    let admitted = if request.needs_admission() {
        s.locks.admit(client, &request)
    } else {
        Ok(())
    };
    let reply = match admitted {
        Ok(()) => {
            s.locks.stamp(&mut request);
            s.data.handle_from(client, request)
        }
        Err(e) => Reply::Error(e),
    };
    out.push(Outgoing {
        to: client,
        tag,
        reply,
    });
    for (file, object) in s.data.take_synchronize() {
        s.locks.synchronize_object(file, object, out);
    }
}

/// A write's bytes cut into 1–3 consecutive parts at random (as pooled chunks cut them).
fn split(data: Vec<u8>, rng: &mut ChaCha8Rng) -> Vec<bytes::Bytes> {
    let all = bytes::Bytes::from(data);
    let mut cuts: Vec<usize> = (0..rng.gen_range(0..3))
        .map(|_| rng.gen_range(0..=all.len()))
        .collect();
    cuts.push(0);
    cuts.push(all.len());
    cuts.sort_unstable();
    cuts.dedup();
    cuts.windows(2).map(|w| all.slice(w[0]..w[1])).collect()
}

/// A request without its bytes (for the debug trace).
fn brief(r: &Request) -> String {
    match r {
        Request::SeqWrite {
            object,
            blocks,
            msn,
            ..
        } => format!("SeqWrite object {object} {blocks:?} msn {msn}"),
        Request::Read { object, pieces, .. } => format!("Read object {object} {pieces:?}"),
        other => format!("{other:?}"),
    }
}

fn fail(cfg: &DlmSimConfig, step: u64, what: impl Into<String>) -> DlmSimFailure {
    DlmSimFailure {
        seed: cfg.seed,
        step,
        what: what.into(),
    }
}

/// One seeded run.
pub fn run(cfg: &DlmSimConfig) -> Result<DlmSimReport, DlmSimFailure> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let n = cfg.clients;
    let s = cfg.servers as usize;
    let layout = Layout::round_robin(cfg.stripe_size, cfg.stripes, cfg.servers, 0)
        .map_err(|e| fail(cfg, 0, format!("layout: {e}")))?;
    let file_bytes = cfg.stripe_size * u64::from(cfg.stripes) * 3;
    let spec = match cfg.fault {
        Fault::NbwAcrossStripes => DlmSpec {
            modes: ModeRule::Always(Mode::Nbw),
            ..cfg.spec
        },
        _ => cfg.spec,
    };
    let mut servers: Vec<Server> = (0..s)
        .map(|i| {
            let mut data =
                DataService::new(MemStore::new()).with_sync_threshold(cfg.sync_threshold);
            if cfg.fault == Fault::SnBlindServers {
                data.seq_writes_mut().fault_ignore_sns = true;
            }
            Server {
                locks: LockServer::with_id(ServerId(i as u32)),
                data,
            }
        })
        .collect();
    let mut clients: Vec<Client> = (0..n)
        .map(|_| Client {
            m: DlmClient::new().with_limits(cfg.cache_limit, cfg.cache_limit * 4),
            todo: (0..cfg.calls_per_client)
                .map(|_| {
                    let read = rng.gen_bool(cfg.read_fraction);
                    (random_access(&mut rng, file_bytes), read)
                })
                .collect(),
            pending: None,
            next_op: 0,
            flushed: false,
        })
        .collect();
    // Links: [client][server] up (to the server) and down (to the client).
    let mut up: Vec<VecDeque<(u64, Request)>> = vec![VecDeque::new(); n * s];
    let mut down: Vec<VecDeque<(u64, Reply)>> = vec![VecDeque::new(); n * s];
    let mut writes: Vec<atomio_verify::Write> = Vec::new();
    let mut reads: Vec<crate::stack::SeenRead> = Vec::new();
    let mut report = DlmSimReport::default();
    let debug = std::env::var_os("ATOMIO_SIM_DEBUG").is_some();
    let budget = 200_000u64;
    let mut step = 0u64;
    let mut out = Vec::new();
    loop {
        step += 1;
        if step > budget {
            return Err(fail(
                cfg,
                step,
                "step budget exhausted (livelock or deadlock)",
            ));
        }
        // Clients' frames onto their links.
        for (ci, c) in clients.iter_mut().enumerate() {
            c.m.set_now(step);
            for o in c.m.take_sends() {
                if matches!(o.request, Request::DlmLock { .. }) {
                    report.grants += 1;
                }
                if matches!(o.request, Request::SeqWrite { .. }) {
                    report.flushes += 1;
                }
                up[ci * s + o.server.0 as usize].push_back((o.tag, o.request));
            }
            for (id, done) in c.m.take_done() {
                let Some((pid, p)) = c.pending.take() else {
                    return Err(fail(
                        cfg,
                        step,
                        format!("client {ci}: an answer to nothing"),
                    ));
                };
                if pid != id {
                    return Err(fail(
                        cfg,
                        step,
                        format!("client {ci}: answer {id} for {pid}"),
                    ));
                }
                match (p, done) {
                    (Pending::Write, Done::Write(Ok(())))
                    | (Pending::Flush, Done::Flush(Ok(()))) => {}
                    (Pending::Read(a), Done::Read(Ok(r))) => {
                        reads.push((ci as u32, id, a, r.data));
                    }
                    (_, d) => {
                        return Err(fail(cfg, step, format!("client {ci}: call {id}: {d:?}")))
                    }
                }
            }
        }
        // What can happen now.
        let busy_links: Vec<usize> = (0..n * s)
            .filter(|&i| !up[i].is_empty() || !down[i].is_empty())
            .collect();
        let ready: Vec<usize> = (0..n)
            .filter(|&ci| {
                let c = &clients[ci];
                c.pending.is_none() && (!c.todo.is_empty() || !c.flushed)
            })
            .collect();
        if busy_links.is_empty() && ready.is_empty() {
            if clients.iter().any(|c| c.pending.is_some()) {
                return Err(fail(
                    cfg,
                    step,
                    "deadlock: calls wait and nothing is in flight",
                ));
            }
            break;
        }
        if !ready.is_empty() && (busy_links.is_empty() || rng.gen_bool(0.2)) {
            let ci = ready[rng.gen_range(0..ready.len())];
            let c = &mut clients[ci];
            c.next_op += 1;
            let id = c.next_op;
            match c.todo.pop_front() {
                Some((a, false)) => {
                    if debug {
                        eprintln!(
                            "{step} c{ci} write {id} {:?}",
                            a.ranges().collect::<Vec<_>>()
                        );
                    }
                    let mut data = vec![0u8; a.size() as usize];
                    atomio_verify::fill(ci as u32, id, a.ranges(), &mut data)
                        .map_err(|e| fail(cfg, step, format!("tags: {e}")))?;
                    writes.push(atomio_verify::Write::new(ci as u32, id, a.clone()));
                    report.writes += 1;
                    c.m.write(
                        id,
                        FILE,
                        layout.clone(),
                        a.ranges().collect(),
                        split(data, &mut rng),
                        spec,
                    );
                    c.pending = Some((id, Pending::Write));
                }
                Some((a, true)) => {
                    if debug {
                        eprintln!(
                            "{step} c{ci} read {id} {:?}",
                            a.ranges().collect::<Vec<_>>()
                        );
                    }
                    report.reads += 1;
                    let len = a.size() as usize;
                    c.m.read(id, FILE, layout.clone(), a.ranges().collect(), len, spec);
                    c.pending = Some((id, Pending::Read(a)));
                }
                None => {
                    c.flushed = true;
                    c.m.flush(id, None, false);
                    c.pending = Some((id, Pending::Flush));
                }
            }
            continue;
        }
        let link = busy_links[rng.gen_range(0..busy_links.len())];
        let (ci, si) = (link / s, link % s);
        let go_up = match (up[link].is_empty(), down[link].is_empty()) {
            (false, false) => rng.gen_bool(0.5),
            (up_empty, _) => !up_empty,
        };
        if go_up {
            let (tag, request) = up[link].pop_front().expect("non-empty");
            if debug {
                eprintln!("{step} c{ci} -> s{si} [{tag}] {}", brief(&request));
            }
            out.clear();
            serve(
                &mut servers[si],
                ClientId(ci as u64 + 1),
                tag,
                request,
                &mut out,
            );
            for o in out.drain(..) {
                if matches!(o.reply, Reply::DlmRevoke { .. }) {
                    report.revocations += 1;
                }
                let to = o.to.0 as usize - 1;
                down[to * s + si].push_back((o.tag, o.reply));
            }
            servers[si]
                .locks
                .check_invariants()
                .map_err(|e| fail(cfg, step, format!("server {si}: {e}")))?;
        } else {
            let (tag, reply) = down[link].pop_front().expect("non-empty");
            if debug {
                eprintln!("{step} s{si} -> c{ci} [{tag}] {reply:?}");
            }
            clients[ci].m.on_frame(ServerId(si as u32), tag, reply);
        }
    }
    report.steps = step;
    // The file as the servers hold it, read with the client's data plane.
    crate::stack::read_back_and_verify(FILE, &layout, file_bytes, &writes, &reads, |server, r| {
        servers[server.0 as usize].data.handle(r)
    })
    .map_err(|e| fail(cfg, step, e))?;
    Ok(report)
}
