//! `atomio-lab bench seqdlm-breakdown | seqdlm-parallel | seqdlm-convert`: SeqDLM's micro
//! benchmarks (Chen et al. §V-B, Figs. 17–19; see `atomio_bench::seqdlm`). Each prints a
//! table, writes JSON and an SVG chart.

use anyhow::Context;
use atomio_bench::chart::{bar_panels, line_panels, Bar, Panel, Series};
use atomio_bench::seqdlm::{self, BreakdownRow, SeqBenchConfig, Throughput, ThroughputRow};
use atomio_cli::table::render;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Clone)]
pub struct SeqArgs {
    /// Client processes' worth of clients (each a file with its own DLM agent).
    #[arg(long, default_value_t = 8)]
    clients: u32,
    #[arg(long, default_value_t = 4)]
    servers: u32,
    /// Writes per client (paper: 4,000), capped so a client writes at most
    /// --max-mib-per-client (its write buffers are filled with verifier tags beforehand).
    #[arg(long, default_value_t = 256)]
    writes: u64,
    #[arg(long, default_value_t = 64)]
    max_mib_per_client: u64,
    /// Write sizes in bytes.
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<u64>>,
    /// Runs per row (interleaved; medians reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Servers keep data in memory (default: files in a scratch directory).
    #[arg(long)]
    memory: bool,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long)]
    chart: Option<PathBuf>,
    #[arg(long)]
    no_progress: bool,
}

impl SeqArgs {
    fn config(&self, default_sizes: &[u64]) -> SeqBenchConfig {
        SeqBenchConfig {
            clients: self.clients,
            servers: self.servers,
            writes: self.writes,
            max_bytes_per_client: self.max_mib_per_client << 20,
            sizes: self.sizes.clone().unwrap_or_else(|| default_sizes.to_vec()),
            runs: self.runs.max(1),
            memory: self.memory,
            scratch: std::env::temp_dir().join(format!("atomio-seqbench-{}", std::process::id())),
            progress: !self.no_progress,
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn kib(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "atomic"
    } else {
        "VIOLATED"
    }
}

pub fn breakdown(a: SeqArgs) -> anyhow::Result<()> {
    let cfg = a.config(&[16 << 10, 64 << 10, 256 << 10, 1 << 20]);
    let rows = runtime()?.block_on(seqdlm::breakdown(&cfg))?;
    let _ = std::fs::remove_dir_all(&cfg.scratch);
    println!(
        "seqdlm-breakdown: {} clients write [0, X) of a one-stripe file round robin; \
         median of {} runs",
        cfg.clients, cfg.runs
    );
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let pct = |x: f64| format!("{:.0}%", x / r.total_s.max(1e-12) * 100.0);
            vec![
                kib(r.size),
                r.mode.clone(),
                format!("{}", r.writes_per_client * u64::from(r.clients)),
                format!("{:.3}", r.total_s),
                format!("{:.3} ({})", r.revocation_s, pct(r.revocation_s)),
                format!("{:.3} ({})", r.cancel_flush_s, pct(r.cancel_flush_s)),
                format!("{:.3} ({})", r.other_s, pct(r.other_s)),
                format!("{:.3}", r.flush_after_s),
                verdict(r.verified).into(),
            ]
        })
        .collect();
    print!(
        "{}",
        render(
            &[
                "X",
                "mode",
                "writes",
                "total s",
                "revocation",
                "cancel+flush",
                "other",
                "flush after s",
                "verified",
            ],
            &body
        )
    );
    for s in &cfg.sizes {
        let get = |m: &str| rows.iter().find(|r| r.size == *s && r.mode == m);
        if let (Some(n), Some(p)) = (get("NBW"), get("PW")) {
            println!(
                "X = {}: NBW total / PW total = {:.2} (cancel+flush is {:.0}% of PW's time)",
                kib(*s),
                n.total_s / p.total_s,
                p.cancel_flush_s / p.total_s * 100.0
            );
        }
    }
    for r in rows.iter().filter(|r| !r.verified) {
        println!(
            "{} {}: {}",
            r.mode,
            kib(r.size),
            r.violation.as_deref().unwrap_or("")
        );
    }
    if let Some(p) = &a.json {
        atomio_cli::output::write_json(p, &rows)?;
    }
    let chart = a
        .chart
        .clone()
        .unwrap_or_else(|| PathBuf::from("out/bench-seqdlm-breakdown.svg"));
    let panels: Vec<(String, Vec<Bar>)> = cfg
        .sizes
        .iter()
        .map(|&s| {
            let bars = rows
                .iter()
                .filter(|r: &&BreakdownRow| r.size == s)
                .flat_map(|r| {
                    [
                        ("revocation", r.revocation_s),
                        ("cancel+flush", r.cancel_flush_s),
                        ("other", r.other_s),
                    ]
                    .map(|(part, v)| Bar {
                        label: format!("{} {part}", r.mode),
                        value: v,
                        bad: !r.verified,
                        muted: part == "other",
                    })
                })
                .collect();
            (kib(s), bars)
        })
        .collect();
    save_chart(&chart, || {
        bar_panels(
            &chart,
            "SeqDLM round-robin writes: time split (Fig. 17)",
            "seconds",
            &panels,
        )
    })
}

fn throughput_table(rows: &[ThroughputRow]) -> String {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                kib(r.size),
                r.variant.clone(),
                r.strategy.clone(),
                format!("{}", r.ops_per_client * u64::from(r.clients)),
                format!("{:.0}", r.ops_per_s),
                format!("{:.3}", r.seconds),
                format!("{:.3}", r.total_seconds),
                format!("{:.2}", r.lock_io_ratio),
                format!("{:.0}", r.cpu_us_per_op),
                verdict(r.verified).into(),
            ]
        })
        .collect();
    render(
        &[
            "X",
            "variant",
            "strategy",
            "ops",
            "ops/s",
            "calls s",
            "with flush s",
            "lock/IO",
            "CPU µs/op",
            "verified",
        ],
        &body,
    )
}

