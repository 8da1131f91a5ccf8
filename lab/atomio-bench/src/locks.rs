//! The lock benchmark of Ching et al. §6.1.
//!
//! Each client acquires, then releases, `locks` one-byte locks spaced `spacing` bytes apart
//! (one strided pattern per client). Two variants:
//!
//! * **scaling**: clients = servers; client `i` locks its own region (no overlap); all
//!   clients acquire, meet at a barrier, then all release — the paper's procedure;
//! * **contention**: a fixed number of clients and servers; client `i`'s pattern starts
//!   `i · (1 − overlap) · region` bytes in, so neighbours share `overlap` of their locks.
//!   Clients that share locks cannot all hold them at once, so each client releases as soon
//!   as it holds everything (no barrier in between);
//! * **interleave**: like contention, but client `i` starts `i · spacing / clients` bytes in:
//!   no lock is shared, every client's locks fall between its neighbours' (the pattern of
//!   interleaved writers such as S3D's), so the servers cannot keep one hull per client.
//!   Its rows carry overlap 0.
//!
//! Transports: servers embedded in this process, `atomio server` processes over TCP, or
//! **host**: no server, every client takes its locks in one host's shared lock table
//! (`HostLocks`, `/dev/shm`; what `--locks host` and `<strategy>+host` use). Ching's
//! methods and protocols describe requests to servers, so a host row is one per variant,
//! labelled `host-table`; its clients are threads (the table is shared memory, and its
//! waits are futex sleeps).
//!
//! A phase's rate is total locks / the time during which at least one client was in that
//! phase (the length of the union of the clients' intervals). In the scaling variant this is
//! exactly "time for all clients to acquire everything" and "… to release everything"; under
//! contention it charges serialized clients their real elapsed time. Each configuration is
//! run `runs` times and the median reported, with every run kept in the JSON.

use crate::stats::{median, union_length};
use atomio_layout::{Access, Layout, Pattern};
use atomio_lock::{Method, Protocol};
use atomio_net::{ClusterClient, EmbeddedCluster, LocalServers};
use atomio_proto::{ErrorCode, FileId, LockMode, WireError};
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Barrier;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Servers as actors in this process, in-process links.
    Embedded,
    /// Real `atomio server` processes on loopback (or the cluster file's servers).
    Tcp,
    /// No server: one host's shared lock table (`HostLocks`).
    Host,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Embedded => "embedded",
            Transport::Tcp => "tcp",
            Transport::Host => "host",
        })
    }
}

#[derive(Clone, Debug)]
pub struct LockBenchConfig {
    pub transports: Vec<Transport>,
    /// Client (= server) counts for the scaling variant.
    pub scaling_clients: Vec<u32>,
    pub spacings: Vec<u64>,
    pub locks: u64,
    pub methods: Vec<Method>,
    pub protocols: Vec<Protocol>,
    /// Overlap percentages for the contention variant (empty: skip it).
    pub overlaps: Vec<u32>,
    /// Also run the interleave variant (with the contention clients).
    pub interleave: bool,
    pub contention_clients: u32,
    pub runs: usize,
    /// Acquire-release cycles each client makes per run in the contention and interleave
    /// variants (the scaling variant keeps the paper's one, held together). With leaps a
    /// lone client's description is granted in one step, so one cycle lasts a round trip
    /// and a run of one cycle measures scheduling noise more than the protocol.
    pub rounds: u32,
    pub stripe_size: u64,
    /// The `atomio` executable, to start TCP servers.
    pub server_exe: Option<PathBuf>,
    /// Use these running servers for TCP instead of starting processes.
    pub external_servers: Option<Vec<String>>,
    pub progress: bool,
    /// Network delay added between clients and TCP servers (a relay per server).
    pub delay: atomio_net::relay::Delay,
}

