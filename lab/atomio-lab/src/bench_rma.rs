//! `atomio-lab bench rma`: the RMA byte-range lock micro-benchmark (`mpi/rmalock`, Thakur et al.
//! 2005 §4) in one `mpiexec`; prints µs per acquire+release pair for paper, direct-grant and
//! fcntl (conflicting and not; 2, 4, 8 ranks), the work per pair, and the key ratio
//! direct-grant / paper (conflicting, 8 ranks; target ≤ 0.5); writes JSON and an SVG chart.

use anyhow::Context;
use atomio_bench::chart::{line_panels, Panel, Series};
use atomio_bench::rma::{self, RmaBenchConfig, RmaRow, RmaRun};
use atomio_cli::table::render;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args)]
pub struct RmaArgs {
    /// Rank counts (each on the first k ranks of one MPI world).
    #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
    ranks: Vec<u32>,
    /// MPI world size (default: the largest rank count).
    #[arg(long)]
    world: Option<u32>,
    /// Timed repetitions per configuration, interleaved; medians are reported.
    #[arg(long, default_value_t = 7)]
    reps: u32,
    /// Pairs per rank are cut so one timed run takes about this long.
    #[arg(long, default_value_t = 1.0)]
    target_sec: f64,
    /// At most this many pairs per run over all ranks (bench_rmalock's --total, default 800).
    #[arg(long)]
    total: Option<u32>,
    /// Implementations: paper, direct-grant, dg-epoch (direct-grant on MPI exclusive
    /// epochs, an ablation), fcntl.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "paper,direct-grant,fcntl"
    )]
    impls: Vec<String>,
    /// Directory of the fcntl lock file: the file system fcntl is measured on (default /tmp).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// MPI launcher.
    #[arg(long, default_value = "mpiexec")]
    mpiexec: String,
    /// The mpi/rmalock folder (default: found from the current directory or the build tree).
    #[arg(long)]
    src: Option<PathBuf>,
    /// Kill the run after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// Write the run (command, every row with every repetition, key figure) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// SVG chart path.
    #[arg(long, default_value = "out/bench-rma.svg")]
    chart: PathBuf,
    #[arg(long)]
    no_progress: bool,
    /// Further bench_rmalock options, after `--` (e.g. `-- --min-pairs 4`).
    #[arg(last = true)]
    extra: Vec<String>,
}

pub fn run(a: RmaArgs) -> anyhow::Result<()> {
    let cfg = RmaBenchConfig {
        src: a.src,
        mpiexec: a.mpiexec,
        ranks: a.ranks,
        world: a.world,
        reps: a.reps,
        target_sec: a.target_sec,
        total: a.total,
        impls: a.impls,
        dir: a.dir,
        extra: a.extra,
        timeout: Duration::from_secs(a.timeout),
    };
    println!("running: {}", rma::command_line(&cfg).join(" "));
    let bar = atomio_bench::progress::bar(1, !a.no_progress);
    let result = rma::run(&cfg, |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
        bar.set_message(p.line.clone());
    });
    bar.finish_and_clear();
    let run = result?;
    print!("{}", report(&run));
    if let Some(path) = &a.json {
        atomio_cli::output::write_json(path, &run)?;
    }
    if let Some(dir) = a.chart.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    chart(&a.chart, &run)?;
    println!("chart: {}", a.chart.display());
    Ok(())
}

fn labels(rows: &[RmaRow]) -> Vec<String> {
    let mut l: Vec<String> = Vec::new();
    for want in rma::IMPLS {
        if rows.iter().any(|r| r.label() == want) {
            l.push(want.to_string());
        }
    }
    l
}

fn cases(rows: &[RmaRow]) -> Vec<(String, u32)> {
    let mut c: Vec<(String, u32)> = rows.iter().map(|r| (r.case.clone(), r.ranks)).collect();
    c.sort();
    c.dedup();
    c
}

