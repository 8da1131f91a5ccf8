//! `atomio-lab sim calibrate | validate | --scale`: the calibrated scale model.

use anyhow::{anyhow, Context};
use atomio_scale::calibrate::CalibrateConfig;
use atomio_scale::Costs;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct CalibrateArgs {
    /// Where to write the cost file.
    #[arg(long, default_value = "out/calib.json")]
    json: PathBuf,
    /// Fewer repetitions and smaller sizes (a few seconds; for trying things out).
    #[arg(long)]
    quick: bool,
    /// Scratch directory (a server's data, files written and removed).
    #[arg(long)]
    scratch: Option<PathBuf>,
    /// Seconds to wait for the machine to be quiet (other work busy below 0.15 cores)
    /// before measuring; 0: measure at once (the load is still recorded).
    #[arg(long, default_value_t = 300)]
    patience: u64,
    /// Calibrations to take the figure-by-figure median of (a machine's speed can
    /// drift between minutes: one calibration's draw moved single figures by 20–40 %).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=25))]
    rounds: u32,
}

#[derive(Args)]
pub struct ValidateArgs {
    /// The cost file (`atomio-lab sim calibrate`).
    #[arg(long, default_value = "out/calib.json")]
    costs: PathBuf,
    /// Client counts (the lock benchmark uses as many servers; workloads use `--servers`).
    #[arg(long, value_delimiter = ',', default_value = "4,8")]
    clients: Vec<u32>,
    /// Servers for the workload benchmarks.
    #[arg(long, default_value_t = 4)]
    servers: u32,
    /// Runs of each real benchmark row (the median is compared).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Invocations of each real benchmark (`bench locks` and each workload's), taken in
    /// turn over the groups so that they are minutes apart; the median invocation's figure
    /// is compared (a machine's speed can drift between minutes: one invocation moved S3D's
    /// rows by 30 %, another `bench locks`' list one-try by 35 %).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=25))]
    rounds: u32,
    /// One-byte locks per client in the lock benchmark's POSIX rows (a request per lock:
    /// two-phase pays a round trip per lock, ~0.3 s a run at 8 Ki).
    #[arg(long, default_value_t = 8192)]
    locks: u64,
    /// One-byte locks per client in its list and datatype rows: Ching §6.1's 128 Ki (at
    /// 8 Ki a run of those lasts 0.05–3 ms, a burst the start of the clients decides:
    /// list one-try measured 13.6–23.9 M locks/s from one invocation to the next).
    #[arg(long, default_value_t = 131_072)]
    range_locks: u64,
    /// Groups of rows: locks, ior-hard, tile, s3d.
    #[arg(long, value_delimiter = ',', default_value = "locks,ior-hard,tile,s3d")]
    groups: Vec<String>,
    /// Write every row (predicted, measured, error) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Only the model's predictions (no real benchmark).
    #[arg(long)]
    predict_only: bool,
    /// Seconds to wait for the machine to be quiet before each real benchmark.
    #[arg(long, default_value_t = 300)]
    patience: u64,
    /// Measure the data path's terms again (`pwrite`s, mapped copies) right before each
    /// workload benchmark and predict its rows with them: a machine's speed can drift
    /// 10–25 % between minutes, and the workloads' rows follow their data path's.
    #[arg(long)]
    io_beside: bool,
}

#[derive(Args)]
pub struct ScaleArgs {
    /// With `--scale`: the cost file (`atomio-lab sim calibrate`).
    #[arg(long = "costs", default_value = "out/calib.json")]
    scale_costs: PathBuf,
    /// With `--scale`: the most clients (curves go 1, 2, 4, … up to it).
    #[arg(long, default_value_t = 4096)]
    max_clients: u32,
    /// With `--scale`: the most servers (clients = servers up to it, then fixed).
    #[arg(long, default_value_t = 64)]
    max_servers: u32,
    /// With `--scale`: small sizes (seconds; for trying things out, not for figures).
    #[arg(long)]
    quick: bool,
    /// With `--scale`: studies to run (ching-locks, s3d, ior-hard, tile).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ching-locks,s3d,ior-hard,tile"
    )]
    studies: Vec<String>,
    /// With `--scale`: where the JSON goes.
    #[arg(long = "scale-json", default_value = "out/scale.json")]
    scale_json: PathBuf,
    /// With `--scale`: where the SVG chart goes.
    #[arg(long = "scale-chart", default_value = "out/scale.svg")]
    scale_chart: PathBuf,
}

