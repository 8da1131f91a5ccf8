//! `atomio bench mpi-tile`: the unmodified MPI program `mpi/bench/tile_io` (mpi-tile-io
//! style, overlapping tiles, one subarray write per rank) under MPICH non-atomic, MPICH's own
//! atomic mode, and each atomio strategy through the preloaded `libatomio_mpiio.so`;
//! interleaved repetitions, a table (MiB/s, ratio to MPICH atomic, verifier verdict), the key
//! figure (best atomio ≥ 3× MPICH atomic), JSON and an SVG bar chart.

use anyhow::{anyhow, Context};
use atomio_bench::chart::{bars, Bar};
use atomio_bench::mpi_tile::{self, Baseline, Flavor, MpiTileConfig, MpiTileReport, TileGeometry};
use atomio_bench::table::render;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum)]
enum FlavorArg {
    Mpich,
    Openmpi,
}

#[derive(Args)]
pub struct MpiTileArgs {
    /// MPI ranks (= tiles).
    #[arg(long, default_value_t = 4)]
    ranks: u32,
    /// Tiles along X (default: near-square, tiles_x ≥ tiles_y).
    #[arg(long)]
    tiles_x: Option<u32>,
    #[arg(long)]
    tiles_y: Option<u32>,
    /// Elements per tile along X, ghost cells included (mpi-tile-io sz_tile_x).
    #[arg(long, default_value_t = 128)]
    tile_x: u64,
    #[arg(long, default_value_t = 128)]
    tile_y: u64,
    /// Bytes per element (sz_element).
    #[arg(long, default_value_t = 1024)]
    element_bytes: u64,
    /// Elements shared by X neighbours (overlap_x).
    #[arg(long, default_value_t = 16)]
    overlap_x: u64,
    #[arg(long, default_value_t = 16)]
    overlap_y: u64,
    /// Write calls per rank per run (each timed; the run's time is their sum).
    #[arg(long, default_value_t = 3)]
    iterations: u32,
    /// MPI_File_write_at_all instead of MPI_File_write_at.
    #[arg(long)]
    collective: bool,
    /// Repetitions of every configuration, interleaved; medians are reported.
    #[arg(long, default_value_t = 5)]
    reps: u32,
    /// MPI baselines: mpich (non-atomic), mpich-atomic, and the same with ROMIO's write
    /// data sieving disabled (mpich-nods, mpich-atomic-nods).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "mpich,mpich-nods,mpich-atomic,mpich-atomic-nods"
    )]
    baselines: Vec<String>,
    /// atomio strategies, each run through the preloaded libatomio_mpiio.so.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ching:datatype:one-try,ching:list:one-try,bounding-extent,rma"
    )]
    strategies: Vec<String>,
    /// libatomio_mpiio.so: `auto` builds it (make -C mpi/mpiio) against the libatomio.so next
    /// to this program; `none` lists the strategies as skipped; anything else is its path.
    #[arg(long, default_value = "auto")]
    mpiio_lib: String,
    /// Extra environment for every rank, NAME=VALUE (repeatable).
    #[arg(long = "env")]
    env: Vec<String>,
    /// Extra environment only for the atomio runs, NAME=VALUE (repeatable).
    #[arg(long = "atomio-env")]
    atomio_env: Vec<String>,
    /// Directory of the benchmark files (plain and atomio: paths).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Which MPI builds and launches the program.
    #[arg(long, value_enum, default_value = "mpich")]
    mpi: FlavorArg,
    /// MPI launcher (default: mpiexec, or mpirun.openmpi with --mpi openmpi).
    #[arg(long)]
    mpiexec: Option<String>,
    /// The mpi/bench folder (default: found from the current directory or the build tree).
    #[arg(long)]
    src: Option<PathBuf>,
    /// Skip tile_io's serializability check of the final file.
    #[arg(long)]
    no_verify: bool,
    /// Kill a run after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long, default_value = "out/bench-mpi-tile.svg")]
    chart: PathBuf,
    #[arg(long)]
    no_progress: bool,
    /// Further tile_io options for every run, after `--`.
    #[arg(last = true)]
    extra: Vec<String>,
}

fn pairs(v: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    v.iter()
        .map(|s| {
            s.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| anyhow!("expected NAME=VALUE, got {s}"))
        })
        .collect()
}

/// `--mpiio-lib`: `none`, `auto` (built next to this executable) or a path (made absolute:
/// the runs start in `mpi/bench`).
fn resolve_lib(arg: &str, flavor: Flavor) -> anyhow::Result<Option<PathBuf>> {
    match arg {
        "none" => Ok(None),
        "auto" => {
            let exe = std::env::current_exe().context("locating the atomio executable")?;
            let dir = exe.parent().context("atomio executable has no folder")?;
            let lib = atomio_bench::mpi_run::build_mpiio_lib(flavor.mpicc(), dir)?;
            println!("MPI-IO library: {}", lib.display());
            Ok(Some(lib))
        }
        path => Ok(Some(
            std::fs::canonicalize(path).with_context(|| format!("--mpiio-lib {path}"))?,
        )),
    }
}

