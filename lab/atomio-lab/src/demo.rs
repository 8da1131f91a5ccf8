//! `atomio-lab demo`: the main job. Two workloads side by side, each on an embedded cluster
//! (no daemons) with 4 client processes, in direct mode (the user's ordinary file holds the
//! bytes; atomio holds only locks), against the baseline MPI users have (`romio`: one
//! `fcntl` lock on each call's bounding extent, then data sieving) and a reference row
//! (`contiguous`: the same bytes `pwrite`n contiguously, no atomio). Every result is read back and checked
//! by the verifier; the demo names the winner per workload and why, and draws one chart.

use crate::bench_workload::{run_config, table, verdict, CommonArgs};
use anyhow::anyhow;
use atomio_bench::chart::{bar_panels, Bar};
use atomio_bench::workload::WorkloadRow;
use atomio_client::PlacementKind;
use atomio_workloads::Workload;
use clap::Args;
use std::path::{Path, PathBuf};

/// The rows of each workload: contiguous, no atomicity, the two fcntl baselines, the lock
/// strategies that matter (on lock servers, and datatype one-try on the host's shared lock
/// table, `+host`: one host's job needs no lock server), SeqDLM (on atomio's servers: its cached locks and write-back
/// caches need data servers that apply flushes in sequence-number order), versioning,
/// interval I/O, and `auto` (which picks one of them from the workload's interval analysis).
const DEMO_STRATEGIES: &str = "contiguous,none,romio,posix-fcntl,bounding-extent,ching:list:one-try,ching:datatype:one-try,ching:datatype:alt-try,ching:datatype:one-try+host,seqdlm,versioning,interval,auto";

#[derive(Args)]
pub struct DemoArgs {
    /// Where to write the chart.
    #[arg(long, default_value = "out/demo.svg")]
    chart: PathBuf,
    /// Runs per strategy (interleaved; the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where the bytes live: direct (the user's file) or servers (atomio's data servers).
    #[arg(long, default_value = "direct")]
    data: PlacementKind,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long)]
    no_progress: bool,
    /// Instead: the story on a file system with several clients (brings up the GlusterFS
    /// bed of scripts/sharedfs, two clients and a check client, and tears it down; root):
    /// MPICH's atomic mode, MPICH without data sieving, atomio's auto and the contiguous row, each
    /// verified through a client no rank wrote through; chart out/demo-sharedfs.svg.
    #[arg(long)]
    sharedfs: bool,
}

struct Part {
    name: &'static str,
    params: &'static [&'static str],
    title: &'static str,
}

const PARTS: [Part; 2] = [
    Part {
        name: "s3d",
        params: &[],
        title: "S3D checkpoint: interleaved noncontiguous writes, no overlap",
    },
    Part {
        name: "tile",
        params: &[],
        title: "mpi-tile-io: overlapping tiles (ghost cells shared)",
    },
];

/// Today's baselines: what MPI users have without atomio.
fn is_baseline(strategy: &str) -> bool {
    matches!(strategy, "romio" | "posix-fcntl")
}