#[derive(Args)]
pub struct PingClientArgs {
    #[arg(long)]
    addr: String,
    /// Pings (or calls).
    #[arg(long)]
    count: u64,
    /// `call-client`: the direct file to write.
    #[arg(long)]
    file: Option<PathBuf>,
    /// `call-client`: bytes each call writes (one piece).
    #[arg(long, default_value_t = 8)]
    bytes: u64,
    /// `call-client`: which of the call scenario's clients this is (where it writes).
    #[arg(long, default_value_t = 0)]
    rank: u32,
    /// `call-client`: the same writes without locks (the scenario's control).
    #[arg(long)]
    plain: bool,
}

/// `ping-client` (`call: false`) or `call-client`: prints its CPU and wall time.
pub fn ping_client(a: PingClientArgs, call: bool) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (cpu, wall) = match (call, &a.file) {
        (false, _) => rt.block_on(atomio_scale::calibrate::ping_client(&a.addr, a.count)),
        (true, Some(f)) => rt.block_on(atomio_scale::calibrate::call_client(
            &a.addr, f, a.rank, a.count, a.bytes, a.plain,
        )),
        (true, None) => return Err(anyhow!("call-client needs --file")),
    }
    .map_err(|e| anyhow!(e))?;
    if let Some(f) = &a.file {
        let _ = std::fs::remove_file(f);
    }
    println!(
        "{}",
        serde_json::json!({ "cpu_ns": cpu, "wall_ns": wall, "count": a.count })
    );
    Ok(())
}

fn scratch(given: &Option<PathBuf>, what: &str) -> PathBuf {
    given.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("atomio-{what}-{}", std::process::id()))
    })
}

