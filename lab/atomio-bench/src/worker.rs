//! The client side of a workload run: one `atomio worker` process per client.
//!
//! Clients are processes, not tasks, because the baseline's `fcntl` locks belong to the
//! process (two tasks of one process never exclude each other) and because MPI ranks are
//! processes. The coordinator talks to each worker with JSON lines on stdin/stdout:
//!
//! ```text
//! coordinator → worker   {"cmd":"job", ...}   connect, open the file, fill write buffers
//! worker → coordinator   {"msg":"ready"}
//! coordinator → worker   {"cmd":"go"}         run the calls (timed)
//! worker → coordinator   {"msg":"called"}     the calls returned (the PIO phase is over)
//! coordinator → worker   {"cmd":"flush"}      once every worker's calls returned: flush
//!                                             what a cached-lock DLM cached, and (rank 0)
//!                                             write versioning's newest snapshot into the
//!                                             file's base (timed apart)
//! worker → coordinator   {"msg":"done", ...}  seconds, bytes, lock counts, read dumps
//! coordinator → worker   {"cmd":"exit"}
//! ```
//!
//! **Invariants:** write buffers are filled with verifier tags (writer = rank, op = call
//! number) before "go", so the timed part is I/O and locking only; what reads returned is
//! dumped after the timed part.

use atomio_client::{DirectData, File, Strategy};
use atomio_layout::Access;
use atomio_net::ClusterClient;
use atomio_proto::{ErrorCode, WireError};
use atomio_workloads::{CallKind, Workload};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// Where a job's I/O goes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Target {
    /// A file on atomio's data servers (servers in order) and its path there.
    Servers {
        servers: Vec<String>,
        path: String,
        stripe_size: u64,
        stripe_count: u32,
        /// Move bytes through the servers' object files when they are on this host.
        bypass: bool,
    },
    /// The user's ordinary file (direct placement); `servers` hold only locks (empty when
    /// the strategy takes none on the lock service: `none`, `posix-fcntl`, `romio`).
    Direct {
        servers: Vec<String>,
        file: PathBuf,
        /// Write an interval file (Logan §3.4) laid out by the plan's interval set instead
        /// of the flat file (strategies `interval` and `auto`).
        #[serde(default)]
        interval_file: bool,
        /// Take the locks in the host's shared lock table, not on lock servers
        /// (`servers` then empty).
        #[serde(default)]
        host_locks: bool,
    },
    /// A reference row (`contiguous`, `plain`, `plain-mapped`): every client writes its
    /// calls' bytes into the local `file` with no locks and no atomio, the `way` says how.
    Local {
        file: PathBuf,
        #[serde(default)]
        way: LocalWay,
    },
}

/// How a reference row writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LocalWay {
    /// The calls' bytes contiguously, one after another, rank after rank (no layout).
    #[default]
    Contiguous,
    /// Each piece where the workload puts it, one `pwrite` each.
    Pieces,
    /// Each piece where the workload puts it, the way direct placement writes a call's
    /// pieces (through a shared mapping when that pays), with no locks: direct placement's
    /// data path without atomio.
    Mapped,
}

