//! Workload benchmarks: N client processes (see `worker`) run a workload's calls under each
//! strategy against M servers, the coordinator times them, reads the result back and proves
//! it atomic (or not) with the verifier.
//!
//! Per strategy and run: a fresh file; every worker prepares (connects, opens, fills its
//! write buffers with verifier tags) and says ready; the coordinator warms the page cache
//! (`page_warm`: writes and deletes a file of the run's size, so no row pays for memory
//! untouched for a while), sends "go" to all and times until the last "done". Seconds are the median over runs; bandwidth is bytes moved
//! (writes + reads) over that. The first run of each strategy is verified: the file's bytes
//! against every write of the plan, plus every read's dump. Repetitions are interleaved:
//! run k of every row (order rotated by k) before run k+1 of any. Rows: each strategy on
//! its placement (`--data direct|servers`; the fcntl baselines always on a direct file),
//! and three reference rows that run no atomio: `contiguous` — every client `pwrite`s its
//! bytes contiguously into a fresh local file (the same bytes without the pattern; not
//! verified: no layout; strategies that write in parallel through a mapping can beat it);
//! `plain` — every client `pwrite`s each of its pieces in place: the plain way to write the
//! pattern (verified like `none`; for small pieces, a system call each is what atomio's
//! mapped copies beat); `plain-mapped` — every client writes its pieces the way direct
//! placement does, with no locks. `rtt-floor` is `none` plus one round trip to a lock
//! server (a `Ping`) before each call: the least any lock-server technique adds, since a
//! call may not write before a server has answered it.
//!
//! **Invariants:** every strategy of one invocation runs the same plan on the same servers
//! with the same workers, so their ratios are comparable; a run that fails is an error, not
//! a slow row.

use crate::stats::median;
use crate::worker::{FromWorker, Job, JobResult, LocalWay, Target, ToWorker};
use atomio_client::{PlacementKind, Strategy};
use atomio_layout::Access;
use atomio_net::{ClusterClient, EmbeddedCluster, LocalServers};
use atomio_proto::{ErrorCode, WireError};
use atomio_verify::{Read, Report, Write};
use atomio_workloads::{CallKind, Workload, WorkloadPlan};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How servers are provided.
#[derive(Clone, Debug)]
pub enum Deploy {
    /// In the coordinator process, served over loopback TCP; data on disk under the
    /// scratch directory (or in memory).
    Embedded { memory: bool },
    /// `atomio server` processes on loopback.
    Processes,
    /// Servers already running.
    Cluster(Vec<String>),
}

/// One row of a workload table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowSpec {
    /// `contiguous`: each client `pwrite`s its bytes contiguously into a local file (the
    /// same bytes without the pattern; not verified).
    Contiguous,
    /// `plain`: each client `pwrite`s its own pieces, one by one, where they go in one
    /// local file (no atomio, no locks; verified like `none`).
    Plain,
    /// `plain-mapped`: each client writes its pieces the way direct placement does
    /// (through a shared mapping when that pays), with no atomio client and no locks, into
    /// one local file (verified like `none`).
    PlainMapped,
    /// `none` plus one lock-server round trip per call: the floor of lock-server techniques.
    RttFloor,
    Strategy(Strategy),
    /// `<strategy>+ifile`: an interval file instead of the flat file (strategies that
    /// split by intervals; verified after translating it to flat in memory).
    IntervalFile(Strategy),
    /// `<strategy>+host`: the strategy's locks taken in the host's shared lock table
    /// (`atomio_client::host_locks`) instead of on the lock servers: no round trip.
    HostLocks(Strategy),
}

impl RowSpec {
    pub fn name(&self) -> String {
        match self {
            RowSpec::Contiguous => "contiguous".into(),
            RowSpec::Plain => "plain".into(),
            RowSpec::PlainMapped => "plain-mapped".into(),
            RowSpec::RttFloor => "rtt-floor".into(),
            RowSpec::Strategy(s) => s.name(),
            RowSpec::IntervalFile(s) => format!("{s}+ifile"),
            RowSpec::HostLocks(s) => format!("{s}+host"),
        }
    }
}