pub fn calibrate(a: CalibrateArgs) -> anyhow::Result<()> {
    let dir = scratch(&a.scratch, "calibrate");
    let cfg = CalibrateConfig {
        server_exe: std::env::current_exe().context("locating the atomio-lab executable")?,
        scratch: dir.clone(),
        quick: a.quick,
        patience: std::time::Duration::from_secs(a.patience),
    };
    let started = std::time::Instant::now();
    let mut rounds = Vec::new();
    for round in 1..=a.rounds {
        if a.rounds > 1 {
            eprintln!("calibrating: round {round} of {}", a.rounds);
        }
        match atomio_scale::calibrate::calibrate(&cfg) {
            Ok(c) => rounds.push(c),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(anyhow!(e));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let costs = Costs::median_of(&rounds).map_err(|e| anyhow!(e))?;
    if a.rounds > 1 {
        println!("the median of {} calibrations, figure by figure", a.rounds);
    }
    print!("{}", describe(&costs));
    println!("calibrated in {:.1} s", started.elapsed().as_secs_f64());
    costs.save(&a.json)?;
    println!("cost file: {}", a.json.display());
    Ok(())
}

/// The cost file as a table.
fn describe(c: &Costs) -> String {
    let rows: Vec<Vec<String>> = c
        .figures()
        .into_iter()
        .map(|(name, v)| vec![name.to_string(), format!("{v:.3}")])
        .collect();
    let mut out = format!(
        "machine: {} cores, {}, kernel {}\n",
        c.machine.cores, c.machine.cpu, c.machine.kernel
    );
    out += &atomio_cli::table::render(&["cost", "value"], &rows);
    out += "pwrite into a fresh file, per call:";
    for [b, ns] in &c.io.pwrite_curve {
        out += &format!(" {b:.0} B {:.1} µs;", ns / 1e3);
    }
    out += &format!(
        "\nwrites to one file serialize: {} (two threads: {:.2}x one)\n",
        c.io.pwrite_serialized, c.io.pwrite_parallel_speedup
    );
    out += "pwrite, writers interleaved in one file, time over one writer's in order:";
    for [k, f] in &c.io.pwrite_interleaved {
        out += &format!(" {k:.0}: {f:.2}x;");
    }
    out += "\n  their CPU beyond one core, per second (waiters spinning):";
    for [k, f] in &c.io.pwrite_spin {
        out += &format!(" {k:.0}: {f:.2};");
    }
    out += "\nmapped copies, writers sharing every page of one file:";
    for [k, ns] in &c.io.mmap_shared_byte_ns {
        out += &format!(" {k:.0}: {:.0} MiB/s;", 1e9 / ns / f64::from(1 << 20));
    }
    out += "\n  their CPU beyond one core, per second:";
    for [k, f] in &c.io.mmap_spin {
        out += &format!(" {k:.0}: {f:.2};");
    }
    out += "\nan atomic call's path beyond what the model charges its messages, locks, bytes:";
    for [b, ns] in &c.lock.client_call_curve {
        out += &format!(" {b:.0} B per call {:.1} µs;", ns / 1e3);
    }
    out += "\n";
    out
}

pub fn load_costs(path: &Path) -> anyhow::Result<Costs> {
    Costs::load(path).map_err(|e| {
        anyhow!(
            "{e}\n  (make one with: atomio-lab sim calibrate --json {})",
            path.display()
        )
    })
}

/// The lock benchmark rows validated: (method, protocol).
const LOCK_ROWS: &[(&str, &str)] = &[
    ("posix", "two-phase"),
    ("posix", "one-try"),
    ("list", "one-try"),
    ("datatype", "two-phase"),
    ("datatype", "one-try"),
];

/// Locks per client of a lock row of `method` (`posix`, `list`, `datatype`).
fn locks_for(a: &ValidateArgs, method: &str) -> u64 {
    if method == "posix" {
        a.locks
    } else {
        a.range_locks
    }
}

/// The workload rows validated: (group, strategies).
const WORKLOAD_ROWS: &[(&str, &[&str])] = &[
    (
        "ior-hard",
        &["none", "bounding-extent", "ching:datatype:one-try"],
    ),
    (
        "tile",
        &[
            "none",
            "bounding-extent",
            "ching:datatype:one-try",
            "ching:list:one-try",
        ],
    ),
    (
        "s3d",
        &["none", "ching:datatype:one-try", "ching:list:one-try"],
    ),
];

/// One validated row.
#[derive(serde::Serialize)]
pub struct ValidationRow {
    pub group: String,
    pub row: String,
    pub clients: u32,
    pub servers: u32,
    pub unit: &'static str,
    pub predicted: f64,
    pub measured: Option<f64>,
    /// (predicted − measured) / measured, in percent.
    pub error_pct: Option<f64>,
    /// Virtual seconds of the model's run, the CPU seconds it charged (every core's jobs:
    /// over `model_seconds` × cores, how busy the model kept the machine), and its
    /// wall-clock seconds.
    pub model_seconds: f64,
    pub model_cpu_seconds: Option<f64>,
    /// The real run's median seconds and CPU (workload rows: every process of the run).
    pub measured_seconds: Option<f64>,
    pub measured_cpu_seconds: Option<f64>,
    pub model_wall_seconds: f64,
    /// Cores busy with other work just before the real benchmark ran.
    pub background_busy_cores: Option<f64>,
}

pub fn validate(a: ValidateArgs) -> anyhow::Result<()> {
    use atomio_scale::lockbench::{self, Fault, LockBenchSpec};
    let costs = load_costs(&a.costs)?;
    let platform = atomio_scale::Platform::here(&costs);
    println!("platform: {}", platform.summary);
    let mut rows: Vec<ValidationRow> = Vec::new();
    // The model first (seconds), then the real benchmarks.
    if a.groups.iter().any(|g| g == "locks") {
        for &clients in &a.clients {
            for &(m, p) in LOCK_ROWS {
                let spec = LockBenchSpec {
                    clients,
                    servers: clients,
                    locks: locks_for(&a, m),
                    spacing: 64,
                    overlap_pct: None,
                    method: m.parse().map_err(|e: String| anyhow!(e))?,
                    protocol: p.parse().map_err(|e: String| anyhow!(e))?,
                    stripe_size: atomio_layout::DEFAULT_STRIPE_SIZE,
                    odd_clients_read: false,
                    fault: Fault::None,
                };
                let t0 = std::time::Instant::now();
                let r = lockbench::run(&spec, &costs, &platform, |_| {}).map_err(|e| anyhow!(e))?;
                rows.push(ValidationRow {
                    group: "locks".into(),
                    row: spec.label(),
                    clients,
                    servers: clients,
                    unit: "acquire locks/s",
                    predicted: r.acquire_locks_per_s,
                    measured: None,
                    error_pct: None,
                    model_seconds: r.sim_seconds,
                    model_cpu_seconds: None,
                    measured_seconds: None,
                    measured_cpu_seconds: None,
                    model_wall_seconds: t0.elapsed().as_secs_f64(),
                    background_busy_cores: None,
                });
            }
        }
    }
    let beside = a.io_beside && !a.predict_only;
    let scratch = std::env::temp_dir().join(format!("atomio-validate-io-{}", std::process::id()));
    for &(group, strategies) in WORKLOAD_ROWS {
        if !a.groups.iter().any(|g| g == group) {
            continue;
        }
        for &clients in &a.clients {
            let mut costs = costs.clone();
            if beside {
                quiet(a.patience);
                eprintln!(
                    "measuring: the data path's terms again, for {group} at {clients} clients"
                );
                std::fs::create_dir_all(&scratch)?;
                costs.io = atomio_scale::calibrate::measure_io(&scratch, false, &mut Vec::new())
                    .map_err(|e| anyhow!(e))?;
            }
            predict_workload(&a, group, strategies, clients, &costs, &platform, &mut rows)?;
            if beside {
                // Beside its own terms: one invocation (the terms are this minute's).
                for m in measure_workload(&a, group, strategies, clients)? {
                    if let Some(r) = rows
                        .iter_mut()
                        .find(|r| r.group == group && r.clients == clients && r.row == m.row)
                    {
                        m.fill(r);
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if !a.predict_only {
        measure(&a, !beside, &mut rows)?;
    }
    print!("{}", validation_table(&rows, costs.machine.cores));
    print!("{}", validation_summary(&rows, beside, a.rounds));
    if let Some(p) = &a.json {
        atomio_cli::output::write_json(p, &rows)?;
    }
    Ok(())
}

/// The model's rows of `group` at `clients` clients.
fn predict_workload(
    a: &ValidateArgs,
    group: &str,
    strategies: &[&str],
    clients: u32,
    costs: &Costs,
    platform: &atomio_scale::Platform,
    rows: &mut Vec<ValidationRow>,
) -> anyhow::Result<()> {
    let workload =
        atomio_workloads::Workload::from_name::<&str>(group, &[]).map_err(|e| anyhow!("{e}"))?;
    let plan = workload.plan(clients).map_err(|e| anyhow!("{e}"))?;
    for &st in strategies {
        let strategy: atomio_client::Strategy = st.parse().map_err(|e: String| anyhow!(e))?;
        let t0 = std::time::Instant::now();
        let r = atomio_scale::workload::run(
            &plan,
            &strategy,
            a.servers,
            atomio_scale::workload::DataPath::Direct,
            costs,
            platform,
            atomio_scale::lockbench::Fault::None,
            |_| {},
        )
        .map_err(|e| anyhow!("{group} {st}: {e}"))?;
        rows.push(ValidationRow {
            group: group.into(),
            row: st.into(),
            clients,
            servers: a.servers,
            unit: "MiB/s",
            predicted: r.mib_per_s,
            measured: None,
            error_pct: None,
            model_seconds: r.seconds,
            model_cpu_seconds: Some(r.cpu_seconds),
            measured_seconds: None,
            measured_cpu_seconds: None,
            model_wall_seconds: t0.elapsed().as_secs_f64(),
            background_busy_cores: None,
        });
    }
    Ok(())
}

/// Waits (up to `patience` seconds) for other work on the machine to stop; returns how
/// busy it was when the wait ended.
fn quiet(patience: u64) -> Option<f64> {
    let wait = std::time::Duration::from_secs(patience);
    let b = atomio_scale::quiet::wait_for_quiet(wait, 0.15, |b| {
        eprintln!("measuring: waiting for the machine to be quiet ({b:.2} cores busy)")
    });
    if let Some(b) = b.filter(|&b| b > 0.15) {
        eprintln!("measuring: WARNING: {b:.2} cores busy with other work");
    }
    b
}

/// Runs the real benchmarks (the workloads' too unless `workloads` is false: measured
/// already) and fills in `measured` and `error_pct`. Every group runs once per round, so
/// that one group's invocations are minutes apart; each row is the median invocation's.
fn measure(a: &ValidateArgs, workloads: bool, rows: &mut [ValidationRow]) -> anyhow::Result<()> {
    let locks = a.groups.iter().any(|g| g == "locks");
    let mut seen: Vec<Vec<Measured>> = vec![Vec::new(); rows.len()];
    for round in 1..=a.rounds.max(1) {
        if a.rounds > 1 {
            eprintln!("measuring: round {round} of {}", a.rounds);
        }
        if locks {
            keep(rows, &mut seen, "locks", &measure_locks(a)?);
        }
        if !workloads {
            continue;
        }
        for &(group, strategies) in WORKLOAD_ROWS {
            if !a.groups.iter().any(|g| g == group) {
                continue;
            }
            for &clients in &a.clients {
                let got = measure_workload(a, group, strategies, clients)?;
                keep(rows, &mut seen, group, &got);
            }
        }
    }
    for (r, seen) in rows.iter_mut().zip(seen) {
        if let Some(m) = median_invocation(seen) {
            m.fill(r);
        }
    }
    for r in rows.iter_mut() {
        r.error_pct = r
            .measured
            .filter(|&m| m > 0.0)
            .map(|m| (r.predicted - m) / m * 100.0);
    }
    Ok(())
}

/// Adds to each of `group`'s rows what invocation `got` measured for it (same row name and
/// client count).
fn keep(rows: &[ValidationRow], seen: &mut [Vec<Measured>], group: &str, got: &[Measured]) {
    for (r, seen) in rows.iter().zip(seen.iter_mut()) {
        if r.group != group {
            continue;
        }
        if let Some(m) = got
            .iter()
            .find(|m| m.row == r.row && m.clients == r.clients)
        {
            seen.push(m.clone());
        }
    }
}

/// Runs the real `bench locks` (TCP, scaling, the validated methods and protocols) once:
/// acquire locks/s per row (in `mib_per_s`, the figure the row compares).
fn measure_locks(a: &ValidateArgs) -> anyhow::Result<Vec<Measured>> {
    use atomio_bench::locks::{LockBenchConfig, Transport};
    use atomio_lock::Method;
    let exe = std::env::current_exe().context("locating the atomio-lab executable")?;
    eprintln!("measuring: bench locks (TCP, {:?} clients)", a.clients);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let busy = quiet(a.patience);
    let list = Method::List {
        max_ranges: atomio_lock::DEFAULT_LIST_RANGES,
    };
    // POSIX rows at `locks`, list and datatype rows at `range_locks`: two invocations.
    let mut real = Vec::new();
    for (methods, locks) in [
        (vec![Method::Posix], a.locks),
        (vec![list, Method::Datatype], a.range_locks),
    ] {
        let cfg = LockBenchConfig {
            transports: vec![Transport::Tcp],
            scaling_clients: a.clients.clone(),
            spacings: vec![64],
            locks,
            methods,
            protocols: vec![
                atomio_lock::Protocol::TwoPhase,
                atomio_lock::Protocol::OneTry,
            ],
            overlaps: Vec::new(),
            runs: a.runs.max(1),
            server_exe: Some(exe.clone()),
            ..LockBenchConfig::default()
        };
        real.extend(rt.block_on(atomio_bench::locks::run(&cfg))?);
    }
    Ok(real
        .iter()
        .map(|x| Measured {
            row: x.label(),
            clients: x.clients,
            mib_per_s: x.acquire_locks_per_s,
            seconds: None,
            cpu_seconds: None,
            busy,
        })
        .collect())
}

/// One real row of one invocation.
#[derive(Clone)]
struct Measured {
    row: String,
    clients: u32,
    /// The row's figure: MiB/s, or acquire locks/s for `bench locks`.
    mib_per_s: f64,
    /// The run's seconds (`None`: `bench locks`, which reports rates only).
    seconds: Option<f64>,
    cpu_seconds: Option<f64>,
    busy: Option<f64>,
}

impl Measured {
    fn fill(self, r: &mut ValidationRow) {
        r.measured = Some(self.mib_per_s);
        r.measured_seconds = self.seconds;
        r.measured_cpu_seconds = self.cpu_seconds;
        r.background_busy_cores = self.busy;
    }
}

/// The invocation whose rate is the median (the lower middle of an even count): its
/// figures stay together.
fn median_invocation(mut seen: Vec<Measured>) -> Option<Measured> {
    seen.sort_by(|x, y| x.mib_per_s.total_cmp(&y.mib_per_s));
    let n = seen.len();
    (n > 0).then(|| seen.swap_remove((n - 1) / 2))
}

/// Runs the real `bench <group> --clients <clients>` once: its rows.
fn measure_workload(
    a: &ValidateArgs,
    group: &str,
    strategies: &[&str],
    clients: u32,
) -> anyhow::Result<Vec<Measured>> {
    let exe = std::env::current_exe().context("locating the atomio-lab executable")?;
    let workload =
        atomio_workloads::Workload::from_name::<&str>(group, &[]).map_err(|e| anyhow!("{e}"))?;
    eprintln!("measuring: bench {group} --clients {clients}");
    let cfg = atomio_bench::workload::WorkloadBenchConfig {
        workload,
        clients,
        strategies: crate::bench_workload::parse_strategies(&strategies.join(","))?,
        data: atomio_client::PlacementKind::Direct,
        bypass: true,
        servers: a.servers,
        deploy: atomio_bench::workload::Deploy::Embedded { memory: false },
        stripe_size: atomio_layout::DEFAULT_STRIPE_SIZE,
        stripe_count: None,
        runs: a.runs.max(1),
        exe,
        scratch: std::env::temp_dir().join(format!("atomio-validate-{}", std::process::id())),
        verify: false,
        keep: None,
        progress: true,
        delay: Default::default(),
    };
    let busy = quiet(a.patience);
    let real = crate::bench_workload::run_config(&cfg)?;
    Ok(real
        .iter()
        .map(|m| Measured {
            row: m.strategy.clone(),
            clients,
            mib_per_s: m.mib_per_s,
            seconds: Some(m.seconds),
            cpu_seconds: m.cpu_seconds,
            busy,
        })
        .collect())
}

fn validation_table(rows: &[ValidationRow], cores: u32) -> String {
    use atomio_cli::table::{render, thousands};
    // How busy a run kept the machine's cores: where a prediction misses, whether the
    // model charged too little CPU or left too little idle.
    let busy = |cpu: Option<f64>, secs: Option<f64>| match (cpu, secs) {
        (Some(c), Some(s)) if s > 0.0 => format!("{:.0}%", c / s / f64::from(cores) * 100.0),
        _ => "-".into(),
    };
    let fmt = |x: f64, unit: &str| {
        if unit == "MiB/s" {
            format!("{x:.1}")
        } else {
            thousands(x)
        }
    };
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.group.clone(),
                r.row.clone(),
                r.clients.to_string(),
                r.servers.to_string(),
                r.unit.to_string(),
                fmt(r.predicted, r.unit),
                r.measured.map_or("-".into(), |m| fmt(m, r.unit)),
                r.error_pct.map_or("-".into(), |e| format!("{e:+.0}%")),
                busy(r.model_cpu_seconds, Some(r.model_seconds)),
                busy(r.measured_cpu_seconds, r.measured_seconds),
            ]
        })
        .collect();
    render(
        &[
            "group",
            "row",
            "clients",
            "servers",
            "unit",
            "predicted",
            "measured",
            "error",
            "cores busy: model",
            "real",
        ],
        &body,
    )
}

fn validation_summary(rows: &[ValidationRow], io_beside: bool, rounds: u32) -> String {
    let errs: Vec<f64> = rows.iter().filter_map(|r| r.error_pct).collect();
    if errs.is_empty() {
        return String::new();
    }
    let within = errs.iter().filter(|e| e.abs() <= 25.0).count();
    let mut abs: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
    abs.sort_by(f64::total_cmp);
    format!(
        "{within} of {} rows within ±25 %; median |error| {:.0} %, worst {:.0} % ({})\n",
        errs.len(),
        abs[abs.len() / 2],
        abs[abs.len() - 1],
        if io_beside {
            "one cost file for every row; the data path's terms measured again before each workload benchmark".to_string()
        } else if rounds > 1 {
            format!("one cost file for every row; every row: the median of {rounds} invocations")
        } else {
            "one cost file for every row".to_string()
        }
    )
}

pub fn scale(a: &ScaleArgs) -> anyhow::Result<()> {
    use atomio_scale::project::{self, ProjectConfig, STUDIES};
    let costs = load_costs(&a.scale_costs)?;
    if let Some(bad) = a.studies.iter().find(|s| !STUDIES.contains(&s.as_str())) {
        return Err(anyhow!(
            "unknown study '{bad}' (expected {})",
            STUDIES.join(", ")
        ));
    }
    if a.max_clients == 0 || a.max_servers == 0 || a.max_clients > 4096 {
        return Err(anyhow!(
            "--max-clients must be 1 to 4096 and --max-servers at least 1"
        ));
    }
    let cfg = ProjectConfig {
        max_clients: a.max_clients,
        max_servers: a.max_servers,
        quick: a.quick,
        studies: a.studies.clone(),
    };
    println!(
        "scale model: costs from {} ({} cores, {}), up to {} clients × {} servers{}",
        a.scale_costs.display(),
        costs.machine.cores,
        costs.machine.cpu,
        a.max_clients,
        a.max_servers,
        if a.quick { " (quick sizes)" } else { "" }
    );
    let started = std::time::Instant::now();
    let p = project::run(&costs, &cfg, &mut |line| {
        eprintln!("[{:6.1} s] {line}", started.elapsed().as_secs_f64())
    })
    .map_err(|e| anyhow!(e))?;
    for pl in &p.platforms {
        println!(
            "platform {}: {} (one-way wire {:.1} µs)",
            pl.name,
            pl.summary,
            pl.latency_ns as f64 / 1e3
        );
    }
    print!("{}", scale_tables(&p));
    print!("{}", paper_table(&p));
    // A lock run gives two rows (acquire, release) from one set of checks.
    let checks: u64 = p
        .rows
        .iter()
        .filter(|r| r.unit != "release locks/s")
        .map(|r| r.checks)
        .sum();
    println!(
        "safety: {} runs, {checks} checks passed (no two conflicting holders, resource invariants, cross-stripe SN order, versions published in order); {:.0} s",
        p.rows
            .iter()
            .filter(|r| r.unit != "release locks/s")
            .count(),
        p.wall_seconds
    );
    atomio_cli::output::write_json(&a.scale_json, &p)?;
    scale_chart(&a.scale_chart, &p)?;
    println!("chart: {}", a.scale_chart.display());
    Ok(())
}

/// A rate in a few characters: 2.06M, 345k, 12.3.
fn short(x: f64) -> String {
    match x.abs() {
        v if v >= 1e9 => format!("{:.2}G", x / 1e9),
        v if v >= 1e6 => format!("{:.2}M", x / 1e6),
        v if v >= 1e4 => format!("{:.0}k", x / 1e3),
        v if v >= 100.0 => format!("{x:.0}"),
        _ => format!("{x:.1}"),
    }
}

/// One table per study and unit: strategies down, clients across.
fn scale_tables(p: &atomio_scale::project::Projection) -> String {
    let mut out = String::new();
    let mut keys: Vec<(&str, &str, &str)> = Vec::new();
    for r in &p.rows {
        let k = (r.study, r.unit, r.platform.as_str());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (study, unit, platform) in keys {
        let rows: Vec<_> = p
            .rows
            .iter()
            .filter(|r| r.study == study && r.unit == unit)
            .collect();
        let mut clients: Vec<u32> = rows.iter().map(|r| r.clients).collect();
        clients.sort_unstable();
        clients.dedup();
        let mut strategies: Vec<&str> = Vec::new();
        for r in &rows {
            if !strategies.contains(&r.strategy.as_str()) {
                strategies.push(&r.strategy);
            }
        }
        let mut headers = vec!["strategy".to_string()];
        headers.extend(clients.iter().map(|c| {
            let s = rows
                .iter()
                .find(|r| r.clients == *c)
                .map_or(0, |r| r.servers);
            format!("{c}×{s}")
        }));
        let body: Vec<Vec<String>> = strategies
            .iter()
            .map(|st| {
                let mut line = vec![st.to_string()];
                line.extend(clients.iter().map(|c| {
                    rows.iter()
                        .find(|r| r.strategy == *st && r.clients == *c)
                        .map_or("-".into(), |r| short(r.value))
                }));
                line
            })
            .collect();
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        out += &format!("\n{study} — {unit} ({platform}; columns: clients×servers)\n");
        out += &atomio_cli::table::render(&h, &body);
    }
    out
}

fn paper_table(p: &atomio_scale::project::Projection) -> String {
    if p.papers.is_empty() {
        return String::new();
    }
    let body: Vec<Vec<String>> = p
        .papers
        .iter()
        .map(|x| {
            vec![
                x.what.clone(),
                short(x.paper),
                short(x.projected),
                x.unit.to_string(),
                x.source.to_string(),
            ]
        })
        .collect();
    format!(
        "\nprojection beside the papers (their hardware: the platform's network and disks, atomio's own CPU costs)\n{}",
        atomio_cli::table::render(&["what", "paper", "projected", "unit", "source"], &body)
    )
}

fn scale_chart(path: &Path, p: &atomio_scale::project::Projection) -> anyhow::Result<()> {
    use atomio_bench::chart::{line_panels, Panel, Series};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let panels: Vec<Panel> = [
        (
            "ching-locks",
            "acquire locks/s",
            "Ching §6.1 lock test (ching07): acquire",
        ),
        ("s3d", "MiB/s", "S3D checkpoint (ching07)"),
        ("ior-hard", "PIO MiB/s", "IOR hard, 4 stripes (seqdlm22)"),
        ("tile", "PIO MiB/s", "tile-io, 4-byte pixels (seqdlm22)"),
    ]
    .iter()
    .filter_map(|&(study, unit, title)| {
        let rows: Vec<_> = p
            .rows
            .iter()
            .filter(|r| r.study == study && r.unit == unit)
            .collect();
        if rows.is_empty() {
            return None;
        }
        let mut names: Vec<&str> = Vec::new();
        for r in &rows {
            if !names.contains(&r.strategy.as_str()) {
                names.push(&r.strategy);
            }
        }
        Some(Panel {
            title: title.into(),
            x_label: "clients".into(),
            y_label: unit.into(),
            series: names
                .iter()
                .map(|n| Series {
                    label: n.to_string(),
                    points: rows
                        .iter()
                        .filter(|r| r.strategy == *n)
                        .map(|r| (f64::from(r.clients), r.value))
                        .collect(),
                })
                .collect(),
            log_y: true,
            log_x: true,
        })
    })
    .collect();
    line_panels(path, &panels).with_context(|| format!("writing {}", path.display()))
}