impl Target {
    pub fn placement(&self) -> &'static str {
        match self {
            Target::Servers { .. } => "servers",
            Target::Direct { .. } => "direct",
            Target::Local { .. } => "local",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub rank: u32,
    pub clients: u32,
    pub workload: Workload,
    pub strategy: String,
    pub target: Target,
    /// Where to put what reads returned.
    pub dump_dir: PathBuf,
    /// The `rtt-floor` row: one `Ping` round trip to a lock server before each call.
    #[serde(default)]
    pub ping_per_call: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReadDump {
    pub op: u32,
    pub path: PathBuf,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct JobResult {
    pub rank: u32,
    /// Seconds of the calls and of flushing what they left cached (cached-lock DLMs).
    pub seconds: f64,
    /// Seconds of the calls alone: what the application waits for (the paper's "PIO
    /// time"; equal to `seconds` for techniques that cache nothing).
    #[serde(default)]
    pub pio_seconds: f64,
    /// What the file's DLM client did (cached-lock DLMs only).
    #[serde(default)]
    pub dlm: Option<atomio_client::dlm::machine::DlmClientStats>,
    pub bytes: u64,
    pub lock_requests: u64,
    pub lock_messages: u64,
    pub reads: Vec<ReadDump>,
    /// The bytes went through the servers' object files on this host (same-host bypass).
    #[serde(default)]
    pub object_files: bool,
    /// Interval I/O: calls that took no lock, calls that fell back to locking undeclared
    /// bytes, what `auto` chose and why, and the interval analysis's seconds.
    #[serde(default)]
    pub lock_free_calls: u64,
    #[serde(default)]
    pub interval_fallbacks: u64,
    #[serde(default)]
    pub chosen: Option<atomio_interval::Choice>,
    #[serde(default)]
    pub analysis_seconds: f64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum ToWorker {
    Job(Box<Job>),
    Go,
    Flush,
    Exit,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "lowercase")]
pub enum FromWorker {
    Ready,
    Called,
    Done(Box<JobResult>),
    Failed { error: String },
}

enum Io {
    File {
        /// The lock service / data servers, when the strategy needs them.
        client: Option<Box<ClusterClient>>,
        file: Box<File>,
    },
    /// A reference row's local file.
    Local(LocalIo),
}

/// A reference row's local file, opened for its way of writing (`LocalWay`).
enum LocalIo {
    /// `offset`: where this client's next contiguous write goes.
    Contiguous {
        file: std::fs::File,
        offset: u64,
    },
    Pieces(std::fs::File),
    /// Opened as direct placement opens the user's file.
    Mapped(Box<DirectData>),
}

/// One call ready to run: its write buffer is already filled with tags.
struct ReadyCall {
    kind: CallKind,
    access: Option<Access>,
    op: u32,
    data: Option<Vec<u8>>,
    /// The `rtt-floor` row: the lock servers this call's bytes map to (direct placement's
    /// lock stripes), each pinged once, all at once, before the call.
    ping: Vec<atomio_layout::ServerId>,
}

/// The lock servers of a direct file's `DIRECT_LOCK_STRIPE`s that `a`'s bytes touch (the
/// rotation of the first stripe aside, which changes neither their number nor balance).
fn lock_servers_of(a: &Access, servers: usize) -> Vec<atomio_layout::ServerId> {
    let stripe = atomio_client::file::DIRECT_LOCK_STRIPE;
    let mut hit = vec![false; servers];
    for r in a.ranges() {
        let (first, last) = (r.start / stripe, (r.end - 1) / stripe);
        for k in first..=last.min(first + servers as u64) {
            hit[(k % servers as u64) as usize] = true;
        }
    }
    (0..servers)
        .filter(|&i| hit[i])
        .map(|i| atomio_layout::ServerId(i as u32))
        .collect()
}

struct Prepared {
    job: Job,
    calls: Vec<ReadyCall>,
    io: Io,
    analysis_seconds: f64,
    /// The `rtt-floor` row's connections to the lock servers.
    pinger: Option<Box<ClusterClient>>,
}

/// Interval I/O's declaration: every rank analyzes the whole plan (the declared accesses
/// of all clients; the same result everywhere) and gives the set to its file.
fn declare_intervals(
    file: &mut File,
    plan: &atomio_workloads::WorkloadPlan,
    rank: u32,
) -> Result<f64, WireError> {
    if !file
        .atomic()
        .is_some_and(|s| s.technique().splits_by_intervals())
    {
        return Ok(0.0);
    }
    let t0 = Instant::now();
    let calls: Vec<(u32, Access)> = plan
        .clients
        .iter()
        .flat_map(|c| {
            c.calls
                .iter()
                .filter_map(move |k| k.access.clone().map(|a| (c.rank, a)))
        })
        .collect();
    let set = atomio_interval::from_accesses(
        plan.clients.len() as u32,
        &calls,
        atomio_interval::Limits::default(),
    )
    .map_err(bad)?;
    file.set_intervals(std::sync::Arc::new(set), rank);
    Ok(t0.elapsed().as_secs_f64())
}

fn bad(e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::InvalidArgument, e.to_string())
}

async fn prepare(job: Job) -> Result<Prepared, WireError> {
    // A reference row runs no strategy.
    let strategy: Strategy = match &job.target {
        Target::Local { .. } => Strategy::none(),
        _ => job.strategy.parse().map_err(bad)?,
    };
    let plan = job.workload.plan(job.clients).map_err(bad)?;
    let mine = plan
        .clients
        .iter()
        .find(|c| c.rank == job.rank)
        .cloned()
        .ok_or_else(|| bad(format!("the plan has no client {}", job.rank)))?;
    let mut calls = Vec::with_capacity(mine.calls.len());
    for call in mine.calls {
        let buf = match (&call.kind, &call.access) {
            (CallKind::Write, Some(a)) => {
                let mut buf = vec![0u8; a.size() as usize];
                atomio_verify::fill(job.rank, u64::from(call.op), a.ranges(), &mut buf)
                    .map_err(bad)?;
                Some(buf)
            }
            _ => None,
        };
        let ping = match (&job.target, &call.access, job.ping_per_call) {
            (Target::Direct { servers, .. }, Some(a), true) if !servers.is_empty() => {
                lock_servers_of(a, servers.len())
            }
            _ => Vec::new(),
        };
        calls.push(ReadyCall {
            kind: call.kind,
            access: call.access,
            op: call.op,
            data: buf,
            ping,
        });
    }
    let mut analysis_seconds = 0.0;
    let io = match &job.target {
        Target::Servers {
            servers,
            path,
            stripe_size,
            stripe_count,
            bypass,
        } => {
            let mut client = ClusterClient::connect_tcp(servers).await?;
            let info = client
                .create(path, *stripe_size, *stripe_count, false)
                .await?;
            let mut file = match bypass {
                true => File::with_local_objects(&mut client, info).await,
                false => File::from_info(info),
            };
            file.set_atomic(Some(strategy))?;
            analysis_seconds = declare_intervals(&mut file, &plan, job.rank)?;
            Io::File {
                client: Some(Box::new(client)),
                file: Box::new(file),
            }
        }
        Target::Direct {
            servers,
            file,
            interval_file,
            host_locks,
        } => {
            let client = match strategy.uses_lock_service() && !host_locks {
                true => Some(Box::new(ClusterClient::connect_tcp(servers).await?)),
                false => None,
            };
            let mut file = File::direct(DirectData::open(file, true)?);
            file.set_atomic(Some(strategy))?;
            if *host_locks {
                file.use_host_locks()?;
            }
            analysis_seconds = declare_intervals(&mut file, &plan, job.rank)?;
            if *interval_file {
                file.set_interval_format()?;
            }
            Io::File {
                client,
                file: Box::new(file),
            }
        }
        Target::Local { file: path, way } => {
            let offset = plan
                .clients
                .iter()
                .filter(|c| c.rank < job.rank)
                .flat_map(|c| c.calls.iter())
                .filter(|c| c.kind == CallKind::Write)
                .filter_map(|c| c.access.as_ref().map(Access::size))
                .sum();
            let open = || {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .map_err(|e| WireError::new(ErrorCode::Io, format!("{}: {e}", path.display())))
            };
            Io::Local(match way {
                LocalWay::Contiguous => LocalIo::Contiguous {
                    file: open()?,
                    offset,
                },
                LocalWay::Pieces => LocalIo::Pieces(open()?),
                LocalWay::Mapped => LocalIo::Mapped(Box::new(DirectData::open(path, true)?)),
            })
        }
    };
    let pinger = match (&job.target, job.ping_per_call) {
        (Target::Direct { servers, .. }, true) if !servers.is_empty() => {
            Some(Box::new(ClusterClient::connect_tcp(servers).await?))
        }
        (_, true) => return Err(bad("the rtt-floor row needs lock servers")),
        (_, false) => None,
    };
    Ok(Prepared {
        job,
        calls,
        io,
        analysis_seconds,
        pinger,
    })
}

/// What the calls left for the flush phase.
struct Called {
    observed: Vec<(u32, Vec<u8>)>,
    bytes: u64,
    t0: Instant,
    pio_seconds: f64,
}

async fn execute(p: &mut Prepared) -> Result<Called, WireError> {
    let mut observed: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut bytes = 0u64;
    let t0 = Instant::now();
    for ReadyCall {
        kind,
        access,
        op,
        data,
        ping,
    } in &p.calls
    {
        if let Some(c) = p.pinger.as_deref_mut() {
            let pings = ping
                .iter()
                .map(|&s| {
                    (
                        s,
                        atomio_proto::Request::Ping {
                            nonce: (*op).into(),
                        },
                    )
                })
                .collect();
            c.rpc_all(pings).await?;
        }
        match (kind, access) {
            (CallKind::Write, Some(a)) => {
                let data = data.as_deref().expect("prepared");
                match &mut p.io {
                    Io::File {
                        client: Some(c),
                        file,
                    } => file.write(c, a, data).await?,
                    Io::File { client: None, file } => file.write_local(a, data)?,
                    Io::Local(LocalIo::Contiguous { file, offset }) => {
                        file.write_all_at(data, *offset).map_err(|e| {
                            WireError::new(ErrorCode::Io, format!("pwrite at {offset}: {e}"))
                        })?;
                        *offset += data.len() as u64;
                    }
                    Io::Local(LocalIo::Mapped(d)) => d.write_pieces(a, data)?,
                    Io::Local(LocalIo::Pieces(file)) => {
                        let mut at = 0usize;
                        for r in a.ranges() {
                            let n = r.len() as usize;
                            file.write_all_at(&data[at..at + n], r.start).map_err(|e| {
                                WireError::new(ErrorCode::Io, format!("pwrite at {}: {e}", r.start))
                            })?;
                            at += n;
                        }
                    }
                }
                bytes += a.size();
            }
            (CallKind::Read, Some(a)) => {
                let mut out = vec![0u8; a.size() as usize];
                match &mut p.io {
                    Io::File {
                        client: Some(c),
                        file,
                    } => file.read(c, a, &mut out).await?,
                    Io::File { client: None, file } => file.read_local(a, &mut out)?,
                    Io::Local(_) => {}
                }
                bytes += a.size();
                observed.push((*op, out));
            }
            (CallKind::Sync, _) => match &mut p.io {
                Io::File { client, file } => file.sync(client.as_deref_mut()).await?,
                Io::Local(LocalIo::Mapped(d)) => d.sync()?,
                Io::Local(LocalIo::Contiguous { file, .. } | LocalIo::Pieces(file)) => file
                    .sync_data()
                    .map_err(|e| WireError::new(ErrorCode::Io, format!("fsync: {e}")))?,
            },
            (_, None) => return Err(bad(format!("call {op} has no access"))),
        }
    }
    Ok(Called {
        observed,
        bytes,
        t0,
        pio_seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The flush phase (every client's calls have returned): what a cached-lock DLM left in
/// its cache goes to the servers now.
async fn finish(p: &mut Prepared, called: Called) -> Result<JobResult, WireError> {
    let Called {
        observed,
        bytes,
        t0,
        pio_seconds,
    } = called;
    let dlm = match &mut p.io {
        Io::File { file, client } => {
            file.flush_cache().await?;
            // Versioning: the newest snapshot goes into the file's base once, by rank 0,
            // as the MPI library does at close (every client's calls have returned).
            if let (0, Some(c)) = (p.job.rank, client.as_deref_mut()) {
                file.materialize(c).await?;
            }
            file.dlm_stats().await
        }
        Io::Local(_) => None,
    };
    let seconds = t0.elapsed().as_secs_f64();
    let object_files = matches!(&p.io, Io::File { file, .. } if file.bypasses_messages());
    let stats = match &p.io {
        Io::File { file, .. } => file.stats(),
        Io::Local(_) => Default::default(),
    };
    let chosen = match &p.io {
        Io::File { file, .. } => file.explain().cloned(),
        Io::Local(_) => None,
    };
    let mut reads = Vec::new();
    for (op, data) in observed {
        let path = p.job.dump_dir.join(format!("read-{}-{op}.bin", p.job.rank));
        std::fs::write(&path, data)
            .map_err(|e| WireError::new(ErrorCode::Io, format!("{}: {e}", path.display())))?;
        reads.push(ReadDump { op, path });
    }
    Ok(JobResult {
        rank: p.job.rank,
        seconds,
        pio_seconds,
        dlm,
        bytes,
        lock_requests: stats.lock_requests,
        lock_messages: stats.lock_messages,
        reads,
        object_files,
        lock_free_calls: stats.lock_free_calls,
        interval_fallbacks: stats.interval_fallbacks,
        chosen,
        analysis_seconds: p.analysis_seconds,
    })
}

async fn say(out: &mut (impl AsyncWrite + Unpin), msg: &FromWorker) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line).await?;
    out.flush().await
}

/// A worker's main loop: serves jobs until told to exit or its input closes.
pub async fn serve(
    input: impl AsyncBufRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
) -> std::io::Result<()> {
    let mut lines = input.lines();
    let mut prepared: Option<Prepared> = None;
    while let Some(line) = lines.next_line().await? {
        let msg: ToWorker = match serde_json::from_str(&line) {
            Ok(m) => m,
            Err(e) => {
                say(
                    &mut output,
                    &FromWorker::Failed {
                        error: format!("unreadable command: {e}"),
                    },
                )
                .await?;
                continue;
            }
        };
        match msg {
            ToWorker::Job(job) => {
                prepared = None;
                match prepare(*job).await {
                    Ok(p) => {
                        prepared = Some(p);
                        say(&mut output, &FromWorker::Ready).await?;
                    }
                    Err(e) => {
                        say(
                            &mut output,
                            &FromWorker::Failed {
                                error: e.to_string(),
                            },
                        )
                        .await?
                    }
                }
            }
            ToWorker::Go => {
                let called = match prepared.as_mut() {
                    None => Err("go before a job was prepared".to_string()),
                    Some(p) => execute(p).await.map_err(|e| e.to_string()),
                };
                match called {
                    Err(error) => {
                        prepared = None;
                        say(&mut output, &FromWorker::Failed { error }).await?;
                    }
                    Ok(called) => {
                        say(&mut output, &FromWorker::Called).await?;
                        // Wait for every client's calls before flushing (a flush must not
                        // run beside others' timed calls).
                        let next = lines.next_line().await?;
                        let reply = match next.as_deref().map(serde_json::from_str::<ToWorker>) {
                            Some(Ok(ToWorker::Flush)) => {
                                let p = prepared.as_mut().expect("executed");
                                match finish(p, called).await {
                                    Ok(r) => FromWorker::Done(Box::new(r)),
                                    Err(e) => FromWorker::Failed {
                                        error: e.to_string(),
                                    },
                                }
                            }
                            Some(other) => FromWorker::Failed {
                                error: format!("expected flush after the calls, got {other:?}"),
                            },
                            None => return Ok(()),
                        };
                        prepared = None;
                        say(&mut output, &reply).await?;
                    }
                }
            }
            ToWorker::Flush => {
                say(
                    &mut output,
                    &FromWorker::Failed {
                        error: "flush without calls".into(),
                    },
                )
                .await?
            }
            ToWorker::Exit => return Ok(()),
        }
    }
    Ok(())
}
