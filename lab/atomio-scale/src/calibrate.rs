//! `atomio-lab sim calibrate`: the cost file, measured on this machine through the product's
//! own code, each figure by a short microbenchmark:
//!
//! * **messages** — `Ping`s from a `ClusterClient` (current-thread runtime, as a benchmark
//!   worker's) to one `atomio server` process over loopback TCP, one at a time and 256 at a
//!   time; the CPU each side spent (this process's CPU clock, the server's through
//!   `clock_getcpuclockid`) per message. Pipelined pings give the per-message cost; one at
//!   a time gives the round trip's wall time beyond both sides' CPU (the wire). The pick-up
//!   of a batch (a wake-up, a poll, a read) comes from four client processes (`atomio-lab sim
//!   ping-client`) pinging four servers one at a time, all at once — processes outnumber
//!   cores, as in every benchmark here. (A pair alone on an idle machine pays two to three
//!   times more CPU per round trip on a VM whose idle virtual CPUs are slow to wake, and
//!   that figure is recorded, not used.)
//! * **how calls differ** — one writer's `pwrite`s timed call by call: the log-σ the
//!   model spreads every job's cost by;
//! * **waking an idle core** — two threads ping-ponging a byte through pipes, pinned to
//!   two cores (every wake-up finds its core idle) and to one (every wake-up finds it
//!   busy): half the difference per round trip. The model makes a job that finds its core
//!   idle wait that long (`engine`'s `wake_ns`).
//! * **lock work** — the sans-IO `LockOp`s and `LockServer`s in this process (plans,
//!   grants, releases, for POSIX, list and datatype requests), timed call by call and
//!   fitted to per-request and per-range costs; frame encode/decode per explicit range;
//! * **bytes** — `memcpy`; `pwrite` into a fresh file at four sizes (fitted per call and
//!   per byte), and two threads at once into one file (do writes to one file serialize?);
//!   copies through a shared mapping by the product's own direct-file path (`write_local`
//!   with many small pieces, dense and sparse: per page and per byte).
//!
//! Each measurement is repeated and its median kept; every raw figure goes into the file's
//! `samples`.
//!
//! **Invariants:** nothing measured here is a benchmark the model is validated against
//! (no lock benchmark, no workload run); a failed measurement is an error, never a guess.

use crate::costs::{Costs, IoCosts, LockCosts, Machine, NetCosts, Sample, SCHEMA};
use atomio_layout::{Access, Layout, Pattern, ServerId};
use atomio_lock::{plan, LockOp, LockServer, Method, Protocol, Send};
use atomio_proto::{ClientId, FileId, LockMode, Request};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct CalibrateConfig {
    /// The `atomio` executable (to start a server process).
    pub server_exe: PathBuf,
    /// Scratch directory (server data, files written).
    pub scratch: PathBuf,
    /// Fewer repetitions and smaller sizes (seconds instead of tens of seconds).
    pub quick: bool,
    /// How long to wait for the machine to be quiet before measuring.
    pub patience: std::time::Duration,
}

/// Measures everything; prints a line per step to stderr.
pub fn calibrate(cfg: &CalibrateConfig) -> Result<Costs, String> {
    std::fs::create_dir_all(&cfg.scratch).map_err(|e| format!("{}: {e}", cfg.scratch.display()))?;
    let mut samples = Vec::new();
    let step = |what: &str| eprintln!("calibrating: {what}");
    // Someone else's build or benchmark would make every figure wrong: wait for quiet.
    let busy = crate::quiet::wait_for_quiet(cfg.patience, 0.15, |b| {
        eprintln!("calibrating: waiting for the machine to be quiet ({b:.2} cores busy)")
    });
    if let Some(b) = busy {
        sample(
            &mut samples,
            "cores busy before calibrating (others' load)",
            b,
            "cores",
        );
        if b > 0.15 {
            eprintln!(
                "calibrating: WARNING: {b:.2} cores busy with other work; figures may be high"
            );
        }
    }
    step("lock table and client protocol (in process)");
    let lock = measure_lock_work(cfg.quick, &mut samples)?;
    step("message round trips to an atomio server process (loopback TCP)");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut net = rt.block_on(measure_messages(cfg, &mut samples))?;
    step("waking an idle core (a pipe ping-pong across cores and on one)");
    net.wake_ns = measure_wake(if cfg.quick { 3 } else { 5 }, &mut samples)?;
    step("the scheduler's tick");
    let tick_ns = measure_tick(&mut samples);
    step("memcpy, pwrite into fresh files, copies through a mapping");
    let io = measure_io(&cfg.scratch, cfg.quick, &mut samples)?;
    let mut costs = Costs {
        schema: SCHEMA,
        machine: Machine {
            cores: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            cpu: cpu_name(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            tick_ns,
            migration_cost_ns: migration_cost(&mut samples),
        },
        net,
        lock,
        io,
        samples,
    };
    step("atomic calls from four processes at once (the call path beyond its messages)");
    // At 8 bytes (the path alone, caches warm) and at the workloads' piece sizes, where
    // the bytes each call moves leave the next call's path to run on cold caches.
    let mut curve = Vec::new();
    for (bytes, calls) in CALL_SIZES {
        let calls = if cfg.quick { calls / 5 } else { calls };
        let b = bytes.to_string();
        // Atomic runs alternate with plain ones (the same writes, no locks), and the term
        // is fitted to their difference, not to the atomic runs against `pwrite`s measured
        // minutes earlier (a machine's speed can drift between minutes). It still spreads
        // 1.4–9.8 µs at 47,008 B between calibrations: a difference of two ~25–50 µs
        // figures.
        // Three of each, the median by CPU per call: a run that meets the page cache's
        // writeback (one did: 3× the CPU at 128 KiB) must not set the term.
        let (mut atomic, mut plain) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            for (runs, extra) in [
                (&mut atomic, vec!["--bytes", &b]),
                (&mut plain, vec!["--bytes", &b, "--plain"]),
            ] {
                runs.push(rt.block_on(loaded(
                    cfg,
                    "call-client",
                    &extra,
                    calls,
                    &mut costs.samples,
                ))?);
            }
        }
        let median = |runs: &mut Vec<(f64, f64)>| {
            runs.sort_by(|x, y| (x.0 + x.1).total_cmp(&(y.0 + y.1)));
            runs[1].0 + runs[1].1
        };
        let (atomic, plain) = (median(&mut atomic), median(&mut plain));
        sample(
            &mut costs.samples,
            &format!("CPU per {bytes}-byte call, the same writes without locks"),
            plain,
            "ns",
        );
        let (term, bare) = call_path_term(&mut costs, bytes, atomic - plain)?;
        sample(
            &mut costs.samples,
            &format!(
                "the model's CPU per {bytes}-byte call of that scenario without its call path term"
            ),
            bare,
            "ns",
        );
        curve.push([bytes as f64, term]);
    }
    costs.lock.client_call_curve = curve;
    costs.validate("calibration").map_err(|e| e.to_string())?;
    Ok(costs)
}

/// The call scenario's sizes (bytes per call) and calls per process (fewer where each
/// moves more: four processes' files stay a few hundred MiB).
const CALL_SIZES: [(u64, u64); 3] = [(8, 5_000), (47_008, 1_000), (131_072, 500)];

/// The call path's term for `bytes`-byte calls, from the calibration's call scenario at
/// that size, whose atomic calls measured `locked` CPU ns per call more than the same
/// writes without locks: the term with which the model's atomic calls cost that much more
/// than its plain ones, and the model's CPU per atomic call without it. Leaves
/// `costs.lock.client_call_curve` at that one point.
///
/// The term is charged to the client, per atomic call: what the model leaves uncharged is
/// the call path (`CallOp`, the lease check, the detached release's flush, caches the
/// bytes moved have cooled) and whatever of the server's reads the model's batching does
/// not reproduce, and only calls pay it — a per-request server term would be charged to
/// every lock of `bench locks` too.
fn call_path_term(costs: &mut Costs, bytes: u64, locked: f64) -> Result<(f64, f64), String> {
    let per_call = |costs: &Costs, plain: bool| -> Result<f64, String> {
        let model = crate::workload::call_scenario(costs, 200, bytes, plain)?;
        Ok(model.cpu_seconds * 1e9 / model.calls.max(1) as f64)
    };
    let with = |costs: &mut Costs, term: f64| -> Result<f64, String> {
        costs.lock.client_call_curve = vec![[bytes as f64, term]];
        per_call(costs, false)
    };
    let target = per_call(costs, true)? + locked;
    let bare = with(costs, 0.0)?;
    // The model's charge grows a little faster than the term (a longer call path splits
    // what a server reads at once): a secant search, from a slope of one.
    let (mut term, mut at, mut slope) = (0.0, bare, 1.0);
    for _ in 0..12 {
        if (target - at).abs() <= 0.002 * target.abs() || (term == 0.0 && at >= target) {
            break;
        }
        let next = (term + (target - at) / slope).max(0.0);
        let m = with(costs, next)?;
        if next != term {
            slope = ((m - at) / (next - term)).clamp(0.25, 4.0);
        }
        (term, at) = (next, m);
    }
    costs.lock.client_call_curve = vec![[bytes as f64, term]];
    Ok((term, bare))
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default()
}

