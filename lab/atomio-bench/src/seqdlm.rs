//! SeqDLM's micro benchmarks (Chen et al., SC'22 §V-B), on atomio's servers with real
//! clients: servers embedded in this process and reached over loopback TCP, each client a
//! `File` with its own DLM agent (its own connections and thread), exactly as in the
//! workload benchmarks and the MPI library.
//!
//! * **breakdown** (Fig. 16a / 17): the clients write `[0, X)` of a one-stripe file one
//!   after another, round robin (a token passed between them, as the paper's
//!   `MPI_Send`/`MPI_Recv`), so every write's lock conflicts with the previous writer's.
//!   The time is split into *lock revocation* (waiting for a grant, less what of it the
//!   holder spent between its cancel and its release), *cancel + flush* (the holders' cancel
//!   → release time while a writer waited: the flush of their bytes and the release), and
//!   *other* (everything but waiting for grants: the calls into the cache, the token).
//!   NBW's early grant takes the flush off that path; PW cannot.
//! * **parallel** (Fig. 16b / 18): every client writes `[0, X)` at once, again and again;
//!   throughput = writes / the time until every client's calls returned (the flush of what
//!   is cached afterwards is timed apart). NBW / NBW+ER / PW / PW+ER as in the paper
//!   (`seqdlm:nbw:no-er`, `seqdlm:nbw:no-cr`, `seqdlm:pw:no-er`, `seqdlm:pw:no-cr`), and
//!   NBW+ER+CR (`seqdlm:nbw`: with atomio's contention revocation).
//! * **convert** (Fig. 19): *upgrading* — one client interleaves writes and reads of
//!   `[0, X)` (PW; NBW without conversion; NBW with it, upgraded to PW at the first read);
//!   *downgrading* — every client writes `X` bytes across the boundary of a two-stripe file
//!   (BW with downgrading, BW without, PW).
//!
//! Every run's file is read back and proven atomic by the verifier (all writes overlap
//! entirely: the file must be one write, whole); the upgrade test also checks every read.
//! Write buffers carry verifier tags and are filled before the clock starts.
//!
//! **Invariants:** one invocation uses one cluster for every row, so rows compare; a run
//! whose verification fails is reported as violated, never dropped; medians over runs.

use crate::stats::median;
use atomio_client::dlm::machine::LockRecord;
use atomio_client::{File, Strategy};
use atomio_layout::{Access, ByteRange};
use atomio_net::{ClusterClient, EmbeddedCluster};
use atomio_proto::{ErrorCode, WireError};
use atomio_verify::{Read, Verdict, Write};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct SeqBenchConfig {
    pub clients: u32,
    pub servers: u32,
    /// Writes per client (at most `max_bytes_per_client / X` for size X).
    pub writes: u64,
    pub max_bytes_per_client: u64,
    pub sizes: Vec<u64>,
    pub runs: usize,
    /// Embedded servers keep data in memory instead of files under `scratch`.
    pub memory: bool,
    pub scratch: PathBuf,
    pub progress: bool,
}

impl SeqBenchConfig {
    fn writes_for(&self, size: u64) -> u64 {
        self.writes
            .min(self.max_bytes_per_client / size.max(1))
            .max(2)
    }
}

fn wire(e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::Internal, e.to_string())
}

/// The cluster every row of one invocation runs on.
struct Env {
    _cluster: EmbeddedCluster,
    addrs: Vec<String>,
}

impl Env {
    async fn start(cfg: &SeqBenchConfig) -> Result<Self, WireError> {
        // A directory of its own per cluster: a stopped one's data threads may still hold
        // theirs for a moment.
        static CLUSTERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = CLUSTERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cluster = if cfg.memory {
            EmbeddedCluster::start(cfg.servers)
        } else {
            EmbeddedCluster::start_on_disk(cfg.servers, &cfg.scratch.join(format!("servers-{n}")))?
        };
        let addrs = cluster.serve_tcp().await?;
        Ok(Self {
            _cluster: cluster,
            addrs,
        })
    }

