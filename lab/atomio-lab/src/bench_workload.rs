//! `atomio-lab bench <workload>`: run a workload under several strategies with client processes,
//! verify each result, print a table, write JSON and a bar chart.

use anyhow::{anyhow, Context};
use atomio_bench::chart::{bars, Bar};
use atomio_bench::workload::{Deploy, RowSpec, WorkloadBenchConfig, WorkloadRow};
use atomio_cli::table::render;
use atomio_client::{PlacementKind, Strategy};
use atomio_net::ClusterConfig;
use atomio_workloads::Workload;
use clap::{Args, Parser};
use std::path::{Path, PathBuf};

/// The rows a workload runs unless told otherwise: the reference rows without atomio
/// (the same bytes contiguously, the workload's own pieces by plain `pwrite`, and through
/// direct placement's mapping), no atomicity,
/// today's baselines (`romio`: what MPI users have; `posix-fcntl`), and the lock
/// strategies that matter (on the lock servers, and datatype one-try on the host's shared
/// lock table).
pub const DEFAULT_STRATEGIES: &str =
    "contiguous,plain,plain-mapped,none,rtt-floor,romio,posix-fcntl,bounding-extent,block:4096,ching:list:one-try,ching:datatype:one-try,ching:datatype:alt-try,ching:datatype:one-try+host";

#[derive(Args, Clone)]
pub struct CommonArgs {
    /// Client processes.
    #[arg(long, default_value_t = 4)]
    pub clients: u32,
    /// Servers (objects per file = servers).
    #[arg(long, default_value_t = 4)]
    pub servers: u32,
    /// Strategies, comma-separated, or "all"; `contiguous` adds a reference row (each
    /// client `pwrite`s its bytes contiguously into a local file), `plain` the pattern
    /// written plainly (each client `pwrite`s each of its pieces in place in a local file:
    /// no atomio, no locks), `plain-mapped` the pattern through a mapping (each client
    /// writes its pieces in place as direct placement does: through a shared mapping when
    /// that pays; no atomio client, no locks), `rtt-floor` the floor of
    /// lock-server techniques (`none` plus one round trip to each lock server a call's
    /// bytes map to, before each call); `<strategy>+host` takes a lock-server strategy's
    /// locks in the host's shared lock table instead (no server; every client on this host).
    #[arg(long, default_value = DEFAULT_STRATEGIES)]
    pub strategies: String,
    /// Where the bytes live: `direct` (the user's ordinary file; servers hold only locks)
    /// or `servers` (atomio's data servers). `posix-fcntl` and `romio` always run direct.
    #[arg(long, default_value = "direct")]
    pub data: PlacementKind,
    /// With `--data servers`: every byte through messages, even for clients on the
    /// servers' host (by default they use the object files directly).
    #[arg(long)]
    pub no_bypass: bool,
    /// embedded: servers inside this process (served on loopback TCP); processes: `atomio
    /// server` processes on loopback.
    #[arg(long, default_value = "embedded")]
    pub deploy: String,
    /// Keep embedded servers' data in memory instead of local files.
    #[arg(long)]
    pub memory: bool,
    /// Use the servers of this cluster file.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    #[arg(long, default_value_t = atomio_layout::DEFAULT_STRIPE_SIZE)]
    pub stripe_size: u64,
    /// Objects (stripes) per server file; default: one per server.
    #[arg(long)]
    pub stripe_count: Option<u32>,
    /// Runs per strategy (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Skip the atomicity verification.
    #[arg(long)]
    pub no_verify: bool,
    /// Keep each strategy's verified file and manifest here (then `atomio-lab verify FILE`).
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Scratch directory for server data, local files and read dumps.
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// SVG chart path (default out/bench-<workload>.svg).
    #[arg(long)]
    pub chart: Option<PathBuf>,
    #[arg(long)]
    pub no_progress: bool,
    /// Inject this network round-trip time (µs) between clients and servers: a delaying
    /// relay per server (this kernel has no netem). Clients then count as on other hosts
    /// (no object-file bypass). The RTT a ping measures through the relays is printed.
    #[arg(long, default_value_t = 0)]
    pub rtt_us: u64,
    /// With `--rtt-us`: each message's one-way delay varies by up to ± half this (µs).
    #[arg(long, default_value_t = 0)]
    pub jitter_us: u64,
}

#[derive(Parser)]
#[command(
    name = "atomio-lab bench <workload>",
    after_help = "Workload parameters go after `--`; \
`atomio-lab bench <workload> -- --help` lists them, `atomio-lab bench list` the workloads."
)]
struct WorkloadCmd {
    #[command(flatten)]
    common: CommonArgs,
    /// Workload parameters, after `--` (e.g. `-- --tile-x 64 --overlap-x 8`).
    #[arg(last = true)]
    params: Vec<String>,
}

pub fn parse_strategies(s: &str) -> anyhow::Result<Vec<RowSpec>> {
    if s == "all" {
        let mut v = vec![
            Strategy::none(),
            Strategy::romio(),
            Strategy::posix_fcntl(),
            Strategy::whole_file(),
            Strategy::bounding_extent(),
            Strategy::block(atomio_client::BlockSize::Bytes(4096)),
            Strategy::block(atomio_client::BlockSize::Stripe),
        ];
        v.extend(Strategy::ching_all());
        let mut rows = vec![
            RowSpec::Contiguous,
            RowSpec::Plain,
            RowSpec::PlainMapped,
            RowSpec::RttFloor,
        ];
        rows.extend(v.into_iter().map(RowSpec::Strategy));
        return Ok(rows);
    }
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<RowSpec>().map_err(|e| anyhow!(e)))
        .collect()
}