fn sample(samples: &mut Vec<Sample>, name: &str, value: f64, unit: &str) {
    samples.push(Sample {
        name: name.into(),
        value,
        unit: unit.into(),
    });
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// CPU time of this process, ns.
fn own_cpu_ns() -> Result<f64, String> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map_err(|e| format!("process CPU clock: {e}"))?;
    Ok(t.tv_sec() as f64 * 1e9 + t.tv_nsec() as f64)
}

/// CPU time of process `pid`, ns.
fn cpu_of(pid: u32) -> Result<f64, String> {
    let clock = nix::time::clock_getcpuclockid(nix::unistd::Pid::from_raw(pid as i32))
        .map_err(|e| format!("CPU clock of process {pid}: {e}"))?;
    let t = nix::time::clock_gettime(clock).map_err(|e| format!("CPU clock of {pid}: {e}"))?;
    Ok(t.tv_sec() as f64 * 1e9 + t.tv_nsec() as f64)
}

/// Per ping: (wall ns, client CPU ns, server CPU ns).
async fn pings(
    client: &mut atomio_net::ClusterClient,
    server_pid: u32,
    batches: usize,
    per_batch: usize,
) -> Result<(f64, f64, f64), String> {
    let (c0, s0, t0) = (own_cpu_ns()?, cpu_of(server_pid)?, Instant::now());
    let mut nonce = 0;
    for _ in 0..batches {
        let calls = (0..per_batch)
            .map(|_| {
                nonce += 1;
                (ServerId(0), Request::Ping { nonce })
            })
            .collect();
        client.rpc_all(calls).await.map_err(|e| e.to_string())?;
    }
    let n = (batches * per_batch) as f64;
    let wall = t0.elapsed().as_secs_f64() * 1e9;
    Ok((
        wall / n,
        (own_cpu_ns()? - c0) / n,
        (cpu_of(server_pid)? - s0) / n,
    ))
}

async fn measure_messages(
    cfg: &CalibrateConfig,
    samples: &mut Vec<Sample>,
) -> Result<NetCosts, String> {
    let servers = atomio_net::LocalServers::start(&cfg.server_exe, 1, &cfg.scratch.join("srv"))
        .await
        .map_err(|e| format!("starting a server: {e}"))?;
    let result = async {
        let pid = servers.pids()[0].ok_or("the server exited")?;
        let mut client = atomio_net::ClusterClient::connect_tcp(&servers.addresses)
            .await
            .map_err(|e| e.to_string())?;
        let (seq_n, pipe_batches) = if cfg.quick {
            (2_000, 20)
        } else {
            (10_000, 100)
        };
        // Warm up both sides (allocations, the scheduler's view of the threads).
        pings(&mut client, pid, 500, 1).await?;
        pings(&mut client, pid, 5, 256).await?;
        let (mut seq, mut pipe) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            seq.push(pings(&mut client, pid, seq_n, 1).await?);
            pipe.push(pings(&mut client, pid, pipe_batches, 256).await?);
        }
        let pick = |v: &[(f64, f64, f64)], f: fn(&(f64, f64, f64)) -> f64| {
            median(v.iter().map(f).collect())
        };
        let (seq_wall, seq_c, seq_s) = (
            pick(&seq, |x| x.0),
            pick(&seq, |x| x.1),
            pick(&seq, |x| x.2),
        );
        let (pipe_wall, pipe_c, pipe_s) = (
            pick(&pipe, |x| x.0),
            pick(&pipe, |x| x.1),
            pick(&pipe, |x| x.2),
        );
        // Several connections at once: K clients, one ping each, together (fan-in at the
        // server); one client, one ping to each of K servers together (fan-out).
        let k = 4;
        let mut fan_clients = Vec::new();
        for _ in 0..k {
            fan_clients.push(
                atomio_net::ClusterClient::connect_tcp(&servers.addresses)
                    .await
                    .map_err(|e| e.to_string())?,
            );
        }
        let rounds = if cfg.quick { 500 } else { 2_000 };
        let mut fan = Vec::new();
        for _ in 0..3 {
            let (c0, s0, t0) = (own_cpu_ns()?, cpu_of(pid)?, Instant::now());
            for r in 0..rounds {
                let calls = fan_clients
                    .iter_mut()
                    .map(|c| c.rpc_all(vec![(ServerId(0), Request::Ping { nonce: r })]));
                for res in futures::future::join_all(calls).await {
                    res.map_err(|e| e.to_string())?;
                }
            }
            let n = (rounds * k) as f64;
            fan.push((
                t0.elapsed().as_secs_f64() * 1e9 / n,
                (own_cpu_ns()? - c0) / n,
                (cpu_of(pid)? - s0) / n,
            ));
        }
        drop(fan_clients);
        let pickf = |f: fn(&(f64, f64, f64)) -> f64| median(fan.iter().map(f).collect());
        sample(
            samples,
            "4 clients, one ping each at once: wall per ping",
            pickf(|x| x.0),
            "ns",
        );
        sample(
            samples,
            "4 clients, one ping each at once: client CPU per ping",
            pickf(|x| x.1),
            "ns",
        );
        sample(
            samples,
            "4 clients, one ping each at once: server CPU per ping",
            pickf(|x| x.2),
            "ns",
        );
        sample(
            samples,
            "ping one at a time: wall per round trip",
            seq_wall,
            "ns",
        );
        sample(
            samples,
            "ping one at a time: client CPU per round trip",
            seq_c,
            "ns",
        );
        sample(
            samples,
            "ping one at a time: server CPU per round trip",
            seq_s,
            "ns",
        );
        sample(
            samples,
            "ping 256 at a time: wall per ping",
            pipe_wall,
            "ns",
        );
        sample(
            samples,
            "ping 256 at a time: client CPU per ping",
            pipe_c,
            "ns",
        );
        sample(
            samples,
            "ping 256 at a time: server CPU per ping",
            pipe_s,
            "ns",
        );
        let (loaded_c, loaded_s) = loaded_pings(cfg, samples).await?;
        // A round trip is a batch of one at each end plus two messages.
        Ok(NetCosts {
            client_msg_ns: pipe_c / 2.0,
            client_batch_ns: (loaded_c - pipe_c).max(0.0),
            server_msg_ns: pipe_s / 2.0,
            server_batch_ns: (loaded_s - pipe_s).max(0.0),
            wire_ns: ((seq_wall - seq_c - seq_s) / 2.0).max(0.0),
            // Measured apart (`measure_wake`).
            wake_ns: 0.0,
            ping_rtt_ns: seq_wall,
        })
    }
    .await;
    servers.stop().await;
    result
}