impl std::str::FromStr for RowSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "contiguous" => Ok(RowSpec::Contiguous),
            "plain" => Ok(RowSpec::Plain),
            "plain-mapped" => Ok(RowSpec::PlainMapped),
            "rtt-floor" => Ok(RowSpec::RttFloor),
            s if s.ends_with("+host") => {
                let st: Strategy = s.trim_end_matches("+host").parse()?;
                if !st.uses_lock_service() || !st.supports(PlacementKind::Direct) {
                    return Err(format!(
                        "'{s}': host locks replace the lock servers of a strategy that locks \
                         a direct file on them (ching:*, bounding-extent, block:*, whole-file)"
                    ));
                }
                Ok(RowSpec::HostLocks(st))
            }
            s => match s.strip_suffix("+ifile") {
                Some(base) => {
                    let st: Strategy = base.parse()?;
                    if !st.technique().splits_by_intervals() {
                        return Err(format!(
                            "'{s}': interval files are written by strategies interval and auto"
                        ));
                    }
                    Ok(RowSpec::IntervalFile(st))
                }
                None => s.parse().map(RowSpec::Strategy),
            },
        }
    }
}

#[derive(Clone, Debug)]
pub struct WorkloadBenchConfig {
    pub workload: Workload,
    pub clients: u32,
    pub strategies: Vec<RowSpec>,
    /// Where strategies that can run on either placement keep the bytes (`posix-fcntl` and
    /// `romio` always run on a direct file).
    pub data: PlacementKind,
    /// On servers placement, let clients on the servers' host move bytes through the
    /// object files (off: every byte through messages).
    pub bypass: bool,
    pub servers: u32,
    pub deploy: Deploy,
    pub stripe_size: u64,
    /// Objects per server file (default: one per server).
    pub stripe_count: Option<u32>,
    pub runs: usize,
    /// The `atomio` executable (for workers and server processes).
    pub exe: PathBuf,
    pub scratch: PathBuf,
    pub verify: bool,
    /// Keep each strategy's verified file and its manifest here (for `atomio-lab verify`).
    pub keep: Option<PathBuf>,
    pub progress: bool,
    /// Network delay added between every client and server (a relay per server; zero:
    /// plain loopback).
    pub delay: atomio_net::relay::Delay,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadRow {
    pub workload: String,
    pub strategy: String,
    /// `direct` (the user's file), `servers` (atomio's data servers) or `local` (the reference rows).
    pub data: String,
    pub clients: u32,
    pub servers: u32,
    /// Bytes moved per run (writes + reads).
    pub bytes: u64,
    /// Median seconds per run (until every client's calls returned and what a cached-lock
    /// DLM cached was flushed).
    pub seconds: f64,
    pub mib_per_s: f64,
    /// Median over runs of the slowest client's call time alone (the paper's PIO time:
    /// what the application waits for; cached-lock DLMs flush after it), and the
    /// bandwidth over it.
    pub pio_seconds: f64,
    pub pio_mib_per_s: f64,
    /// Median over runs of the CPU every process of the run spent from the start until
    /// the last client was done: the clients' and this one's (which holds embedded
    /// servers; not external ones). Over `seconds` × cores: how busy the run kept the
    /// machine (`null` when a clock could not be read).
    pub cpu_seconds: Option<f64>,
    /// Bandwidth as a percentage of strategy `none` in the same invocation (null if `none`
    /// did not run).
    pub pct_of_none: Option<f64>,
    /// Bandwidth as a percentage of the `contiguous` row (null if it did not run).
    pub pct_of_contiguous: Option<f64>,
    /// Bandwidth over the `romio` baseline's (null if it did not run).
    pub x_romio: Option<f64>,
    /// Lock requests per run (all clients).
    pub lock_requests: u64,
    /// Interval I/O (first run, all clients): calls with no lock, calls that locked
    /// undeclared bytes; what `auto` chose (rank 0) and the analysis's seconds (max).
    pub lock_free_calls: u64,
    pub interval_fallbacks: u64,
    pub chosen: Option<atomio_interval::Choice>,
    pub analysis_seconds: f64,
    /// The verifier's verdict on the first run; null when no two clients' writes overlap
    /// and the data checked out (nothing to order).
    pub verified: Option<bool>,
    pub runs: usize,
    pub seconds_runs: Vec<f64>,
    /// The first violation, when verification failed.
    pub violation: Option<String>,
    /// Cached-lock DLMs: what every client's DLM client did in the first run, summed.
    pub dlm: Option<atomio_client::dlm::machine::DlmClientStats>,
    /// With an injected delay: the round trip asked for and the medians measured (a
    /// `Ping` through the relays, and straight to the server), in µs.
    pub rtt: Option<RttCheck>,
}

/// The round trip a relayed run asked for, and what a `Ping` measured.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RttCheck {
    pub asked_us: f64,
    pub relayed_us: f64,
    pub direct_us: f64,
}

