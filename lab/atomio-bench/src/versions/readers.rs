//! Readers beside writers (Tran et al.'s claim that "readers never have to synchronize with
//! writers", §5): readers read a fixed tile-sized region of the newest data in a loop while
//! W writers write overlapping tiles (the `tile` workload's tiles, one subarray write per
//! call, again and again); the read latency with writers running against without them.
//!
//! The reader's region is a tile-sized subarray centred on the array, so with the default
//! 2 × 2 tiles it overlaps every writer's tile: under a lock strategy every read conflicts
//! with every writer's lock.
//!
//! **What it measures on a small machine.** Clients are processes (`atomio-lab bench
//! version-client`, JSON lines on stdin/stdout; `fcntl` locks are per process), servers are
//! embedded in this process and reached over loopback TCP. On 2 cores, W writers running
//! back to back would take the CPU from the reader, and the ratio would measure the
//! scheduler, not waiting for writers. So writers run at a lower CPU priority (`nice`,
//! default 10) and may be paced (one write per interval each); the reader and the servers
//! run at normal priority. The `plain` row — plain `pwrite`s and `pread`s of the same
//! bytes, no atomicity — shows what the machine itself adds to a read under the same
//! writers (page cache, memory bandwidth, the servers' threads); the rest of a strategy's
//! ratio is its own (waiting for locks; for versioning, fetching each new snapshot's tree).
//!
//! Per strategy and run: a fresh file; every writer writes its tile once (so the readers
//! read written bytes); the readers alone for `seconds` (after a few untimed reads); then
//! the writers start, and after a short warm-up the readers again for `seconds`; then the
//! writers stop. Per phase the median and the 99th percentile of the reads' latencies;
//! ratios are per run (loaded / idle), the median over runs reported. The first run of each
//! strategy is verified: the final file (for versioning the newest snapshot) and a sample of
//! every reader's reads, against every write, by the verifier. A versioning run's store is
//! collected down to its newest snapshot before the next run starts (see `cleanup`), and
//! `keep_last` makes the writers collect as they write, as a long-running store would.

use super::{collect_to_newest, io, percentile, wire, VersionedAt};
use crate::stats::median;
use crate::workload::RowSpec;
use atomio_client::{DirectData, File, PlacementKind, Strategy};
use atomio_layout::{Access, ByteRange, Order, Pattern};
use atomio_net::{ClusterClient, EmbeddedCluster};
use atomio_proto::{ErrorCode, WireError};
use atomio_workloads::{TileParams, Workload};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

// ---------------------------------------------------------------------------------------
// The client process

