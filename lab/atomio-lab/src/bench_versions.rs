//! `atomio-lab bench regions-sweep | version-readers | version-gc`: versioning's benchmarks
//! (Tran et al. 2010 §6; see `atomio_bench::versions`). Each prints a table and what it
//! measures, writes JSON and an SVG chart; versioning's target is checked in the output
//! with the exact figures.

use anyhow::Context;
use atomio_bench::chart::{bar_panels, line_panels, Bar, Panel, Series};
use atomio_bench::versions::gc::{GcConfig, GcRow};
use atomio_bench::versions::readers::{ReadersConfig, ReadersReport};
use atomio_bench::versions::sweep::{SweepConfig, SweepReport};
use atomio_cli::table::render;
use atomio_client::PlacementKind;
use clap::Args;
use std::path::{Path, PathBuf};

/// Rows of the sweep and reader benchmarks unless told otherwise.
pub const DEFAULT_STRATEGIES: &str = "plain,posix-fcntl,ching:datatype:one-try,versioning";

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn scratch(given: &Option<PathBuf>, what: &str) -> PathBuf {
    given.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("atomio-{what}-{}", std::process::id()))
    })
}

fn save_chart(path: &Path, draw: impl FnOnce() -> std::io::Result<()>) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    draw().with_context(|| format!("writing {}", path.display()))?;
    println!("chart: {}", path.display());
    Ok(())
}

fn size(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// The 1-minute load average (other processes share this machine's cores).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn print_load(before: &str) {
    println!(
        "load average (1 min) when it started: {before}, when it ended: {} ({} cores)",
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}

fn holds(ok: bool) -> &'static str {
    if ok {
        "holds"
    } else {
        "MISSED"
    }
}

// ---------------------------------------------------------------------------------------
// regions-sweep

#[derive(Args, Clone)]
pub struct SweepArgs {
    /// MiB written (and read back) per call [Tran: 1 GB].
    #[arg(long, default_value_t = 64)]
    mib: u64,
    /// Region counts [Tran: 1, 2, 4, …, 1024].
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64,128,256,512,1024"
    )]
    regions: Vec<u64>,
    /// Bytes between regions (default: the region size).
    #[arg(long)]
    gap_bytes: Option<u64>,
    /// Rows, comma-separated; `plain` = plain `pwrite`/`pread` per region, no locks.
    #[arg(long, default_value = DEFAULT_STRATEGIES)]
    strategies: String,
    /// Where strategies that run on either placement keep the bytes (`direct`: the user's
    /// file; for versioning its snapshots' base).
    #[arg(long, default_value = "direct")]
    data: PlacementKind,
    #[arg(long, default_value_t = 4)]
    servers: u32,
    #[arg(long, default_value_t = atomio_layout::DEFAULT_STRIPE_SIZE)]
    stripe_size: u64,
    /// Runs per row (interleaved; medians reported). A 64 MiB call takes ~20 ms here and
    /// single runs vary by ±25 % on this shared machine, so one run of every row is a few
    /// seconds and the medians need many of them.
    #[arg(long, default_value_t = 15)]
    runs: usize,
    /// Read back through a newly opened file (versioning: no tree node cached).
    #[arg(long)]
    fresh_reader: bool,
    #[arg(long)]
    scratch: Option<PathBuf>,
    #[arg(long)]
    json: Option<PathBuf>,
    /// SVG chart path (default out/bench-regions-sweep.svg).
    #[arg(long)]
    chart: Option<PathBuf>,
    #[arg(long)]
    no_progress: bool,
}

/// The target: versioning at the most regions keeps this share of one region.
const SWEEP_TARGET: f64 = 0.90;