/// Why `winner` won, from the measurements (`rows`) and the workload's shape.
fn why(overlapping: bool, piece_bytes: f64, winner: &WorkloadRow, rows: &[WorkloadRow]) -> String {
    let rate = |n: &str| {
        rows.iter()
            .find(|r| r.strategy == n)
            .map_or(0.0, |r| r.mib_per_s)
    };
    let (none, romio) = (rate("none"), rate("romio"));
    match (overlapping, winner.strategy.as_str()) {
        (_, "auto") => match &winner.chosen {
            Some(c) => format!(
                "auto read the ranks' declared accesses and chose {}: {}",
                c.strategy, c.reason
            ),
            None => "auto had no interval analysis and locked every byte".to_string(),
        },
        (false, "interval") => format!(
            "interval I/O intersected the ranks' declared accesses before any write and found no \
             byte two ranks share: its calls take no lock at all and every process writes at \
             once ({:.0}% of the no-lock rate), while romio's one fcntl lock on each call's \
             bounding extent (which spans everyone's data) serializes them",
            winner.mib_per_s / none.max(1e-9) * 100.0
        ),
        (_, "versioning") => "versioning takes no locks: each call stores its bytes as new \
             immutable chunks in parallel with every other writer, then only its metadata (a \
             segment tree sharing every unchanged subtree) is ordered into a snapshot by the \
             version manager; overlapping writers never wait for each other (its MiB/s \
             includes writing the newest snapshot into the user's file at the end; PIO MiB/s \
             is the calls alone)"
            .to_string(),
        (_, w) if w.starts_with("seqdlm") => format!(
            "{w} caches each call's bytes in the client under cached stripe locks; a conflicting \
             writer is granted as soon as the holder stops using its lock (early grant), and the \
             data servers apply the flushes in the locks' sequence-number order, so the flush \
             is off every writer's path (its MiB/s includes the flush at the end; PIO MiB/s is \
             the calls alone)"
        ),
        (true, w) if w.ends_with("+host") => format!(
            "every tile overlaps its neighbours, so every atomic strategy must run overlapping calls \
             one after another; {w} takes each call's locks in a lock table in shared memory on \
             this host (no lock server, no round trip, no system call unless it must wait), so \
             its serialized calls cost no more than a kernel fcntl lock's, and it writes only the \
             call's own bytes where romio also reads and rewrites the whole extent (data \
             sieving, {romio:.0} MiB/s); a job across hosts takes the same locks on lock servers"
        ),
        (true, "posix-fcntl") => {
            let host = rows
                .iter()
                .filter(|r| r.strategy.ends_with("+host"))
                .max_by(|a, b| a.mib_per_s.total_cmp(&b.mib_per_s));
            let mut why = format!(
                "every tile overlaps its neighbours, so every atomic strategy must run overlapping \
                 calls one after another; with the same serialization, a kernel fcntl lock on one \
                 host (~2 us) is cheaper than a round trip to a lock server process (a wake-up each \
                 way, tens of microseconds, nothing of atomio included); \
                 on a cluster both are network round trips. romio also re-reads and rewrites each \
                 call's whole extent (data sieving), which is why it trails at {romio:.0} MiB/s"
            );
            if let Some(h) = host {
                why += &format!(
                    ". atomio's host lock table needs no round trip either: {} ran at {:.2}x \
                     posix-fcntl, both locks in one host's shared memory",
                    h.strategy,
                    h.mib_per_s / winner.mib_per_s.max(1e-9)
                );
            }
            why
        }
        (true, "romio") => "every tile overlaps its neighbours, so every atomic strategy must run \
             overlapping calls one after another; with the same serialization, romio's kernel fcntl \
             lock on one host (~2 us) is cheaper than a round trip to a lock server process (a \
             wake-up each way), and its data sieving (re-reading and rewriting \
             each call's whole extent) stays in one host's page cache; on a cluster both locks are \
             network round trips and the extent's reads and writes go to the file system"
            .to_string(),
        (true, w) => format!(
            "every tile overlaps its neighbours, so every atomic strategy must run overlapping calls \
             one after another; {w} wins because its serialized calls are the cheapest: one lock \
             round trip and plain pwrites of the call's own bytes, where romio also reads and \
             rewrites the whole extent (data sieving)"
        ),
        (false, "romio") => format!(
            "the pieces average {piece_bytes:.0} bytes. atomio copies them into a shared mapping of \
             the file (no system call per piece), but every process still maps every page its \
             neighbours write too, and the byte-range strategies' locks name each piece for the \
             lock servers to index: even with no locks at all (none) the pieces reach \
             {none:.0} MiB/s = {:.2}x romio. romio's data sieving turns a call into 4 MiB reads \
             and writes of the extent under one fcntl lock, which one host's page cache absorbs \
             as fast; on a parallel file system that extent lock serializes every writer of the \
             file while the pieces go to many servers in parallel",
            none / romio.max(1e-9)
        ),
        (false, w) => {
            let mut why = format!(
                "no two processes write the same byte, so {w}'s locks never make anyone wait and \
                 every process writes at once ({:.0}% of the no-lock rate), while romio's one \
                 fcntl lock on each call's bounding extent (which spans everyone's data) \
                 serializes them and rewrites the holes by data sieving",
                winner.mib_per_s / none.max(1e-9) * 100.0
            );
            if romio >= 0.9 * none {
                // Measured, not assumed: say when the serialization did not cost much here.
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                why += &format!(
                    ". Here that costs romio little ({:.0}% of the no-lock rate): {cores} cores \
                     cannot run four writers at once anyway, and its 4 MiB writes cost one \
                     host's page cache less per byte than placing {piece_bytes:.0}-byte pieces; \
                     across the nodes of a parallel file system the extent lock serializes \
                     writers that could otherwise all write at once",
                    romio / none.max(1e-9) * 100.0
                );
            }
            why
        }
    }
}

pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    if a.sharedfs {
        let chart = if a.chart == Path::new("out/demo.svg") {
            PathBuf::from("out/demo-sharedfs.svg")
        } else {
            a.chart.clone()
        };
        return crate::demo_sharedfs::run(a.runs, &chart, !a.no_progress);
    }
    let common = CommonArgs {
        clients: 4,
        servers: 4,
        strategies: DEMO_STRATEGIES.to_string(),
        data: a.data,
        no_bypass: false,
        deploy: "embedded".into(),
        memory: false,
        cluster: None,
        stripe_size: atomio_layout::DEFAULT_STRIPE_SIZE,
        stripe_count: None,
        runs: a.runs,
        no_verify: false,
        keep: None,
        scratch: None,
        json: None,
        chart: None,
        no_progress: a.no_progress,
        rtt_us: 0,
        jitter_us: 0,
    };
    println!(
        "atomio-lab demo: 4 client processes, 4 embedded lock servers, data {} ({}), median of {} interleaved runs",
        a.data,
        match a.data {
            PlacementKind::Direct => "each process writes the user's ordinary file under atomio's locks; seqdlm keeps the bytes on the servers, versioning keeps snapshots there and writes the newest into the file at the end",
            PlacementKind::Servers => "bytes stored on atomio's data servers",
        },
        a.runs
    );
    let mut all_rows = Vec::new();
    let mut panels = Vec::new();
    let mut failures = Vec::new();
    for part in &PARTS {
        let workload = Workload::from_name(part.name, part.params).map_err(|e| anyhow!("{e}"))?;
        let plan = workload.plan(4).map_err(|e| anyhow!("{e}"))?;
        let overlapping = plan.overlapping;
        let (pieces, bytes) = plan
            .clients
            .iter()
            .flat_map(|c| c.calls.iter().filter_map(|c| c.access.as_ref()))
            .fold((0u64, 0u64), |(p, b), a| {
                (p + a.ranges().count() as u64, b + a.size())
            });
        let piece_bytes = bytes as f64 / pieces.max(1) as f64;
        let cfg = crate::bench_workload::config(&common, workload)?;
        let rows = run_config(&cfg)?;
        println!();
        println!(
            "== {} ({} MiB per run)",
            part.title,
            rows.first().map_or(0, |r| r.bytes >> 20)
        );
        print!("{}", table(&rows));
        let atomic: Vec<&WorkloadRow> = rows
            .iter()
            .filter(|r| {
                !matches!(
                    r.strategy.as_str(),
                    "none" | "contiguous" | "plain" | "plain-mapped"
                )
            })
            .collect();
        for r in atomic.iter().filter(|r| r.verified == Some(false)) {
            failures.push(format!("{}: {}", part.name, r.strategy));
        }
        let best = |baseline: bool| {
            atomic
                .iter()
                .filter(|r| r.verified != Some(false) && is_baseline(&r.strategy) == baseline)
                .max_by(|x, y| x.mib_per_s.total_cmp(&y.mib_per_s))
        };
        let show = |w: &WorkloadRow| {
            format!(
                "{} at {:.0} MiB/s = {} romio, {} of none (no atomicity)",
                w.strategy,
                w.mib_per_s,
                w.x_romio.map_or("-".into(), |x| format!("{x:.2}x")),
                w.pct_of_none.map_or("-".into(), |p| format!("{p:.0}%")),
            )
        };
        if let Some(w) = [best(false), best(true)]
            .into_iter()
            .flatten()
            .max_by(|x, y| x.mib_per_s.total_cmp(&y.mib_per_s))
        {
            let who = if is_baseline(&w.strategy) {
                "today's baseline"
            } else {
                "atomio"
            };
            println!("winner ({who}): {}", show(w));
            if let Some(a) = best(false).filter(|a| a.strategy != w.strategy) {
                println!("best atomio: {}", show(a));
            }
            println!("why: {}", why(overlapping, piece_bytes, w, &rows));
        }
        if let Some(none) = rows.iter().find(|r| r.strategy == "none") {
            println!("none (no atomicity): {}", verdict(none.verified));
        }
        panels.push((
            format!("{} (MiB/s)", part.name),
            rows.iter()
                .map(|r| Bar {
                    label: r.strategy.clone(),
                    value: r.mib_per_s,
                    bad: r.verified == Some(false),
                    muted: matches!(
                        r.strategy.as_str(),
                        "none" | "contiguous" | "plain" | "plain-mapped" | "romio"
                    ),
                })
                .collect::<Vec<_>>(),
        ));
        all_rows.extend(rows);
    }
    println!();
    println!(
        "verification: {}",
        if failures.is_empty() {
            "every atomic strategy produced an atomic file with every byte in place".to_string()
        } else {
            format!("NOT atomic: {}", failures.join(", "))
        }
    );
    if let Some(p) = &a.json {
        atomio_cli::output::write_json(p, &all_rows)?;
    }
    if let Some(dir) = a.chart.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    bar_panels(
        &a.chart,
        "atomio-lab demo: 4 processes, one shared file, atomic mode",
        "MiB/s (median of runs; grey: contiguous, none, romio; red: not atomic)",
        &panels,
    )?;
    println!("chart: {}", a.chart.display());
    if !failures.is_empty() {
        return Err(anyhow!("an atomic strategy produced a non-atomic file"));
    }
    Ok(())
}