/// What `atomio-lab sim ping-client` does: `pings` pings to `addr`, one at a time; returns
/// (this process's CPU ns, wall ns) over them.
pub async fn ping_client(addr: &str, pings: u64) -> Result<(f64, f64), String> {
    let mut client = atomio_net::ClusterClient::connect_tcp(&[addr.to_string()])
        .await
        .map_err(|e| e.to_string())?;
    client
        .rpc_all(vec![(ServerId(0), Request::Ping { nonce: 0 })])
        .await
        .map_err(|e| e.to_string())?;
    let (c0, t0) = (own_cpu_ns()?, Instant::now());
    for nonce in 0..pings {
        client
            .rpc_all(vec![(ServerId(0), Request::Ping { nonce })])
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok((own_cpu_ns()? - c0, t0.elapsed().as_secs_f64() * 1e9))
}

/// What `atomio-lab sim call-client` does: client `rank` of the call scenario makes `calls`
/// atomic writes of `bytes` each (`workload::CALL_STRATEGY`, at `workload::call_offset`)
/// on the direct file at `path` (created if missing; the scenario's four clients share
/// it), locks at the server `addr`; `plain`: the same writes with no locks. Returns (this
/// process's CPU ns, wall ns) over them.
pub async fn call_client(
    addr: &str,
    path: &Path,
    rank: u32,
    calls: u64,
    bytes: u64,
    plain: bool,
) -> Result<(f64, f64), String> {
    let mut client = atomio_net::ClusterClient::connect_tcp(&[addr.to_string()])
        .await
        .map_err(|e| e.to_string())?;
    let direct = atomio_client::DirectData::open(path, true).map_err(|e| e.to_string())?;
    let mut file = atomio_client::File::direct(direct);
    if !plain {
        let strategy: atomio_client::Strategy = crate::workload::CALL_STRATEGY.parse()?;
        file.set_atomic(Some(strategy)).map_err(|e| e.to_string())?;
    }
    let bytes = bytes.clamp(1, atomio_client::file::DIRECT_LOCK_STRIPE);
    let data = vec![7u8; bytes as usize];
    let at = |k: u64| {
        Access::new(
            crate::workload::call_offset(rank, k, bytes),
            Pattern::bytes(bytes).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())
    };
    file.write(&mut client, &at(0)?, &data)
        .await
        .map_err(|e| e.to_string())?;
    let (c0, t0) = (own_cpu_ns()?, Instant::now());
    for k in 1..=calls {
        file.write(&mut client, &at(k)?, &data)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok((own_cpu_ns()? - c0, t0.elapsed().as_secs_f64() * 1e9))
}

/// Four processes at once, each making `calls` one-at-a-time calls of `what` (`ping-client`
/// or `call-client`) against its own server process: (client CPU, server CPU) per call.
async fn loaded(
    cfg: &CalibrateConfig,
    what: &str,
    extra: &[&str],
    calls: u64,
    samples: &mut Vec<Sample>,
) -> Result<(f64, f64), String> {
    let k = 4u32;
    // Four clusters of one server each: every client's server is its server 0.
    let mut servers = Vec::new();
    for i in 0..k {
        servers.push(
            atomio_net::LocalServers::start(
                &cfg.server_exe,
                1,
                &cfg.scratch.join(format!("{what}-{i}")),
            )
            .await
            .map_err(|e| format!("starting a server: {e}"))?,
        );
    }
    let addresses: Vec<String> = servers.iter().map(|s| s.addresses[0].clone()).collect();
    let result = async {
        let pids: Vec<u32> = servers
            .iter()
            .map(|s| s.pids()[0])
            .collect::<Option<_>>()
            .ok_or("a server exited")?;
        let before: Vec<f64> = pids.iter().map(|&p| cpu_of(p)).collect::<Result<_, _>>()?;
        let t0 = Instant::now();
        let mut children = Vec::new();
        // One file for the four (the call scenario's clients write one file, each its
        // own stripes, as the model runs it).
        let file = cfg.scratch.join(format!("{what}.dat"));
        let _ = std::fs::remove_file(&file);
        for (i, addr) in addresses.iter().enumerate() {
            children.push(
                tokio::process::Command::new(&cfg.server_exe)
                    .args(["sim", what, "--addr", addr, "--count"])
                    .arg(calls.to_string())
                    .arg("--file")
                    .arg(&file)
                    .args(["--rank", &i.to_string()])
                    .args(extra)
                    .stdout(std::process::Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| format!("starting a {what}: {e}"))?,
            );
        }
        let mut client_cpu = 0.0;
        for c in children {
            let out = c.wait_with_output().await.map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout);
            let v: serde_json::Value = serde_json::from_str(text.trim())
                .map_err(|e| format!("a {what} said '{text}': {e}"))?;
            client_cpu += v["cpu_ns"].as_f64().ok_or("no cpu_ns")?;
        }
        let wall = t0.elapsed().as_secs_f64() * 1e9;
        let mut server_cpu = 0.0;
        for (p, b) in pids.iter().zip(before) {
            server_cpu += cpu_of(*p)? - b;
        }
        let n = (calls * u64::from(k)) as f64;
        let label = if extra.is_empty() {
            String::new()
        } else {
            format!(" ({})", extra.join(" "))
        };
        let (c, s) = (client_cpu / n, server_cpu / n);
        sample(
            samples,
            &format!("4 {what} processes at once{label}: client CPU per call"),
            c,
            "ns",
        );
        sample(
            samples,
            &format!("4 {what} processes at once{label}: server CPU per call"),
            s,
            "ns",
        );
        sample(
            samples,
            &format!("4 {what} processes at once{label}: wall per call (all)"),
            wall / n,
            "ns",
        );
        Ok((c, s))
    }
    .await;
    for s in servers {
        s.stop().await;
    }
    result
}

/// Four ping-client processes, each pinging its own server process one at a time, all at
/// once: (client CPU, server CPU) per round trip.
async fn loaded_pings(
    cfg: &CalibrateConfig,
    samples: &mut Vec<Sample>,
) -> Result<(f64, f64), String> {
    let pings: u64 = if cfg.quick { 3_000 } else { 15_000 };
    loaded(cfg, "ping-client", &[], pings, samples).await
}

/// Times of the sans-IO lock work of one method, summed.
#[derive(Default, Debug)]
struct LockTimes {
    ops: f64,
    start_ns: f64,
    start_sends: f64,
    explicit: f64,
    replies: f64,
    reply_ns: f64,
    reply_sends: f64,
    acquires: f64,
    acquire_ns: f64,
    granted: f64,
    releases: f64,
    release_ns: f64,
}

/// Clients lock disjoint strided regions (one-try) on `servers` in-process servers, then
/// release; every call timed.
fn lock_run(method: Method, clients: u64, locks: u64, servers: u32) -> Result<LockTimes, String> {
    let layout = Layout::round_robin(65_536, servers, servers, 0).map_err(|e| e.to_string())?;
    let mut table: Vec<LockServer> = (0..servers)
        .map(|s| LockServer::with_id(ServerId(s)))
        .collect();
    let one = Pattern::bytes(1).map_err(|e| e.to_string())?;
    let pattern = Pattern::hvector(locks, 1, 64, &one).map_err(|e| e.to_string())?;
    let mut t = LockTimes::default();
    let mut out = Vec::new();
    for c in 0..clients {
        let access = Access::new(c * locks * 64, pattern.clone()).map_err(|e| e.to_string())?;
        let mut sends: Vec<Send> = Vec::new();
        let t0 = Instant::now();
        let subs = plan(&access, &layout, method);
        t.explicit += subs
            .iter()
            .map(|s| match &s.desc {
                atomio_proto::ValidDesc::Ranges(r) => r.len() as f64,
                _ => 0.0,
            })
            .sum::<f64>();
        let mut op = LockOp::new(FileId(1), LockMode::Write, Protocol::OneTry, subs);
        op.start(&mut sends);
        t.start_ns += t0.elapsed().as_nanos() as f64;
        t.ops += 1.0;
        t.start_sends += sends.len() as f64;
        let mut releasing = false;
        let mut queue: std::collections::VecDeque<Send> = sends.drain(..).collect();
        while let Some(s) = queue.pop_front() {
            out.clear();
            let is_release = matches!(s.request, Request::LockRelease { .. });
            let before = table[s.server.0 as usize].stats().ranges_granted;
            let t1 = Instant::now();
            table[s.server.0 as usize].handle(ClientId(c), u64::from(s.sub), s.request, &mut out);
            let dt = t1.elapsed().as_nanos() as f64;
            if is_release {
                t.releases += 1.0;
                t.release_ns += dt;
            } else {
                t.acquires += 1.0;
                t.acquire_ns += dt;
                t.granted += (table[s.server.0 as usize].stats().ranges_granted - before) as f64;
            }
            for o in out.drain(..) {
                let t2 = Instant::now();
                op.on_reply(o.tag as u32, o.reply, &mut sends);
                t.reply_ns += t2.elapsed().as_nanos() as f64;
                t.replies += 1.0;
                t.reply_sends += sends.len() as f64;
                queue.extend(sends.drain(..));
            }
            // Long grants and releases run in slices: the server's driver continues them.
            while queue.is_empty() {
                let Some(srv) = table.iter_mut().find(|t| t.has_work()) else {
                    break;
                };
                let before = srv.stats().ranges_granted;
                let t1 = Instant::now();
                srv.work(&mut out);
                t.acquire_ns += t1.elapsed().as_nanos() as f64;
                t.granted += (srv.stats().ranges_granted - before) as f64;
                for o in out.drain(..) {
                    let t2 = Instant::now();
                    op.on_reply(o.tag as u32, o.reply, &mut sends);
                    t.reply_ns += t2.elapsed().as_nanos() as f64;
                    t.replies += 1.0;
                    t.reply_sends += sends.len() as f64;
                    queue.extend(sends.drain(..));
                }
            }
            if queue.is_empty() && !releasing {
                if op.status() != atomio_lock::Status::Held {
                    return Err(format!("{method}: not held after every reply"));
                }
                releasing = true;
                op.release(&mut sends);
                queue.extend(sends.drain(..));
            }
        }
        if op.status() != atomio_lock::Status::Released {
            return Err(format!("{method}: not released"));
        }
    }
    Ok(t)
}

/// Least squares for y = a·x1 + b·x2 over rows (x1, x2, y); both clamped at ≥ 0.
fn fit2(rows: &[(f64, f64, f64)]) -> (f64, f64) {
    let (mut s11, mut s12, mut s22, mut s1y, mut s2y) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x1, x2, y) in rows {
        s11 += x1 * x1;
        s12 += x1 * x2;
        s22 += x2 * x2;
        s1y += x1 * y;
        s2y += x2 * y;
    }
    let det = s11 * s22 - s12 * s12;
    if det.abs() < 1e-9 {
        return ((s1y / s11.max(1e-9)).max(0.0), 0.0);
    }
    let a = (s1y * s22 - s2y * s12) / det;
    let b = (s11 * s2y - s12 * s1y) / det;
    match (a >= 0.0, b >= 0.0) {
        (true, true) => (a, b),
        (false, _) => (0.0, (s2y / s22.max(1e-9)).max(0.0)),
        (true, false) => ((s1y / s11.max(1e-9)).max(0.0), 0.0),
    }
}