impl Default for LockBenchConfig {
    fn default() -> Self {
        Self {
            transports: vec![Transport::Embedded, Transport::Tcp],
            scaling_clients: vec![1, 2, 4, 8],
            spacings: vec![64, 4096],
            locks: 131_072,
            methods: Method::ALL.to_vec(),
            protocols: Protocol::ALL.to_vec(),
            overlaps: vec![0, 25, 50, 75, 100],
            interleave: true,
            contention_clients: 8,
            runs: 3,
            rounds: 1,
            stripe_size: atomio_layout::DEFAULT_STRIPE_SIZE,
            server_exe: None,
            external_servers: None,
            progress: true,
            delay: Default::default(),
        }
    }
}

/// One configuration's result.
#[derive(Clone, Debug, Serialize)]
pub struct LockBenchRow {
    /// "scaling", "contention" or "interleave".
    pub variant: &'static str,
    pub transport: Transport,
    pub method: String,
    pub protocol: String,
    pub clients: u32,
    pub servers: u32,
    pub spacing_bytes: u64,
    pub overlap_pct: u32,
    pub locks_per_client: u64,
    /// Acquire-release cycles per client per run.
    pub rounds: u32,
    /// Median over runs.
    pub acquire_locks_per_s: f64,
    pub release_locks_per_s: f64,
    pub runs: usize,
    pub acquire_runs: Vec<f64>,
    pub release_runs: Vec<f64>,
    /// Messages one client sent to acquire and release (median over clients and runs).
    pub messages_per_client: f64,
    /// TCP through delaying relays: the round trip asked for and measured.
    pub rtt: Option<crate::workload::RttCheck>,
}

impl LockBenchRow {
    pub fn label(&self) -> String {
        format!("{}-{}", self.method, self.protocol)
    }
}

/// A host row's method and protocol (`label` "host-table").
const HOST_METHOD: &str = "host";
const HOST_PROTOCOL: &str = "table";

enum Cluster {
    Embedded(EmbeddedCluster),
    /// One host's lock table, by its key (no server).
    Host(String),
    /// Servers (when started here), the addresses clients use, and the relays those
    /// addresses may lead through.
    Tcp(
        Option<LocalServers>,
        Vec<String>,
        Vec<atomio_net::relay::Relay>,
    ),
}

impl Cluster {
    async fn start(
        t: Transport,
        n: u32,
        cfg: &LockBenchConfig,
        scratch: &std::path::Path,
    ) -> Result<Self, WireError> {
        match t {
            Transport::Embedded => Ok(Cluster::Embedded(EmbeddedCluster::start(n))),
            Transport::Host => Ok(Cluster::Host(format!(
                "atomio-bench-locks-{}-{n}",
                std::process::id()
            ))),
            Transport::Tcp => {
                if let Some(addrs) = &cfg.external_servers {
                    if addrs.len() < n as usize {
                        return Err(WireError::new(
                            ErrorCode::InvalidArgument,
                            format!("{n} servers needed, the cluster file names {}", addrs.len()),
                        ));
                    }
                    return Self::relayed(None, addrs[..n as usize].to_vec(), cfg);
                }
                let exe = cfg.server_exe.as_ref().ok_or_else(|| {
                    WireError::new(
                        ErrorCode::InvalidArgument,
                        "TCP runs need the atomio executable",
                    )
                })?;
                let servers = LocalServers::start(exe, n, scratch).await?;
                let addrs = servers.addresses.clone();
                Self::relayed(Some(servers), addrs, cfg)
            }
        }
    }

    /// TCP servers reached through delaying relays when `cfg.delay` asks for a round trip.
    fn relayed(
        servers: Option<LocalServers>,
        addrs: Vec<String>,
        cfg: &LockBenchConfig,
    ) -> Result<Self, WireError> {
        if cfg.delay.rtt.is_zero() {
            return Ok(Cluster::Tcp(servers, addrs, Vec::new()));
        }
        let relays = atomio_net::relay::relay_all(&addrs, cfg.delay)
            .map_err(|e| WireError::new(ErrorCode::Io, format!("starting relays: {e}")))?;
        let relayed = relays.iter().map(|r| r.address.to_string()).collect();
        Ok(Cluster::Tcp(servers, relayed, relays))
    }