/// Median `Ping` round trip to server 0, in µs.
pub(crate) async fn ping_median_us(client: &mut ClusterClient) -> Result<f64, WireError> {
    let mut t = Vec::new();
    for nonce in 0..41 {
        let start = Instant::now();
        client
            .rpc_all(vec![(
                atomio_layout::ServerId(0),
                atomio_proto::Request::Ping { nonce },
            )])
            .await?;
        t.push(start.elapsed().as_secs_f64() * 1e6);
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    async fn spawn(exe: &Path) -> Result<Self, WireError> {
        let mut child = Command::new(exe)
            .arg("worker")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                WireError::new(
                    ErrorCode::Io,
                    format!("starting a worker ({}): {e}", exe.display()),
                )
            })?;
        let stdin = child.stdin.take().expect("piped");
        let lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        Ok(Self {
            child,
            stdin,
            lines,
        })
    }

    async fn send(&mut self, msg: &ToWorker) -> Result<(), WireError> {
        let mut line = serde_json::to_vec(msg)
            .map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))?;
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .map_err(|e| WireError::new(ErrorCode::Disconnected, format!("a worker is gone: {e}")))
    }

    async fn recv(&mut self, timeout: Duration) -> Result<FromWorker, WireError> {
        let line = tokio::time::timeout(timeout, self.lines.next_line())
            .await
            .map_err(|_| {
                WireError::new(
                    ErrorCode::Timeout,
                    format!("a worker said nothing for {timeout:?}"),
                )
            })?
            .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))?
            .ok_or_else(|| WireError::new(ErrorCode::Disconnected, "a worker exited"))?;
        serde_json::from_str(&line)
            .map_err(|e| WireError::new(ErrorCode::Malformed, format!("worker said '{line}': {e}")))
    }
}

/// How long a worker may take to prepare or run one job.
const WORKER_TIMEOUT: Duration = Duration::from_secs(600);

enum Servers {
    /// The cluster is held so its servers live as long as the run.
    Embedded {
        _cluster: EmbeddedCluster,
        addrs: Vec<String>,
    },
    Processes(LocalServers),
    External(Vec<String>),
}

impl Servers {
    fn addrs(&self) -> &[String] {
        match self {
            Servers::Embedded { addrs: a, .. } | Servers::External(a) => a,
            Servers::Processes(p) => &p.addresses,
        }
    }
}

/// What the runs of one row have measured so far.
#[derive(Default)]
struct Acc {
    seconds: Vec<f64>,
    pio: Vec<f64>,
    cpu: Vec<Option<f64>>,
    locks: Vec<f64>,
    bytes: u64,
    data: &'static str,
    verdict: (Option<bool>, Option<String>),
    dlm: Option<atomio_client::dlm::machine::DlmClientStats>,
    lock_free_calls: u64,
    interval_fallbacks: u64,
    chosen: Option<atomio_interval::Choice>,
    analysis_seconds: f64,
}