/// Where a client's I/O goes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Place {
    /// A plain local file: `pwrite`/`pread` per run, no locks (the plain row).
    Plain { file: PathBuf },
    /// The user's file (direct placement) with atomio servers for locks or versions.
    Direct { servers: Vec<String>, file: PathBuf },
    /// A file on atomio's data servers.
    Servers { servers: Vec<String>, path: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Reader,
    Writer,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientJob {
    pub role: Role,
    /// Writer number (the verifier's writer id) or reader number.
    pub id: u32,
    /// A strategy name (ignored for `Place::Plain`).
    pub strategy: String,
    pub place: Place,
    pub access: Access,
    /// The first operation's number (writes are tagged with it; reads are dumped under it).
    pub op_base: u64,
    /// Writers: stop after this many writes (otherwise at `stop`).
    pub max_ops: Option<u64>,
    /// Writers: start one write every this many µs (0: back to back).
    pub interval_us: u64,
    /// Readers: read for this long after `warmup` untimed reads.
    pub seconds: f64,
    pub warmup: u32,
    /// Readers: keep every `keep_every`-th read (at most `keep_max`) for the verifier.
    pub keep_every: u64,
    pub keep_max: usize,
    pub dump_dir: PathBuf,
    /// Versioning writers: keep at most this many published snapshots stored
    /// (`File::set_version_retention`); `None`: unbounded.
    #[serde(default)]
    pub keep_last: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum ToClient {
    Job(Box<ClientJob>),
    Go,
    Stop,
    Exit,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientResult {
    pub ops: u64,
    /// Each timed call's latency, µs, in order.
    pub latencies_us: Vec<f64>,
    /// From go to the last call's end.
    pub seconds: f64,
    /// Kept reads: (op, dump file).
    pub dumps: Vec<(u64, PathBuf)>,
    pub lock_requests: u64,
    /// Versioning: tree nodes fetched from servers (not found in the client's cache).
    pub nodes_fetched: Option<u64>,
    /// Versioning readers: tree nodes each timed read fetched (beside `latencies_us`).
    #[serde(default)]
    pub fetched_per_read: Vec<u32>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "lowercase")]
pub enum FromClient {
    Ready,
    Done(Box<ClientResult>),
    Failed { error: String },
}

enum Io {
    Plain(std::fs::File),
    File {
        c: Option<Box<ClusterClient>>,
        f: Box<File>,
    },
}

impl Io {
    async fn open(job: &ClientJob) -> Result<Self, WireError> {
        let strategy = || -> Result<Strategy, WireError> {
            job.strategy
                .parse()
                .map_err(|e: String| WireError::new(ErrorCode::InvalidArgument, e))
        };
        Ok(match &job.place {
            Place::Plain { file } => Io::Plain(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(file)
                    .map_err(|e| io(file, e))?,
            ),
            Place::Direct { servers, file } => {
                let s = strategy()?;
                let c = match s.uses_lock_service() {
                    true => Some(Box::new(ClusterClient::connect_tcp(servers).await?)),
                    false => None,
                };
                let mut f = File::direct(DirectData::open(file, false)?);
                f.set_atomic(Some(s))?;
                f.set_version_retention(job.keep_last);
                Io::File { c, f: Box::new(f) }
            }
            Place::Servers { servers, path } => {
                let mut c = ClusterClient::connect_tcp(servers).await?;
                let mut f = File::open(&mut c, path).await?;
                f.set_atomic(Some(strategy()?))?;
                f.set_version_retention(job.keep_last);
                Io::File {
                    c: Some(Box::new(c)),
                    f: Box::new(f),
                }
            }
        })
    }

    async fn write(&mut self, a: &Access, data: &[u8]) -> Result<(), WireError> {
        match self {
            Io::Plain(file) => {
                let mut at = 0usize;
                for r in a.ranges() {
                    let n = r.len() as usize;
                    file.write_all_at(&data[at..at + n], r.start)
                        .map_err(|e| WireError::new(ErrorCode::Io, format!("pwrite: {e}")))?;
                    at += n;
                }
                Ok(())
            }
            Io::File { c: Some(c), f } => f.write(c, a, data).await,
            Io::File { c: None, f } => f.write_local(a, data),
        }
    }

    async fn read(&mut self, a: &Access, out: &mut [u8]) -> Result<(), WireError> {
        match self {
            Io::Plain(file) => {
                let mut at = 0usize;
                for r in a.ranges() {
                    let n = r.len() as usize;
                    file.read_exact_at(&mut out[at..at + n], r.start)
                        .map_err(|e| WireError::new(ErrorCode::Io, format!("pread: {e}")))?;
                    at += n;
                }
                Ok(())
            }
            Io::File { c: Some(c), f } => f.read(c, a, out).await,
            Io::File { c: None, f } => f.read_local(a, out),
        }
    }

    /// Opens a versioned file's store before the clock starts (an untimed open).
    async fn prepare(&mut self) -> Result<(), WireError> {
        if let Io::File { c: Some(c), f } = self {
            if f.atomic().is_some_and(Strategy::is_versioning) {
                f.list_versions(c).await?;
            }
        }
        Ok(())
    }

    fn lock_requests(&self) -> u64 {
        match self {
            Io::Plain(_) => 0,
            Io::File { f, .. } => f.stats().lock_requests,
        }
    }

    /// Tree nodes the client had to take in: fetched from servers, or pulled from their
    /// node logs on this host (a read of a snapshot new to it, either way).
    fn nodes_fetched(&self) -> Option<u64> {
        match self {
            Io::Plain(_) => None,
            Io::File { f, .. } => f
                .version_stats()
                .map(|s| s.nodes_fetched + s.nodes_from_logs),
        }
    }
}

fn say(msg: &FromClient) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, msg).map_err(std::io::Error::other)?;
    out.write_all(b"\n")?;
    out.flush()
}

type Inbox = tokio::sync::mpsc::UnboundedReceiver<ToClient>;

async fn next(inbox: &mut Inbox) -> Option<ToClient> {
    inbox.recv().await
}