    /// The round trip asked for and measured (TCP through relays only).
    async fn rtt(
        &self,
        cfg: &LockBenchConfig,
    ) -> Result<Option<crate::workload::RttCheck>, WireError> {
        let Cluster::Tcp(_, addrs, relays) = self else {
            return Ok(None);
        };
        if relays.is_empty() {
            return Ok(None);
        }
        let direct: Vec<String> = match self {
            Cluster::Tcp(Some(s), _, _) => s.addresses.clone(),
            _ => cfg.external_servers.clone().unwrap_or_default(),
        };
        let mut through = ClusterClient::connect_tcp(addrs).await?;
        let mut straight = ClusterClient::connect_tcp(&direct[..addrs.len()]).await?;
        Ok(Some(crate::workload::RttCheck {
            asked_us: cfg.delay.rtt.as_secs_f64() * 1e6,
            relayed_us: crate::workload::ping_median_us(&mut through).await?,
            direct_us: crate::workload::ping_median_us(&mut straight).await?,
        }))
    }

    /// `n` clients: connections to the servers, or handles on the host's table.
    async fn clients(&self, n: u32) -> Result<Clients, WireError> {
        if let Cluster::Host(key) = self {
            let tables = (0..n)
                .map(|_| atomio_client::host_locks::HostLocks::open(key))
                .collect::<Result<_, _>>()?;
            return Ok(Clients::Host(tables));
        }
        let mut pool = Vec::new();
        for _ in 0..n {
            pool.push(match self {
                Cluster::Embedded(c) => c.connect().await?,
                Cluster::Tcp(_, addrs, _) => ClusterClient::connect_tcp(addrs).await?,
                Cluster::Host(_) => unreachable!("answered above"),
            });
        }
        Ok(Clients::Servers(pool))
    }

    async fn stop(self) {
        if let Cluster::Tcp(Some(s), _, _) = self {
            s.stop().await;
        }
    }
}

enum Clients {
    Servers(Vec<ClusterClient>),
    Host(Vec<atomio_client::host_locks::HostLocks>),
}

struct Case {
    variant: &'static str,
    clients: u32,
    spacing: u64,
    overlap: u32,
    method: Method,
    protocol: Protocol,
}