/// Runs the workload under every strategy; one row per strategy.
pub async fn run(cfg: &WorkloadBenchConfig) -> Result<Vec<WorkloadRow>, WireError> {
    let plan = cfg
        .workload
        .plan(cfg.clients)
        .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?;
    std::fs::create_dir_all(&cfg.scratch)
        .map_err(|e| WireError::new(ErrorCode::Io, format!("{}: {e}", cfg.scratch.display())))?;
    let warm_bytes = plan
        .clients
        .iter()
        .flat_map(|c| c.calls.iter())
        .filter_map(|c| c.access.as_ref().map(Access::size))
        .sum();
    let servers = match &cfg.deploy {
        Deploy::Embedded { memory } => {
            let cluster = if *memory {
                EmbeddedCluster::start(cfg.servers)
            } else {
                EmbeddedCluster::start_on_disk(cfg.servers, &cfg.scratch.join("servers"))?
            };
            let addrs = cluster.serve_tcp().await?;
            Servers::Embedded {
                _cluster: cluster,
                addrs,
            }
        }
        Deploy::Processes => Servers::Processes(
            LocalServers::start(&cfg.exe, cfg.servers, &cfg.scratch.join("servers")).await?,
        ),
        Deploy::Cluster(a) => Servers::External(a.clone()),
    };
    let mut addrs = servers.addrs().to_vec();
    // Relays hold the injected delay; they live as long as this run.
    let mut _relays = Vec::new();
    let mut rtt = None;
    if !cfg.delay.rtt.is_zero() {
        let direct_us = ping_median_us(&mut ClusterClient::connect_tcp(&addrs).await?).await?;
        _relays = atomio_net::relay::relay_all(&addrs, cfg.delay)
            .map_err(|e| WireError::new(ErrorCode::Io, format!("starting relays: {e}")))?;
        addrs = _relays.iter().map(|r| r.address.to_string()).collect();
        let relayed_us = ping_median_us(&mut ClusterClient::connect_tcp(&addrs).await?).await?;
        rtt = Some(RttCheck {
            asked_us: cfg.delay.rtt.as_secs_f64() * 1e6,
            relayed_us,
            direct_us,
        });
    }
    let mut coordinator = ClusterClient::connect_tcp(&addrs).await?;
    let mut workers = Vec::new();
    for _ in 0..plan.clients.len() {
        workers.push(Worker::spawn(&cfg.exe).await?);
    }
    let bar = crate::progress::bar((cfg.strategies.len() * cfg.runs) as u64, cfg.progress);
    let mut rows = Vec::new();
    let result = async {
        // Repetition k of every row runs before repetition k+1 of any (order rotated each
        // time), so drift on a noisy machine hits every row alike.
        let n = cfg.strategies.len();
        let mut acc: Vec<Acc> = cfg.strategies.iter().map(|_| Acc::default()).collect();
        for run in 0..cfg.runs {
            for k in 0..n {
                let si = (k + run) % n;
                let spec = &cfg.strategies[si];
                let a = &mut acc[si];
                bar.set_message(format!("{} {} run {}", plan.workload, spec.name(), run + 1));
                let tag = format!("{}-{si}-{run}", std::process::id());
                let dump_dir = cfg.scratch.join(format!("dumps-{tag}"));
                std::fs::create_dir_all(&dump_dir)
                    .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))?;
                let target = target_for(cfg, spec, &addrs, &plan.workload, &tag)?;
                let results =
                    run_once(&mut workers, cfg, spec, &target, &dump_dir, warm_bytes).await?;
                a.data = match target.placement() {
                    "servers" if results.1.iter().all(|r| r.object_files) => "servers (files)",
                    p => p,
                };
                a.seconds.push(results.0);
                a.cpu.push(results.2);
                a.pio
                    .push(results.1.iter().map(|r| r.pio_seconds).fold(0.0, f64::max));
                a.bytes = results.1.iter().map(|r| r.bytes).sum();
                a.locks
                    .push(results.1.iter().map(|r| r.lock_requests).sum::<u64>() as f64);
                if run == 0 {
                    a.lock_free_calls = results.1.iter().map(|r| r.lock_free_calls).sum();
                    a.interval_fallbacks = results.1.iter().map(|r| r.interval_fallbacks).sum();
                    a.chosen = results.1.iter().find_map(|r| r.chosen.clone());
                    a.analysis_seconds = results
                        .1
                        .iter()
                        .map(|r| r.analysis_seconds)
                        .fold(0.0, f64::max);
                    for d in results.1.iter().filter_map(|r| r.dlm.as_ref()) {
                        a.dlm.get_or_insert_with(Default::default).add(d);
                    }
                }
                if run == 0 && cfg.verify && *spec != RowSpec::Contiguous {
                    let keep = cfg.keep.as_ref().map(|d| {
                        d.join(format!(
                            "{}-{}.dat",
                            plan.workload,
                            spec.name().replace(':', "-")
                        ))
                    });
                    if let (
                        Some(k),
                        Target::Direct {
                            file,
                            interval_file: true,
                            ..
                        },
                    ) = (&keep, &target)
                    {
                        // The interval file itself, for `atomio interval translate`.
                        let _ = std::fs::copy(file, k.with_extension("ival"));
                    }
                    let report = verify_run(
                        &mut coordinator,
                        &plan,
                        &target,
                        &results.1,
                        keep.as_deref(),
                    )
                    .await?;
                    a.verdict = if report.ok() {
                        (if plan.overlapping { Some(true) } else { None }, None)
                    } else {
                        (
                            Some(false),
                            Some(
                                report
                                    .violation()
                                    .map_or_else(|| report.to_string(), |v| v.to_string()),
                            ),
                        )
                    };
                }
                cleanup(&mut coordinator, spec, &target, &dump_dir).await;
                bar.inc(1);
            }
        }
        for (spec, a) in cfg.strategies.iter().zip(acc) {
            let med = median(&a.seconds);
            let pio = median(&a.pio);
            let cpu: Option<Vec<f64>> = a.cpu.iter().copied().collect();
            rows.push(WorkloadRow {
                workload: plan.workload.clone(),
                strategy: spec.name(),
                data: a.data.to_string(),
                clients: cfg.clients,
                servers: cfg.servers,
                bytes: a.bytes,
                seconds: med,
                mib_per_s: a.bytes as f64 / med / (1 << 20) as f64,
                pio_seconds: pio,
                pio_mib_per_s: a.bytes as f64 / pio / (1 << 20) as f64,
                cpu_seconds: cpu.map(|c| median(&c)),
                pct_of_none: None,
                pct_of_contiguous: None,
                x_romio: None,
                lock_requests: median(&a.locks) as u64,
                lock_free_calls: a.lock_free_calls,
                interval_fallbacks: a.interval_fallbacks,
                chosen: a.chosen,
                analysis_seconds: a.analysis_seconds,
                verified: a.verdict.0,
                runs: cfg.runs,
                seconds_runs: a.seconds,
                violation: a.verdict.1,
                dlm: a.dlm,
                rtt,
            });
        }
        Ok::<(), WireError>(())
    }
    .await;
    bar.finish_and_clear();
    for mut w in workers {
        let _ = w.send(&ToWorker::Exit).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), w.child.wait()).await;
    }
    drop(coordinator);
    if let Servers::Processes(p) = servers {
        p.stop().await;
    }
    result?;
    let rate = |name: &str| {
        rows.iter()
            .find(|r| r.strategy == name)
            .map(|r| r.mib_per_s)
    };
    let (none, contiguous, romio) = (rate("none"), rate("contiguous"), rate("romio"));
    for r in &mut rows {
        r.pct_of_none = none.map(|n| r.mib_per_s / n * 100.0);
        r.pct_of_contiguous = contiguous.map(|l| r.mib_per_s / l * 100.0);
        r.x_romio = romio.map(|b| r.mib_per_s / b);
    }
    Ok(rows)
}