/// Per-request, per-range, per-message lock costs from POSIX (one range per request),
/// list (64) and datatype (a pattern) runs: the list/POSIX difference gives an explicit
/// range's cost, the rest of a POSIX request is per request, and what a datatype request
/// costs beyond that is per pattern range.
pub fn measure_lock_work(quick: bool, samples: &mut Vec<Sample>) -> Result<LockCosts, String> {
    let (clients, locks, reps) = if quick { (8, 8_192, 3) } else { (8, 32_768, 5) };
    let mut fits: Vec<LockCosts> = Vec::new();
    for _ in 0..reps {
        let p = lock_run(Method::Posix, clients, locks, 4)?;
        let l = lock_run(Method::List { max_ranges: 64 }, clients, locks, 4)?;
        let d = lock_run(Method::Datatype, clients, locks, 4)?;
        let per_posix = p.acquire_ns / p.acquires.max(1.0);
        let per_list = l.acquire_ns / l.acquires.max(1.0);
        let list_ranges = l.granted / l.acquires.max(1.0);
        let list_range = ((per_list - per_posix) / (list_ranges - 1.0).max(1.0)).max(0.0);
        let request = (per_posix - list_range).max(0.0);
        let pattern_range = ((d.acquire_ns - d.acquires * request) / d.granted.max(1.0)).max(0.0);
        let release = (p.release_ns + l.release_ns) / (p.releases + l.releases).max(1.0);
        let reply =
            (p.reply_ns + l.reply_ns + d.reply_ns) / (p.replies + l.replies + d.replies).max(1.0);
        let (send, range) = fit2(&[
            (p.start_sends, p.explicit, p.start_ns),
            (l.start_sends, l.explicit, l.start_ns),
        ]);
        fits.push(LockCosts {
            client_call_curve: Vec::new(),
            client_op_ns: ((d.start_ns - d.start_sends * send) / d.ops.max(1.0)).max(0.0),
            client_send_ns: send,
            client_reply_ns: reply,
            client_range_ns: range,
            server_request_ns: request,
            server_list_range_ns: list_range,
            server_pattern_range_ns: pattern_range,
            server_checked_range_ns: 0.0,
            server_owner_check_ns: 0.0,
            server_release_ns: release,
            server_entry_release_ns: 0.0,
            server_decode_range_ns: 0.0,
        });
    }
    let m = |f: fn(&LockCosts) -> f64| median(fits.iter().map(f).collect());
    let (encode, decode) = wire_range_costs()?;
    let (mut checked, mut per_owner) = (Vec::new(), Vec::new());
    let mut entry = Vec::new();
    for _ in 0..reps {
        // Checked ranges as interleaved list writers make servers check them (in a shared
        // hull, range by range against the other owners: lists never leap there), 2, 4
        // and 8 writers sharing the hull (S3D's 4 and 8 clients share a lock stripe's
        // hull as many ways): per range checked and per other owner it was checked
        // against, fitted. Index entries as a server releases them where every
        // interleaved range is an entry of its own (a hull that has no room for another
        // owner is carved).
        let rows = [2, 4, 8]
            .into_iter()
            .map(|writers| {
                let (c, _, st) = interleaved_lock_run(
                    locks,
                    writers,
                    Method::List {
                        max_ranges: atomio_lock::DEFAULT_LIST_RANGES,
                    },
                    walks_every_range,
                )?;
                let n = st.ranges_checked as f64;
                Ok((n, st.owners_checked as f64, c * n))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let (range, owner) = fit2(&rows);
        let (_, e, _) = interleaved_lock_run(locks, 2, Method::Datatype, unshared)?;
        checked.push(range);
        per_owner.push(owner);
        entry.push(e);
    }
    // What a check adds to a list range's grant: the model charges the grant and its
    // share of the request beside each check.
    let list = atomio_lock::DEFAULT_LIST_RANGES as f64;
    let (checked, owner_check, entry) = (
        (median(checked) - m(|c| c.server_list_range_ns) - m(|c| c.server_request_ns) / list)
            .max(0.0),
        median(per_owner),
        median(entry),
    );
    let costs = LockCosts {
        client_call_curve: Vec::new(),
        client_op_ns: m(|c| c.client_op_ns),
        client_send_ns: m(|c| c.client_send_ns),
        client_reply_ns: m(|c| c.client_reply_ns),
        client_range_ns: m(|c| c.client_range_ns) + encode,
        server_request_ns: m(|c| c.server_request_ns),
        server_list_range_ns: m(|c| c.server_list_range_ns),
        server_pattern_range_ns: m(|c| c.server_pattern_range_ns),
        server_checked_range_ns: checked,
        server_owner_check_ns: owner_check,
        server_release_ns: m(|c| c.server_release_ns),
        server_entry_release_ns: entry,
        server_decode_range_ns: decode,
    };
    sample(samples, "frame encode per explicit range", encode, "ns");
    sample(samples, "frame decode per explicit range", decode, "ns");
    for (name, v) in [
        ("lock op setup (datatype plan + LockOp)", costs.client_op_ns),
        ("LockOp per request built", costs.client_send_ns),
        ("LockOp per reply", costs.client_reply_ns),
        ("plan per explicit range", m(|c| c.client_range_ns)),
        ("LockServer per acquire request", costs.server_request_ns),
        (
            "LockServer per explicit range granted",
            costs.server_list_range_ns,
        ),
        (
            "LockServer per pattern range granted",
            costs.server_pattern_range_ns,
        ),
        (
            "LockServer per range checked (interleaved with another's hull)",
            checked,
        ),
        (
            "LockServer per other owner a checked range was checked against",
            owner_check,
        ),
        ("LockServer per release", costs.server_release_ns),
        ("LockServer per index entry released", entry),
    ] {
        sample(samples, name, v, "ns");
    }
    Ok(costs)
}

/// Runs `queue` (and the sends the replies cause) through `server` for client `c`'s `op`,
/// with the slices a long grant or release continues in, until nothing is left; returns
/// the server's nanoseconds.
fn drive(server: &mut LockServer, c: u64, op: &mut LockOp, queue: Vec<Send>) -> f64 {
    let mut queue: std::collections::VecDeque<Send> = queue.into();
    let (mut out, mut sends, mut ns) = (Vec::new(), Vec::new(), 0.0);
    loop {
        if let Some(s) = queue.pop_front() {
            let t = Instant::now();
            server.handle(ClientId(c), u64::from(s.sub), s.request, &mut out);
            ns += t.elapsed().as_nanos() as f64;
        } else if server.has_work() {
            let t = Instant::now();
            server.work(&mut out);
            ns += t.elapsed().as_nanos() as f64;
        } else {
            return ns;
        }
        for o in out.drain(..).filter(|o| o.to == ClientId(c)) {
            op.on_reply(o.tag as u32, o.reply, &mut sends);
            queue.extend(sends.drain(..));
        }
    }
}

/// A lock server that grants range by range (no leap over a stretch nobody else holds):
/// every range of an interleaved writer is checked, so the time divides by checks, not by
/// the few a leaping server makes before it grants the rest at once. (Divided by those
/// ~18, a datatype request's whole cost read as 130–540 ns per check, against ~35 ns per
/// range checked and granted in a list walk, and the model charged it to every range of a
/// list: S3D's list rows were predicted at half to two thirds of their speed.)
fn walks_every_range(s: LockServer) -> LockServer {
    s.with_leap_after(u64::MAX)
}

/// A lock server whose hulls are never shared (every interleaved range is an entry of its
/// own) and that grants range by range.
fn unshared(s: LockServer) -> LockServer {
    s.with_hull_owner_limit(1).with_leap_after(u64::MAX)
}

/// Interleaved writers at one server: client 0 holds `locks` one-byte locks 64 bytes
/// apart (in `method`'s requests: one structured request, or lists), each of the other
/// `writers - 1` then locks the bytes `64 / writers` further on (2: halfway between them),
/// every range inside client 0's hull — it joins the hull and each range is checked
/// against client 0's description (or, their accesses being provably disjoint boxes, the
/// rest of the hull granted at once after a few) — then all release. `configure` sets the
/// server up (`unshared`: every later range carves client 0's hull, and each writer ends
/// with an entry per lock). Returns (server ns per range checked, per index entry released) and
/// the server's counters: the model charges what the counters count.
fn interleaved_lock_run(
    locks: u64,
    writers: u64,
    method: Method,
    configure: fn(LockServer) -> LockServer,
) -> Result<(f64, f64, atomio_lock::ServerStats), String> {
    let layout = Layout::round_robin(1 << 40, 1, 1, 0).map_err(|e| e.to_string())?;
    let mut server = configure(LockServer::with_id(ServerId(0)));
    let one = Pattern::bytes(1).map_err(|e| e.to_string())?;
    let pattern = Pattern::hvector(locks, 1, 64, &one).map_err(|e| e.to_string())?;
    let mut ops = Vec::new();
    let mut acquire_ns = Vec::new();
    for c in 0..writers {
        let base = c * 64 / writers;
        let access = Access::new(base, pattern.clone()).map_err(|e| e.to_string())?;
        let subs = plan(&access, &layout, method);
        let mut op = LockOp::new(FileId(1), LockMode::Write, Protocol::OneTry, subs);
        let mut sends = Vec::new();
        op.start(&mut sends);
        acquire_ns.push(drive(&mut server, c, &mut op, sends));
        if op.status() != atomio_lock::Status::Held {
            return Err(format!("interleaved client {c}: not held"));
        }
        ops.push(op);
    }
    let st = server.stats();
    if st.ranges_checked == 0 {
        return Err(format!("interleaved locks: none of {locks} ranges checked"));
    }
    // The later grants are all checked ranges (their messages' own cost is noise beside
    // them).
    let checked = acquire_ns[1..].iter().sum::<f64>() / st.ranges_checked as f64;
    let mut release_ns = 0.0;
    for (c, op) in ops.iter_mut().enumerate().rev() {
        let mut sends = Vec::new();
        op.release(&mut sends);
        release_ns += drive(&mut server, c as u64, op, sends);
        if op.status() != atomio_lock::Status::Released {
            return Err(format!("interleaved client {c}: not released"));
        }
    }
    let st = server.stats();
    Ok((checked, release_ns / st.entries_released.max(1) as f64, st))
}

/// Frame encoding and decoding of a lock request, per explicit range: (encode, decode).
fn wire_range_costs() -> Result<(f64, f64), String> {
    let req = |n: u64| Request::LockNew {
        file: FileId(1),
        mode: LockMode::Write,
        desc: atomio_proto::LockDesc::Ranges(
            (0..n)
                .map(|i| atomio_layout::ByteRange {
                    start: i * 4096,
                    end: i * 4096 + 1,
                })
                .collect(),
        ),
        wait: atomio_proto::Wait::NonBlocking,
    };
    let time = |n: u64| -> Result<(f64, f64), String> {
        let r = req(n);
        let mut buf = Vec::new();
        let reps = 20_000;
        let t0 = Instant::now();
        for _ in 0..reps {
            buf.clear();
            atomio_proto::frame::encode(&r, &mut buf).map_err(|e| e.to_string())?;
        }
        let enc = t0.elapsed().as_nanos() as f64 / f64::from(reps);
        let t1 = Instant::now();
        for _ in 0..reps {
            let _: Request = atomio_proto::frame::decode(&buf[4..]).map_err(|e| e.to_string())?;
        }
        let dec = t1.elapsed().as_nanos() as f64 / f64::from(reps);
        Ok((enc, dec))
    };
    let mut enc = Vec::new();
    let mut dec = Vec::new();
    for _ in 0..3 {
        let (e1, d1) = time(1)?;
        let (e64, d64) = time(64)?;
        enc.push(((e64 - e1) / 63.0).max(0.0));
        dec.push(((d64 - d1) / 63.0).max(0.0));
    }
    Ok((median(enc), median(dec)))
}

fn io_err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// ns per byte of `memcpy` of `bytes`-long buffers.
/// Round trips of one byte through two pipes between two threads pinned to cores
/// `(first, other)`, the machine otherwise idle: wall ns per round trip.
fn pinned_ping_pong_ns(first: usize, other: usize, round_trips: u32) -> Result<f64, String> {
    use nix::sched::{sched_setaffinity, CpuSet};
    use std::io::{Read, Write};
    let pin = |core: usize| -> Result<(), String> {
        let mut set = CpuSet::new();
        set.set(core).map_err(|e| format!("core {core}: {e}"))?;
        // This thread (pid 0: the caller).
        sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .map_err(|e| format!("pinning to core {core}: {e}"))
    };
    let io = |e: std::io::Error| format!("pipe: {e}");
    let me = nix::unistd::Pid::from_raw(0);
    let before = nix::sched::sched_getaffinity(me).map_err(|e| format!("affinity: {e}"))?;
    let (mut to_r, mut to_w) = std::io::pipe().map_err(io)?;
    let (mut back_r, mut back_w) = std::io::pipe().map_err(io)?;
    let warm = 200;
    let echo = std::thread::spawn(move || -> Result<(), String> {
        pin(other)?;
        let mut b = [0u8; 1];
        for _ in 0..warm + round_trips {
            to_r.read_exact(&mut b).map_err(io)?;
            back_w.write_all(&b).map_err(io)?;
        }
        Ok(())
    });
    let ours = (|| -> Result<f64, String> {
        pin(first)?;
        let mut b = [0u8; 1];
        let mut t0 = Instant::now();
        for k in 0..warm + round_trips {
            if k == warm {
                t0 = Instant::now();
            }
            to_w.write_all(&b).map_err(io)?;
            back_r.read_exact(&mut b).map_err(io)?;
        }
        Ok(t0.elapsed().as_nanos() as f64 / f64::from(round_trips))
    })();
    // Unpinned again: what runs after this measurement may use every core it could.
    let _ = sched_setaffinity(me, &before);
    // If we failed, the echo thread may wait on its pipe: closing ours ends it.
    drop(to_w);
    drop(back_r);
    let echoed = echo
        .join()
        .map_err(|_| "the echo thread panicked".to_string())?;
    let ns = ours?;
    echoed?;
    Ok(ns)
}

/// The kernel's default `sched_migration_cost` (500 µs): a task that ran more recently
/// is cache-hot, and a core running out of work leaves it on its queue. The live value is
/// in debugfs (`sched/migration_cost_ns`), read when allowed.
pub const MIGRATION_COST_NS: f64 = 500_000.0;

/// The live `sched_migration_cost` if debugfs lets us read it, else the kernel's default.
fn migration_cost(samples: &mut Vec<Sample>) -> f64 {
    let live = std::fs::read_to_string("/sys/kernel/debug/sched/migration_cost_ns")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok());
    let ns = live.unwrap_or(MIGRATION_COST_NS);
    sample(
        samples,
        if live.is_some() {
            "sched_migration_cost (debugfs)"
        } else {
            "sched_migration_cost (not readable: the kernel's default)"
        },
        ns,
        "ns",
    );
    ns
}

/// The scheduler tick: jiffies (`/proc/timer_list`) counted over a quarter second, and
/// snapped to the nearest `CONFIG_HZ` kernels build with. 0 when the jiffies cannot be
/// read (not root): the model then keeps one shared run queue, as before it knew ticks.
pub fn measure_tick(samples: &mut Vec<Sample>) -> f64 {
    let jiffies = || -> Option<u64> {
        let text = std::fs::read_to_string("/proc/timer_list").ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("jiffies:"))
            .and_then(|v| v.trim().parse().ok())
    };
    let t0 = Instant::now();
    let Some(j0) = jiffies() else {
        sample(samples, "scheduler tick (jiffies not readable)", 0.0, "ns");
        return 0.0;
    };
    std::thread::sleep(std::time::Duration::from_millis(250));
    let Some(j1) = jiffies() else {
        return 0.0;
    };
    let hz = (j1.saturating_sub(j0)) as f64 / t0.elapsed().as_secs_f64();
    sample(samples, "jiffies per second", hz, "Hz");
    let snapped = [100.0, 250.0, 300.0, 1000.0]
        .into_iter()
        .min_by(|a: &f64, b: &f64| (a - hz).abs().total_cmp(&(b - hz).abs()))
        .unwrap_or(250.0);
    1e9 / snapped
}