/// Runs every configuration; returns one row per configuration.
pub async fn run(cfg: &LockBenchConfig) -> Result<Vec<LockBenchRow>, WireError> {
    let scratch = std::env::temp_dir().join(format!("atomio-bench-locks-{}", std::process::id()));
    let mut server_counts: Vec<u32> = cfg.scaling_clients.clone();
    if !cfg.overlaps.is_empty() || cfg.interleave {
        server_counts.push(cfg.contention_clients);
    }
    server_counts.sort_unstable();
    server_counts.dedup();

    let mut plan: Vec<(Transport, u32, Vec<Case>)> = Vec::new();
    for &t in &cfg.transports {
        for &n in &server_counts {
            let mut cases = Vec::new();
            // A host table takes a call's ranges as they are: one case per variant.
            let (methods, protocols) = match t {
                Transport::Host => (
                    cfg.methods.get(..1).unwrap_or_default(),
                    cfg.protocols.get(..1).unwrap_or_default(),
                ),
                _ => (&cfg.methods[..], &cfg.protocols[..]),
            };
            let mut add = |variant, spacing, overlap| {
                for &method in methods {
                    for &protocol in protocols {
                        cases.push(Case {
                            variant,
                            clients: n,
                            spacing,
                            overlap,
                            method,
                            protocol,
                        });
                    }
                }
            };
            for &spacing in &cfg.spacings {
                if cfg.scaling_clients.contains(&n) {
                    add("scaling", spacing, 0);
                }
                if n == cfg.contention_clients {
                    for &ov in &cfg.overlaps {
                        add("contention", spacing, ov);
                    }
                    if cfg.interleave && spacing >= u64::from(n) {
                        add("interleave", spacing, 0);
                    }
                }
            }
            plan.push((t, n, cases));
        }
    }
    let total: usize = plan.iter().map(|p| p.2.len()).sum::<usize>() * cfg.runs;
    let bar = crate::progress::bar(total as u64, cfg.progress);

    let mut rows = Vec::new();
    let mut file_seq = 0u64;
    for (t, n, cases) in plan {
        if cases.is_empty() {
            continue;
        }
        bar.set_message(format!("starting {n} {t} servers"));
        let cluster = Cluster::start(t, n, cfg, &scratch).await?;
        let rtt = cluster.rtt(cfg).await?;
        let mut clients = cluster.clients(n).await?;
        for case in cases {
            let layout = Layout::round_robin(cfg.stripe_size, n, n, 0)?;
            let (mut acq, mut rel, mut msgs) = (Vec::new(), Vec::new(), Vec::new());
            // The scaling variant keeps the paper's single cycle, held together.
            let rounds = if case.variant == "scaling" {
                1
            } else {
                cfg.rounds.max(1)
            };
            for run in 0..cfg.runs {
                bar.set_message(format!(
                    "{t} {} {}-{} {n}x{n} {}B ov{}% run {}",
                    case.variant,
                    case.method,
                    case.protocol,
                    case.spacing,
                    case.overlap,
                    run + 1
                ));
                file_seq += 1;
                let r = match &mut clients {
                    Clients::Servers(pool) => {
                        run_once(pool, &layout, &case, cfg.locks, rounds, FileId(file_seq)).await?
                    }
                    Clients::Host(tables) => run_once_host(tables, &case, cfg.locks, rounds)?,
                };
                acq.push(r.0);
                rel.push(r.1);
                msgs.extend(r.2);
                bar.inc(1);
            }
            let (method, protocol) = match t {
                Transport::Host => (HOST_METHOD.to_string(), HOST_PROTOCOL.to_string()),
                _ => (case.method.to_string(), case.protocol.to_string()),
            };
            rows.push(LockBenchRow {
                variant: case.variant,
                transport: t,
                method,
                protocol,
                clients: case.clients,
                servers: n,
                spacing_bytes: case.spacing,
                overlap_pct: case.overlap,
                locks_per_client: cfg.locks,
                rounds,
                acquire_locks_per_s: median(&acq),
                release_locks_per_s: median(&rel),
                runs: cfg.runs,
                acquire_runs: acq,
                release_runs: rel,
                messages_per_client: median(&msgs),
                rtt,
            });
        }
        drop(clients);
        cluster.stop().await;
    }
    bar.finish_and_clear();
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(rows)
}