/// Prepares every worker, starts them together, and waits for all: (seconds, results).
/// A fresh target for one run of `spec`: a file on the servers, a new local file for
/// direct placement (and always for the fcntl baselines), or a reference row's local file.
fn target_for(
    cfg: &WorkloadBenchConfig,
    spec: &RowSpec,
    addrs: &[String],
    workload: &str,
    tag: &str,
) -> Result<Target, WireError> {
    let local = |stem: &str| {
        let file = cfg.scratch.join(format!("{stem}-{tag}.dat"));
        std::fs::File::create(&file)
            .map(|_| file)
            .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))
    };
    Ok(match spec {
        RowSpec::Contiguous => Target::Local {
            file: local("contiguous")?,
            way: LocalWay::Contiguous,
        },
        RowSpec::Plain => Target::Local {
            file: local("plain")?,
            way: LocalWay::Pieces,
        },
        RowSpec::PlainMapped => Target::Local {
            file: local("plain-mapped")?,
            way: LocalWay::Mapped,
        },
        // Techniques that run only on atomio's servers (cached-lock DLMs) run there.
        RowSpec::Strategy(s)
            if s.supports(PlacementKind::Servers)
                && (cfg.data == PlacementKind::Servers || !s.supports(PlacementKind::Direct)) =>
        {
            Target::Servers {
                servers: addrs.to_vec(),
                path: format!("/bench/{workload}/{tag}"),
                stripe_size: cfg.stripe_size,
                stripe_count: cfg.stripe_count.unwrap_or(cfg.servers),
                bypass: cfg.bypass,
            }
        }
        RowSpec::Strategy(_) | RowSpec::RttFloor => Target::Direct {
            servers: addrs.to_vec(),
            file: local("direct")?,
            interval_file: false,
            host_locks: false,
        },
        RowSpec::IntervalFile(_) => Target::Direct {
            servers: addrs.to_vec(),
            file: local("ifile")?,
            interval_file: true,
            host_locks: false,
        },
        RowSpec::HostLocks(_) => Target::Direct {
            servers: Vec::new(),
            file: local("host")?,
            interval_file: false,
            host_locks: true,
        },
    })
}

