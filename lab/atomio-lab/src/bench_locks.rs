//! `atomio-lab bench locks`: run the lock benchmark, print a table and the key ratios, write
//! JSON and an SVG chart.

use anyhow::Context;
use atomio_bench::chart::{line_panels, Panel, Series};
use atomio_bench::locks::{LockBenchConfig, LockBenchRow, Transport};
use atomio_cli::table::{render, thousands};
use atomio_lock::{Method, Protocol};
use atomio_net::ClusterConfig;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Clone, Copy, ValueEnum)]
enum TransportArg {
    Embedded,
    Tcp,
    /// No server: one host's shared lock table (what `--locks host` uses).
    Host,
    /// Embedded and TCP.
    Both,
    /// Embedded, TCP and host.
    All,
}

#[derive(Args)]
pub struct LockArgs {
    /// Where the locks are taken: servers in this process, TCP server processes on loopback,
    /// or no server at all (`host`: one host's shared lock table, one row per variant).
    #[arg(long, value_enum, default_value = "both")]
    transport: TransportArg,
    /// Client (= server) counts for the scaling variant.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    clients: Vec<u32>,
    /// Lock spacing in bytes.
    #[arg(long, value_delimiter = ',', default_value = "64,4096")]
    spacing: Vec<u64>,
    /// One-byte locks per client.
    #[arg(long, default_value_t = 131_072)]
    locks: u64,
    /// Lock methods: posix, list, list/N, datatype.
    #[arg(long, value_delimiter = ',', default_value = "posix,list,datatype")]
    methods: Vec<Method>,
    /// Lock protocols: two-phase, one-try, alt-try.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "two-phase,one-try,alt-try"
    )]
    protocols: Vec<Protocol>,
    /// Overlap percentages for the contention variant.
    #[arg(long, value_delimiter = ',', default_value = "0,25,50,75,100")]
    overlap: Vec<u32>,
    /// Skip the contention variant.
    #[arg(long)]
    no_contention: bool,
    /// Skip the interleave variant (clients' locks between each other's, none shared).
    #[arg(long)]
    no_interleave: bool,
    /// Clients (and servers) in the contention variant.
    #[arg(long, default_value_t = 8)]
    contention_clients: u32,
    /// Runs per configuration (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Acquire-release cycles per client per run in the contention and interleave variants
    /// (the scaling variant makes one, the paper's).
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// A smaller sweep that finishes in well under a minute (embedded, 1-4 clients).
    #[arg(long)]
    quick: bool,
    /// Use the servers of this cluster file for TCP runs instead of starting processes.
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Write every row as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG chart here.
    #[arg(long, default_value = "out/bench-locks.svg")]
    chart: PathBuf,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// TCP runs: inject this network round-trip time (µs) through a delaying relay per
    /// server (use fewer `--locks`: posix two-phase pays a round trip per lock).
    #[arg(long, default_value_t = 0)]
    rtt_us: u64,
    /// With `--rtt-us`: each message's one-way delay varies by up to ± half this (µs).
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
}

pub fn run(a: LockArgs) -> anyhow::Result<()> {
    let mut cfg = LockBenchConfig {
        transports: match a.transport {
            TransportArg::Embedded => vec![Transport::Embedded],
            TransportArg::Tcp => vec![Transport::Tcp],
            TransportArg::Host => vec![Transport::Host],
            TransportArg::Both => vec![Transport::Embedded, Transport::Tcp],
            TransportArg::All => vec![Transport::Embedded, Transport::Tcp, Transport::Host],
        },
        scaling_clients: a.clients,
        spacings: a.spacing,
        locks: a.locks,
        methods: a.methods,
        protocols: a.protocols,
        overlaps: if a.no_contention {
            Vec::new()
        } else {
            a.overlap.into_iter().filter(|&o| o <= 100).collect()
        },
        interleave: !a.no_interleave,
        contention_clients: a.contention_clients,
        runs: a.runs.max(1),
        rounds: a.rounds.max(1),
        server_exe: Some(std::env::current_exe().context("locating the atomio-lab executable")?),
        external_servers: match &a.cluster {
            Some(p) => Some(ClusterConfig::load(p)?.addresses()),
            None => None,
        },
        progress: !a.no_progress,
        delay: atomio_net::relay::Delay::rtt_us(a.rtt_us, a.jitter_us),
        ..LockBenchConfig::default()
    };
    if a.quick {
        cfg.transports = vec![Transport::Embedded];
        cfg.scaling_clients = vec![1, 2, 4];
        cfg.spacings = vec![64];
        cfg.overlaps = vec![0, 100];
        cfg.interleave = false;
        cfg.contention_clients = 4;
        cfg.locks = cfg.locks.min(32_768);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let rows = rt.block_on(atomio_bench::locks::run(&cfg))?;
    if let Some(r) = rows.iter().find_map(|r| r.rtt) {
        println!(
            "injected RTT (TCP rows): asked {:.0} µs; a ping measured {:.0} µs through the \
             relays, {:.0} µs straight to the server",
            r.asked_us, r.relayed_us, r.direct_us
        );
    }
    print!("{}", table(&rows));
    println!();
    print!("{}", key_ratios(&rows));
    if let Some(path) = &a.json {
        atomio_cli::output::write_json(path, &rows)?;
    }
    if let Some(dir) = a.chart.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    chart(&a.chart, &rows)?;
    println!("chart: {}", a.chart.display());
    Ok(())
}

fn table(rows: &[LockBenchRow]) -> String {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.transport.to_string(),
                r.variant.to_string(),
                r.label(),
                format!("{}", r.clients),
                format!("{}", r.servers),
                format!("{}", r.spacing_bytes),
                if r.variant == "interleave" {
                    "none shared".into()
                } else {
                    format!("{}%", r.overlap_pct)
                },
                thousands(r.acquire_locks_per_s),
                thousands(r.release_locks_per_s),
                thousands(r.messages_per_client),
            ]
        })
        .collect();
    render(
        &[
            "transport",
            "variant",
            "method-protocol",
            "clients",
            "servers",
            "spacing",
            "overlap",
            "acquire locks/s",
            "release locks/s",
            "msgs/client",
        ],
        &body,
    )
}