/// The tables and the key figure, as printed.
pub fn report(run: &RmaRun) -> String {
    let rows = &run.rows;
    let labels = labels(rows);
    let mut out = format!(
        "µs per acquire+release pair: median of {} interleaved repetitions, one mpiexec (world {}); \
         metric = wall time until the last rank finished / (ranks × pairs){}\n",
        run.reps,
        run.world,
        run.fs
            .as_ref()
            .map(|f| format!("; fcntl on {f}"))
            .unwrap_or_default()
    );
    let mut headers: Vec<&str> = vec!["case", "ranks"];
    headers.extend(labels.iter().map(String::as_str));
    let ratio_cols: Vec<String> = labels
        .iter()
        .filter(|l| l.as_str() != "paper" && l.as_str() != "fcntl")
        .map(|l| format!("{l}/paper"))
        .collect();
    let has_paper = labels.iter().any(|l| l == "paper");
    if has_paper {
        headers.extend(ratio_cols.iter().map(String::as_str));
    }
    let body: Vec<Vec<String>> = cases(rows)
        .into_iter()
        .map(|(case, k)| {
            let mut cells = vec![case.clone(), k.to_string()];
            for l in &labels {
                cells.push(
                    rma::median_of(rows, l, &case, k).map_or("-".into(), |v| format!("{v:.1}")),
                );
            }
            if has_paper {
                let p = rma::median_of(rows, "paper", &case, k);
                for l in labels.iter().filter(|l| *l != "paper" && *l != "fcntl") {
                    let cell = match (rma::median_of(rows, l, &case, k), p) {
                        (Some(x), Some(p)) if p > 0.0 => format!("{:.2}", x / p),
                        _ => "-".into(),
                    };
                    cells.push(cell);
                }
            }
            cells
        })
        .collect();
    out += &render(&headers, &body);

    // Machine-independent work per pair (RMA modes only).
    let work: Vec<Vec<String>> = rows
        .iter()
        .filter(|r| r.epochs_per_pair.is_some())
        .map(|r| {
            let f = |x: Option<f64>, p: usize| x.map_or("-".into(), |v| format!("{v:.p$}"));
            vec![
                r.case.clone(),
                r.ranks.to_string(),
                r.label(),
                r.pairs.to_string(),
                f(r.epochs_per_pair, 2),
                f(r.failed_tries_per_pair, 2),
                f(r.msgs_per_pair, 2),
                f(r.bytes_fetched_per_epoch, 0),
            ]
        })
        .collect();
    if !work.is_empty() {
        out += "\nwork per pair (does not depend on machine load):\n";
        out += &render(
            &[
                "case",
                "ranks",
                "impl",
                "pairs/rank",
                "epochs",
                "failed tries",
                "messages",
                "bytes/epoch",
            ],
            &work,
        );
    }
    out += "\nkey figure (target in brackets):\n";
    match &run.key {
        Some(k) => {
            let note = if k.ranks != k.target_ranks {
                format!(
                    " (the target is stated for {} ranks; this run's largest is {})",
                    k.target_ranks, k.ranks
                )
            } else {
                String::new()
            };
            out += &format!(
                "  direct-grant / paper, {} locks, {} ranks = {:.1} / {:.1} µs = {:.2} [<= {}: {}]{note}\n",
                k.case,
                k.ranks,
                k.direct_grant_us,
                k.paper_us,
                k.ratio,
                k.target,
                if k.met { "met" } else { "MISSED" }
            );
        }
        None => out += "  direct-grant / paper: not measured (both impls and the conflicting case are needed)\n",
    }
    out
}

fn chart(path: &Path, run: &RmaRun) -> anyhow::Result<()> {
    let rows = &run.rows;
    let panel = |case: &str| Panel {
        title: format!("{case} locks: µs per acquire+release pair"),
        x_label: "ranks".into(),
        y_label: "µs per pair (median)".into(),
        series: labels(rows)
            .into_iter()
            .map(|l| Series {
                points: rows
                    .iter()
                    .filter(|r| r.case == case && r.label() == l)
                    .map(|r| (f64::from(r.ranks), r.us_per_pair_median.max(1e-3)))
                    .collect(),
                label: l,
            })
            .filter(|s| !s.points.is_empty())
            .collect(),
        log_y: true,
        log_x: false,
    };
    line_panels(path, &[panel("conflicting"), panel("nonconflicting")])
        .with_context(|| format!("writing {}", path.display()))
}