    /// A fresh file and `n` clients with it open under `strategy`.
    async fn clients(
        &self,
        path: &str,
        stripe_size: u64,
        stripes: u32,
        n: u32,
        strategy: &str,
    ) -> Result<Vec<Client>, WireError> {
        let s: Strategy = strategy.parse().map_err(wire)?;
        {
            let mut c = ClusterClient::connect_tcp(&self.addrs).await?;
            let _ = c.remove(path).await;
            File::create(&mut c, path, stripe_size, stripes).await?;
        }
        let mut out = Vec::new();
        for _ in 0..n {
            let mut c = ClusterClient::connect_tcp(&self.addrs).await?;
            let mut f = File::open(&mut c, path).await?;
            f.set_atomic(Some(s.clone()))?;
            out.push(Client { c, f });
        }
        Ok(out)
    }

    async fn read_back(&self, path: &str) -> Result<Vec<u8>, WireError> {
        let mut c = ClusterClient::connect_tcp(&self.addrs).await?;
        let info = c.open(path).await?;
        let bytes = c.read_all(&info).await?;
        let _ = c.remove(path).await;
        Ok(bytes)
    }
}

struct Client {
    c: ClusterClient,
    f: File,
}

/// Writer w's buffers for `ops` writes of `access`, tagged for the verifier.
fn buffers(w: u32, ops: u64, access: &Access) -> Result<Vec<Vec<u8>>, WireError> {
    (0..ops)
        .map(|op| {
            let mut b = vec![0u8; access.size() as usize];
            atomio_verify::fill(w, op, access.ranges(), &mut b).map_err(wire)?;
            Ok(b)
        })
        .collect()
}

fn verdict(file: &[u8], writes: &[Write], reads: &[Read]) -> Result<(bool, String), WireError> {
    let report = atomio_verify::verify(file, writes, reads).map_err(wire)?;
    Ok((report.verdict == Verdict::Atomic, report.to_string()))
}

fn contiguous(start: u64, len: u64) -> Result<Access, WireError> {
    Access::contiguous(ByteRange {
        start,
        end: start + len,
    })
    .map_err(wire)
}