fn find<'a>(
    rows: &'a [LockBenchRow],
    t: Transport,
    variant: &str,
    label: &str,
    clients: u32,
    spacing: u64,
    overlap: u32,
) -> Option<&'a LockBenchRow> {
    rows.iter().find(|r| {
        r.transport == t
            && r.variant == variant
            && r.label() == label
            && r.clients == clients
            && r.spacing_bytes == spacing
            && r.overlap_pct == overlap
    })
}

/// The figures the project's goals are stated in, with the targets beside them.
fn key_ratios(rows: &[LockBenchRow]) -> String {
    let mut out = String::from("key figures (median of runs; target in brackets):\n");
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    for &spacing in &[64u64, 4096] {
        let Some(h) = find(
            rows,
            Transport::Host,
            "scaling",
            "host-table",
            4,
            spacing,
            0,
        ) else {
            continue;
        };
        out += &format!(
            "  host 4 clients {spacing}B: one host's lock table acquire {} locks/s, release {} locks/s",
            thousands(h.acquire_locks_per_s),
            thousands(h.release_locks_per_s)
        );
        for t in [Transport::Tcp, Transport::Embedded] {
            if let Some(dt) = find(rows, t, "scaling", "datatype-one-try", 4, spacing, 0) {
                out += &format!(
                    "; {:.2}x datatype-one-try on 4 {t} servers",
                    h.acquire_locks_per_s / dt.acquire_locks_per_s
                );
            }
        }
        out += "\n";
    }
    for t in [Transport::Tcp, Transport::Embedded] {
        for &spacing in &[64u64, 4096] {
            let dt = find(rows, t, "scaling", "datatype-one-try", 4, spacing, 0);
            if let Some(dt) = dt {
                if let Some(p) = find(rows, t, "scaling", "posix-two-phase", 4, spacing, 0) {
                    let x = dt.acquire_locks_per_s / p.acquire_locks_per_s;
                    out += &format!(
                        "  {t} 4x4 {spacing}B: datatype-one-try / posix-two-phase acquire = {x:.1}x [>= 50x: {}]\n",
                        verdict(x >= 50.0)
                    );
                }
                if let Some(l) = find(rows, t, "scaling", "list-one-try", 4, spacing, 0) {
                    let x = dt.acquire_locks_per_s / l.acquire_locks_per_s;
                    out += &format!(
                        "  {t} 4x4 {spacing}B: datatype-one-try / list-one-try acquire = {x:.2}x [>= 1.5x: {}]\n",
                        verdict(x >= 1.5)
                    );
                }
                out += &format!(
                    "  {t} 4x4 {spacing}B: datatype-one-try acquire {} locks/s [>= 2,000,000: {}], release {} locks/s [>= 20,000,000: {}]\n",
                    thousands(dt.acquire_locks_per_s),
                    verdict(dt.acquire_locks_per_s >= 2e6),
                    thousands(dt.release_locks_per_s),
                    verdict(dt.release_locks_per_s >= 2e7),
                );
            }
            let cc = rows
                .iter()
                .filter(|r| r.variant == "contention")
                .map(|r| r.clients)
                .max();
            if let Some(cc) = cc {
                for label in ["datatype-alt-try", "datatype-one-try", "list-alt-try"] {
                    let z = find(rows, t, "contention", label, cc, spacing, 0);
                    let f = find(rows, t, "contention", label, cc, spacing, 100);
                    if let (Some(z), Some(f)) = (z, f) {
                        let x = f.acquire_locks_per_s / z.acquire_locks_per_s * 100.0;
                        let target = if label == "datatype-alt-try" {
                            format!(" [>= 50%: {}]", verdict(x >= 50.0))
                        } else {
                            String::new()
                        };
                        out += &format!(
                            "  {t} {cc} clients {spacing}B: {label} acquire at 100% overlap = {x:.0}% of 0% overlap{target}\n"
                        );
                    }
                }
                out += &overlap_figures(rows, t, cc, spacing);
            }
        }
    }
    out
}