async fn run_once(
    workers: &mut [Worker],
    cfg: &WorkloadBenchConfig,
    spec: &RowSpec,
    target: &Target,
    dump_dir: &Path,
    warm_bytes: u64,
) -> Result<(f64, Vec<JobResult>, Option<f64>), WireError> {
    let n = workers.len() as u32;
    for (rank, w) in workers.iter_mut().enumerate() {
        w.send(&ToWorker::Job(Box::new(Job {
            rank: rank as u32,
            clients: n,
            workload: cfg.workload.clone(),
            // The format travels in the target; the worker runs the base strategy.
            strategy: match spec {
                RowSpec::IntervalFile(s) | RowSpec::HostLocks(s) => s.name(),
                RowSpec::RttFloor => Strategy::none().name(),
                other => other.name(),
            },
            ping_per_call: *spec == RowSpec::RttFloor,
            target: target.clone(),
            dump_dir: dump_dir.to_path_buf(),
        })))
        .await?;
    }
    for w in workers.iter_mut() {
        match w.recv(WORKER_TIMEOUT).await? {
            FromWorker::Ready => {}
            FromWorker::Failed { error } => {
                return Err(WireError::new(
                    ErrorCode::Internal,
                    format!("worker: {error}"),
                ))
            }
            FromWorker::Done(_) | FromWorker::Called => {
                return Err(WireError::new(
                    ErrorCode::Internal,
                    "worker finished before go",
                ))
            }
        }
    }
    if std::env::var_os("ATOMIO_BENCH_WARM").is_none_or(|v| v != "0") {
        crate::page_warm::warm(&cfg.scratch, warm_bytes)?;
    }
    let pids: Vec<Option<u32>> = std::iter::once(Some(std::process::id()))
        .chain(workers.iter().map(|w| w.child.id()))
        .collect();
    let cpu0 = cpu_of_all(&pids);
    let t0 = Instant::now();
    for w in workers.iter_mut() {
        w.send(&ToWorker::Go).await?;
    }
    // Every client's calls first (the PIO phase), then everyone flushes.
    let mut first_err = None;
    let mut called = vec![false; workers.len()];
    for (i, w) in workers.iter_mut().enumerate() {
        match w.recv(WORKER_TIMEOUT).await? {
            FromWorker::Called => called[i] = true,
            FromWorker::Failed { error } => {
                first_err.get_or_insert(error);
            }
            other => first_err = Some(format!("worker said {other:?} after go")),
        }
    }
    for (i, w) in workers.iter_mut().enumerate() {
        if called[i] {
            w.send(&ToWorker::Flush).await?;
        }
    }
    let mut results = Vec::new();
    for (i, w) in workers.iter_mut().enumerate() {
        if !called[i] {
            continue;
        }
        match w.recv(WORKER_TIMEOUT).await? {
            FromWorker::Done(r) => results.push(*r),
            FromWorker::Failed { error } => {
                first_err.get_or_insert(error);
            }
            other => first_err = Some(format!("worker said {other:?} after flush")),
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu0.zip(cpu_of_all(&pids)).map(|(a, b)| b - a);
    if let Some(e) = first_err {
        return Err(WireError::new(
            ErrorCode::Internal,
            format!("{}: worker failed: {e}", spec.name()),
        ));
    }
    Ok((secs, results, cpu))
}

/// The CPU seconds these processes have used, summed; `None` if a process is gone or its
/// clock cannot be read.
fn cpu_of_all(pids: &[Option<u32>]) -> Option<f64> {
    use nix::time::{clock_getcpuclockid, clock_gettime};
    pids.iter()
        .map(|pid| {
            let clock = clock_getcpuclockid(nix::unistd::Pid::from_raw((*pid)? as i32)).ok()?;
            let t = clock_gettime(clock).ok()?;
            Some(t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9)
        })
        .sum()
}

/// Reads the run's file back and checks it (and the reads) with the verifier.
async fn verify_run(
    c: &mut ClusterClient,
    plan: &WorkloadPlan,
    target: &Target,
    results: &[JobResult],
    keep: Option<&Path>,
) -> Result<Report, WireError> {
    let bytes = read_back(c, target).await?;
    if let Some(path) = keep {
        save_run(path, &bytes, plan, results)?;
    }
    let writes: Vec<Write> = plan
        .clients
        .iter()
        .flat_map(|cl| {
            cl.calls
                .iter()
                .filter(|c| c.kind == CallKind::Write)
                .filter_map(move |c| {
                    c.access
                        .as_ref()
                        .map(|a| Write::new(cl.rank, u64::from(c.op), a.clone()))
                })
        })
        .collect();
    let mut reads = Vec::new();
    for r in results {
        let client = plan.clients.iter().find(|c| c.rank == r.rank);
        for d in &r.reads {
            let access = client
                .and_then(|c| c.calls.iter().find(|c| c.op == d.op))
                .and_then(|c| c.access.clone())
                .ok_or_else(|| {
                    WireError::new(ErrorCode::Internal, "a read dump matches no call")
                })?;
            let observed = std::fs::File::open(&d.path)
                .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))?;
            reads.push(Read::new(r.rank, u64::from(d.op), access, observed));
        }
    }
    atomio_verify::verify(&bytes[..], &writes, &reads).map_err(|e| {
        WireError::new(
            ErrorCode::Internal,
            format!("verifier could not check the run: {e}"),
        )
    })
}