/// The writes of a run where every client writes `access` `ops` times.
fn all_writes(clients: u32, ops: u64, access: &Access) -> Vec<Write> {
    (0..clients)
        .flat_map(|w| (0..ops).map(move |op| Write::new(w, op, access.clone())))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Breakdown

#[derive(Clone, Debug, Serialize)]
pub struct BreakdownRow {
    pub mode: String,
    pub strategy: String,
    pub size: u64,
    pub clients: u32,
    pub writes_per_client: u64,
    /// Medians over runs, seconds.
    pub total_s: f64,
    pub revocation_s: f64,
    pub cancel_flush_s: f64,
    pub other_s: f64,
    /// Flushing what stayed cached, after the sequence (not part of `total_s`).
    pub flush_after_s: f64,
    pub verified: bool,
    pub violation: Option<String>,
    pub runs: usize,
    pub total_runs: Vec<f64>,
}

pub const BREAKDOWN_MODES: [(&str, &str); 2] = [("NBW", "seqdlm:nbw"), ("PW", "seqdlm:pw")];

pub async fn breakdown(cfg: &SeqBenchConfig) -> Result<Vec<BreakdownRow>, WireError> {
    let env = Env::start(cfg).await?;
    let bar = crate::progress::bar(
        (cfg.sizes.len() * BREAKDOWN_MODES.len() * cfg.runs) as u64,
        cfg.progress,
    );
    let mut rows = Vec::new();
    for &size in &cfg.sizes {
        let ops = cfg.writes_for(size);
        let mut acc: Vec<Vec<[f64; 5]>> = vec![Vec::new(); BREAKDOWN_MODES.len()];
        let mut verdicts = vec![(true, None); BREAKDOWN_MODES.len()];
        for run in 0..cfg.runs {
            for k in 0..BREAKDOWN_MODES.len() {
                let m = (k + run) % BREAKDOWN_MODES.len();
                let (mode, strategy) = BREAKDOWN_MODES[m];
                bar.set_message(format!("breakdown {mode} {size} run {}", run + 1));
                let path = format!("/seqbench/breakdown/{mode}/{size}/{run}");
                let (parts, (ok, why)) =
                    breakdown_once(&env, cfg, &path, strategy, size, ops).await?;
                acc[m].push(parts);
                if !ok {
                    verdicts[m] = (false, Some(why));
                }
                bar.inc(1);
            }
        }
        for (m, (mode, strategy)) in BREAKDOWN_MODES.iter().enumerate() {
            let col = |i: usize| median(&acc[m].iter().map(|p| p[i]).collect::<Vec<_>>());
            rows.push(BreakdownRow {
                mode: mode.to_string(),
                strategy: strategy.to_string(),
                size,
                clients: cfg.clients,
                writes_per_client: ops,
                total_s: col(0),
                revocation_s: col(1),
                cancel_flush_s: col(2),
                other_s: col(3),
                flush_after_s: col(4),
                verified: verdicts[m].0,
                violation: verdicts[m].1.clone(),
                runs: cfg.runs,
                total_runs: acc[m].iter().map(|p| p[0]).collect(),
            });
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// One round-robin run: [total, revocation, cancel+flush, other, flush after] seconds and
/// the verdict.
async fn breakdown_once(
    env: &Env,
    cfg: &SeqBenchConfig,
    path: &str,
    strategy: &str,
    size: u64,
    ops: u64,
) -> Result<([f64; 5], (bool, String)), WireError> {
    let n = cfg.clients;
    let access = contiguous(0, size)?;
    let mut clients = env.clients(path, size.max(1 << 20), 1, n, strategy).await?;
    for c in &mut clients {
        c.f.keep_dlm_log();
    }
    let mut txs = Vec::new();
    let mut rxs = Vec::new();
    for _ in 0..n {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        txs.push(tx);
        rxs.push(rx);
    }
    let mut all_bufs = Vec::new();
    for w in 0..n {
        all_bufs.push(buffers(w, ops, &access)?);
    }
    let mut tasks = Vec::new();
    let start = Instant::now();
    for (w, ((mut cl, mut rx), bufs)) in clients.into_iter().zip(rxs).zip(all_bufs).enumerate() {
        let next = txs[(w + 1) % n as usize].clone();
        let a = access.clone();
        tasks.push(tokio::spawn(async move {
            for buf in &bufs {
                rx.recv().await.ok_or_else(|| wire("token lost"))?;
                let written = cl.f.write(&mut cl.c, &a, buf).await;
                // Pass the token on even after a failure, so nobody waits for it forever.
                let _ = next.send(());
                written?;
            }
            Ok::<_, WireError>((cl, Instant::now()))
        }));
    }
    txs[0].send(()).map_err(wire)?;
    let mut finished = Vec::new();
    for t in tasks {
        finished.push(t.await.map_err(wire)??);
    }
    let end = finished.iter().map(|f| f.1).max().unwrap_or(start);
    let total = (end - start).as_secs_f64();
    let flush_start = Instant::now();
    let mut log = Vec::new();
    for (cl, ..) in &mut finished {
        cl.f.flush_cache().await?;
        log.extend(cl.f.dlm_log().await);
    }
    let flush_after = flush_start.elapsed().as_secs_f64();
    let (wait, critical_flush) = critical_path(log);
    let parts = [
        total,
        wait - critical_flush,
        critical_flush,
        (total - wait).max(0.0),
        flush_after,
    ];
    let file = env.read_back(path).await?;
    let v = verdict(&file, &all_writes(n, ops, &access), &[])?;
    Ok((parts, v))
}

/// From every lock's life in a round-robin run (one resource: SN order is grant order):
/// (seconds waited for grants, seconds of it the previous holder spent flushing and
/// releasing before the grant — zero for an early grant, which came before that release).
pub fn critical_path(mut log: Vec<LockRecord>) -> (f64, f64) {
    log.sort_by_key(|r| r.sn);
    let mut wait = 0u64;
    let mut flush = 0u64;
    for pair in log.windows(2) {
        let (prev, cur) = (&pair[0], &pair[1]);
        let waited = cur.granted_at.saturating_sub(cur.requested_at);
        wait += waited;
        if let (Some(c), Some(r)) = (prev.canceled_at, prev.released_at) {
            if r <= cur.granted_at {
                let from = c.max(cur.requested_at);
                flush += r.saturating_sub(from).min(waited);
            }
        }
    }
    (wait as f64 / 1e9, flush as f64 / 1e9)
}

// ---------------------------------------------------------------------------------------
// Parallel

#[derive(Clone, Debug, Serialize)]
pub struct ThroughputRow {
    pub bench: String,
    pub variant: String,
    pub strategy: String,
    pub size: u64,
    pub clients: u32,
    /// Operations per client (writes; upgrade test: writes + reads).
    pub ops_per_client: u64,
    /// Median seconds until every client's calls returned, and operations per second.
    pub seconds: f64,
    pub ops_per_s: f64,
    /// Median seconds including the flush of what stayed cached.
    pub total_seconds: f64,
    /// Client 0's time waiting for grants over the rest of its call time (Fig. 18b).
    pub lock_io_ratio: f64,
    /// CPU time (every thread of this process: clients, their agents and the servers) per
    /// operation while the calls ran, µs: with 2 cores, ops/s cannot pass 2 s / this.
    pub cpu_us_per_op: f64,
    pub verified: bool,
    pub violation: Option<String>,
    pub runs: usize,
    pub seconds_runs: Vec<f64>,
}

pub const PARALLEL_VARIANTS: [(&str, &str); 5] = [
    ("NBW", "seqdlm:nbw:no-er"),
    ("NBW+ER", "seqdlm:nbw:no-cr"),
    ("NBW+ER+CR", "seqdlm:nbw"),
    ("PW", "seqdlm:pw:no-er"),
    ("PW+ER", "seqdlm:pw:no-cr"),
];
pub const UPGRADE_VARIANTS: [(&str, &str); 3] = [
    ("PW", "seqdlm:pw"),
    ("NBW", "seqdlm:nbw:no-conv"),
    ("NBW+U", "seqdlm:nbw"),
];
pub const DOWNGRADE_VARIANTS: [(&str, &str); 3] = [
    ("BW+D", "seqdlm:bw"),
    ("BW-D", "seqdlm:bw:no-conv"),
    ("PW", "seqdlm:pw"),
];

/// Which throughput test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Throughput {
    /// Every client writes `[0, X)` of a one-stripe file at once.
    Parallel,
    /// One client alternates writes and reads of `[0, X)`.
    Upgrade,
    /// Every client writes `X` bytes across the middle of a two-stripe file.
    Downgrade,
}

impl Throughput {
    fn name(self) -> &'static str {
        match self {
            Throughput::Parallel => "parallel",
            Throughput::Upgrade => "upgrade",
            Throughput::Downgrade => "downgrade",
        }
    }
    pub fn variants(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Throughput::Parallel => &PARALLEL_VARIANTS,
            Throughput::Upgrade => &UPGRADE_VARIANTS,
            Throughput::Downgrade => &DOWNGRADE_VARIANTS,
        }
    }
}

pub async fn throughput(
    cfg: &SeqBenchConfig,
    which: Throughput,
) -> Result<Vec<ThroughputRow>, WireError> {
    let env = Env::start(cfg).await?;
    let variants = which.variants();
    let bar = crate::progress::bar(
        (cfg.sizes.len() * variants.len() * cfg.runs) as u64,
        cfg.progress,
    );
    let mut rows = Vec::new();
    for &size in &cfg.sizes {
        let ops = cfg.writes_for(size);
        let mut acc: Vec<Vec<[f64; 4]>> = vec![Vec::new(); variants.len()];
        let mut verdicts = vec![(true, None); variants.len()];
        for run in 0..cfg.runs {
            for k in 0..variants.len() {
                let m = (k + run) % variants.len();
                let (name, strategy) = variants[m];
                bar.set_message(format!("{} {name} {size} run {}", which.name(), run + 1));
                let path = format!("/seqbench/{}/{name}/{size}/{run}", which.name());
                let (t, (ok, why)) =
                    throughput_once(&env, cfg, which, &path, strategy, size, ops).await?;
                acc[m].push(t);
                if !ok {
                    verdicts[m] = (false, Some(why));
                }
                bar.inc(1);
            }
        }
        let clients = if which == Throughput::Upgrade {
            1
        } else {
            cfg.clients
        };
        for (m, (name, strategy)) in variants.iter().enumerate() {
            let col = |i: usize| median(&acc[m].iter().map(|p| p[i]).collect::<Vec<_>>());
            let seconds = col(0);
            let per_client = if which == Throughput::Upgrade {
                2 * ops
            } else {
                ops
            };
            rows.push(ThroughputRow {
                bench: which.name().into(),
                variant: name.to_string(),
                strategy: strategy.to_string(),
                size,
                clients,
                ops_per_client: per_client,
                seconds,
                ops_per_s: (per_client * u64::from(clients)) as f64 / seconds,
                total_seconds: col(1),
                lock_io_ratio: col(2),
                cpu_us_per_op: col(3) * 1e6 / (per_client * u64::from(clients)) as f64,
                verified: verdicts[m].0,
                violation: verdicts[m].1.clone(),
                runs: cfg.runs,
                seconds_runs: acc[m].iter().map(|p| p[0]).collect(),
            });
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// One run: [seconds of the calls, seconds with the flush, client 0's lock/IO ratio, CPU
/// seconds of the calls].
async fn throughput_once(
    env: &Env,
    cfg: &SeqBenchConfig,
    which: Throughput,
    path: &str,
    strategy: &str,
    size: u64,
    ops: u64,
) -> Result<([f64; 4], (bool, String)), WireError> {
    let (n, stripe, stripes, access) = match which {
        Throughput::Parallel => (cfg.clients, size.max(1 << 20), 1, contiguous(0, size)?),
        Throughput::Upgrade => (1, size.max(1 << 20), 1, contiguous(0, size)?),
        // Across the boundary of two stripes of `stripe` bytes.
        Throughput::Downgrade => {
            let stripe = size.max(1 << 20);
            (cfg.clients, stripe, 2, contiguous(stripe - size / 2, size)?)
        }
    };
    let clients = env.clients(path, stripe, stripes, n, strategy).await?;
    let mut bufs = Vec::new();
    for w in 0..n {
        bufs.push(buffers(w, ops, &access)?);
    }
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(n as usize + 1));
    let mut tasks = Vec::new();
    for (w, (mut cl, bufs)) in clients.into_iter().zip(bufs).enumerate() {
        let a = access.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            barrier.wait().await;
            let t = Instant::now();
            let done = async {
                for (op, buf) in bufs.iter().enumerate() {
                    cl.f.write(&mut cl.c, &a, buf).await?;
                    if which == Throughput::Upgrade {
                        let mut out = vec![0u8; a.size() as usize];
                        cl.f.read(&mut cl.c, &a, &mut out).await?;
                        seen.push((op as u64, out));
                    }
                }
                Ok::<(), WireError>(())
            }
            .await;
            let calls = t.elapsed();
            let stats = cl.f.dlm_stats().await.unwrap_or_default();
            // Everyone's calls are done before anyone flushes (a failed client too: it
            // must not leave the others waiting at the barrier).
            barrier.wait().await;
            done?;
            cl.f.flush_cache().await?;
            Ok::<_, WireError>((w as u32, calls, stats, seen))
        }));
    }
    barrier.wait().await;
    let start = Instant::now();
    let cpu0 = crate::stats::process_cpu_seconds();
    barrier.wait().await;
    let calls = start.elapsed();
    let cpu = crate::stats::process_cpu_seconds() - cpu0;
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.map_err(wire)??);
    }
    let total = start.elapsed();
    let (_, c0_calls, c0_stats, _) = &results[0];
    let wait = Duration::from_nanos(c0_stats.lock_wait_ns);
    let io = c0_calls.saturating_sub(wait).as_secs_f64().max(1e-9);
    let ratio = wait.as_secs_f64() / io;
    let file = env.read_back(path).await?;
    let reads: Vec<Read> = results
        .iter()
        .flat_map(|(w, _, _, seen)| {
            seen.iter()
                .map(|(op, data)| Read::new(*w, *op, access.clone(), &data[..]))
                .collect::<Vec<_>>()
        })
        .collect();
    let v = verdict(&file, &all_writes(n, ops, &access), &reads)?;
    Ok(([calls.as_secs_f64(), total.as_secs_f64(), ratio, cpu], v))
}
