//! `atomio-lab bench mpi-tile` and `atomio-lab bench mpi-strided`: the unmodified MPI programs
//! `mpi/bench/tile_io` (mpi-tile-io style, overlapping tiles, one subarray write per rank)
//! and `mpi/bench/strided_io` (rank r owns every P-th block of B bytes; 16 `write_at` or one
//! `write_at_all`) under MPICH non-atomic, MPICH's own atomic mode, and each atomio strategy
//! through the preloaded `libatomio_mpiio.so` (strided: also the reference rows without
//! MPI-IO: the same bytes `pwrite`n contiguously, the pieces one `pwrite` each, the pieces
//! through a mapping); interleaved repetitions, a table (MiB/s, ratio to MPICH atomic,
//! verdict), the key figure against its target, JSON and an SVG bar chart.

use anyhow::{anyhow, Context};
use atomio_bench::chart::{bar_panels, Bar};
use atomio_bench::mpi_bench::{
    self, Baseline, Flavor, MpiBenchConfig, MpiBenchReport, NoncontigGeometry, Program,
    StridedGeometry, TileGeometry,
};
use atomio_cli::table::render;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum)]
enum FlavorArg {
    Mpich,
    Openmpi,
}

/// What every MPI benchmark takes.
#[derive(Args)]
pub struct MpiCommon {
    /// MPI ranks.
    #[arg(long, default_value_t = 4)]
    ranks: u32,
    /// MPI_File_write_at_all instead of MPI_File_write_at.
    #[arg(long)]
    collective: bool,
    /// Repetitions of every configuration, interleaved; medians are reported.
    #[arg(long, default_value_t = 5)]
    reps: u32,
    /// MPI baselines: mpich (non-atomic), mpich-atomic, and the same with ROMIO's write
    /// data sieving disabled (mpich-nods, mpich-atomic-nods) [default: all four;
    /// mpi-noncontig: mpich,mpich-atomic].
    #[arg(long, value_delimiter = ',')]
    baselines: Option<Vec<String>>,
    /// atomio strategies, each run through the preloaded libatomio_mpiio.so: any name the
    /// library takes (`ching:…`, `bounding-extent`, `rma`, `seqdlm`, `versioning`, …);
    /// `<strategy>+host` runs it with `ATOMIO_LOCKS=host` (locks in the host's shared lock
    /// table, no lock server) [default: ching:datatype:one-try,ching:list:one-try,
    /// bounding-extent,rma,ching:datatype:one-try+host; mpi-noncontig: auto and every
    /// byte-range strategy of the MPI library: auto,ching:datatype:one-try,
    /// ching:list:alt-try,ching:posix:two-phase,bounding-extent,interval].
    #[arg(long, value_delimiter = ',')]
    strategies: Option<Vec<String>>,
    /// libatomio_mpiio.so: `auto` builds it (make -C mpi/mpiio) against the libatomio.so next
    /// to this program; `none` lists the strategies as skipped; anything else is its path.
    #[arg(long, default_value = "auto")]
    mpiio_lib: String,
    /// Where atomio runs keep the bytes: `auto` (the library's choice: the user's file, or
    /// forwarded through the servers where the file system's clients cache privately and
    /// the ranks use more than one), `direct` (the user's file) or `servers` (atomio's data
    /// servers, copied in at open and out at close).
    #[arg(long, value_enum, default_value = "auto")]
    data: DataArg,
    /// On the shared file system bed (`scripts/sharedfs up 2` first; root): ranks over its
    /// clients (`scripts/sharedfs-mpiexec`), the files on its shared path, every result
    /// verified through its check client (a client no rank wrote through), each run timed
    /// through `MPI_File_sync` (until the bytes are in the file for every client).
    #[arg(long)]
    sharedfs: bool,
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
    /// Skip the program's check of the final file.
    #[arg(long)]
    no_verify: bool,
    /// Kill a run after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[arg(long)]
    json: Option<PathBuf>,
    /// SVG bar chart (default out/bench-<bench>.svg).
    #[arg(long)]
    chart: Option<PathBuf>,
    #[arg(long)]
    no_progress: bool,
    /// Further program options for every run, after `--`.
    #[arg(last = true)]
    extra: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum DataArg {
    Auto,
    Direct,
    Servers,
}

/// The bed's launcher, shared path and check client's path (`scripts/sharedfs`), found
/// beside `mpi/bench`.
pub(crate) fn sharedfs_bed(src: Option<&Path>) -> anyhow::Result<(String, PathBuf, PathBuf)> {
    let bench = atomio_bench::mpi_run::find_dir("bench", src).map_err(|e| anyhow!("{e}"))?;
    let scripts = bench.join("../../scripts");
    let script = std::fs::canonicalize(scripts.join("sharedfs"))
        .context("--sharedfs: scripts/sharedfs not found beside mpi/bench")?;
    let ask = |what: &[&str]| -> anyhow::Result<String> {
        let o = std::process::Command::new(&script).args(what).output()?;
        anyhow::ensure!(
            o.status.success(),
            "scripts/sharedfs {}: failed",
            what.join(" ")
        );
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    anyhow::ensure!(
        ask(&["status"])?.lines().any(|l| l.starts_with("check ")),
        "--sharedfs: the bed is not up (run `scripts/sharedfs up 2` as root first)"
    );
    let launcher = script.with_file_name("sharedfs-mpiexec");
    Ok((
        launcher.display().to_string(),
        PathBuf::from(ask(&["path"])?),
        PathBuf::from(ask(&["mount", "check"])?),
    ))
}

#[derive(Args)]
pub struct MpiTileArgs {
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
    #[command(flatten)]
    common: MpiCommon,
}

#[derive(Args)]
pub struct MpiStridedArgs {
    /// Block sizes B to measure, one table each (rank r owns every P-th block of B bytes).
    #[arg(long, value_delimiter = ',', default_value = "384,4096,47008")]
    block: Vec<u64>,
    /// Bytes per rank (whole blocks).
    #[arg(long, default_value_t = 64 << 20)]
    per_rank: u64,
    /// write_at calls per rank (independent mode; --collective makes one write_at_all).
    #[arg(long, default_value_t = 16)]
    calls: u32,
    /// Time reads of a prepared file instead of writes (IOR's read phase; with --calls =
    /// --per-rank / --block, one block per call: IOR hard's).
    #[arg(long)]
    read: bool,
    /// Leave out the reference rows (`contiguous`: each rank pwrite()s its bytes
    /// contiguously; `plain`: each rank pwrite()s its pieces one by one; `plain-mapped`:
    /// each rank copies its pieces through a shared mapping; no MPI-IO, no locks).
    #[arg(long)]
    no_reference: bool,
    #[command(flatten)]
    common: MpiCommon,
}

#[derive(Args)]
pub struct MpiNoncontigArgs {
    /// What the timed calls do, one table each: read, write.
    #[arg(long, value_delimiter = ',', default_value = "read,write")]
    modes: Vec<String>,
    /// Memory side, one table each: cmem (contiguous), ncmem (the vector in memory too).
    #[arg(long, value_delimiter = ',', default_value = "cmem,ncmem")]
    memory: Vec<String>,
    /// Bytes per element (a multiple of 4; noncontig: one int).
    #[arg(long, default_value_t = 4)]
    element_bytes: u64,
    /// Elements per call per rank (noncontig: SIZE/2 = 2500).
    #[arg(long, default_value_t = 2500)]
    elements: u64,
    /// Calls per rank (read_at or write_at, one after the other along the file).
    #[arg(long, default_value_t = 256)]
    calls: u32,
    /// Leave out the reference row of the read tables (`plain`: each call's extent
    /// pread() whole and the rank's elements copied out; no MPI-IO, no locks).
    #[arg(long)]
    no_reference: bool,
    #[command(flatten)]
    common: MpiCommon,
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
pub(crate) fn resolve_lib(arg: &str, flavor: Flavor) -> anyhow::Result<Option<PathBuf>> {
    match arg {
        "none" => Ok(None),
        "auto" => {
            let exe = std::env::current_exe().context("locating the atomio-lab executable")?;
            let dir = exe
                .parent()
                .context("atomio-lab executable has no folder")?;
            let lib = atomio_bench::mpi_run::build_mpiio_lib(flavor.mpicc(), dir)?;
            println!("MPI-IO library: {}", lib.display());
            Ok(Some(lib))
        }
        path => Ok(Some(
            std::fs::canonicalize(path).with_context(|| format!("--mpiio-lib {path}"))?,
        )),
    }
}

/// `mpi-tile`'s and `mpi-strided`'s baselines and strategies unless given.
const DEFAULT_BASELINES: &str = "mpich,mpich-nods,mpich-atomic,mpich-atomic-nods";
const DEFAULT_STRATEGIES: &str =
    "ching:datatype:one-try,ching:list:one-try,bounding-extent,rma,ching:datatype:one-try+host";
/// `mpi-noncontig`'s: `auto` and every byte-range strategy (the rows).
const NONCONTIG_BASELINES: &str = "mpich,mpich-atomic";
const NONCONTIG_STRATEGIES: &str =
    "auto,ching:datatype:one-try,ching:list:alt-try,ching:posix:two-phase,bounding-extent,interval";

/// The given list, or `default` split at commas.
fn or_default(v: &Option<Vec<String>>, default: &str) -> Vec<String> {
    v.clone()
        .unwrap_or_else(|| default.split(',').map(str::to_string).collect())
}

/// The configuration common to every program, from the shared arguments.
fn config(a: &MpiCommon, program: Program) -> anyhow::Result<MpiBenchConfig> {
    let (default_baselines, default_strategies) = match program {
        Program::Noncontig(_) => (NONCONTIG_BASELINES, NONCONTIG_STRATEGIES),
        _ => (DEFAULT_BASELINES, DEFAULT_STRATEGIES),
    };
    let flavor = match a.mpi {
        FlavorArg::Mpich => Flavor::Mpich,
        FlavorArg::Openmpi => Flavor::Openmpi,
    };
    let baselines = or_default(&a.baselines, default_baselines)
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| Baseline::parse(s).ok_or_else(|| anyhow!("unknown baseline {s}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut atomio_env = pairs(&a.atomio_env)?;
    match a.data {
        DataArg::Auto => {}
        DataArg::Direct => atomio_env.push(("ATOMIO_DATA".into(), "direct".into())),
        DataArg::Servers => atomio_env.push(("ATOMIO_DATA".into(), "servers".into())),
    }
    let mut extra = a.extra.clone();
    let mut env = pairs(&a.env)?;
    let (mpiexec, dir, verify_dir) = if a.sharedfs {
        // The warm-up file would be written through the clients under test, and its
        // deletion still drains through the volume during the timed run.
        env.push(("ATOMIO_BENCH_WARM".into(), "0".into()));
        let (launcher, shared, check) = sharedfs_bed(a.src.as_deref())?;
        extra.push("--sync".into());
        (Some(launcher), Some(shared), Some(check))
    } else {
        (a.mpiexec.clone(), a.dir.clone(), None)
    };
    let cfg = MpiBenchConfig {
        flavor,
        mpiexec,
        src: a.src.clone(),
        ranks: a.ranks,
        program,
        iterations: 1,
        collective: a.collective,
        reps: a.reps,
        dir: dir.unwrap_or_else(std::env::temp_dir),
        reference_rows: false,
        baselines,
        strategies: or_default(&a.strategies, default_strategies)
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect(),
        mpiio_lib: resolve_lib(&a.mpiio_lib, flavor)?,
        env,
        atomio_env,
        extra,
        verify: !a.no_verify,
        verify_dir,
        timeout: Duration::from_secs(a.timeout),
    };
    if !cfg.strategies.is_empty() && cfg.mpiio_lib.is_none() {
        println!(
            "note: --mpiio-lib none: the atomio strategies ({}) are skipped; \
             only the MPI baselines run",
            cfg.strategies.join(", ")
        );
    }
    Ok(cfg)
}

/// Runs one configuration with a progress bar.
pub(crate) fn measure(cfg: &MpiBenchConfig, progress: bool) -> anyhow::Result<MpiBenchReport> {
    let bar = atomio_bench::progress::bar(1, progress);
    let result = mpi_bench::run(cfg, |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
        bar.println(&p.what);
        bar.set_message(p.what.clone());
    });
    bar.finish_and_clear();
    Ok(result?)
}

pub fn run_tile(a: MpiTileArgs) -> anyhow::Result<()> {
    let program = Program::Tile(TileGeometry {
        tiles_x: a.tiles_x,
        tiles_y: a.tiles_y,
        tile_x: a.tile_x,
        tile_y: a.tile_y,
        element_bytes: a.element_bytes,
        overlap_x: a.overlap_x,
        overlap_y: a.overlap_y,
    });
    let mut cfg = config(&a.common, program)?;
    cfg.iterations = a.iterations;
    let rep = measure(&cfg, !a.common.no_progress)?;
    print!("{}", report(&rep));
    if let Some(path) = &a.common.json {
        atomio_cli::output::write_json(path, &rep)?;
    }
    let path = a
        .common
        .chart
        .clone()
        .unwrap_or_else(|| "out/bench-mpi-tile.svg".into());
    chart(&path, &[&rep])?;
    println!("chart: {}", path.display());
    Ok(())
}

/// One table per block size, all in one JSON array and one chart.
pub fn run_strided(a: MpiStridedArgs) -> anyhow::Result<()> {
    if a.block.is_empty() {
        return Err(anyhow!("--block: give at least one block size"));
    }
    let mut reports = Vec::new();
    for &block in &a.block {
        let program = Program::Strided(StridedGeometry {
            block,
            per_rank: a.per_rank,
            calls: a.calls,
            read: a.read,
        });
        let mut cfg = config(&a.common, program)?;
        cfg.reference_rows = !a.no_reference;
        let rep = measure(&cfg, !a.common.no_progress)?;
        print!("{}", report(&rep));
        reports.push(rep);
    }
    if let Some(path) = &a.common.json {
        atomio_cli::output::write_json(path, &reports)?;
    }
    let path = a
        .common
        .chart
        .clone()
        .unwrap_or_else(|| "out/bench-mpi-strided.svg".into());
    let refs: Vec<&MpiBenchReport> = reports.iter().collect();
    chart(&path, &refs)?;
    println!("chart: {}", path.display());
    Ok(())
}

/// One table per mode × memory side (ROMIO test/noncontig's pattern), all in one JSON
/// array and one chart.
pub fn run_noncontig(a: MpiNoncontigArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !a.common.sharedfs,
        "mpi-noncontig: --sharedfs is not supported (noncontig_io verifies through its own client only)"
    );
    anyhow::ensure!(
        !a.common.collective,
        "mpi-noncontig: noncontig_io makes independent calls only"
    );
    let mut reports = Vec::new();
    for mode in &a.modes {
        let read = match mode.as_str() {
            "read" => true,
            "write" => false,
            m => return Err(anyhow!("--modes: {m} (read or write)")),
        };
        for memory in &a.memory {
            let ncmem = match memory.as_str() {
                "cmem" => false,
                "ncmem" => true,
                m => return Err(anyhow!("--memory: {m} (cmem or ncmem)")),
            };
            let program = Program::Noncontig(NoncontigGeometry {
                element_bytes: a.element_bytes,
                elements: a.elements,
                calls: a.calls,
                read,
                ncmem,
            });
            let mut cfg = config(&a.common, program)?;
            cfg.reference_rows = read && !a.no_reference;
            let rep = measure(&cfg, !a.common.no_progress)?;
            print!("{}", report(&rep));
            reports.push(rep);
        }
    }
    if let Some(path) = &a.common.json {
        atomio_cli::output::write_json(path, &reports)?;
    }
    let path = a
        .common
        .chart
        .clone()
        .unwrap_or_else(|| "out/bench-mpi-noncontig.svg".into());
    let refs: Vec<&MpiBenchReport> = reports.iter().collect();
    chart(&path, &refs)?;
    println!("chart: {}", path.display());
    Ok(())
}

/// The noncontig target beside the key figure: every byte-range strategy (every atomio row
/// but `auto`, `interval` and the non-lock strategies) ≥ `NONCONTIG_EVERY_TARGET` × MPI
/// atomic, `auto` ≥ 1.0×, each verified in every run.
fn noncontig_targets(r: &MpiBenchReport, atomic_name: &str) -> String {
    let mut out = String::new();
    for row in r.rows.iter().filter(|x| x.kind == "atomio") {
        let Some(ratio) = row.ratio_to_mpi_atomic else {
            continue;
        };
        let s = row.strategy.as_deref().unwrap_or("");
        let target = if s == "auto" {
            1.0
        } else {
            mpi_bench::NONCONTIG_EVERY_TARGET
        };
        let ok = ratio >= target && row.verified == "atomic";
        out += &format!(
            "  {} / {atomic_name} = {ratio:.2}x [>= {target}x, verified]: {}\n",
            row.config,
            if ok { "met" } else { "MISSED" }
        );
    }
    out
}

/// The header, table, skipped/failed notes and key figure, as printed.
pub fn report(r: &MpiBenchReport) -> String {
    let calls = if r.collective {
        "collective"
    } else {
        "independent"
    };
    let what = match &r.program {
        Program::Tile(g) => format!(
            "tile_io: {} ranks, {}×{} tiles of {} B elements, overlap {}×{}{}, {} iteration(s) per run, {calls} writes",
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
        ),
        Program::Noncontig(g) => format!(
            "noncontig_io ({}): {} ranks, {} elements of {} B per call per rank, every {}th (ROMIO noncontig's vector view), {} {} calls per rank",
            g.mode(),
            r.ranks,
            g.elements,
            g.element_bytes,
            r.ranks,
            g.calls,
            if g.read { "read_at" } else { "write_at" },
        ),
        Program::Strided(g) => format!(
            "strided_io: {} ranks, rank r owns every {}th block of B = {} bytes, {} MiB per rank in {}",
            r.ranks,
            r.ranks,
            g.block,
            g.per_rank >> 20,
            match (r.collective, g.read) {
                (true, false) => "one write_at_all".to_string(),
                (true, true) => "one read_at_all".to_string(),
                (false, false) => format!("{} write_at calls", g.calls),
                (false, true) => format!("{} read_at calls", g.calls),
            },
        ),
    };
    let mut out = format!(
        "{what}, median of {} interleaved repetitions; {}\n",
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
                "  best atomio ({}) / {atomic_name} = {:.1} / {:.1} MiB/s = {:.2}x [>= {}x",
                k.best, k.best_mib_per_s, k.mpi_atomic_mib_per_s, k.ratio, k.target,
            );
            if let Some(name) = &k.capped_by {
                let l = k.needed_mib_per_s;
                out += &format!(
                    ", capped: the {name} row (no MPI-IO, no locks) is {l:.1} MiB/s = {:.2}x, so the target is that row",
                    l / k.mpi_atomic_mib_per_s
                );
                if name != "contiguous" && k.mpi_atomic_mib_per_s > l {
                    // Sieving writes its neighbours' bytes back under one lock on the whole
                    // extent: that row caps only writers of their own pieces, as atomio is.
                    out += &format!(
                        " for writers of their own pieces only ({atomic_name}'s data sieving beats it)"
                    );
                }
            }
            out += &format!("]: {}", if k.met { "met" } else { "MISSED" });
            if let Some(l) = k.contiguous_mib_per_s {
                out += &format!("; {:.0}% of contiguous", 100.0 * k.best_mib_per_s / l);
            }
            if let Some(l) = k.plain_mib_per_s {
                out += &format!("; {:.0}% of plain", 100.0 * k.best_mib_per_s / l);
            }
            if let Some(l) = k.plain_mapped_mib_per_s {
                out += &format!("; {:.0}% of plain-mapped", 100.0 * k.best_mib_per_s / l);
            }
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
    if matches!(r.program, Program::Noncontig(_)) {
        out += "every strategy (auto >= 1.0x, the byte-range ones >= 0.5x):\n";
        out += &noncontig_targets(r, &atomic_name);
    }
    out
}

/// One panel per report (per block size for mpi-strided).
pub(crate) fn chart(path: &Path, reports: &[&MpiBenchReport]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let panels: Vec<(String, Vec<Bar>)> = reports
        .iter()
        .map(|r| {
            let b = r
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
            let name = match &r.program {
                Program::Tile(g) => format!(
                    "{}×{}×{} B tiles, overlap {}",
                    g.tile_x, g.tile_y, g.element_bytes, g.overlap_x
                ),
                Program::Strided(g) => format!("B = {} bytes", g.block),
                Program::Noncontig(g) => format!("{}, {} B elements", g.mode(), g.element_bytes),
            };
            (name, b)
        })
        .collect();
    let title = match reports.first().map(|r| (&r.program, r.collective)) {
        Some((p, collective)) => format!(
            "{}, {} ranks, {} writes — MiB/s",
            p.name(),
            reports[0].ranks,
            if collective {
                "collective"
            } else {
                "independent"
            }
        ),
        None => return Ok(()),
    };
    bar_panels(path, &title, "MiB/s (median of repetitions)", &panels)
        .with_context(|| format!("writing {}", path.display()))
}