/// Saves the run's bytes as a flat file plus a manifest beside it (`FILE.atomio.json`), so
/// `atomio-lab verify FILE` can check it again; reads' dumps are copied next to it.
fn save_run(
    path: &Path,
    bytes: &[u8],
    plan: &WorkloadPlan,
    results: &[JobResult],
) -> Result<(), WireError> {
    let io = |e: std::io::Error| WireError::new(ErrorCode::Io, format!("{}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, bytes).map_err(io)?;
    let mut manifest =
        atomio_verify::Manifest::new(path.file_name().map(PathBuf::from).unwrap_or_default());
    for cl in &plan.clients {
        for c in cl.calls.iter().filter(|c| c.kind == CallKind::Write) {
            if let Some(a) = &c.access {
                manifest.add_write(
                    atomio_verify::WriteId {
                        writer: cl.rank,
                        op: u64::from(c.op),
                    },
                    &atomio_verify::Ranges::Access(a.clone()),
                );
            }
        }
    }
    for r in results {
        let client = plan.clients.iter().find(|c| c.rank == r.rank);
        for d in &r.reads {
            let Some(a) = client
                .and_then(|c| c.calls.iter().find(|c| c.op == d.op))
                .and_then(|c| c.access.clone())
            else {
                continue;
            };
            let name = format!(
                "{}.read-{}-{}.bin",
                path.file_name().and_then(|n| n.to_str()).unwrap_or("run"),
                r.rank,
                d.op
            );
            std::fs::copy(&d.path, path.with_file_name(&name)).map_err(io)?;
            manifest.add_read(
                atomio_verify::ReadId {
                    reader: r.rank,
                    op: u64::from(d.op),
                },
                &atomio_verify::Ranges::Access(a),
                atomio_verify::Observed {
                    file: Some(PathBuf::from(name)),
                    offset: 0,
                    hex: None,
                },
            );
        }
    }
    manifest
        .save(&atomio_verify::manifest_path_for(path))
        .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))
}