fn ratio(rows: &[ThroughputRow], size: u64, a: &str, b: &str) -> Option<f64> {
    let get = |v: &str| rows.iter().find(|r| r.size == size && r.variant == v);
    Some(get(a)?.ops_per_s / get(b)?.ops_per_s)
}

pub fn parallel(a: SeqArgs) -> anyhow::Result<()> {
    let cfg = a.config(&[64 << 10, 256 << 10, 1 << 20]);
    let rows = runtime()?.block_on(seqdlm::throughput(&cfg, Throughput::Parallel))?;
    let _ = std::fs::remove_dir_all(&cfg.scratch);
    println!(
        "seqdlm-parallel: {} clients write [0, X) of a one-stripe file at once; writes/s \
         until every call returned; median of {} runs",
        cfg.clients, cfg.runs
    );
    print!("{}", throughput_table(&rows));
    for &s in &cfg.sizes {
        if let (Some(er), Some(n)) = (
            ratio(&rows, s, "NBW+ER", "PW"),
            ratio(&rows, s, "NBW", "PW"),
        ) {
            let cr = ratio(&rows, s, "NBW+ER+CR", "PW")
                .map_or(String::new(), |x| format!(", NBW+ER+CR / PW = {x:.2}x"));
            println!(
                "X = {}: NBW+ER / PW = {er:.2}x, NBW / PW = {n:.2}x{cr}",
                kib(s)
            );
        }
    }
    report(
        &a,
        &rows,
        "out/bench-seqdlm-parallel.svg",
        "writes/s",
        &cfg.sizes,
    )
}

pub fn convert(a: SeqArgs) -> anyhow::Result<()> {
    let cfg = a.config(&[64 << 10, 1 << 20]);
    let rt = runtime()?;
    let mut rows = rt.block_on(seqdlm::throughput(&cfg, Throughput::Upgrade))?;
    rows.extend(rt.block_on(seqdlm::throughput(&cfg, Throughput::Downgrade))?);
    let _ = std::fs::remove_dir_all(&cfg.scratch);
    println!(
        "seqdlm-convert: upgrading — one client alternates writes and reads of [0, X); \
         downgrading — {} clients write X bytes across two stripes; median of {} runs",
        cfg.clients, cfg.runs
    );
    for bench in ["upgrade", "downgrade"] {
        let part: Vec<ThroughputRow> = rows.iter().filter(|r| r.bench == bench).cloned().collect();
        println!("{bench}:");
        print!("{}", throughput_table(&part));
    }
    for &s in &cfg.sizes {
        let up: Vec<ThroughputRow> = rows
            .iter()
            .filter(|r| r.bench == "upgrade")
            .cloned()
            .collect();
        let down: Vec<ThroughputRow> = rows
            .iter()
            .filter(|r| r.bench == "downgrade")
            .cloned()
            .collect();
        if let (Some(u), Some(d)) = (ratio(&up, s, "NBW+U", "NBW"), ratio(&down, s, "BW+D", "PW")) {
            println!(
                "X = {}: upgrading NBW+U / NBW = {u:.2}x; downgrading BW+D / PW = {d:.2}x",
                kib(s)
            );
        }
    }
    report(
        &a,
        &rows,
        "out/bench-seqdlm-convert.svg",
        "ops/s",
        &cfg.sizes,
    )
}

fn report(
    a: &SeqArgs,
    rows: &[ThroughputRow],
    default_chart: &str,
    unit: &str,
    sizes: &[u64],
) -> anyhow::Result<()> {
    for r in rows.iter().filter(|r| !r.verified) {
        println!(
            "{} {} {}: {}",
            r.bench,
            r.variant,
            kib(r.size),
            r.violation.as_deref().unwrap_or("")
        );
    }
    if let Some(p) = &a.json {
        atomio_cli::output::write_json(p, rows)?;
    }
    let chart = a
        .chart
        .clone()
        .unwrap_or_else(|| PathBuf::from(default_chart));
    let mut benches: Vec<&str> = rows.iter().map(|r| r.bench.as_str()).collect();
    benches.dedup();
    let panels: Vec<Panel> = benches
        .iter()
        .map(|b| {
            let mut variants: Vec<&str> = rows
                .iter()
                .filter(|r| r.bench == *b)
                .map(|r| r.variant.as_str())
                .collect();
            variants.sort_unstable();
            variants.dedup();
            Panel {
                title: format!("{b}: {unit} vs write size"),
                x_label: "write size (KiB)".into(),
                y_label: unit.into(),
                log_y: false,
                log_x: false,
                series: variants
                    .iter()
                    .map(|v| Series {
                        label: v.to_string(),
                        points: sizes
                            .iter()
                            .filter_map(|s| {
                                rows.iter()
                                    .find(|r| r.bench == *b && r.variant == *v && r.size == *s)
                                    .map(|r| ((*s >> 10) as f64, r.ops_per_s))
                            })
                            .collect(),
                    })
                    .collect(),
            }
        })
        .collect();
    save_chart(&chart, || line_panels(&chart, &panels))
}

fn save_chart(
    path: &std::path::Path,
    draw: impl FnOnce() -> std::io::Result<()>,
) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    draw().with_context(|| format!("writing {}", path.display()))?;
    println!("chart: {}", path.display());
    Ok(())
}