/// The contention target per method: at every overlap, the fastest protocol against
/// the fastest at 0 % (and each protocol against its own 0 %); and what interleaving (no
/// lock shared) costs against 0 % overlap.
fn overlap_figures(rows: &[LockBenchRow], t: Transport, cc: u32, spacing: u64) -> String {
    let mut out = String::new();
    let mut methods: Vec<&str> = rows.iter().map(|r| r.method.as_str()).collect();
    methods.sort_unstable();
    methods.dedup();
    for m in methods {
        let of = |variant: &str, ov: u32| -> Vec<&LockBenchRow> {
            rows.iter()
                .filter(|r| {
                    r.transport == t
                        && r.variant == variant
                        && r.method == m
                        && r.clients == cc
                        && r.spacing_bytes == spacing
                        && r.overlap_pct == ov
                })
                .collect()
        };
        let best = |rs: &[&LockBenchRow]| {
            rs.iter()
                .map(|r| r.acquire_locks_per_s)
                .fold(0.0f64, f64::max)
        };
        let zero = of("contention", 0);
        let base = best(&zero);
        if base <= 0.0 {
            continue;
        }
        let mut ovs: Vec<u32> = rows
            .iter()
            .filter(|r| r.variant == "contention" && r.method == m && r.overlap_pct > 0)
            .map(|r| r.overlap_pct)
            .collect();
        ovs.sort_unstable();
        ovs.dedup();
        if !ovs.is_empty() {
            let pct: Vec<(u32, f64)> = ovs
                .iter()
                .map(|&ov| (ov, best(&of("contention", ov)) / base * 100.0))
                .collect();
            let worst = pct.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
            let own: Vec<String> = zero
                .iter()
                .map(|z| {
                    let w = ovs
                        .iter()
                        .filter_map(|&ov| {
                            of("contention", ov)
                                .into_iter()
                                .find(|r| r.protocol == z.protocol)
                        })
                        .map(|r| r.acquire_locks_per_s / z.acquire_locks_per_s * 100.0)
                        .fold(f64::INFINITY, f64::min);
                    format!("{} {w:.0}%", z.protocol)
                })
                .collect();
            out += &format!(
                "  {t} {cc} clients {spacing}B: {m}, the fastest protocol at each overlap vs the \
                 fastest at 0%: {} [>= 50% at every overlap: {}]; each protocol's worst overlap \
                 vs its own 0%: {}\n",
                pct.iter()
                    .map(|(ov, p)| format!("{ov}% {p:.0}%"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if worst >= 50.0 { "met" } else { "MISSED" },
                own.join(", ")
            );
        }
        let inter = of("interleave", 0);
        if !inter.is_empty() {
            out += &format!(
                "  {t} {cc} clients {spacing}B: {m}, interleaved (no lock shared, each between \
                 its neighbours'): the fastest protocol at {:.0}% of the fastest at 0% overlap\n",
                best(&inter) / base * 100.0
            );
        }
    }
    out
}

fn chart(path: &std::path::Path, rows: &[LockBenchRow]) -> anyhow::Result<()> {
    // One server transport, and the host table's rows beside it.
    let t = [Transport::Tcp, Transport::Embedded, Transport::Host]
        .into_iter()
        .find(|&t| rows.iter().any(|r| r.transport == t))
        .unwrap_or(Transport::Embedded);
    let spacing = rows.iter().map(|r| r.spacing_bytes).min().unwrap_or(64);
    let mut labels: Vec<String> = rows.iter().map(LockBenchRow::label).collect();
    labels.sort();
    labels.dedup();
    let series = |variant: &str, x: fn(&LockBenchRow) -> f64| -> Vec<Series> {
        labels
            .iter()
            .map(|l| Series {
                label: l.clone(),
                points: rows
                    .iter()
                    .filter(|r| {
                        (r.transport == t || r.transport == Transport::Host)
                            && r.variant == variant
                            && &r.label() == l
                            && r.spacing_bytes == spacing
                    })
                    .map(|r| (x(r), r.acquire_locks_per_s))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let panels = vec![
        Panel {
            title: format!("acquire rate vs clients = servers ({t}, {spacing} B spacing)"),
            x_label: "clients = servers".into(),
            y_label: "locks/s".into(),
            series: series("scaling", |r| f64::from(r.clients)),
            log_y: true,
            log_x: false,
        },
        Panel {
            title: format!("acquire rate vs overlap ({t}, {spacing} B spacing)"),
            x_label: "overlap %".into(),
            y_label: "locks/s".into(),
            series: series("contention", |r| f64::from(r.overlap_pct)),
            log_y: true,
            log_x: false,
        },
    ];
    line_panels(path, &panels).with_context(|| format!("writing {}", path.display()))
}