/// The logical bytes of the run's file.
pub async fn read_back(c: &mut ClusterClient, target: &Target) -> Result<Vec<u8>, WireError> {
    match target {
        Target::Servers { path, .. } => {
            let f = c.open(path).await?;
            c.read_all(&f).await
        }
        Target::Direct {
            file,
            interval_file: true,
            ..
        } => {
            // The translation to flat, in memory.
            let f = atomio_interval::IntervalFile::open(file)
                .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))?;
            let mut out = vec![0u8; f.header().flat_size as usize];
            f.read_logical(0, &mut out)
                .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))?;
            Ok(out)
        }
        Target::Direct { file, .. } | Target::Local { file, .. } => {
            std::fs::read(file).map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))
        }
    }
}

/// Removes a run's file and dumps; a versioned run's store is collected to its newest
/// snapshot first (`collect_to_newest`: otherwise its chunks outlive the run, dirty, and are
/// written back during other rows' runs).
async fn cleanup(c: &mut ClusterClient, spec: &RowSpec, target: &Target, dump_dir: &Path) {
    if matches!(spec, RowSpec::Strategy(s) if s.is_versioning()) {
        use crate::versions::{collect_to_newest, VersionedAt};
        match target {
            Target::Servers { path, .. } => collect_to_newest(c, VersionedAt::Servers(path)).await,
            Target::Direct { file, .. } => collect_to_newest(c, VersionedAt::Direct(file)).await,
            Target::Local { .. } => {}
        }
    }
    match target {
        Target::Servers { path, .. } => {
            let _ = c.remove(path).await;
        }
        Target::Direct { file, .. } | Target::Local { file, .. } => {
            let _ = std::fs::remove_file(file);
        }
    }
    let _ = std::fs::remove_dir_all(dump_dir);
}