pub fn regions_sweep(a: SweepArgs) -> anyhow::Result<()> {
    let cfg = SweepConfig {
        bytes: a.mib << 20,
        regions: a.regions.clone(),
        gap_bytes: a.gap_bytes,
        strategies: crate::bench_workload::parse_strategies(&a.strategies)?,
        data: a.data,
        servers: a.servers,
        stripe_size: a.stripe_size,
        runs: a.runs.max(1),
        fresh_reader: a.fresh_reader,
        scratch: scratch(&a.scratch, "regions-sweep"),
        progress: !a.no_progress,
    };
    let load = loadavg();
    let report = runtime()?.block_on(atomio_bench::versions::sweep::run(&cfg));
    let _ = std::fs::remove_dir_all(&cfg.scratch);
    let report = report?;
    print_sweep(&report, &cfg);
    print_load(&load);
    if let Some(p) = &a.json {
        atomio_cli::output::write_json(p, &report)?;
    }
    let chart = a
        .chart
        .clone()
        .unwrap_or_else(|| PathBuf::from("out/bench-regions-sweep.svg"));
    let names: Vec<String> = cfg.strategies.iter().map(|s| s.name()).collect();
    let panel = |title: &str, f: &dyn Fn(&atomio_bench::versions::sweep::SweepRow) -> f64| Panel {
        title: title.into(),
        x_label: "regions (log2)".into(),
        y_label: "MiB/s (median of runs)".into(),
        log_y: false,
        log_x: false,
        series: names
            .iter()
            .map(|n| Series {
                label: n.clone(),
                points: report
                    .rows
                    .iter()
                    .filter(|r| &r.strategy == n)
                    .map(|r| ((r.regions as f64).log2(), f(r)))
                    .collect(),
            })
            .collect(),
    };
    let panels = [
        panel(
            &format!("write {} in R regions (Tran §6.3)", size(cfg.bytes)),
            &|r| r.write_mib_s,
        ),
        panel("read them back", &|r| r.read_mib_s),
    ];
    save_chart(&chart, || line_panels(&chart, &panels))
}