/// How long an idle core takes to start a woken thread: a ping-pong between two cores
/// (each wake-up finds the other core idle) against the same on one core (each wake-up
/// finds the core busy with its waker, which then blocks: a switch, no wake). Half the
/// difference per round trip: ~20 µs on a VM whose halted virtual CPUs are woken through
/// the host. One core allowed: 0.
pub fn measure_wake(reps: usize, samples: &mut Vec<Sample>) -> Result<f64, String> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let set =
        sched_getaffinity(nix::unistd::Pid::from_raw(0)).map_err(|e| format!("affinity: {e}"))?;
    let allowed: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect();
    let [a, b, ..] = allowed[..] else {
        return Ok(0.0);
    };
    let (mut cross, mut same) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        cross.push(pinned_ping_pong_ns(a, b, 5_000)?);
        same.push(pinned_ping_pong_ns(a, a, 5_000)?);
    }
    let (cross, same) = (median(cross), median(same));
    sample(
        samples,
        "pipe ping-pong between two idle cores, per round trip",
        cross,
        "ns",
    );
    sample(
        samples,
        "pipe ping-pong on one core, per round trip",
        same,
        "ns",
    );
    Ok(((cross - same) / 2.0).max(0.0))
}

fn memcpy_ns(bytes: usize) -> f64 {
    let src = vec![7u8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.copy_from_slice(&src);
    let reps = 4;
    let t0 = Instant::now();
    for i in 0..reps {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst[i]);
    }
    t0.elapsed().as_nanos() as f64 / (reps * bytes) as f64
}