/// One run of one configuration: (acquire rate, release rate, messages per client).
async fn run_once(
    pool: &mut Vec<ClusterClient>,
    layout: &Layout,
    case: &Case,
    locks: u64,
    rounds: u32,
    file: FileId,
) -> Result<(f64, f64, Vec<f64>), WireError> {
    let accesses = accesses(case, locks, pool.len())?;
    let barrier = Arc::new(Barrier::new(pool.len()));
    let hold_together = case.variant == "scaling";
    let mut tasks = Vec::new();
    for (mut client, access) in pool.drain(..).zip(accesses) {
        let (layout, barrier) = (layout.clone(), barrier.clone());
        let (method, protocol) = (case.method, case.protocol);
        tasks.push(tokio::spawn(async move {
            let result = async {
                barrier.wait().await;
                let (mut acq, mut rel, mut messages) = (Vec::new(), Vec::new(), 0);
                for _ in 0..rounds {
                    let a0 = Instant::now();
                    let held = client
                        .lock(file, LockMode::Write, &access, &layout, method, protocol)
                        .await;
                    let a1 = Instant::now();
                    if hold_together {
                        // Reached even on failure, or the other clients would wait here forever.
                        barrier.wait().await;
                    }
                    let held = held?;
                    let r0 = Instant::now();
                    let stats = client.unlock(held).await?;
                    let r1 = Instant::now();
                    acq.push((a0, a1));
                    rel.push((r0, r1));
                    messages += stats.messages;
                }
                Ok::<_, WireError>((acq, rel, messages / u64::from(rounds)))
            }
            .await;
            (client, result)
        }));
    }
    let mut acq_spans = Vec::new();
    let mut rel_spans = Vec::new();
    let mut msgs = Vec::new();
    let mut first_err = None;
    for t in tasks {
        let (client, result) = t.await.map_err(|e| {
            WireError::new(
                ErrorCode::Internal,
                format!("benchmark client panicked: {e}"),
            )
        })?;
        pool.push(client);
        match result {
            Ok((a, r, m)) => {
                acq_spans.extend(a);
                rel_spans.extend(r);
                msgs.push(m as f64);
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let total = (locks * pool.len() as u64 * u64::from(rounds)) as f64;
    Ok((
        total / union_length(acq_spans).as_secs_f64(),
        total / union_length(rel_spans).as_secs_f64(),
        msgs,
    ))
}

/// Each client's pattern of `locks` one-byte locks for `case`, client `i` at its shift.
fn accesses(case: &Case, locks: u64, clients: usize) -> Result<Vec<Access>, WireError> {
    let region = locks * case.spacing;
    let shift = if case.variant == "scaling" {
        region
    } else if case.variant == "interleave" {
        case.spacing / u64::from(case.clients)
    } else {
        // A whole number of lock spacings, so that neighbours share exactly `overlap` of
        // their locks (`region / 100 · (100 − overlap)` was 60 bytes off the spacing at
        // 50 %: no lock was shared, every lock fell between a neighbour's).
        locks * u64::from(100 - case.overlap) / 100 * case.spacing
    };
    let one = Pattern::bytes(1)?;
    let pattern = Pattern::hvector(locks, 1, case.spacing, &one)?;
    (0..clients as u64)
        .map(|i| Ok(Access::new(i * shift, pattern.clone())?))
        .collect()
}

/// `run_once` on one host's lock table: each client a thread with its own handle, which
/// lists its call's ranges and takes them all at once, as a `+host` call does.
fn run_once_host(
    tables: &[atomio_client::host_locks::HostLocks],
    case: &Case,
    locks: u64,
    rounds: u32,
) -> Result<(f64, f64, Vec<f64>), WireError> {
    type Spans = Vec<(Instant, Instant)>;
    let accesses = accesses(case, locks, tables.len())?;
    let barrier = std::sync::Barrier::new(tables.len());
    let hold_together = case.variant == "scaling";
    let results: Vec<Result<(Spans, Spans), WireError>> = std::thread::scope(|s| {
        let handles: Vec<_> = tables
            .iter()
            .zip(&accesses)
            .map(|(table, access)| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let (mut acq, mut rel) = (Vec::new(), Vec::new());
                    for _ in 0..rounds {
                        let a0 = Instant::now();
                        let ranges: Vec<_> = access.ranges().collect();
                        let held = table.acquire(LockMode::Write, &ranges);
                        let a1 = Instant::now();
                        if hold_together {
                            // Reached even on failure, or the other clients would wait here
                            // forever.
                            barrier.wait();
                        }
                        let held = held?;
                        let r0 = Instant::now();
                        table.release(held)?;
                        acq.push((a0, a1));
                        rel.push((r0, Instant::now()));
                    }
                    Ok((acq, rel))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(WireError::new(
                        ErrorCode::Internal,
                        "benchmark client panicked",
                    ))
                })
            })
            .collect()
    });
    let (mut acq_spans, mut rel_spans) = (Vec::new(), Vec::new());
    for r in results {
        let (a, r) = r?;
        acq_spans.extend(a);
        rel_spans.extend(r);
    }
    let total = (locks * tables.len() as u64 * u64::from(rounds)) as f64;
    Ok((
        total / union_length(acq_spans).as_secs_f64(),
        total / union_length(rel_spans).as_secs_f64(),
        vec![0.0; tables.len()],
    ))
}