fn print_sweep(report: &SweepReport, cfg: &SweepConfig) {
    let gap = report.rows.first().map_or(0, |r| r.gap_bytes);
    println!(
        "regions-sweep (Tran §6.3): one client writes {} in R equal regions (gap = {}) in one \
         call, then reads the same regions back in one call; {} servers (embedded, on disk, \
         loopback TCP); strategies on {} placement; MiB/s, median of {} runs{}",
        size(report.bytes),
        if cfg.gap_bytes.is_some() {
            size(gap)
        } else {
            "the region size".into()
        },
        report.servers,
        cfg.data,
        report.runs,
        if report.fresh_reader {
            "; read back through a newly opened file"
        } else {
            "; read back by the writer's open file"
        }
    );
    println!(
        "steady state: each row keeps one file and every run overwrites the regions with new \
         bytes (one untimed pass first; versioning's old snapshots collected after each run, \
         untimed); plain = plain pwrite/pread of each region, no locks; versioning's write \
         returns when its snapshot is published (materializing into the user's file is timed \
         apart, below)"
    );
    let names: Vec<String> = cfg.strategies.iter().map(|s| s.name()).collect();
    let mut headers = vec!["R".to_string(), "region".to_string()];
    for n in &names {
        headers.push(format!("{n} write"));
        headers.push(format!("{n} read"));
    }
    let body: Vec<Vec<String>> = cfg
        .regions
        .iter()
        .map(|&r| {
            let mut row = vec![r.to_string(), size(report.bytes / r)];
            for n in &names {
                match report
                    .rows
                    .iter()
                    .find(|x| x.regions == r && &x.strategy == n)
                {
                    Some(x) => {
                        let bad = if x.verified { "" } else { " BAD" };
                        row.push(format!("{:.0}{bad}", x.write_mib_s));
                        row.push(format!("{:.0}{bad}", x.read_mib_s));
                    }
                    None => {
                        row.push("-".into());
                        row.push("-".into());
                    }
                }
            }
            row
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    print!("{}", render(&h, &body));
    let ratio_body: Vec<Vec<String>> = report
        .ratios
        .iter()
        .map(|x| {
            vec![
                x.strategy.clone(),
                format!("{:.3}", x.write),
                format!("{:.3}", x.read),
            ]
        })
        .collect();
    if let Some(x) = report.ratios.first() {
        println!(
            "throughput at R = {} over R = {}:",
            x.to_regions, x.from_regions
        );
        print!(
            "{}",
            render(&["strategy", "write ratio", "read ratio"], &ratio_body)
        );
    }
    if let Some(x) = report.ratios.iter().find(|x| x.strategy == "versioning") {
        println!(
            "target: versioning at R = {} >= {:.0}% of R = {} — write {:.1}% ({}), \
             read {:.1}% ({})",
            x.to_regions,
            SWEEP_TARGET * 100.0,
            x.from_regions,
            x.write * 100.0,
            holds(x.write >= SWEEP_TARGET),
            x.read * 100.0,
            holds(x.read >= SWEEP_TARGET),
        );
    }
    let mats: Vec<String> = report
        .rows
        .iter()
        .filter_map(|r| {
            r.materialize_seconds
                .map(|s| format!("R={}: {:.3} s", r.regions, s))
        })
        .collect();
    if !mats.is_empty() {
        println!(
            "versioning: materializing the newest snapshot into the base afterwards (median; not \
             in the write figures): {}",
            mats.join(", ")
        );
    }
    let bad: Vec<String> = report
        .rows
        .iter()
        .filter_map(|r| {
            r.mismatch
                .as_ref()
                .map(|m| format!("{} R={}: {m}", r.strategy, r.regions))
        })
        .collect();
    if bad.is_empty() {
        println!("every read returned exactly the bytes written (versioning: the base too, after materializing)");
    } else {
        for b in bad {
            println!("WRONG DATA: {b}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// version-readers

#[derive(Args, Clone)]
pub struct ReadersArgs {
    /// Writer processes (each writes its own tile of a near-square grid, again and again).
    #[arg(long, default_value_t = 4)]
    writers: u32,
    /// Reader processes (each reads the same centred tile-sized region in a loop).
    #[arg(long, default_value_t = 1)]
    readers: u32,
    #[arg(long, default_value_t = 4)]
    servers: u32,
    /// Elements per tile along X (a tile row is tile-x × element-bytes).
    #[arg(long, default_value_t = 64)]
    tile_x: u64,
    /// Rows per tile.
    #[arg(long, default_value_t = 64)]
    tile_y: u64,
    #[arg(long, default_value_t = 1024)]
    element_bytes: u64,
    /// Elements neighbouring tiles share along each axis.
    #[arg(long, default_value_t = 8)]
    overlap: u64,
    /// Rows, comma-separated; `plain` = plain pwrite/pread, no atomicity.
    #[arg(long, default_value = DEFAULT_STRATEGIES)]
    strategies: String,
    #[arg(long, default_value = "direct")]
    data: PlacementKind,
    #[arg(long, default_value_t = atomio_layout::DEFAULT_STRIPE_SIZE)]
    stripe_size: u64,
    /// Seconds of timed reads per phase (without, then with writers).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Runs per strategy (interleaved; medians reported; a p99 on this shared machine
    /// moves from run to run).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Each writer starts one write every this many ms (0: back to back). Paced by default
    /// so every row is offered the same write load (back to back, lock strategies' writers
    /// made 2-3x as many writes as versioning's, each one more conflict for the reader).
    #[arg(long, default_value_t = 50.0)]
    write_interval_ms: f64,
    /// The writers' CPU priority: `normal`, `nice:N` or `idle` (SCHED_IDLE). On a machine
    /// with fewer cores than clients, a lower priority keeps the writers from taking the
    /// reader's CPU.
    #[arg(long, default_value = "nice:10")]
    writer_priority: atomio_bench::versions::readers::Priority,
    /// Versioning writers keep at most this many published snapshots stored: each write
    /// first collects older ones (`File::set_version_retention`). Without it the store
    /// keeps every write's chunks.
    #[arg(long)]
    keep_last: Option<u64>,
    /// Writers run this long before the timed reads start.
    #[arg(long, default_value_t = 300)]
    warmup_ms: u64,
    #[arg(long)]
    no_verify: bool,
    /// The reader of every row reads a plain local file of the same bytes (`pread`, no
    /// atomicity) beside that row's writers: what the machine itself adds to a read under
    /// each row's write load. Not verified.
    #[arg(long)]
    plain_reader: bool,
    #[arg(long)]
    scratch: Option<PathBuf>,
    #[arg(long)]
    json: Option<PathBuf>,
    /// SVG chart path (default out/bench-version-readers.svg).
    #[arg(long)]
    chart: Option<PathBuf>,
    #[arg(long)]
    no_progress: bool,
}

/// The target: read latency with writers over without, for versioning.
const READERS_TARGET: f64 = 1.2;

pub fn version_readers(a: ReadersArgs) -> anyhow::Result<()> {
    let tile = atomio_workloads::TileParams {
        tile_x: a.tile_x,
        tile_y: a.tile_y,
        element_bytes: a.element_bytes,
        overlap_x: a.overlap,
        overlap_y: a.overlap,
        ..Default::default()
    };
    let cfg = ReadersConfig {
        writers: a.writers,
        readers: a.readers,
        servers: a.servers,
        tile,
        strategies: crate::bench_workload::parse_strategies(&a.strategies)?,
        data: a.data,
        stripe_size: a.stripe_size,
        seconds: a.seconds,
        runs: a.runs.max(1),
        interval_ms: a.write_interval_ms,
        writer_priority: a.writer_priority,
        keep_last: a.keep_last,
        warmup_ms: a.warmup_ms,
        verify: !a.no_verify,
        plain_reader: a.plain_reader,
        exe: std::env::current_exe().context("locating the atomio-lab executable")?,
        scratch: scratch(&a.scratch, "version-readers"),
        progress: !a.no_progress,
    };
    let load = loadavg();
    let report = runtime()?.block_on(atomio_bench::versions::readers::run(&cfg));
    let _ = std::fs::remove_dir_all(&cfg.scratch);
    let report = report?;
    print_readers(&report, &cfg);
    print_load(&load);
    if let Some(p) = &a.json {
        atomio_cli::output::write_json(p, &report)?;
    }
    let chart = a
        .chart
        .clone()
        .unwrap_or_else(|| PathBuf::from("out/bench-version-readers.svg"));
    let bars = |f: &dyn Fn(&atomio_bench::versions::readers::ReadersRow) -> f64| -> Vec<Bar> {
        report
            .rows
            .iter()
            .map(|r| Bar {
                label: format!("{} {:.2}x", r.strategy, f(r)),
                value: f(r),
                bad: r.verdict.as_deref() == Some("VIOLATED")
                    || (r.strategy == "versioning" && f(r) > READERS_TARGET),
                muted: r.strategy == "plain",
            })
            .collect()
    };
    let panels = vec![
        (
            "median read latency: with writers / without".to_string(),
            bars(&|r| r.median_ratio),
        ),
        (
            "p99 read latency: with writers / without".to_string(),
            bars(&|r| r.p99_ratio),
        ),
    ];
    save_chart(&chart, || {
        bar_panels(
            &chart,
            &format!(
                "readers beside {} writers (target for versioning: <= {READERS_TARGET}x)",
                report.writers
            ),
            "ratio (median over runs)",
            &panels,
        )
    })
}

fn print_readers(report: &ReadersReport, cfg: &ReadersConfig) {
    let first = report.rows.first();
    println!(
        "version-readers: {} reader process(es) read a {} region ({}) of the newest data in a \
         loop; {} writer processes write overlapping {} tiles ({}) {}; {} servers embedded \
         in this process (on disk, loopback TCP); {} s of reads per phase, median over {} runs; \
         versioning writers keep {}",
        report.readers,
        size(first.map_or(0, |r| r.read_bytes)),
        report.reader_region,
        report.writers,
        size(first.map_or(0, |r| r.write_bytes)),
        format_args!(
            "{} x {} elements of {} B, overlap {}",
            cfg.tile.tile_x, cfg.tile.tile_y, cfg.tile.element_bytes, cfg.tile.overlap_x
        ),
        if report.interval_ms > 0.0 {
            format!(
                "one write each per {} ms (offered {:.0} writes/s in all)",
                report.interval_ms,
                1000.0 / report.interval_ms * f64::from(report.writers)
            )
        } else {
            "back to back".into()
        },
        report.servers,
        report.seconds,
        cfg.runs,
        report
            .keep_last
            .map_or("every snapshot stored".into(), |k| format!(
                "the last {k} snapshots stored (each write collects older ones first)"
            )),
    );
    println!(
        "what it measures: this machine has {} cores; the writers run at priority {} (the \
         reader and the servers at normal priority), so writers use the CPU the reader leaves; \
         the plain row (plain \
         pwrite/pread, no atomicity) is what the machine itself adds under the same writers; \
         the rest of a strategy's ratio is its own (lock waits; for versioning, each new \
         snapshot's tree taken in)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        report.writer_priority,
    );
    let body: Vec<Vec<String>> = report
        .rows
        .iter()
        .map(|r| {
            vec![
                r.strategy.clone(),
                r.data.clone(),
                format!("{:.0}", r.idle_median_us),
                format!("{:.0}", r.idle_p99_us),
                format!("{:.0}", r.loaded_median_us),
                format!("{:.0}", r.loaded_p99_us),
                format!("{:.2}x", r.median_ratio),
                format!("{:.2}x", r.p99_ratio),
                format!("{:.1}", r.writes_per_s),
                format!("{:.1}", r.write_median_us / 1e3),
                r.nodes_per_read.map_or("-".into(), |n| format!("{n:.1}")),
                match (r.strategy.as_str(), r.verdict.as_deref()) {
                    ("plain", _) => "n/a (plain)".into(),
                    (_, Some(v)) => format!("{v} ({} reads)", r.reads_verified),
                    (_, None) => "-".into(),
                },
            ]
        })
        .collect();
    print!(
        "{}",
        render(
            &[
                "strategy",
                "data",
                "idle med µs",
                "idle p99 µs",
                "writers med µs",
                "writers p99 µs",
                "med ratio",
                "p99 ratio",
                "writes/s",
                "write med ms",
                "nodes/read",
                "verified",
            ],
            &body
        )
    );
    for r in report.rows.iter().filter(|r| r.violation.is_some()) {
        println!(
            "{} ({}): {}",
            r.strategy,
            r.verdict.as_deref().unwrap_or(""),
            r.violation.as_deref().unwrap_or("").trim_end()
        );
    }
    if cfg.plain_reader {
        println!(
            "reader: every row's reader read a plain local file of the same bytes (pread, no \
             atomicity) beside that row's writers, so a row's ratios are what the machine \
             itself adds to a read under that row's write load; versioning's target is judged \
             on a run without --plain-reader"
        );
        return;
    }
    if let Some(v) = report.rows.iter().find(|r| r.strategy == "versioning") {
        let splits: Vec<String> = v
            .runs
            .iter()
            .filter_map(|r| r.split.as_ref())
            .map(|s| {
                let st = |p: &Option<atomio_bench::versions::readers::PhaseStats>| {
                    p.as_ref().map_or("-".into(), |p| {
                        format!("{:.0}/{:.0} µs", p.median_us, p.p99_us)
                    })
                };
                match s.fetching {
                    None => format!("no read took in nodes, all {}", st(&s.cached)),
                    Some(_) => format!(
                        "{:.1}% took in nodes ({:.1} each; median/p99 {}), cached {}",
                        s.fetching_share * 100.0,
                        s.nodes_per_fetching_read,
                        st(&s.fetching),
                        st(&s.cached)
                    ),
                }
            })
            .collect();
        if !splits.is_empty() {
            println!(
                "versioning reads beside writers, by whether the newest snapshot's tree was \
                 cached or nodes of a new one were taken in (fetched, or pulled from the \
                 servers' node logs on this host) — per run: {}",
                splits.join("; ")
            );
        }
        println!(
            "target: versioning read latency with writers <= {READERS_TARGET}x \
             without — median {:.3}x ({}), p99 {:.3}x ({}); per run: {}",
            v.median_ratio,
            holds(v.median_ratio <= READERS_TARGET),
            v.p99_ratio,
            holds(v.p99_ratio <= READERS_TARGET),
            v.runs
                .iter()
                .map(|r| format!("{:.2}x/{:.2}x", r.median_ratio, r.p99_ratio))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

// ---------------------------------------------------------------------------------------
// version-gc

#[derive(Args, Clone)]
pub struct GcArgs {
    /// Overwrites by the one writer.
    #[arg(long, default_value_t = 1000)]
    overwrites: u64,
    /// File size, MiB.
    #[arg(long, default_value_t = 64)]
    mib: u64,
    /// Of the file each overwrite writes (1 = all of it; else consecutive windows of this
    /// share, in turn).
    #[arg(long, default_value_t = 1.0)]
    fraction: f64,
    /// Snapshots the collector keeps.
    #[arg(long, default_value_t = 4)]
    keep_last: u64,
    /// Leave collection to the collector alone (the writer does not bound the storage by
    /// collecting before a write when the collector lags).
    #[arg(long)]
    collector_only: bool,
    /// The collector's pause after a pass that found nothing to collect, ms (none after a
    /// pass that collected something).
    #[arg(long, default_value_t = 5)]
    gc_idle_ms: u64,
    /// Rows: `plain` (plain in-place pwrite), strategies without servers (posix-fcntl), and
    /// versioning.
    #[arg(long, default_value = "plain,posix-fcntl,versioning")]
    strategies: String,
    /// Versioning's base: `servers` (a server file) or `direct` (a local file).
    #[arg(long, default_value = "servers")]
    data: PlacementKind,
    #[arg(long, default_value_t = 4)]
    servers: u32,
    #[arg(long, default_value_t = atomio_layout::DEFAULT_STRIPE_SIZE)]
    stripe_size: u64,
    /// Disk usage is sampled after every overwrite and this often in between, ms.
    #[arg(long, default_value_t = 20)]
    sample_ms: u64,
    #[arg(long)]
    scratch: Option<PathBuf>,
    #[arg(long)]
    json: Option<PathBuf>,
    /// SVG chart path (default out/bench-version-gc.svg).
    #[arg(long)]
    chart: Option<PathBuf>,
    #[arg(long)]
    no_progress: bool,
}

/// The target: the servers' disk usage stays within this multiple of the file.
const GC_TARGET: f64 = 5.0;

pub fn version_gc(a: GcArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.fraction > 0.0 && a.fraction <= 1.0,
        "--fraction must be in (0, 1]"
    );
    let cfg = GcConfig {
        overwrites: a.overwrites.max(1),
        file_bytes: a.mib << 20,
        fraction: a.fraction,
        keep_last: a.keep_last.max(1),
        writer_retention: !a.collector_only,
        gc_idle_ms: a.gc_idle_ms,
        strategies: crate::bench_workload::parse_strategies(&a.strategies)?,
        data: a.data,
        servers: a.servers,
        stripe_size: a.stripe_size,
        sample_ms: a.sample_ms,
        scratch: scratch(&a.scratch, "version-gc"),
        progress: !a.no_progress,
    };
    println!(
        "version-gc: one writer overwrites a {} file {} times, each overwrite writing {} ({}); \
         versioning on {} placement with {} servers (embedded, file-backed, loopback TCP), a \
         second client collecting concurrently (keep the newest {}; next pass at once after one \
         that collected, after {} ms after one that found nothing){}",
        size(cfg.file_bytes),
        cfg.overwrites,
        size(cfg.window()),
        if cfg.window() == cfg.file_bytes {
            "the whole file".to_string()
        } else {
            format!(
                "{:.1}% of the file, consecutive windows in turn",
                cfg.window() as f64 / cfg.file_bytes as f64 * 100.0
            )
        },
        cfg.data,
        cfg.servers,
        cfg.keep_last,
        cfg.gc_idle_ms,
        if cfg.writer_retention {
            "; the writer collects itself before a write when the collector lags"
        } else {
            ""
        }
    );
    let load = loadavg();
    let rows = runtime()?.block_on(atomio_bench::versions::gc::run(&cfg));
    let _ = std::fs::remove_dir_all(&cfg.scratch);
    let rows = rows?;
    print_gc(&rows, &cfg);
    print_load(&load);
    if let Some(p) = &a.json {
        atomio_cli::output::write_json(p, &rows)?;
    }
    let chart = a
        .chart
        .clone()
        .unwrap_or_else(|| PathBuf::from("out/bench-version-gc.svg"));
    let mut series: Vec<Series> = rows
        .iter()
        .map(|r| Series {
            label: r.strategy.clone(),
            points: peaks(&r.samples, cfg.overwrites)
                .into_iter()
                .map(|(x, b)| (x as f64, b as f64 / cfg.file_bytes as f64))
                .collect(),
        })
        .collect();
    series.push(Series {
        label: format!("target {GC_TARGET}x"),
        points: vec![(0.0, GC_TARGET), (cfg.overwrites as f64, GC_TARGET)],
    });
    let panels = [Panel {
        title: format!(
            "disk usage while overwriting a {} file (keep {})",
            size(cfg.file_bytes),
            cfg.keep_last
        ),
        x_label: "overwrites done".into(),
        y_label: "disk usage / file size (peak per bucket)".into(),
        log_y: false,
        log_x: false,
        series,
    }];
    save_chart(&chart, || line_panels(&chart, &panels))
}

/// At most ~200 chart points: the samples grouped by overwrites done into equal buckets,
/// each bucket's highest disk usage (peaks survive) at its last overwrite count.
fn peaks(samples: &[atomio_bench::versions::gc::GcSample], overwrites: u64) -> Vec<(u64, u64)> {
    let bucket = overwrites.div_ceil(200).max(1);
    let mut out: Vec<(u64, u64)> = Vec::new();
    for s in samples {
        let x = (s.overwrites.div_ceil(bucket) * bucket).min(overwrites);
        match out.last_mut() {
            Some((lx, lb)) if *lx == x => *lb = (*lb).max(s.bytes),
            _ => out.push((x, s.bytes)),
        }
    }
    out
}

fn print_gc(rows: &[GcRow], cfg: &GcConfig) {
    println!(
        "disk usage = sum of st_blocks x 512 over every file under the servers' data \
         directories (versioning) or of the file (the others), sampled after every overwrite \
         and every {} ms; x = multiple of the file size",
        cfg.sample_ms
    );
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.strategy.clone(),
                r.data.clone(),
                format!("{:.2}x", r.max_x),
                format!("{:.2}x", r.end_of_writes_x),
                format!("{:.2}x", r.final_x),
                format!("{:.0}", r.write_mib_s),
                format!("{:.1}", r.write_median_ms),
                format!("{:.1}", r.write_p99_ms),
                format!("{:.1}", r.seconds),
                r.collector.as_ref().map_or("-".into(), |c| {
                    format!("{} / {}", c.passes, c.versions_collected)
                }),
                if r.verified {
                    format!("exact ({})", r.snapshots_checked)
                } else {
                    "WRONG".into()
                },
            ]
        })
        .collect();
    print!(
        "{}",
        render(
            &[
                "strategy",
                "data",
                "max disk",
                "at end of writes",
                "after last GC",
                "write MiB/s",
                "write med ms",
                "write p99 ms",
                "seconds",
                "GC passes / collected",
                "verified",
            ],
            &body
        )
    );
    for r in rows.iter().filter(|r| !r.verified) {
        println!(
            "WRONG DATA: {}: {}",
            r.strategy,
            r.mismatch.as_deref().unwrap_or("")
        );
    }
    for r in rows.iter().filter(|r| r.strategy == "versioning") {
        if let Some(c) = &r.collector {
            println!(
                "versioning collector: {} passes, {} snapshots collected, {} nodes freed, {} \
                 punched, {:.1} s in collection calls",
                c.passes,
                c.versions_collected,
                c.nodes_freed,
                size(c.bytes_punched),
                c.seconds_collecting
            );
        }
        match r.writer_collections {
            Some(n) => println!(
                "versioning writer: bounds the storage itself (retention {}: collects before a \
                 write what the collector has not yet) — it collected {n} times",
                cfg.keep_last
            ),
            None => println!(
                "versioning writer: --collector-only (the collector alone frees; the disk grows \
                 while it lags)"
            ),
        }
        // The file's own storage: what the servers held before its first write (their own
        // logs and tables, there with no file at all) is not the file's.
        let own = |b: u64| b.saturating_sub(r.baseline_bytes) as f64 / r.file_bytes.max(1) as f64;
        println!(
            "target: the file's storage <= {GC_TARGET}x the file ({} bytes) — max \
             {:.4}x ({}), at the end of the writes {:.4}x ({}), after the last collection \
             {:.4}x ({}); counted without the {} bytes the servers held before the first write \
             (their own files); with them: max {:.4}x ({} bytes), end {:.4}x, after the last \
             collection {:.4}x; newest snapshot {} the last overwrite ({} snapshots compared \
             byte for byte)",
            r.file_bytes,
            own(r.max_bytes),
            holds(own(r.max_bytes) <= GC_TARGET),
            own(r.end_of_writes_bytes),
            holds(own(r.end_of_writes_bytes) <= GC_TARGET),
            own(r.final_bytes),
            holds(own(r.final_bytes) <= GC_TARGET),
            r.baseline_bytes,
            r.max_x,
            r.max_bytes,
            r.end_of_writes_x,
            r.final_x,
            if r.verified {
                "reads back exactly"
            } else {
                "does NOT read back as"
            },
            r.snapshots_checked
        );
    }
}

/// `atomio-lab bench version-client`: one client process of `version-readers`.
pub fn version_client() -> anyhow::Result<()> {
    atomio_bench::versions::readers::client_main()?;
    Ok(())
}