/// How long `writers` threads at once take to `pwrite` `per` bytes each in `size`-byte calls
/// into a fresh file at `path`: thread `t`'s call `k` at `(k · of + t) · (size − overlap)`,
/// `of` interleaved writers in all (as IOR's strided writers; `of` = 1: one contiguous
/// writer), each piece sharing its last `overlap` bytes with the next one (a tile's ghost
/// cells). Each writes from its own buffer of `per` bytes, filled before the clock starts,
/// as a client writes its own data, not a block the cache keeps hot.
fn pwrite_secs(
    path: &Path,
    per: u64,
    size: u64,
    (writers, of): (u64, u64),
    overlap: u64,
) -> Result<Timed, String> {
    use std::os::unix::fs::FileExt;
    let _ = std::fs::remove_file(path);
    let file = std::fs::File::create(path).map_err(|e| io_err("create", e))?;
    let calls = per / size;
    let mut bufs: Vec<Vec<u8>> = (0..writers)
        .map(|t| vec![0x5a ^ t as u8; (calls * size) as usize])
        .collect();
    let secs = together(&mut bufs, |t, buf| {
        for k in 0..calls {
            let at = (k * size) as usize;
            let off = (k * of + t as u64) * (size - overlap);
            file.write_all_at(&buf[at..at + size as usize], off)
                .map_err(|e| io_err("pwrite", e))?;
        }
        Ok(())
    })?;
    drop(file);
    let _ = std::fs::remove_file(path);
    Ok(secs)
}

/// `calls` `pwrite`s of `size` bytes into a fresh file, in order, each timed: the geometric
/// mean of their times (ns) and the standard deviation of their logs.
fn pwrite_spread(path: &Path, calls: u64, size: u64) -> Result<(f64, f64), String> {
    use std::os::unix::fs::FileExt;
    let _ = std::fs::remove_file(path);
    let file = std::fs::File::create(path).map_err(|e| io_err("create", e))?;
    let buf = vec![0x5au8; size as usize];
    let mut logs = Vec::with_capacity(calls as usize);
    for k in 0..calls {
        let t = Instant::now();
        file.write_all_at(&buf, k * size)
            .map_err(|e| io_err("pwrite", e))?;
        logs.push((t.elapsed().as_nanos().max(1) as f64).ln());
    }
    drop(file);
    let _ = std::fs::remove_file(path);
    let n = logs.len().max(1) as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let sigma = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n).sqrt();
    Ok((mean.exp(), sigma))
}

/// A run of writers at once: its wall seconds, and this process's CPU over them (the
/// calibration's other threads are idle then).
#[derive(Clone, Copy, Debug)]
struct Timed {
    secs: f64,
    cpu_secs: f64,
}

impl Timed {
    /// CPU beyond one core per second of the run: what writers waiting for one file burn
    /// (the inode lock's waiters spin while its owner runs) on top of the writes.
    fn spin(&self) -> f64 {
        (self.cpu_secs / self.secs.max(1e-12) - 1.0).max(0.0)
    }
}

/// One thread per item runs `work(index, item)`, started together (a barrier), until the
/// last returns: the wall seconds and the process's CPU.
fn together<T: std::marker::Send>(
    items: &mut [T],
    work: impl Fn(usize, &mut T) -> Result<(), String> + Sync,
) -> Result<Timed, String> {
    let start = std::sync::Barrier::new(items.len() + 1);
    std::thread::scope(|s| -> Result<Timed, String> {
        let hs: Vec<_> = items
            .iter_mut()
            .enumerate()
            .map(|(i, item)| {
                let (start, work) = (&start, &work);
                s.spawn(move || {
                    start.wait();
                    work(i, item)
                })
            })
            .collect();
        start.wait();
        let (t0, c0) = (Instant::now(), own_cpu_ns()?);
        for h in hs {
            h.join()
                .map_err(|_| "a writer thread panicked".to_string())??;
        }
        Ok(Timed {
            secs: t0.elapsed().as_secs_f64(),
            cpu_secs: (own_cpu_ns()? - c0) / 1e9,
        })
    })
}

/// How long `writers` threads at once take to write their shares of interleavings through
/// the product's direct-file path (strategy `none`, each its own `File` on one fresh file,
/// one call each, from its own buffer). Writers go in groups of `of`: member `m`'s pieces of
/// `piece` bytes at `(k · of + m) · piece` in its group's bytes, so that a group shares
/// pages (S3D's rows: neighbours along x). With more than one group and `count` a multiple
/// of `SPAN_PIECES`, the groups' bytes alternate in spans (S3D's half planes along y, a
/// strided view's ranks: every writer touches every large folio, and each fault, `page_mkwrite`
/// and unmap of a folio is paid once per writer); else each group has a region of its own.
fn mapped_secs(
    path: &Path,
    count: u64,
    piece: u64,
    writers: u64,
    of: u64,
) -> Result<Timed, String> {
    let _ = std::fs::remove_file(path);
    let one = Pattern::bytes(1).map_err(|e| e.to_string())?;
    let e = |e: atomio_layout::LayoutError| e.to_string();
    let groups = writers.div_ceil(of);
    let (pattern, region) = if groups > 1 && count.is_multiple_of(SPAN_PIECES) {
        // Groups take turns by spans of `SPAN_PIECES` of their pieces: every large folio
        // is written by every writer, as S3D's and a strided view's are.
        let run = Pattern::hvector(SPAN_PIECES, piece, of * piece, &one).map_err(e)?;
        let span = SPAN_PIECES * of * piece;
        let p = Pattern::hvector(count / SPAN_PIECES, 1, groups * span, &run).map_err(e)?;
        (p, span)
    } else {
        let p = Pattern::hvector(count, piece, of * piece, &one).map_err(e)?;
        (p, (count * of * piece).next_multiple_of(4096))
    };
    let mut files = Vec::new();
    for t in 0..writers {
        let direct = atomio_client::DirectData::open(path, true).map_err(|e| e.to_string())?;
        let mut file = atomio_client::File::direct(direct);
        file.set_atomic(Some(atomio_client::Strategy::none()))
            .map_err(|e| e.to_string())?;
        let base = t / of * region + t % of * piece;
        let access = Access::new(base, pattern.clone()).map_err(|e| e.to_string())?;
        let data = vec![0x33 ^ t as u8; access.size() as usize];
        files.push((file, access, data));
    }
    let secs = together(&mut files, |_, (file, access, data)| {
        file.write_local(access, data).map_err(|e| e.to_string())
    })?;
    drop(files);
    let _ = std::fs::remove_file(path);
    Ok(secs)
}

/// Pieces of one writer in a row before the next group's (S3D's 48 rows of a client's
/// half plane: a 36 KiB span for a pair of 384-byte pieces).
const SPAN_PIECES: u64 = 48;

/// Writers measured at once into one file (the contention curves): as many as the client
/// processes of the benchmarks the model is checked against (4 and 8), and 2.
const CONTENDERS: [u64; 3] = [2, 4, 8];

/// The median over `reps` of `together()` (writers at once) over `alone()` (the same
/// calls as the model charges them for a writer alone), the median `together()` seconds,
/// and the median of their spins (`Timed::spin`).
fn contention_factor(
    reps: usize,
    mut together: impl FnMut() -> Result<Timed, String>,
    mut alone: impl FnMut() -> Result<Timed, String>,
) -> Result<(f64, f64, f64), String> {
    let (mut f, mut t, mut spin) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let run = together()?;
        f.push(run.secs / alone()?.secs.max(1e-12));
        t.push(run.secs);
        spin.push(run.spin());
    }
    Ok((median(f), median(t), median(spin)))
}