async fn run_job(job: &ClientJob, io: &mut Io, inbox: &mut Inbox) -> Result<ClientResult, String> {
    let e = |e: WireError| e.to_string();
    let a = &job.access;
    let mut buf = vec![0u8; a.size() as usize];
    let mut lat = Vec::new();
    let mut fetched = Vec::new();
    let mut dumps: Vec<(u64, Vec<u8>)> = Vec::new();
    let t0 = Instant::now();
    let mut ops = 0u64;
    match job.role {
        Role::Writer => {
            let interval = Duration::from_micros(job.interval_us);
            let mut due = tokio::time::Instant::now();
            loop {
                if job.max_ops.is_some_and(|m| ops >= m) {
                    break;
                }
                if let Ok(ToClient::Stop) = inbox.try_recv() {
                    break;
                }
                let op = job.op_base + ops;
                atomio_verify::fill(job.id, op, a.ranges(), &mut buf).map_err(|e| e.to_string())?;
                if !interval.is_zero() {
                    tokio::select! {
                        _ = tokio::time::sleep_until(due) => {}
                        m = next(inbox) => match m {
                            Some(ToClient::Stop) | None => break,
                            Some(other) => return Err(format!("unexpected {other:?} while writing")),
                        },
                    }
                }
                let t = Instant::now();
                io.write(a, &buf).await.map_err(e)?;
                lat.push(t.elapsed().as_secs_f64() * 1e6);
                ops += 1;
                if !interval.is_zero() {
                    due = (due + interval).max(tokio::time::Instant::now());
                }
            }
        }
        Role::Reader => {
            for _ in 0..job.warmup {
                io.read(a, &mut buf).await.map_err(e)?;
            }
            let end = Instant::now() + Duration::from_secs_f64(job.seconds);
            while Instant::now() < end {
                let before = io.nodes_fetched();
                let t = Instant::now();
                io.read(a, &mut buf).await.map_err(e)?;
                lat.push(t.elapsed().as_secs_f64() * 1e6);
                if let (Some(b), Some(n)) = (before, io.nodes_fetched()) {
                    fetched.push((n - b) as u32);
                }
                if job.keep_every > 0
                    && ops.is_multiple_of(job.keep_every)
                    && dumps.len() < job.keep_max
                {
                    dumps.push((job.op_base + ops, buf.clone()));
                }
                ops += 1;
            }
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let mut kept = Vec::new();
    for (op, data) in dumps {
        let p = job.dump_dir.join(format!("read-{}-{op}.bin", job.id));
        std::fs::write(&p, data).map_err(|x| super::io(&p, x).to_string())?;
        kept.push((op, p));
    }
    Ok(ClientResult {
        ops,
        latencies_us: lat,
        seconds,
        dumps: kept,
        lock_requests: io.lock_requests(),
        nodes_fetched: io.nodes_fetched(),
        fetched_per_read: fetched,
    })
}

/// The client process's main loop (`atomio-lab bench version-client`): jobs from stdin, one
/// at a time, until `exit` or end of input.
pub fn client_main() -> std::io::Result<()> {
    let (tx, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    // A thread of its own reads stdin, so a `stop` is seen while a call blocks the runtime.
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<ToClient>(&line) {
                Ok(m) => {
                    if tx.send(m).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = say(&FromClient::Failed {
                        error: format!("unreadable command '{line}': {e}"),
                    });
                }
            }
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        while let Some(msg) = next(&mut inbox).await {
            let job = match msg {
                ToClient::Job(j) => j,
                ToClient::Exit => return Ok(()),
                other => {
                    say(&FromClient::Failed {
                        error: format!("expected a job, got {other:?}"),
                    })?;
                    continue;
                }
            };
            let mut io = match Io::open(&job).await {
                Ok(mut io) => match io.prepare().await {
                    Ok(()) => io,
                    Err(e) => {
                        say(&FromClient::Failed {
                            error: e.to_string(),
                        })?;
                        continue;
                    }
                },
                Err(e) => {
                    say(&FromClient::Failed {
                        error: e.to_string(),
                    })?;
                    continue;
                }
            };
            say(&FromClient::Ready)?;
            match next(&mut inbox).await {
                Some(ToClient::Go) => {}
                Some(ToClient::Exit) | None => return Ok(()),
                Some(other) => {
                    say(&FromClient::Failed {
                        error: format!("expected go, got {other:?}"),
                    })?;
                    continue;
                }
            }
            let reply = match run_job(&job, &mut io, &mut inbox).await {
                Ok(r) => FromClient::Done(Box::new(r)),
                Err(error) => FromClient::Failed { error },
            };
            drop(io);
            say(&reply)?;
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// The coordinator

/// A client process's CPU priority (set by starting it under `nice` or `chrt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    Normal,
    /// `nice -n N`.
    Nice(i32),
    /// `chrt --idle 0`: `SCHED_IDLE`, runs only on CPU time nothing else wants.
    Idle,
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "normal" => Ok(Priority::Normal),
            "idle" => Ok(Priority::Idle),
            _ => s
                .strip_prefix("nice:")
                .and_then(|n| n.parse().ok())
                .map(Priority::Nice)
                .ok_or_else(|| format!("'{s}': expected normal, nice:N or idle")),
        }
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Priority::Normal => f.write_str("normal"),
            Priority::Nice(n) => write!(f, "nice:{n}"),
            Priority::Idle => f.write_str("idle"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReadersConfig {
    pub writers: u32,
    pub readers: u32,
    pub servers: u32,
    /// The writers' tiles (`tile` workload parameters; the grid follows from `writers`).
    pub tile: TileParams,
    pub strategies: Vec<RowSpec>,
    pub data: PlacementKind,
    pub stripe_size: u64,
    /// Measured reading per phase, per run.
    pub seconds: f64,
    pub runs: usize,
    /// Each writer starts one write per interval (0: back to back).
    pub interval_ms: f64,
    /// Writers' CPU priority.
    pub writer_priority: Priority,
    /// Versioning writers keep at most this many published snapshots stored (each write
    /// first collects older ones); `None`: unbounded, every write's chunks stay.
    pub keep_last: Option<u64>,
    /// Writers run this long before the loaded phase's reads start.
    pub warmup_ms: u64,
    pub verify: bool,
    /// Every row's reader reads a plain local file of the same bytes with `pread` (no
    /// atomicity, no servers) while the row's writers write as usual: what the machine
    /// itself adds to a read under that row's write load (the plain row's writers do far
    /// less work than versioning's). Not verified.
    pub plain_reader: bool,
    /// The `atomio` executable (its `bench version-client` is the client process).
    pub exe: PathBuf,
    pub scratch: PathBuf,
    pub progress: bool,
}

/// Latencies of one phase of one run.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseStats {
    pub reads: u64,
    pub median_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
}

impl PhaseStats {
    fn of(lat: &[f64]) -> Self {
        let mut v = lat.to_vec();
        v.sort_by(f64::total_cmp);
        Self {
            reads: v.len() as u64,
            median_us: percentile(&v, 50.0),
            p99_us: percentile(&v, 99.0),
            mean_us: v.iter().sum::<f64>() / v.len().max(1) as f64,
            max_us: v.last().copied().unwrap_or(f64::NAN),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RunStats {
    pub idle: PhaseStats,
    pub loaded: PhaseStats,
    pub median_ratio: f64,
    pub p99_ratio: f64,
    /// Writes per second of all writers together during the loaded phase.
    pub writes_per_s: f64,
    /// Median latency of the writers' calls in the loaded phase, µs.
    pub write_median_us: f64,
    /// Versioning readers: tree nodes fetched per read in the loaded phase.
    pub nodes_per_read: Option<f64>,
    /// Versioning readers, loaded phase: reads that found the newest snapshot's tree
    /// cached against those that fetched nodes of a new one.
    pub split: Option<FetchSplit>,
}

/// The loaded phase's reads of a versioning reader, by whether they fetched tree nodes.
#[derive(Clone, Debug, Serialize)]
pub struct FetchSplit {
    /// Share of the reads that fetched at least one node.
    pub fetching_share: f64,
    pub nodes_per_fetching_read: f64,
    pub cached: Option<PhaseStats>,
    pub fetching: Option<PhaseStats>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReadersRow {
    pub strategy: String,
    pub data: String,
    pub writers: u32,
    pub readers: u32,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Medians over runs of each run's figure.
    pub idle_median_us: f64,
    pub idle_p99_us: f64,
    pub loaded_median_us: f64,
    pub loaded_p99_us: f64,
    pub median_ratio: f64,
    pub p99_ratio: f64,
    pub writes_per_s: f64,
    pub write_median_us: f64,
    pub nodes_per_read: Option<f64>,
    /// The verifier's verdict on the first run: `atomic` (one serial order explains the
    /// file and every kept read), `VIOLATED`, or when the joint search for that order gives
    /// up, each read checked alone: `each read atomic alone` or `inconclusive` (null for the
    /// plain row or without verification).
    pub verdict: Option<String>,
    /// The violation, or why the verdict is inconclusive.
    pub violation: Option<String>,
    pub reads_verified: usize,
    pub runs: Vec<RunStats>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReadersReport {
    pub writers: u32,
    pub readers: u32,
    pub servers: u32,
    pub seconds: f64,
    pub interval_ms: f64,
    pub writer_priority: String,
    /// Versioning writers' retention (snapshots kept stored), if any.
    pub keep_last: Option<u64>,
    pub tile: serde_json::Value,
    pub reader_region: String,
    pub rows: Vec<ReadersRow>,
}

struct Proc {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

const CLIENT_TIMEOUT: Duration = Duration::from_secs(600);

impl Proc {
    async fn spawn(exe: &Path, priority: Priority) -> Result<Self, WireError> {
        let mut cmd = match priority {
            Priority::Normal => Command::new(exe),
            Priority::Nice(n) => {
                let mut c = Command::new("nice");
                c.arg("-n").arg(n.to_string()).arg(exe);
                c
            }
            Priority::Idle => {
                let mut c = Command::new("chrt");
                c.args(["--idle", "0"]).arg(exe);
                c
            }
        };
        cmd.args(["bench", "version-client"]);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                WireError::new(
                    ErrorCode::Io,
                    format!("starting a client ({}): {e}", exe.display()),
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

    async fn send(&mut self, msg: &ToClient) -> Result<(), WireError> {
        let mut line = serde_json::to_vec(msg).map_err(wire)?;
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .map_err(|e| WireError::new(ErrorCode::Disconnected, format!("a client is gone: {e}")))
    }

    async fn recv(&mut self) -> Result<FromClient, WireError> {
        let line = tokio::time::timeout(CLIENT_TIMEOUT, self.lines.next_line())
            .await
            .map_err(|_| WireError::new(ErrorCode::Timeout, "a client said nothing for 600 s"))?
            .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))?
            .ok_or_else(|| WireError::new(ErrorCode::Disconnected, "a client exited"))?;
        serde_json::from_str(&line)
            .map_err(|e| WireError::new(ErrorCode::Malformed, format!("client said '{line}': {e}")))
    }

    async fn ready(&mut self) -> Result<(), WireError> {
        match self.recv().await? {
            FromClient::Ready => Ok(()),
            FromClient::Failed { error } => Err(WireError::new(
                ErrorCode::Internal,
                format!("client: {error}"),
            )),
            FromClient::Done(_) => Err(wire("a client finished before go")),
        }
    }

    async fn done(&mut self) -> Result<ClientResult, WireError> {
        match self.recv().await? {
            FromClient::Done(r) => Ok(*r),
            FromClient::Failed { error } => Err(WireError::new(
                ErrorCode::Internal,
                format!("client: {error}"),
            )),
            FromClient::Ready => Err(wire("a client said ready twice")),
        }
    }
}

/// The writers' tiles and the readers' centred tile-sized region.
pub fn geometry(
    cfg: &ReadersConfig,
) -> Result<(Vec<Access>, Access, serde_json::Value), WireError> {
    let plan = Workload::Tile(cfg.tile.clone())
        .plan(cfg.writers)
        .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?;
    let writes: Vec<Access> = plan
        .clients
        .iter()
        .map(|c| {
            c.calls[0]
                .access
                .clone()
                .expect("tile writes have an access")
        })
        .collect();
    let p = &cfg.tile;
    let tiles_x = plan.params["tiles_x"].as_u64().unwrap_or(1);
    let tiles_y = plan.params["tiles_y"].as_u64().unwrap_or(1);
    let side = |tiles: u64, tile: u64, overlap: u64| match p.overlap_mode {
        atomio_workloads::OverlapMode::Shared => tiles * (tile - overlap) + overlap,
        atomio_workloads::OverlapMode::Halo => tiles * tile,
    };
    let cols = side(tiles_x, p.tile_x, p.overlap_x);
    let rows = side(tiles_y, p.tile_y, p.overlap_y);
    let (ny, nx) = (p.tile_y.min(rows), p.tile_x.min(cols));
    let elem = Pattern::bytes(p.element_bytes).map_err(wire)?;
    let pattern = Pattern::subarray(
        &[rows, cols],
        &[ny, nx],
        &[(rows - ny) / 2, (cols - nx) / 2],
        Order::C,
        &elem,
    )
    .map_err(wire)?;
    let read = Access::new(p.header_bytes, pattern).map_err(wire)?;
    Ok((writes, read, plan.params))
}

struct Env {
    _cluster: EmbeddedCluster,
    addrs: Vec<String>,
    c: ClusterClient,
    writers: Vec<Proc>,
    readers: Vec<Proc>,
}

/// One strategy's file for one run.
fn place_for(
    cfg: &ReadersConfig,
    env: &Env,
    spec: &RowSpec,
    tag: &str,
) -> Result<Place, WireError> {
    let local = |stem: &str| {
        let file = cfg.scratch.join(format!("{stem}-{tag}.dat"));
        std::fs::File::create(&file)
            .map(|_| file.clone())
            .map_err(|e| io(&file, e))
    };
    Ok(match spec {
        RowSpec::Plain => Place::Plain {
            file: local("plain")?,
        },
        RowSpec::Strategy(s)
            if s.supports(PlacementKind::Servers)
                && (cfg.data == PlacementKind::Servers || !s.supports(PlacementKind::Direct)) =>
        {
            Place::Servers {
                servers: env.addrs.clone(),
                path: format!("/version-readers/{tag}"),
            }
        }
        RowSpec::RttFloor | RowSpec::Contiguous | RowSpec::PlainMapped | RowSpec::HostLocks(_) => {
            return Err(WireError::new(
                atomio_proto::ErrorCode::InvalidArgument,
                format!("{} is a row of the workload benchmarks", spec.name()),
            ))
        }
        RowSpec::IntervalFile(s) => {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("{s}+ifile: interval files are for workload benchmarks"),
            ))
        }
        RowSpec::Strategy(_) => Place::Direct {
            servers: env.addrs.clone(),
            file: local("direct")?,
        },
    })
}

fn job(role: Role, id: u32, spec: &RowSpec, place: &Place, access: &Access) -> ClientJob {
    ClientJob {
        role,
        id,
        strategy: match spec {
            RowSpec::Plain | RowSpec::Contiguous | RowSpec::PlainMapped | RowSpec::RttFloor => {
                "none".into()
            }
            RowSpec::Strategy(s) | RowSpec::IntervalFile(s) | RowSpec::HostLocks(s) => s.name(),
        },
        place: place.clone(),
        access: access.clone(),
        op_base: 0,
        max_ops: None,
        interval_us: 0,
        seconds: 0.0,
        warmup: 0,
        keep_every: 0,
        keep_max: 0,
        dump_dir: PathBuf::new(),
        keep_last: None,
    }
}

/// What one run of one strategy measured.
struct RunOut {
    stats: RunStats,
    /// Writes each writer made in all (setup included): ops 0..n.
    writes_made: Vec<u64>,
    dumps: Vec<(u32, u64, PathBuf)>,
}

async fn one_run(
    cfg: &ReadersConfig,
    env: &mut Env,
    spec: &RowSpec,
    place: &Place,
    (tiles, region): (&[Access], &Access),
    dump_dir: &Path,
    keep: bool,
) -> Result<RunOut, WireError> {
    let mut writes_made = vec![0u64; tiles.len()];
    // Setup: every writer writes its tile once.
    for (w, p) in env.writers.iter_mut().enumerate() {
        let mut j = job(Role::Writer, w as u32, spec, place, &tiles[w]);
        j.keep_last = cfg.keep_last;
        j.max_ops = Some(1);
        p.send(&ToClient::Job(Box::new(j))).await?;
    }
    for p in env.writers.iter_mut() {
        p.ready().await?;
    }
    for p in env.writers.iter_mut() {
        p.send(&ToClient::Go).await?;
    }
    for (w, p) in env.writers.iter_mut().enumerate() {
        writes_made[w] += p.done().await?.ops;
    }
    // With `plain_reader`, a local file as long as the region's end, its bytes written
    // (a read of a hole would cost less than one of data).
    let plain = if cfg.plain_reader {
        let file = dump_dir.join("plain-reader.dat");
        let end = region.ranges().last().map_or(0, |r| r.end);
        std::fs::write(&file, vec![0x5au8; end as usize]).map_err(|e| io(&file, e))?;
        Some(Place::Plain { file })
    } else {
        None
    };
    let reader_job = |r: u32, op_base: u64| {
        let mut j = match &plain {
            Some(p) => job(Role::Reader, r, &RowSpec::Plain, p, region),
            None => job(Role::Reader, r, spec, place, region),
        };
        j.op_base = op_base;
        j.seconds = cfg.seconds;
        j.warmup = 5;
        if keep {
            j.keep_every = 8;
            j.keep_max = 12;
        }
        j.dump_dir = dump_dir.to_path_buf();
        j
    };
    let mut dumps = Vec::new();
    // Idle: the readers alone.
    for (r, p) in env.readers.iter_mut().enumerate() {
        p.send(&ToClient::Job(Box::new(reader_job(r as u32, 0))))
            .await?;
    }
    for p in env.readers.iter_mut() {
        p.ready().await?;
    }
    for p in env.readers.iter_mut() {
        p.send(&ToClient::Go).await?;
    }
    let mut idle = Vec::new();
    for (r, p) in env.readers.iter_mut().enumerate() {
        let res = p.done().await?;
        idle.extend(res.latencies_us);
        dumps.extend(res.dumps.into_iter().map(|(op, f)| (r as u32, op, f)));
    }
    // Loaded: writers first, then the readers again.
    for (w, p) in env.writers.iter_mut().enumerate() {
        let mut j = job(Role::Writer, w as u32, spec, place, &tiles[w]);
        j.keep_last = cfg.keep_last;
        j.op_base = writes_made[w];
        j.interval_us = (cfg.interval_ms * 1000.0) as u64;
        p.send(&ToClient::Job(Box::new(j))).await?;
    }
    for (r, p) in env.readers.iter_mut().enumerate() {
        p.send(&ToClient::Job(Box::new(reader_job(r as u32, 1 << 32))))
            .await?;
    }
    for p in env.writers.iter_mut().chain(env.readers.iter_mut()) {
        p.ready().await?;
    }
    for p in env.writers.iter_mut() {
        p.send(&ToClient::Go).await?;
    }
    tokio::time::sleep(Duration::from_millis(cfg.warmup_ms)).await;
    for p in env.readers.iter_mut() {
        p.send(&ToClient::Go).await?;
    }
    let mut loaded = Vec::new();
    let (mut cached, mut fetching, mut nodes) = (Vec::new(), Vec::new(), Vec::new());
    let mut reader_err = None;
    for (r, p) in env.readers.iter_mut().enumerate() {
        match p.done().await {
            Ok(res) => {
                loaded.extend(res.latencies_us.iter().copied());
                for (l, n) in res.latencies_us.iter().zip(&res.fetched_per_read) {
                    match n {
                        0 => cached.push(*l),
                        n => {
                            fetching.push(*l);
                            nodes.push(f64::from(*n));
                        }
                    }
                }
                dumps.extend(res.dumps.into_iter().map(|(op, f)| (r as u32, op, f)));
            }
            Err(e) => reader_err = Some(e),
        }
    }
    for p in env.writers.iter_mut() {
        p.send(&ToClient::Stop).await?;
    }
    let mut wlat = Vec::new();
    let mut wsecs: f64 = 0.0;
    let mut wops = 0u64;
    for (w, p) in env.writers.iter_mut().enumerate() {
        let res = p.done().await?;
        writes_made[w] += res.ops;
        wops += res.ops;
        wsecs = wsecs.max(res.seconds);
        wlat.extend(res.latencies_us);
    }
    if let Some(e) = reader_err {
        return Err(e);
    }
    if idle.is_empty() || loaded.is_empty() {
        return Err(wire(format!(
            "{}: a phase made no timed read (seconds = {})",
            spec.name(),
            cfg.seconds
        )));
    }
    let (i, l) = (PhaseStats::of(&idle), PhaseStats::of(&loaded));
    let mut wl = wlat.clone();
    wl.sort_by(f64::total_cmp);
    let versioned = !cached.is_empty() || !fetching.is_empty();
    // Not `sum()`: a float sum of nothing is −0.0, printed "-0.0".
    let fetched: f64 = nodes.iter().fold(0.0, |a, n| a + n);
    let nodes_per_read = versioned.then(|| fetched / l.reads.max(1) as f64);
    let split = versioned.then(|| FetchSplit {
        fetching_share: fetching.len() as f64 / l.reads.max(1) as f64,
        nodes_per_fetching_read: fetched / nodes.len().max(1) as f64,
        cached: (!cached.is_empty()).then(|| PhaseStats::of(&cached)),
        fetching: (!fetching.is_empty()).then(|| PhaseStats::of(&fetching)),
    });
    Ok(RunOut {
        stats: RunStats {
            median_ratio: l.median_us / i.median_us,
            p99_ratio: l.p99_us / i.p99_us,
            idle: i,
            loaded: l,
            writes_per_s: wops as f64 / wsecs.max(1e-9),
            write_median_us: percentile(&wl, 50.0),
            nodes_per_read,
            split,
        },
        writes_made,
        dumps,
    })
}

/// The run's final bytes: the file, or for versioning its newest snapshot.
async fn final_bytes(
    c: &mut ClusterClient,
    spec: &RowSpec,
    place: &Place,
) -> Result<Vec<u8>, WireError> {
    let versioning = matches!(spec, RowSpec::Strategy(s) if s.is_versioning());
    let mut f = match place {
        Place::Plain { file } => return std::fs::read(file).map_err(|e| io(file, e)),
        Place::Direct { file, .. } if !versioning => {
            return std::fs::read(file).map_err(|e| io(file, e))
        }
        Place::Servers { path, .. } if !versioning => {
            let info = c.open(path).await?;
            return c.read_all(&info).await;
        }
        Place::Direct { file, .. } => File::direct(DirectData::open(file, false)?),
        Place::Servers { path, .. } => File::open(c, path).await?,
    };
    f.set_atomic(Some(Strategy::versioning()))?;
    let size = f.size(Some(c)).await?;
    let all = Access::contiguous(ByteRange::new(0, size).map_err(wire)?).map_err(wire)?;
    let mut out = vec![0u8; size as usize];
    f.read(c, &all, &mut out).await?;
    Ok(out)
}

async fn verify_run(
    c: &mut ClusterClient,
    spec: &RowSpec,
    place: &Place,
    tiles: &[Access],
    region: &Access,
    out: &RunOut,
) -> Result<(&'static str, Option<String>, usize), WireError> {
    let bytes = final_bytes(c, spec, place).await?;
    let writes: Vec<atomio_verify::Write> = tiles
        .iter()
        .enumerate()
        .flat_map(|(w, a)| {
            (0..out.writes_made[w])
                .map(move |op| atomio_verify::Write::new(w as u32, op, a.clone()))
        })
        .collect();
    let mut reads = Vec::new();
    for (r, op, path) in &out.dumps {
        let f = std::fs::File::open(path).map_err(|e| io(path, e))?;
        reads.push(atomio_verify::Read::new(*r, *op, region.clone(), f));
    }
    let n = reads.len();
    let report = atomio_verify::verify(&bytes[..], &writes, &reads)
        .map_err(|e| wire(format!("the verifier could not check the run: {e}")))?;
    Ok(match report.verdict {
        atomio_verify::Verdict::Atomic => ("atomic", None, n),
        atomio_verify::Verdict::Violated => (
            "VIOLATED",
            Some(
                report
                    .violation()
                    .map_or_else(|| report.to_string(), |v| v.to_string()),
            ),
            n,
        ),
        atomio_verify::Verdict::Inconclusive => {
            // The joint search for one order placing every read gave up. Each read on its
            // own must still be a whole serial prefix: check them one at a time.
            let mut verdict = "each read atomic alone";
            let mut detail = format!("jointly: {report}");
            for (r, op, path) in &out.dumps {
                let f = std::fs::File::open(path).map_err(|e| io(path, e))?;
                let one = [atomio_verify::Read::new(*r, *op, region.clone(), f)];
                let rep = atomio_verify::verify(&bytes[..], &writes, &one)
                    .map_err(|e| wire(format!("the verifier could not check the run: {e}")))?;
                match rep.verdict {
                    atomio_verify::Verdict::Atomic => {}
                    atomio_verify::Verdict::Violated => {
                        verdict = "VIOLATED";
                        detail = format!("read {r}/{op} alone: {rep}");
                        break;
                    }
                    atomio_verify::Verdict::Inconclusive => {
                        verdict = "inconclusive";
                        detail = format!("read {r}/{op} alone: {rep}");
                    }
                }
            }
            (verdict, Some(detail), n)
        }
    })
}

/// Removes a run's file; a versioned run's store is collected to its newest snapshot first
/// (`collect_to_newest`: ~1.7 GB of dirty chunks a run at the default load).
async fn cleanup(c: &mut ClusterClient, spec: &RowSpec, place: &Place) {
    if matches!(spec, RowSpec::Strategy(s) if s.is_versioning()) {
        match place {
            Place::Direct { file, .. } => collect_to_newest(c, VersionedAt::Direct(file)).await,
            Place::Servers { path, .. } => collect_to_newest(c, VersionedAt::Servers(path)).await,
            Place::Plain { .. } => {}
        }
    }
    match place {
        Place::Plain { file } | Place::Direct { file, .. } => {
            let _ = std::fs::remove_file(file);
        }
        Place::Servers { path, .. } => {
            let _ = c.remove(path).await;
        }
    }
}

pub async fn run(cfg: &ReadersConfig) -> Result<ReadersReport, WireError> {
    std::fs::create_dir_all(&cfg.scratch).map_err(|e| io(&cfg.scratch, e))?;
    let (tiles, region, tile_params) = geometry(cfg)?;
    let cluster = EmbeddedCluster::start_on_disk(cfg.servers, &cfg.scratch.join("servers"))?;
    let addrs = cluster.serve_tcp().await?;
    let c = ClusterClient::connect_tcp(&addrs).await?;
    let mut writers = Vec::new();
    for _ in 0..cfg.writers {
        writers.push(Proc::spawn(&cfg.exe, cfg.writer_priority).await?);
    }
    let mut readers = Vec::new();
    for _ in 0..cfg.readers {
        readers.push(Proc::spawn(&cfg.exe, Priority::Normal).await?);
    }
    let mut env = Env {
        _cluster: cluster,
        addrs,
        c,
        writers,
        readers,
    };
    let n = cfg.strategies.len();
    let bar = crate::progress::bar((n * cfg.runs) as u64, cfg.progress);
    let mut per: Vec<Vec<RunStats>> = vec![Vec::new(); n];
    let mut data: Vec<&'static str> = vec![""; n];
    let mut verdicts: Vec<(Option<&'static str>, Option<String>, usize)> = vec![(None, None, 0); n];
    let result: Result<(), WireError> = async {
        for run in 0..cfg.runs {
            for k in 0..n {
                let si = (k + run) % n;
                let spec = &cfg.strategies[si];
                bar.set_message(format!("{} run {}", spec.name(), run + 1));
                let tag = format!("{}-{si}-{run}", std::process::id());
                let place = place_for(cfg, &env, spec, &tag)?;
                data[si] = match &place {
                    Place::Plain { .. } => "local",
                    Place::Direct { .. } => "direct",
                    Place::Servers { .. } => "servers",
                };
                if let Place::Servers { path, .. } = &place {
                    let _ = env.c.remove(path).await;
                    env.c
                        .create(path, cfg.stripe_size, cfg.servers, false)
                        .await?;
                }
                let dump_dir = cfg.scratch.join(format!("dumps-{tag}"));
                std::fs::create_dir_all(&dump_dir).map_err(|e| io(&dump_dir, e))?;
                let check = run == 0 && cfg.verify && !cfg.plain_reader && *spec != RowSpec::Plain;
                let out = one_run(
                    cfg,
                    &mut env,
                    spec,
                    &place,
                    (&tiles, &region),
                    &dump_dir,
                    check,
                )
                .await?;
                if check {
                    bar.set_message(format!("{} verifying", spec.name()));
                    let (verdict, detail, n) =
                        verify_run(&mut env.c, spec, &place, &tiles, &region, &out).await?;
                    verdicts[si] = (Some(verdict), detail, n);
                }
                per[si].push(out.stats);
                cleanup(&mut env.c, spec, &place).await;
                let _ = std::fs::remove_dir_all(&dump_dir);
                bar.inc(1);
            }
        }
        Ok(())
    }
    .await;
    bar.finish_and_clear();
    for p in env.writers.iter_mut().chain(env.readers.iter_mut()) {
        let _ = p.send(&ToClient::Exit).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), p.child.wait()).await;
    }
    result?;
    let rows = cfg
        .strategies
        .iter()
        .enumerate()
        .map(|(si, spec)| {
            let runs = std::mem::take(&mut per[si]);
            let m = |f: &dyn Fn(&RunStats) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
            let nodes: Vec<f64> = runs.iter().filter_map(|r| r.nodes_per_read).collect();
            let (verdict, violation, reads_verified) = verdicts[si].clone();
            ReadersRow {
                strategy: spec.name(),
                data: data[si].to_string(),
                writers: cfg.writers,
                readers: cfg.readers,
                read_bytes: region.size(),
                write_bytes: tiles.first().map_or(0, Access::size),
                idle_median_us: m(&|r| r.idle.median_us),
                idle_p99_us: m(&|r| r.idle.p99_us),
                loaded_median_us: m(&|r| r.loaded.median_us),
                loaded_p99_us: m(&|r| r.loaded.p99_us),
                median_ratio: m(&|r| r.median_ratio),
                p99_ratio: m(&|r| r.p99_ratio),
                writes_per_s: m(&|r| r.writes_per_s),
                write_median_us: m(&|r| r.write_median_us),
                nodes_per_read: (!nodes.is_empty()).then(|| median(&nodes)),
                verdict: verdict.map(str::to_string),
                violation,
                reads_verified,
                runs,
            }
        })
        .collect();
    Ok(ReadersReport {
        writers: cfg.writers,
        readers: cfg.readers,
        servers: cfg.servers,
        seconds: cfg.seconds,
        interval_ms: cfg.interval_ms,
        writer_priority: cfg.writer_priority.to_string(),
        keep_last: cfg.keep_last,
        tile: tile_params,
        reader_region: describe(&region),
        rows,
    })
}

fn describe(a: &Access) -> String {
    let runs = a.ranges().count();
    let hull = a.hull().map_or_else(String::new, |h| h.to_string());
    format!("{} bytes in {runs} runs within {hull}", a.size())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::disk_usage;

    /// A versioned run's chunks do not outlive it: `cleanup` collects the store down to
    /// its newest snapshot (the dead chunks are punched, so their dirty pages are dropped
    /// rather than written back during the next run) and removes the user's file.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cleanup_frees_a_versioned_runs_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let servers = dir.path().join("servers");
        let cluster = EmbeddedCluster::start_on_disk(2, &servers).unwrap();
        let addrs = cluster.serve_tcp().await.unwrap();
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        let file = dir.path().join("direct.dat");
        std::fs::File::create(&file).unwrap();
        let spec = RowSpec::Strategy(Strategy::versioning());
        let place = Place::Direct {
            servers: addrs.clone(),
            file: file.clone(),
        };
        const WRITE: u64 = 256 << 10;
        const WRITES: u64 = 16;
        let mut f = File::direct(DirectData::open(&file, false).unwrap());
        f.set_atomic(Some(Strategy::versioning())).unwrap();
        let all = Access::contiguous(ByteRange::new(0, WRITE).unwrap()).unwrap();
        for i in 0..WRITES {
            f.write(&mut c, &all, &vec![i as u8; WRITE as usize])
                .await
                .unwrap();
        }
        drop(f);
        let before = disk_usage(std::slice::from_ref(&servers));
        assert!(before >= WRITES * WRITE, "{before} bytes stored");
        cleanup(&mut c, &spec, &place).await;
        let after = disk_usage(std::slice::from_ref(&servers));
        // The newest snapshot's chunks stay, and the servers' own small files.
        assert!(
            after <= 3 * WRITE,
            "{after} bytes stored after cleanup, {before} before"
        );
        assert!(!file.exists());
    }
}