pub fn config(common: &CommonArgs, workload: Workload) -> anyhow::Result<WorkloadBenchConfig> {
    let deploy = match (&common.cluster, common.deploy.as_str()) {
        (Some(p), _) => Deploy::Cluster(ClusterConfig::load(p)?.addresses()),
        (None, "embedded") => Deploy::Embedded {
            memory: common.memory,
        },
        (None, "processes") => Deploy::Processes,
        (None, other) => return Err(anyhow!("--deploy {other}: expected embedded or processes")),
    };
    let servers = match &deploy {
        Deploy::Cluster(a) => a.len() as u32,
        _ => common.servers,
    };
    Ok(WorkloadBenchConfig {
        workload,
        clients: common.clients,
        strategies: parse_strategies(&common.strategies)?,
        data: common.data,
        bypass: !common.no_bypass && common.rtt_us == 0,
        servers,
        deploy,
        stripe_size: common.stripe_size,
        stripe_count: common.stripe_count,
        runs: common.runs.max(1),
        exe: std::env::current_exe().context("locating the atomio-lab executable")?,
        scratch: common.scratch.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("atomio-bench-{}", std::process::id()))
        }),
        verify: !common.no_verify,
        keep: common.keep.clone(),
        progress: !common.no_progress,
        delay: atomio_net::relay::Delay::rtt_us(common.rtt_us, common.jitter_us),
    })
}

pub fn run(name: &str, argv: &[String]) -> anyhow::Result<()> {
    let cmd = WorkloadCmd::try_parse_from(
        std::iter::once(format!("atomio-lab bench {name}")).chain(argv.iter().cloned()),
    )
    .map_err(|e| anyhow!("{}", e.render()))?;
    let workload = Workload::from_name(name, &cmd.params).map_err(|e| anyhow!("{e}"))?;
    let cfg = config(&cmd.common, workload)?;
    let rows = run_config(&cfg)?;
    report(&rows, &cmd.common, &format!("bench-{name}"))
}

pub fn run_config(cfg: &WorkloadBenchConfig) -> anyhow::Result<Vec<WorkloadRow>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let rows = rt.block_on(atomio_bench::workload::run(cfg))?;
    let _ = std::fs::remove_dir_all(&cfg.scratch);
    Ok(rows)
}

pub fn verdict(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "atomic",
        Some(false) => "VIOLATED",
        None => "n/a (no overlap)",
    }
}

pub fn table(rows: &[WorkloadRow]) -> String {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                match &r.chosen {
                    Some(c) => format!("{} → {}", r.strategy, c.strategy),
                    None => r.strategy.clone(),
                },
                r.data.clone(),
                format!("{:.1}", r.mib_per_s),
                format!("{:.1}", r.pio_mib_per_s),
                r.pct_of_contiguous
                    .map_or("-".into(), |p| format!("{p:.0}%")),
                r.pct_of_none.map_or("-".into(), |p| format!("{p:.0}%")),
                r.x_romio.map_or("-".into(), |x| format!("{x:.2}x")),
                format!("{:.3}", r.seconds),
                format!("{}", r.lock_requests),
                if r.strategy == "contiguous" {
                    "n/a (no layout)".to_string()
                } else {
                    verdict(r.verified).to_string()
                },
            ]
        })
        .collect();
    render(
        &[
            "strategy",
            "data",
            "MiB/s",
            "PIO MiB/s",
            "% of contiguous",
            "% of none",
            "vs romio",
            "seconds",
            "lock requests",
            "verified",
        ],
        &body,
    )
}

pub fn chart(path: &Path, title: &str, rows: &[WorkloadRow]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let b: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: r.strategy.clone(),
            value: r.mib_per_s,
            bad: r.verified == Some(false),
            muted: r.strategy == "none" || r.strategy == "contiguous",
        })
        .collect();
    bars(path, title, "MiB/s (median of runs)", &b)
        .with_context(|| format!("writing {}", path.display()))
}

fn report(rows: &[WorkloadRow], common: &CommonArgs, stem: &str) -> anyhow::Result<()> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    println!(
        "{}: {} clients, {} servers, {} MiB per run, median of {} runs",
        first.workload,
        first.clients,
        first.servers,
        first.bytes >> 20,
        first.runs
    );
    if let Some(r) = first.rtt {
        println!(
            "injected RTT: asked {:.0} µs; a ping measured {:.0} µs through the relays, {:.0} µs \
             straight to the server",
            r.asked_us, r.relayed_us, r.direct_us
        );
    }
    print!("{}", table(rows));
    for r in rows.iter().filter(|r| r.verified == Some(false)) {
        println!(
            "{}: {}",
            r.strategy,
            r.violation.as_deref().unwrap_or("violated")
        );
    }
    if let Some(p) = &common.json {
        atomio_cli::output::write_json(p, rows)?;
    }
    let chart_path = common
        .chart
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("out/{stem}.svg")));
    chart(
        &chart_path,
        &format!("{} — {} clients", first.workload, first.clients),
        rows,
    )?;
    println!("chart: {}", chart_path.display());
    Ok(())
}

/// `atomio-lab bench list`.
pub fn list() {
    let rows: Vec<Vec<String>> = Workload::list()
        .iter()
        .map(|w| {
            vec![
                w.name.to_string(),
                w.summary.to_string(),
                w.source.to_string(),
            ]
        })
        .collect();
    print!("{}", render(&["workload", "what", "from"], &rows));
}