/// The data path's terms (`IoCosts`), measured in `scratch`; raw figures go to `samples`.
pub fn measure_io(
    scratch: &Path,
    quick: bool,
    samples: &mut Vec<Sample>,
) -> Result<IoCosts, String> {
    let total: u64 = if quick { 32 << 20 } else { 128 << 20 };
    let reps = if quick { 3 } else { 5 };
    let memcpy = median((0..reps).map(|_| memcpy_ns(64 << 20)).collect());
    sample(samples, "memcpy of 64 MiB, per byte", memcpy, "ns");
    let path = scratch.join("calibrate-pwrite.dat");
    // Per call at sizes from a page to 4 MiB (no line fits them all: small writes pay
    // per call, large ones per byte, with a knee in between).
    // The sizes take turns, rep by rep: a slow spell of the machine (one put 128 KiB at 54 µs
    // between neighbours at 28) then costs each size one rep, which the median drops,
    // instead of every rep of one size.
    const SIZES: [u64; 6] = [4_096, 16_384, 47_008, 131_072, 1 << 20, 4 << 20];
    let mut secs_by_size = vec![Vec::new(); SIZES.len()];
    for _ in 0..reps {
        for (i, &size) in SIZES.iter().enumerate() {
            secs_by_size[i].push(pwrite_secs(&path, total, size, (1, 1), 0)?.secs);
        }
    }
    let mut curve = Vec::new();
    for (size, secs) in SIZES.into_iter().zip(secs_by_size) {
        let secs = median(secs);
        let per_call = secs * 1e9 / (total / size) as f64;
        sample(
            samples,
            &format!("pwrite of {size} B into a fresh file, per call"),
            per_call,
            "ns",
        );
        curve.push([size as f64, per_call]);
    }
    // One writer's seconds for the same bytes in 1 MiB calls: the curve's point.
    let one = curve
        .iter()
        .find(|p| p[0] == f64::from(1 << 20))
        .map_or(0.0, |p| p[1] * (total >> 20) as f64 / 1e9);
    let two = median(
        (0..reps)
            .map(|_| pwrite_secs(&path, total / 2, 1 << 20, (2, 2), 0).map(|r| r.secs))
            .collect::<Result<Vec<_>, _>>()?,
    );
    let speedup = one / two.max(1e-9);
    sample(
        samples,
        "pwrite of 1 MiB calls, two threads into one file: speedup over one",
        speedup,
        "x",
    );
    // Writers at once into one file, each its interleaved share from its own buffer, at
    // the workloads' piece sizes (IO500's 47,008 B; a tile row's 128 KiB): what the inode
    // lock's handoffs (a sleep and a wake-up once writers outnumber cores) and the shared
    // caches cost beyond each writer's own calls.
    let (mut pwrite_interleaved, mut pwrite_spin) = (Vec::new(), Vec::new());
    for k in CONTENDERS {
        let (mut f, mut spins) = (Vec::new(), Vec::new());
        for size in [47_008u64, 131_072] {
            // Alone, the model charges the calls the curve's (one writer, in order).
            let (factor, secs, spin) = contention_factor(
                reps,
                || pwrite_secs(&path, total / k, size, (k, k), 0),
                || pwrite_secs(&path, total, size, (1, 1), 0),
            )?;
            sample(
                samples,
                &format!("pwrite of {size} B, {k} writers interleaved in one file"),
                total as f64 / secs / f64::from(1 << 20),
                "MiB/s",
            );
            f.push(factor);
            spins.push(spin);
        }
        let factor = f.iter().sum::<f64>() / f.len() as f64;
        sample(
            samples,
            &format!("pwrite, {k} writers interleaved in one file: time over one writer's"),
            factor,
            "x",
        );
        pwrite_interleaved.push([k as f64, factor]);
        let spin = spins.iter().sum::<f64>() / spins.len() as f64;
        sample(
            samples,
            &format!(
                "pwrite, {k} writers interleaved in one file: CPU beyond one core, per second"
            ),
            spin,
            "s/s",
        );
        pwrite_spin.push([k as f64, spin]);
    }
    // Neighbours whose pieces overlap (a tile's ghost cells, written by both): four
    // writers of 128 KiB pieces, each sharing its last eighth (page-aligned) with the next
    // writer's, against the same writers without overlap.
    let pwrite_shared = {
        let (size, k) = (131_072u64, 4u64);
        let overlap = size / 8;
        // A ratio of two runs of ~50 ms each: at five pairs, one calibration in five read
        // 1.39× where the others read 1.11–1.19×, and put every tile row at −30 %.
        let (factor, _, _) = contention_factor(
            if quick { reps } else { 15 },
            || pwrite_secs(&path, total / k, size, (k, k), overlap),
            || pwrite_secs(&path, total / k, size, (k, k), 0),
        )?;
        // Writers per page written: every page is written once, the overlaps twice.
        let calls = total / k / size * k;
        let span = (calls - 1) * (size - overlap) + size;
        let sharing = (calls * size) as f64 / span as f64;
        sample(
            samples,
            &format!("pwrite, 4 writers whose pieces share 1/8 ({sharing:.3} writers per page): time over none shared"),
            factor,
            "x",
        );
        [sharing, factor]
    };
    // The product's direct-file call path around a write (strategy `none`): per call
    // beyond its `pwrite`.
    let direct_call = {
        let _ = std::fs::remove_file(&path);
        let direct = atomio_client::DirectData::open(&path, true).map_err(|e| e.to_string())?;
        let mut file = atomio_client::File::direct(direct);
        file.set_atomic(Some(atomio_client::Strategy::none()))
            .map_err(|e| e.to_string())?;
        let n = 20_000u64;
        let data = [1u8; 8];
        let t0 = Instant::now();
        for k in 0..n {
            let a = Access::new(k * 4096, Pattern::bytes(8).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            file.write_local(&a, &data).map_err(|e| e.to_string())?;
        }
        let per = t0.elapsed().as_nanos() as f64 / n as f64;
        drop(file);
        let _ = std::fs::remove_file(&path);
        sample(
            samples,
            "direct write_local of 8 bytes (strategy none), per call",
            per,
            "ns",
        );
        let raw = median(
            (0..reps)
                .map(|_| pwrite_secs(&path, 20_000 * 4096, 4096, (1, 1), 0).map(|r| r.secs))
                .collect::<Result<Vec<_>, _>>()?,
        ) * 1e9
            / 20_000.0;
        (per - raw).max(0.0)
    };
    // Copies through a mapping: the same bytes in pieces dense (half the hull) and sparse
    // (an eighth), so the pages touched differ and the bytes do not.
    let piece = 384u64;
    let count = total / 4 / piece;
    let mapped = |of: u64| -> Result<(f64, f64), String> {
        let hull_pages = ((count - 1) * of * piece + piece).div_ceil(4096) as f64;
        let secs = median(
            (0..reps)
                .map(|_| mapped_secs(&path, count, piece, 1, of).map(|r| r.secs))
                .collect::<Result<Vec<_>, _>>()?,
        );
        Ok((hull_pages, secs * 1e9))
    };
    let (pages_dense, ns_dense) = mapped(2)?;
    let (pages_sparse, ns_sparse) = mapped(8)?;
    let bytes = (count * piece) as f64;
    let (page, per_byte) = fit2(&[
        (pages_dense, bytes, ns_dense),
        (pages_sparse, bytes, ns_sparse),
    ]);
    sample(
        samples,
        "mapped copy, dense pieces: ns per call",
        ns_dense,
        "ns",
    );
    sample(
        samples,
        "mapped copy, sparse pieces: ns per call",
        ns_sparse,
        "ns",
    );
    // Writers at once through the mapping, 384-byte pieces (S3D's rows of 48 doubles),
    // in pairs whose pieces interleave so that the two share every page (S3D's and the
    // tiles' neighbours share pages pairwise, whatever the client count), the pairs taking
    // turns by 36 KiB spans so that every writer touches every large folio (S3D's clients
    // do: at 4, 216 of 216 (client, folio) pairs; pairs in regions of their own touched
    // half as many per writer, and the model charged S3D 0.5–0.8× its CPU per byte).
    // Each run is some tens of ms and runs minutes apart differ by a third: more of
    // them than elsewhere (the S3D rows hang on these figures).
    let (mut mmap_shared, mut mmap_spin) = (Vec::new(), Vec::new());
    for k in CONTENDERS {
        let count = (total / 2 / k / piece).next_multiple_of(SPAN_PIECES);
        let runs = (0..if quick { reps } else { 11 })
            .map(|_| mapped_secs(&path, count, piece, k, 2))
            .collect::<Result<Vec<_>, _>>()?;
        let secs = median(runs.iter().map(|r| r.secs).collect());
        let spin = median(runs.iter().map(Timed::spin).collect());
        let bytes = (k * count * piece) as f64;
        sample(
            samples,
            &format!("mapped copies, {k} writers interleaved in one file"),
            bytes / secs / f64::from(1 << 20),
            "MiB/s",
        );
        sample(
            samples,
            &format!("mapped copies, {k} writers interleaved in one file: CPU beyond one core, per second"),
            spin,
            "s/s",
        );
        mmap_shared.push([k as f64, secs * 1e9 / bytes]);
        mmap_spin.push([k as f64, spin]);
    }
    // How much one writer's calls of one size differ, call by call.
    let spreads = [4_096u64, 47_008, 131_072]
        .into_iter()
        .map(|size| {
            let (mean, sigma) = pwrite_spread(&path, if quick { 500 } else { 2_000 }, size)?;
            sample(
                samples,
                &format!("pwrite of {size} B, one writer: log-σ of a call's time"),
                sigma,
                "",
            );
            Ok((mean, sigma))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let spread = median(spreads.iter().map(|s| s.1).collect());
    let spread_ns = median(spreads.iter().map(|s| s.0).collect());
    Ok(IoCosts {
        memcpy_byte_ns: memcpy,
        pwrite_curve: curve,
        pwrite_interleaved,
        pwrite_spin,
        pwrite_shared,
        direct_call_ns: direct_call,
        pwrite_parallel_speedup: speedup,
        pwrite_serialized: speedup < 1.3,
        mmap_page_ns: page,
        mmap_byte_ns: per_byte,
        mmap_shared_byte_ns: mmap_shared,
        mmap_spin,
        cost_spread: spread,
        cost_spread_ns: spread_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tick_is_a_kernel_hz_or_unmeasured() {
        let mut s = Vec::new();
        let tick = measure_tick(&mut s);
        // Root reads jiffies; anyone else gets 0 (one shared run queue in the model).
        let hz_ticks = [1e9 / 100.0, 1e9 / 250.0, 1e9 / 300.0, 1e9 / 1000.0];
        assert!(tick == 0.0 || hz_ticks.contains(&tick), "tick {tick} ns");
        assert!(!s.is_empty(), "the measurement is recorded");
        let mut s = Vec::new();
        let m = migration_cost(&mut s);
        assert!(m > 0.0 && s.len() == 1);
    }

    #[test]
    fn the_model_charges_the_call_scenario_what_calibration_measured() {
        let mut costs = Costs::for_tests();
        let model = |costs: &Costs, bytes, plain| {
            let r = crate::workload::call_scenario(costs, 200, bytes, plain).unwrap();
            r.cpu_seconds * 1e9 / r.calls as f64
        };
        for bytes in [8, 47_008] {
            // Measured: atomic calls 90 µs CPU per call above the same writes without
            // locks (above what the test costs' messages and locks charge alone).
            let locked = 90_000.0;
            let (term, bare) = call_path_term(&mut costs, bytes, locked).unwrap();
            assert!(term > 0.0, "{bytes} B: term {term}");
            assert_eq!(costs.lock.client_call_curve, vec![[bytes as f64, term]]);
            assert!(bare < model(&costs, bytes, false));
            let more = model(&costs, bytes, false) - model(&costs, bytes, true);
            assert!(
                (more - locked).abs() < 0.02 * locked,
                "{bytes} B: the model's atomic calls cost {more:.0} ns more, measured {locked}"
            );
            // Plain calls never pay the term.
            let plain = model(&costs, bytes, true);
            costs.lock.client_call_curve.clear();
            assert_eq!(model(&costs, bytes, true), plain);
            // Locks cheaper than the model's messages alone leave no negative term.
            let (term, _) = call_path_term(&mut costs, bytes, 1.0).unwrap();
            assert_eq!(term, 0.0);
        }
    }

    #[test]
    fn an_idle_core_wake_is_half_the_cross_core_ping_pong_beyond_the_same_core_one() {
        let before = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
        let mut s = Vec::new();
        let wake = measure_wake(1, &mut s).unwrap();
        let got = |name: &str| s.iter().find(|x| x.name.contains(name)).map(|x| x.value);
        match (got("two idle cores"), got("on one core")) {
            (Some(cross), Some(same)) => {
                assert!(cross > 0.0 && same > 0.0, "{cross} {same}");
                assert_eq!(wake, ((cross - same) / 2.0).max(0.0));
            }
            // One core: nothing to wake, nothing measured.
            _ => assert_eq!(wake, 0.0),
        }
        // The pinning is undone: whatever runs next may use every core it could before.
        let me = nix::unistd::Pid::from_raw(0);
        assert_eq!(nix::sched::sched_getaffinity(me).unwrap(), before);
    }

    #[test]
    fn least_squares_recovers_a_line_and_never_goes_negative() {
        let rows: Vec<_> = [1.0, 10.0, 100.0]
            .iter()
            .map(|&x| (1.0, x, 500.0 + 3.0 * x))
            .collect();
        let (a, b) = fit2(&rows);
        assert!(
            (a - 500.0).abs() < 1e-6 && (b - 3.0).abs() < 1e-6,
            "{a} {b}"
        );
        let (a, b) = fit2(&[(1.0, 1.0, 10.0), (1.0, 2.0, 5.0)]);
        assert!(a >= 0.0 && b >= 0.0);
    }

    #[test]
    fn interleaved_writers_share_a_hull_and_are_checked_range_by_range() {
        // Range by range: the second request's every range lies in the first's hull, which
        // it joins; every range is checked, and the releases remove three entries (the
        // shared hull as each owner's, and the second's own hull for its last lock).
        let (checked, entry, st) =
            interleaved_lock_run(1_000, 2, Method::Datatype, walks_every_range).unwrap();
        assert_eq!(st.ranges_checked, 1_000);
        assert_eq!(st.ranges_granted, 2_000);
        assert_eq!(st.entries_released, 3);
        assert!(checked > 0.0 && entry > 0.0);
        // As servers run: the accesses are disjoint boxes, so after a few ranges the rest
        // of the hull is granted at once.
        let (_, _, st) = interleaved_lock_run(1_000, 2, Method::Datatype, |s| s).unwrap();
        assert!(st.ranges_checked > 0 && st.ranges_checked < 100, "{st:?}");
        // Unshared, every range carves the hull: both end with one entry per lock.
        let (_, _, st) = interleaved_lock_run(1_000, 2, Method::Datatype, unshared).unwrap();
        assert_eq!(st.ranges_checked, 1_000);
        assert_eq!(st.entries_released, 2_000);
        // Lists (what the checked-range cost is measured with): no box proof, so every
        // range of the second writer is checked against the first's, leap or not.
        let list = Method::List {
            max_ranges: atomio_lock::DEFAULT_LIST_RANGES,
        };
        for cfg in [walks_every_range, |s| s] {
            let (_, _, st) = interleaved_lock_run(1_000, 2, list, cfg).unwrap();
            assert!(st.ranges_checked >= 1_000, "{st:?}");
            // Walked in the shared hull against the one other owner, all but the first
            // of each list request (checked before it joins the hull).
            assert!(st.owners_checked <= st.ranges_checked, "{st:?}");
            assert!(st.owners_checked * 10 >= st.ranges_checked * 9, "{st:?}");
            // Four writers: the three after the first check every range, against one,
            // two and three other owners.
            let (_, _, st) = interleaved_lock_run(1_000, 4, list, cfg).unwrap();
            assert!(st.ranges_checked >= 3_000, "{st:?}");
            assert!(st.owners_checked >= 5_000, "{st:?}");
        }
    }

    #[test]
    fn lock_work_is_measured_for_every_method() {
        let mut s = Vec::new();
        for m in [
            Method::Posix,
            Method::List { max_ranges: 64 },
            Method::Datatype,
        ] {
            // 2 × 4096 locks: slices of the servers' work included. A request of many
            // ranges nobody is near is granted range by range for a few, then at once (a
            // leap counts as one): the counters count what the server did.
            let t = lock_run(m, 2, 4096, 2).unwrap();
            match m {
                Method::Posix => assert_eq!(t.granted, 8192.0, "{m}"),
                _ => assert!(t.granted > 0.0 && t.granted < 8192.0, "{m}: {}", t.granted),
            }
            assert!(t.acquire_ns > 0.0 && t.releases > 0.0, "{m}");
        }
        let c = measure_lock_work(true, &mut s).unwrap();
        assert!(
            c.server_pattern_range_ns > 0.0 && c.server_pattern_range_ns < 10_000.0,
            "{c:?}"
        );
        assert!(c.server_request_ns > 0.0, "{c:?}");
        assert!(s.iter().any(|x| x.name.contains("pattern range granted")));
    }
}