pub fn run(a: MpiTileArgs) -> anyhow::Result<()> {
    let flavor = match a.mpi {
        FlavorArg::Mpich => Flavor::Mpich,
        FlavorArg::Openmpi => Flavor::Openmpi,
    };
    let baselines = a
        .baselines
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| Baseline::parse(s).ok_or_else(|| anyhow!("unknown baseline {s}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cfg = MpiTileConfig {
        flavor,
        mpiexec: a.mpiexec,
        src: a.src,
        ranks: a.ranks,
        geometry: TileGeometry {
            tiles_x: a.tiles_x,
            tiles_y: a.tiles_y,
            tile_x: a.tile_x,
            tile_y: a.tile_y,
            element_bytes: a.element_bytes,
            overlap_x: a.overlap_x,
            overlap_y: a.overlap_y,
        },
        iterations: a.iterations,
        collective: a.collective,
        reps: a.reps,
        dir: a.dir.unwrap_or_else(std::env::temp_dir),
        baselines,
        strategies: a.strategies.into_iter().filter(|s| !s.is_empty()).collect(),
        mpiio_lib: resolve_lib(&a.mpiio_lib, flavor)?,
        env: pairs(&a.env)?,
        atomio_env: pairs(&a.atomio_env)?,
        extra: a.extra,
        verify: !a.no_verify,
        timeout: Duration::from_secs(a.timeout),
    };
    if !cfg.strategies.is_empty() && cfg.mpiio_lib.is_none() {
        println!(
            "note: --mpiio-lib none: the atomio strategies ({}) are skipped; \
             only the MPI baselines run",
            cfg.strategies.join(", ")
        );
    }
    let bar = atomio_bench::progress::bar(1, !a.no_progress);
    let result = mpi_tile::run(&cfg, |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
        bar.println(&p.what);
        bar.set_message(p.what.clone());
    });
    bar.finish_and_clear();
    let rep = result?;
    print!("{}", report(&rep));
    if let Some(path) = &a.json {
        crate::output::write_json(path, &rep)?;
    }
    chart(&a.chart, &rep)?;
    println!("chart: {}", a.chart.display());
    Ok(())
}

/// The header, table, skipped/failed notes and key figure, as printed.
pub fn report(r: &MpiTileReport) -> String {
    let g = &r.geometry;
    let mut out = format!(
        "tile_io: {} ranks, {}×{} tiles of {} B elements, overlap {}×{}{}, {} iteration(s) per run, \
         {} writes, median of {} interleaved repetitions; {}\n",
        r.ranks,
        g.tile_x,
        g.tile_y,
        g.element_bytes,
        g.overlap_x,
        g.overlap_y,
        r.dataset
            .map(|(x, y)| format!(" (dataset {x}×{y} elements)"))
            .unwrap_or_default(),
        r.iterations,
        if r.collective { "collective" } else { "independent" },
        r.reps,
        r.mpi_library.as_deref().unwrap_or("MPI library unknown"),
    );
    let atomic_name = Baseline {
        atomic: true,
        no_sieving: false,
    }
    .name(r.flavor);
    let body: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let runs: Vec<String> = row
                .runs
                .iter()
                .map(|x| format!("{:.0}", x.mib_per_s))
                .collect();
            vec![
                row.config.clone(),
                if row.atomic { "yes" } else { "no" }.into(),
                row.mib_per_s.map_or("-".into(), |v| format!("{v:.1}")),
                row.ratio_to_mpi_atomic
                    .map_or("-".into(), |v| format!("{v:.2}x")),
                row.seconds.map_or("-".into(), |v| format!("{v:.3}")),
                row.verified.clone(),
                if row.error.is_some() {
                    "FAILED".into()
                } else {
                    runs.join(" ")
                },
            ]
        })
        .collect();
    let ratio_header = format!("vs {atomic_name}");
    out += &render(
        &[
            "config",
            "atomic mode",
            "MiB/s",
            &ratio_header,
            "seconds",
            "verified",
            "MiB/s per run",
        ],
        &body,
    );
    for row in &r.rows {
        if let Some(s) = &row.skipped {
            out += &format!("{}: {s}\n", row.config);
        }
        if let Some(e) = &row.error {
            out += &format!("{}: FAILED: {e}\n", row.config);
        }
        if let Some(v) = row.runs.iter().find(|x| x.verify == "violated") {
            out += &format!("{}: {}\n", row.config, v.violation);
        }
    }
    out += "key figure (target in brackets):\n";
    match &r.key {
        Some(k) => {
            out += &format!(
                "  best atomio ({}) / {atomic_name} = {:.1} / {:.1} MiB/s = {:.2}x [>= {}x: {}]",
                k.best,
                k.best_mib_per_s,
                k.mpi_atomic_mib_per_s,
                k.ratio,
                k.target,
                if k.met { "met" } else { "MISSED" }
            );
            if let Some(b) = k.ratio_to_best_mpi_atomic {
                out += &format!("; vs the best MPI atomic configuration: {b:.2}x");
            }
            out += "\n";
        }
        None => {
            out += &format!(
                "  best atomio / {atomic_name}: not measured (needs --mpiio-lib, --strategies and the {atomic_name} baseline)\n"
            )
        }
    }
    out
}

fn chart(path: &Path, r: &MpiTileReport) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let b: Vec<Bar> = r
        .rows
        .iter()
        .filter_map(|row| {
            Some(Bar {
                label: format!("{} ({})", row.config, row.verified),
                value: row.mib_per_s?,
                bad: row.verified.starts_with("VIOLATED"),
                muted: !row.atomic,
            })
        })
        .collect();
    let title = format!(
        "tile_io, {} ranks, {}×{}×{} B tiles, overlap {} — MiB/s",
        r.ranks,
        r.geometry.tile_x,
        r.geometry.tile_y,
        r.geometry.element_bytes,
        r.geometry.overlap_x
    );
    bars(path, &title, "MiB/s (median of repetitions)", &b)
        .with_context(|| format!("writing {}", path.display()))
}
