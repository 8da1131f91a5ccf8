//! The MPI-IO benchmarks: an unmodified MPI program of `mpi/bench` run under several
//! configurations in ONE invocation, interleaved. The program is `tile_io` (mpi-tile-io
//! style overlapping tiles, one subarray write per rank), `strided_io` (rank r owns every
//! P-th block of B bytes; one `write_at_all` or 16 `write_at` calls) or `noncontig_io`
//! (ROMIO test/noncontig's vector views of 4-byte elements, ranks interleaved element by
//! element, memory contiguous or the same vector, timed reads or writes).
//!
//! * MPI baselines on a plain path: non-atomic (the upper bound an ordinary user gets) and
//!   the library's own atomic mode (`MPI_File_set_atomicity`), each also with ROMIO's data
//!   sieving for writes disabled (`romio_ds_write=disable`), which changes what ROMIO locks;
//! * for each atomio strategy, the same program with `LD_PRELOAD=<libatomio_mpiio.so>`,
//!   `ATOMIO_STRATEGY=<strategy>` and the path `atomio:<dir>/…` — skipped, with the reason in
//!   the row, when no library is given;
//! * `noncontig_io` reads, one reference row without MPI-IO: *plain*, each call's extent
//!   `pread` whole and the rank's elements copied out (what ROMIO's data sieving reads,
//!   with no locks);
//! * `strided_io` only, three reference rows without MPI-IO: *contiguous*, the same bytes
//!   `pwrite`n contiguously by each rank into a fresh file (the bytes without the
//!   pattern); *plain*, the same pieces `pwrite`n one by one at their strided offsets into
//!   one fresh file, no locks: what the file system makes a plain writer of the pattern
//!   pay; and *plain-mapped*, the same pieces copied through a shared mapping of that file
//!   as atomio's direct placement copies small pieces, no locks.
//!
//! **Invariants:** repetition `k` runs every runnable configuration once before repetition
//! `k+1` starts, the order rotated by one each repetition (so slow drift and position
//! effects hit every configuration alike); a configuration's MiB/s is the median over its
//! repetitions of the C program's own figure (every rank's bytes × iterations / the sum
//! over iterations of the slowest rank's write time); every run's figure and verifier
//! verdict are kept; a row's ratio is its median over the median of the `mpich-atomic` (or
//! `ompi-atomic`) row of the same invocation, and absent when either is missing. A failing
//! atomio run marks that row failed (with the error) and the others still run; a failing
//! baseline aborts the benchmark.

use crate::mpi_run::{self, MpiError, Result};
use crate::stats::median;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Which MPI the program is built and launched with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// MPICH (hydra `mpiexec`, `-genv NAME VALUE`), the default `mpicc`.
    Mpich,
    /// Open MPI (`mpirun.openmpi`, `-x NAME=VALUE`, `--oversubscribe`), built as `*.ompi`.
    Openmpi,
}

impl Flavor {
    pub fn prefix(self) -> &'static str {
        match self {
            Flavor::Mpich => "mpich",
            Flavor::Openmpi => "ompi",
        }
    }
    /// The compiler wrapper of this MPI (what `libatomio_mpiio.so` must be built with).
    pub fn mpicc(self) -> &'static str {
        match self {
            Flavor::Mpich => "mpicc",
            Flavor::Openmpi => "mpicc.openmpi",
        }
    }
    pub fn default_launcher(self) -> &'static str {
        match self {
            Flavor::Mpich => "mpiexec",
            Flavor::Openmpi => "mpirun.openmpi",
        }
    }
}

/// A baseline: the MPI library's own I/O on a plain path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    pub atomic: bool,
    /// `romio_ds_write=disable` (ROMIO only: MPICH, or Open MPI with `--mca io romio321`).
    pub no_sieving: bool,
}

impl Baseline {
    /// `mpich`, `mpich-atomic`, `mpich-nods`, `mpich-atomic-nods` (or `ompi…`).
    pub fn name(self, f: Flavor) -> String {
        format!(
            "{}{}{}",
            f.prefix(),
            if self.atomic { "-atomic" } else { "" },
            if self.no_sieving { "-nods" } else { "" }
        )
    }

    /// Parses a baseline name (with either flavor prefix, or `mpi`).
    pub fn parse(s: &str) -> Option<Self> {
        let rest = ["mpich", "ompi", "mpi"]
            .iter()
            .find_map(|p| s.strip_prefix(p))?;
        match rest {
            "" => Some(Self {
                atomic: false,
                no_sieving: false,
            }),
            "-atomic" => Some(Self {
                atomic: true,
                no_sieving: false,
            }),
            "-nods" => Some(Self {
                atomic: false,
                no_sieving: true,
            }),
            "-atomic-nods" => Some(Self {
                atomic: true,
                no_sieving: true,
            }),
            _ => None,
        }
    }

    pub const ALL: [Baseline; 4] = [
        Baseline {
            atomic: false,
            no_sieving: false,
        },
        Baseline {
            atomic: false,
            no_sieving: true,
        },
        Baseline {
            atomic: true,
            no_sieving: false,
        },
        Baseline {
            atomic: true,
            no_sieving: true,
        },
    ];
}

/// mpi-tile-io's parameters (see `tile_io.c`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TileGeometry {
    pub tiles_x: Option<u32>,
    pub tiles_y: Option<u32>,
    pub tile_x: u64,
    pub tile_y: u64,
    pub element_bytes: u64,
    pub overlap_x: u64,
    pub overlap_y: u64,
}

impl Default for TileGeometry {
    /// The project's `tile` workload default (Tran §6.5 scaled by 1/64 per client): 128×128
    /// tiles of 1 KiB elements, 16-element overlap, so 16 MiB per rank.
    fn default() -> Self {
        Self {
            tiles_x: None,
            tiles_y: None,
            tile_x: 128,
            tile_y: 128,
            element_bytes: 1024,
            overlap_x: 16,
            overlap_y: 16,
        }
    }
}

/// `strided_io`'s parameters: rank r of P owns block j·P + r of `block` bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StridedGeometry {
    pub block: u64,
    /// Bytes each rank writes (rounded down to whole blocks).
    pub per_rank: u64,
    /// `write_at` calls per rank (independent mode; collective mode makes one call).
    pub calls: u32,
    /// The calls read a prepared file instead (`strided_io --read`; IOR's read phase, and
    /// with one block per call IOR hard's).
    #[serde(default)]
    pub read: bool,
}

impl Default for StridedGeometry {
    /// 64 MiB per rank in 16 `write_at` calls.
    fn default() -> Self {
        Self {
            block: 4096,
            per_rank: 64 << 20,
            calls: 16,
            read: false,
        }
    }
}

/// `noncontig_io`'s parameters: ROMIO test/noncontig's pattern for P ranks (see the C file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoncontigGeometry {
    /// Bytes per element (noncontig: one int).
    pub element_bytes: u64,
    /// Elements per call per rank (noncontig: SIZE/2 = 2,500).
    pub elements: u64,
    /// Calls per rank.
    pub calls: u32,
    /// Timed reads (of a file prepared before); else timed writes.
    pub read: bool,
    /// The vector in memory too (noncontig's ncmem); else contiguous memory (cmem).
    pub ncmem: bool,
}

impl Default for NoncontigGeometry {
    fn default() -> Self {
        Self {
            element_bytes: 4,
            elements: 2_500,
            calls: 256,
            read: true,
            ncmem: false,
        }
    }
}

impl NoncontigGeometry {
    /// `read cmem`, `write ncmem`, …
    pub fn mode(&self) -> String {
        format!(
            "{} {}",
            if self.read { "read" } else { "write" },
            if self.ncmem { "ncmem" } else { "cmem" }
        )
    }
}

/// Which program of `mpi/bench` runs, with its parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Program {
    Tile(TileGeometry),
    Strided(StridedGeometry),
    Noncontig(NoncontigGeometry),
}

impl Program {
    /// The C program's file name (and the `bench` field of its JSON line).
    pub fn name(&self) -> &'static str {
        match self {
            Program::Tile(_) => "tile_io",
            Program::Strided(_) => "strided_io",
            Program::Noncontig(_) => "noncontig_io",
        }
    }

    fn binary(&self, f: Flavor) -> String {
        match f {
            Flavor::Mpich => self.name().to_string(),
            Flavor::Openmpi => format!("{}.ompi", self.name()),
        }
    }

    /// The target of the key figure: best atomio / MPI atomic. mpi-tile: 1.0×, no loss
    /// where the overlap forces every strategy to serialize; strided: 1.5× independent, 3×
    /// collective; noncontig: 1.0× (`auto`; every byte-range strategy ≥
    /// `NONCONTIG_EVERY_TARGET`).
    pub fn target(&self, collective: bool) -> f64 {
        match (self, collective) {
            (Program::Tile(_), _) => TILE_TARGET,
            (Program::Noncontig(_), _) => 1.0,
            (Program::Strided(_), false) => 1.5,
            (Program::Strided(_), true) => 3.0,
        }
    }
}

#[derive(Clone, Debug)]
pub struct MpiBenchConfig {
    pub flavor: Flavor,
    /// Launcher (default: the flavor's).
    pub mpiexec: Option<String>,
    /// `mpi/bench` (found automatically when `None`).
    pub src: Option<PathBuf>,
    pub ranks: u32,
    pub program: Program,
    /// `tile_io` only: write calls per rank per run.
    pub iterations: u32,
    pub collective: bool,
    /// Repetitions of every configuration (≥ 1; ≥ 3 for a meaningful median).
    pub reps: u32,
    /// Directory of the plain files (and of the `atomio:` paths).
    pub dir: PathBuf,
    /// The reference rows (`strided_io` only).
    pub reference_rows: bool,
    pub baselines: Vec<Baseline>,
    /// atomio strategies, each run with the preloaded library.
    pub strategies: Vec<String>,
    /// `libatomio_mpiio.so`; without it the strategies are skipped.
    pub mpiio_lib: Option<PathBuf>,
    /// Extra environment for every rank (`NAME`, `VALUE`).
    pub env: Vec<(String, String)>,
    /// Extra environment only for the atomio runs.
    pub atomio_env: Vec<(String, String)>,
    /// Extra `tile_io` arguments for every run.
    pub extra: Vec<String>,
    pub verify: bool,
    /// The benchmark files as another client of a shared file system sees them (the
    /// `check` client of `scripts/sharedfs`): the program verifies there too, and the
    /// verdict is that check's (`--verify-path`). Only the `contiguous` reference row is run
    /// then (the piece-wise ones write from every client without coherence).
    pub verify_dir: Option<PathBuf>,
    pub timeout: Duration,
}

impl Default for MpiBenchConfig {
    fn default() -> Self {
        Self {
            flavor: Flavor::Mpich,
            mpiexec: None,
            src: None,
            ranks: 4,
            program: Program::Tile(TileGeometry::default()),
            iterations: 3,
            collective: false,
            reps: 5,
            dir: std::env::temp_dir(),
            reference_rows: false,
            baselines: Baseline::ALL.to_vec(),
            strategies: Vec::new(),
            mpiio_lib: None,
            env: Vec::new(),
            atomio_env: Vec::new(),
            extra: Vec::new(),
            verify: true,
            verify_dir: None,
            timeout: Duration::from_secs(600),
        }
    }
}

/// One configuration of the benchmark.
#[derive(Clone, Debug, PartialEq)]
pub enum Variant {
    /// `contiguous`: the same bytes, `pwrite`n contiguously per rank (no MPI-IO).
    Contiguous,
    /// `plain`: the same pieces, `pwrite`n one by one at their strided offsets into one
    /// file (no MPI-IO, no locks): what a plain writer of the pattern pays the file system.
    Plain,
    /// `plain-mapped`: the same pieces copied through a shared mapping of one file, per
    /// call (no MPI-IO, no locks): atomio's own way of writing small pieces, without atomio.
    PlainMapped,
    Baseline(Baseline),
    Atomio(String),
}

/// One run's result (the program's JSON line, the fields we use).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProgramRun {
    pub mib_per_s: f64,
    pub seconds: f64,
    pub iter_seconds: Vec<f64>,
    pub bytes: f64,
    /// `atomic`, `violated`, `n/a` or `skipped`.
    pub verify: String,
    #[serde(default)]
    pub violation: String,
    #[serde(default)]
    pub bad_elements: u64,
    pub atomicity_get: i64,
    pub atomicity_set_rc: i64,
    pub mpi_library: String,
    /// `tile_io`: the dataset in elements.
    #[serde(default)]
    pub dataset_x: u64,
    #[serde(default)]
    pub dataset_y: u64,
}

/// One configuration's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MpiBenchRow {
    /// `contiguous`, `plain`, `plain-mapped`, `mpich`, `mpich-atomic`, …, or
    /// `atomio:<strategy>`.
    pub config: String,
    /// `reference`, `baseline` or `atomio`.
    pub kind: String,
    /// Atomic mode was requested (`--atomic`); `verified` says whether the file shows it.
    pub atomic: bool,
    /// `romio_ds_write=disable` was set.
    pub no_sieving: bool,
    pub strategy: Option<String>,
    /// Why the configuration did not run (no library) — then no figures.
    pub skipped: Option<String>,
    /// Why it stopped (an atomio run failed) — figures of the runs before, if any.
    pub error: Option<String>,
    pub mib_per_s: Option<f64>,
    pub seconds: Option<f64>,
    /// MiB/s over the `<flavor>-atomic` row's (same invocation).
    pub ratio_to_mpi_atomic: Option<f64>,
    /// `atomic` if every run verified, `VIOLATED k/n` if any did not, `n/a`/`skipped`.
    pub verified: String,
    pub runs: Vec<ProgramRun>,
}

/// Everything one invocation measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MpiBenchReport {
    pub bench: String,
    pub flavor: Flavor,
    pub mpi_library: Option<String>,
    pub ranks: u32,
    pub program: Program,
    pub dataset: Option<(u64, u64)>,
    pub iterations: u32,
    pub collective: bool,
    pub reps: u32,
    pub bytes_per_run: Option<f64>,
    /// One example command per configuration.
    pub commands: Vec<Vec<String>>,
    pub rows: Vec<MpiBenchRow>,
    pub key: Option<KeyFigure>,
}

/// The project's target: atomio's best strategy ≥ `target` × the MPI library's own atomic
/// mode; where a reference row without MPI-IO is below that, the target is capped at the
/// lower of `contiguous` (each rank's bytes written contiguously) and the pattern's own
/// way, the faster of `plain` and `plain-mapped` (the same pieces written one by one, or
/// copied through a mapping, into one file with no locks: what a writer that writes only
/// its own pieces, as atomio does, gets from the file system without locks; ROMIO's data
/// sieving can beat it by writing its neighbours' bytes back under a lock on the whole
/// extent).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyFigure {
    pub best: String,
    pub best_mib_per_s: f64,
    pub mpi_atomic_mib_per_s: f64,
    pub ratio: f64,
    /// Against the faster of `-atomic` and `-atomic-nods` (ROMIO tuned by hand).
    pub ratio_to_best_mpi_atomic: Option<f64>,
    pub target: f64,
    /// The `contiguous` row's MiB/s, when measured.
    #[serde(default)]
    pub contiguous_mib_per_s: Option<f64>,
    /// The `plain` row's MiB/s (the pattern's pieces one `pwrite` each), when measured.
    #[serde(default)]
    pub plain_mib_per_s: Option<f64>,
    /// The `plain-mapped` row's MiB/s (the pattern through a mapping), when measured.
    #[serde(default)]
    pub plain_mapped_mib_per_s: Option<f64>,
    /// The reference row that capped `needed_mib_per_s` (`contiguous`, `plain` or
    /// `plain-mapped`), if one did.
    #[serde(default)]
    pub capped_by: Option<String>,
    /// MiB/s that meets the target: target × MPI atomic, or the capping row's if lower.
    #[serde(default)]
    pub needed_mib_per_s: f64,
    pub met: bool,
}

/// noncontig: every byte-range strategy ≥ this × MPI atomic.
pub const NONCONTIG_EVERY_TARGET: f64 = 0.5;

/// mpi-tile's target: best atomio ≥ 1.0× MPI atomic. Overlapping tiles leave every atomic
/// strategy to serialize: even MPICH's own non-atomic mode without data sieving reaches
/// only ~2× its atomic mode on one host.
pub const TILE_TARGET: f64 = 1.0;

#[derive(Clone, Debug)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
    pub what: String,
}

impl MpiBenchConfig {
    fn launcher(&self) -> String {
        self.mpiexec
            .clone()
            .unwrap_or_else(|| self.flavor.default_launcher().to_string())
    }

    pub fn variants(&self) -> Vec<Variant> {
        let mut v: Vec<Variant> = Vec::new();
        if self.reference_rows && matches!(self.program, Program::Noncontig(_)) {
            v.push(Variant::Plain);
        } else if self.reference_rows {
            v.push(Variant::Contiguous);
            if self.verify_dir.is_none() {
                v.push(Variant::Plain);
                // Reads have no mapped reference (strided_io reads by pread).
                if !matches!(&self.program, Program::Strided(g) if g.read) {
                    v.push(Variant::PlainMapped);
                }
            }
        }
        v.extend(self.baselines.iter().map(|&b| Variant::Baseline(b)));
        v.extend(self.strategies.iter().cloned().map(Variant::Atomio));
        v
    }

    pub fn name(&self, v: &Variant) -> String {
        match v {
            Variant::Contiguous => "contiguous".into(),
            Variant::Plain => "plain".into(),
            Variant::PlainMapped => "plain-mapped".into(),
            Variant::Baseline(b) => b.name(self.flavor),
            Variant::Atomio(s) => format!("atomio:{s}"),
        }
    }

    /// The launcher command line for one run of `v` (tag makes the file name unique).
    pub fn command_line(&self, v: &Variant, tag: &str) -> Vec<String> {
        let mut c = vec![self.launcher()];
        let mut env = self.env.clone();
        if let Variant::Atomio(s) = v {
            if let Some(lib) = &self.mpiio_lib {
                env.push(("LD_PRELOAD".into(), lib.display().to_string()));
            }
            // `<strategy>+host`: the strategy's locks in the host's shared lock table.
            match s.strip_suffix("+host") {
                Some(base) => {
                    env.push(("ATOMIO_STRATEGY".into(), base.to_string()));
                    env.push(("ATOMIO_LOCKS".into(), "host".into()));
                }
                None => env.push(("ATOMIO_STRATEGY".into(), s.clone())),
            }
            env.extend(self.atomio_env.iter().cloned());
        }
        match self.flavor {
            Flavor::Mpich => {
                for (k, val) in env {
                    c.extend(["-genv".into(), k, val]);
                }
            }
            Flavor::Openmpi => {
                c.push("--oversubscribe".into());
                if is_root() {
                    c.push("--allow-run-as-root".into());
                }
                for (k, val) in env {
                    c.extend(["-x".into(), format!("{k}={val}")]);
                }
            }
        }
        c.extend(["-n".into(), self.ranks.to_string()]);
        c.push(format!("./{}", self.program.binary(self.flavor)));
        match &self.program {
            Program::Tile(g) => {
                if let Some(x) = g.tiles_x {
                    c.extend(["--tiles-x".into(), x.to_string()]);
                }
                if let Some(y) = g.tiles_y {
                    c.extend(["--tiles-y".into(), y.to_string()]);
                }
                for (k, val) in [
                    ("--tile-x", g.tile_x),
                    ("--tile-y", g.tile_y),
                    ("--element-bytes", g.element_bytes),
                    ("--overlap-x", g.overlap_x),
                    ("--overlap-y", g.overlap_y),
                    ("--iterations", u64::from(self.iterations)),
                ] {
                    c.extend([k.to_string(), val.to_string()]);
                }
            }
            Program::Strided(g) => {
                for (k, val) in [
                    ("--block", g.block),
                    ("--per-rank", g.per_rank),
                    ("--calls", u64::from(g.calls)),
                ] {
                    c.extend([k.to_string(), val.to_string()]);
                }
                if g.read {
                    c.push("--read".into());
                }
            }
            Program::Noncontig(g) => {
                c.push(if g.read { "--read" } else { "--write" }.into());
                c.push(if g.ncmem { "--ncmem" } else { "--cmem" }.into());
                for (k, val) in [
                    ("--element-bytes", g.element_bytes),
                    ("--elements", g.elements),
                    ("--calls", u64::from(g.calls)),
                ] {
                    c.extend([k.to_string(), val.to_string()]);
                }
            }
        }
        let name = format!("atomio_mpi_{}_{tag}.dat", self.program.name());
        let file = self.dir.join(&name);
        if let (Some(d), true) = (&self.verify_dir, self.verify) {
            c.extend(["--verify-path".into(), d.join(&name).display().to_string()]);
        }
        let (path, atomic) = match v {
            Variant::Contiguous => {
                c.push("--contiguous".into());
                (file.display().to_string(), false)
            }
            Variant::Plain => {
                c.push("--plain".into());
                (file.display().to_string(), false)
            }
            Variant::PlainMapped => {
                c.push("--plain-mapped".into());
                (file.display().to_string(), false)
            }
            Variant::Baseline(b) => {
                if b.no_sieving {
                    c.extend(["--hint".into(), "romio_ds_write=disable".into()]);
                }
                (file.display().to_string(), b.atomic)
            }
            Variant::Atomio(_) => (format!("atomio:{}", file.display()), true),
        };
        c.extend(["--path".into(), path]);
        if atomic {
            c.push("--atomic".into());
        }
        if self.collective {
            c.push("--collective".into());
        }
        if !self.verify {
            c.push("--no-verify".into());
        }
        c.extend(["--label".into(), self.name(v)]);
        c.extend(self.extra.iter().cloned());
        c
    }

    fn check(&self) -> Result<()> {
        let bad = |m: &str| Err(MpiError(m.into()));
        if self.ranks == 0 || self.reps == 0 || self.iterations == 0 {
            return bad("ranks, reps and iterations must be positive");
        }
        match &self.program {
            Program::Tile(g) => {
                if g.tile_x == 0 || g.tile_y == 0 || g.element_bytes == 0 {
                    return bad("tile sizes and element size must be positive");
                }
                if g.overlap_x >= g.tile_x || g.overlap_y >= g.tile_y {
                    return bad("overlap must be smaller than the tile");
                }
                if let (Some(x), Some(y)) = (g.tiles_x, g.tiles_y) {
                    if u64::from(x) * u64::from(y) != u64::from(self.ranks) {
                        return bad("tiles-x × tiles-y must equal the ranks");
                    }
                }
                if self.reference_rows {
                    return bad("the reference rows are strided_io's (tile_io has none)");
                }
            }
            Program::Strided(g) => {
                if g.block == 0 || g.block % 8 != 0 || g.block > 1 << 30 {
                    return bad("--block must be a positive multiple of 8 bytes (at most 1 GiB)");
                }
                if g.per_rank < g.block || g.calls == 0 {
                    return bad("--per-rank must hold at least one block; --calls ≥ 1");
                }
                if self.collective && g.per_rank > i32::MAX as u64 {
                    return bad("--per-rank must fit one MPI count (< 2 GiB) with --collective");
                }
            }
            Program::Noncontig(g) => {
                if g.element_bytes == 0 || g.element_bytes % 4 != 0 || g.element_bytes > 1 << 20 {
                    return bad("--element-bytes must be a positive multiple of 4 (at most 1 MiB)");
                }
                if g.elements == 0 || g.calls == 0 {
                    return bad("--elements and --calls must be positive");
                }
                if g.elements * u64::from(self.ranks) * g.element_bytes > 1 << 31 {
                    return bad(
                        "one call's extent (elements × ranks × element bytes) must be at most 2 GiB",
                    );
                }
                if self.collective {
                    return bad("noncontig_io makes independent calls only");
                }
                if self.reference_rows && !g.read {
                    return bad("noncontig_io's reference row (plain) is for reads");
                }
            }
        }
        if self.flavor == Flavor::Openmpi && self.baselines.iter().any(|b| b.no_sieving) {
            return bad("the -nods baselines set a ROMIO hint; Open MPI's default OMPIO ignores it (drop them, or add `--mca io romio321` yourself)");
        }
        if self.variants().is_empty() {
            return bad("nothing to run");
        }
        Ok(())
    }
}

fn is_root() -> bool {
    std::env::var("USER").is_ok_and(|u| u == "root")
        || std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                == Some("0")
        })
}

fn parse_run(program: &str, stdout: &str) -> Result<ProgramRun> {
    let lines = mpi_run::json_lines(stdout)?;
    let v = lines
        .into_iter()
        .rev()
        .find(|v| v["bench"] == program)
        .ok_or_else(|| MpiError(format!("{program} printed no result line:\n{stdout}")))?;
    serde_json::from_value(v.clone())
        .map_err(|e| MpiError(format!("unexpected {program} line ({e}): {v}")))
}

/// Summarizes verdicts: every run atomic → `atomic`; any violated → `VIOLATED k/n`.
pub fn verdict(runs: &[ProgramRun]) -> String {
    if runs.is_empty() {
        return "-".into();
    }
    let bad = runs.iter().filter(|r| r.verify == "violated").count();
    if bad > 0 {
        format!("VIOLATED {bad}/{}", runs.len())
    } else if runs.iter().all(|r| r.verify == "atomic") {
        "atomic".into()
    } else {
        runs[0].verify.clone()
    }
}

/// Runs the benchmark; `progress` sees every finished run.
pub fn run(cfg: &MpiBenchConfig, mut progress: impl FnMut(&Progress)) -> Result<MpiBenchReport> {
    cfg.check()?;
    let launcher = cfg.launcher();
    if !mpi_run::have(&launcher) {
        return Err(MpiError(format!(
            "{launcher} not found: install {}",
            match cfg.flavor {
                Flavor::Mpich => "MPICH (apt-get install mpich libmpich-dev)",
                Flavor::Openmpi => "Open MPI (apt-get install openmpi-bin libopenmpi-dev)",
            }
        )));
    }
    let dir = mpi_run::find_dir("bench", cfg.src.as_deref())?;
    mpi_run::make(&dir, &[&cfg.program.binary(cfg.flavor)], &[])?;
    std::fs::create_dir_all(&cfg.dir)
        .map_err(|e| MpiError(format!("{}: {e}", cfg.dir.display())))?;

    let variants = cfg.variants();
    let skip_reason = |v: &Variant| match v {
        Variant::Atomio(_) if cfg.mpiio_lib.is_none() => {
            Some("skipped: --mpiio-lib none (no libatomio_mpiio.so to preload)".to_string())
        }
        Variant::Atomio(_) => cfg
            .mpiio_lib
            .as_ref()
            .filter(|l| !l.is_file())
            .map(|l| format!("skipped: {} does not exist", l.display())),
        Variant::Baseline(_) | Variant::Contiguous | Variant::Plain | Variant::PlainMapped => None,
    };
    let skipped: Vec<Option<String>> = variants.iter().map(skip_reason).collect();
    let runnable: Vec<usize> = (0..variants.len())
        .filter(|&i| skipped[i].is_none())
        .collect();
    let mut runs: Vec<Vec<ProgramRun>> = vec![Vec::new(); variants.len()];
    let mut errors: Vec<Option<String>> = vec![None; variants.len()];
    let total = u64::from(cfg.reps) * runnable.len() as u64;
    let mut done = 0;
    let mut commands = vec![Vec::new(); variants.len()];
    for rep in 0..cfg.reps as usize {
        let n = runnable.len().max(1);
        for j in 0..runnable.len() {
            let i = runnable[(j + rep) % n];
            if errors[i].is_some() {
                done += 1;
                continue;
            }
            let v = &variants[i];
            let tag = format!("{}_{i}_{rep}", std::process::id());
            let argv = cfg.command_line(v, &tag);
            if commands[i].is_empty() {
                commands[i] = argv.clone();
            }
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..]).current_dir(&dir);
            let result = mpi_run::run(cmd, cfg.timeout, |_| {})
                .and_then(|out| parse_run(cfg.program.name(), &out.stdout));
            done += 1;
            match result {
                Ok(r) => {
                    progress(&Progress {
                        done,
                        total,
                        what: format!(
                            "rep {}/{} {}: {:.1} MiB/s, {}",
                            rep + 1,
                            cfg.reps,
                            cfg.name(v),
                            r.mib_per_s,
                            r.verify
                        ),
                    });
                    runs[i].push(r);
                }
                Err(e) if matches!(v, Variant::Atomio(_)) => {
                    progress(&Progress {
                        done,
                        total,
                        what: format!("{} failed", cfg.name(v)),
                    });
                    errors[i] = Some(e.0);
                }
                Err(e) => return Err(e),
            }
        }
    }
    let med = |i: usize| -> Option<f64> {
        let v: Vec<f64> = runs[i].iter().map(|r| r.mib_per_s).collect();
        (!v.is_empty()).then(|| median(&v))
    };
    let atomic_default = variants.iter().position(|v| {
        *v == Variant::Baseline(Baseline {
            atomic: true,
            no_sieving: false,
        })
    });
    let base = atomic_default.and_then(med);
    let mut rows = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let m = med(i);
        let (atomic, no_sieving, strategy, kind) = match v {
            Variant::Contiguous | Variant::Plain | Variant::PlainMapped => {
                (false, false, None, "reference")
            }
            Variant::Baseline(b) => (b.atomic, b.no_sieving, None, "baseline"),
            Variant::Atomio(s) => (true, false, Some(s.clone()), "atomio"),
        };
        let secs: Vec<f64> = runs[i].iter().map(|r| r.seconds).collect();
        rows.push(MpiBenchRow {
            config: cfg.name(v),
            kind: kind.into(),
            atomic,
            no_sieving,
            strategy,
            skipped: skipped[i].clone(),
            error: errors[i].clone(),
            mib_per_s: m,
            seconds: (!secs.is_empty()).then(|| median(&secs)),
            ratio_to_mpi_atomic: match (m, base) {
                (Some(x), Some(b)) if b > 0.0 => Some(x / b),
                _ => None,
            },
            verified: if skipped[i].is_some() {
                "skipped".into()
            } else {
                verdict(&runs[i])
            },
            runs: runs[i].clone(),
        });
    }
    let first = runs.iter().flatten().next();
    let key = key_figure(&rows, cfg.flavor, cfg.program.target(cfg.collective));
    Ok(MpiBenchReport {
        bench: match cfg.program {
            Program::Tile(_) => "mpi-tile",
            Program::Strided(_) => "mpi-strided",
            Program::Noncontig(_) => "mpi-noncontig",
        }
        .into(),
        flavor: cfg.flavor,
        mpi_library: first.map(|r| r.mpi_library.clone()),
        ranks: cfg.ranks,
        program: cfg.program.clone(),
        dataset: first
            .filter(|_| matches!(cfg.program, Program::Tile(_)))
            .map(|r| (r.dataset_x, r.dataset_y)),
        iterations: cfg.iterations,
        collective: cfg.collective,
        reps: cfg.reps,
        bytes_per_run: first.map(|r| r.bytes),
        commands: commands.into_iter().filter(|c| !c.is_empty()).collect(),
        rows,
        key,
    })
}

/// Best atomio row (verified atomic, not failed) over the `<flavor>-atomic` row; met when it
/// reaches `target` × that, or the capping reference row where that is lower.
pub fn key_figure(rows: &[MpiBenchRow], flavor: Flavor, target: f64) -> Option<KeyFigure> {
    let atomic_name = Baseline {
        atomic: true,
        no_sieving: false,
    }
    .name(flavor);
    let nods_name = Baseline {
        atomic: true,
        no_sieving: true,
    }
    .name(flavor);
    let get = |n: &str| {
        rows.iter()
            .find(|r| r.config == n)
            .and_then(|r| r.mib_per_s)
    };
    let base = get(&atomic_name)?;
    let best = rows
        .iter()
        .filter(|r| r.kind == "atomio" && r.error.is_none() && !r.verified.starts_with("VIOLATED"))
        .filter_map(|r| Some((r, r.mib_per_s?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let best_mpi = get(&nods_name).map_or(base, |n| n.max(base));
    let contiguous = get("contiguous");
    let plain = get("plain");
    let plain_mapped = get("plain-mapped");
    // A writer of only its own pieces takes the faster way to write them.
    let pattern = [("plain", plain), ("plain-mapped", plain_mapped)]
        .into_iter()
        .filter_map(|(n, l)| Some((n, l?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    // The lower of that and `contiguous`, when below target × base, caps the target.
    let capping = [
        ("contiguous", contiguous),
        pattern.map_or(("plain", None), |(n, l)| (n, Some(l))),
    ]
    .into_iter()
    .filter_map(|(n, l)| Some((n, l?)))
    .filter(|&(_, l)| l < target * base)
    .min_by(|a, b| a.1.total_cmp(&b.1));
    let needed = capping.map_or(target * base, |(_, l)| l);
    Some(KeyFigure {
        best: best.0.config.clone(),
        best_mib_per_s: best.1,
        mpi_atomic_mib_per_s: base,
        ratio: best.1 / base,
        ratio_to_best_mpi_atomic: Some(best.1 / best_mpi),
        target,
        contiguous_mib_per_s: contiguous,
        plain_mib_per_s: plain,
        plain_mapped_mib_per_s: plain_mapped,
        capped_by: capping.map(|(n, _)| n.to_string()),
        needed_mib_per_s: needed,
        met: best.1 >= needed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_names_round_trip() {
        for b in Baseline::ALL {
            assert_eq!(Baseline::parse(&b.name(Flavor::Mpich)), Some(b));
            assert_eq!(Baseline::parse(&b.name(Flavor::Openmpi)), Some(b));
        }
        assert_eq!(Baseline::parse("mpich-bogus"), None);
        assert_eq!(Baseline::parse("atomio"), None);
    }

    #[test]
    fn atomio_runs_get_the_library_strategy_and_prefix_and_baselines_do_not() {
        let cfg = MpiBenchConfig {
            strategies: vec!["rma".into()],
            mpiio_lib: Some("/x/libatomio_mpiio.so".into()),
            dir: "/scratch".into(),
            ..MpiBenchConfig::default()
        };
        let a = cfg
            .command_line(&Variant::Atomio("rma".into()), "t")
            .join(" ");
        assert!(a.starts_with("mpiexec -genv LD_PRELOAD /x/libatomio_mpiio.so -genv ATOMIO_STRATEGY rma -n 4 ./tile_io"), "{a}");
        assert!(
            a.contains("--path atomio:/scratch/atomio_mpi_tile_io_t.dat --atomic"),
            "{a}"
        );
        let b = cfg
            .command_line(
                &Variant::Baseline(Baseline {
                    atomic: true,
                    no_sieving: true,
                }),
                "t",
            )
            .join(" ");
        assert!(!b.contains("LD_PRELOAD") && !b.contains("atomio:"), "{b}");
        assert!(
            b.contains(
                "--hint romio_ds_write=disable --path /scratch/atomio_mpi_tile_io_t.dat --atomic"
            ),
            "{b}"
        );
        let plain = cfg
            .command_line(&Variant::Baseline(Baseline::ALL[0]), "t")
            .join(" ");
        assert!(
            !plain.contains("--atomic") && !plain.contains("--hint"),
            "{plain}"
        );
    }

    #[test]
    fn strided_runs_pass_the_geometry_and_the_reference_rows_run_without_mpi_io() {
        let cfg = MpiBenchConfig {
            program: Program::Strided(StridedGeometry {
                block: 384,
                per_rank: 1 << 20,
                calls: 16,
                read: false,
            }),
            reference_rows: true,
            baselines: vec![Baseline::ALL[2]],
            strategies: vec!["ching:list:one-try".into()],
            mpiio_lib: Some("/x/libatomio_mpiio.so".into()),
            dir: "/s".into(),
            ..MpiBenchConfig::default()
        };
        assert!(cfg.check().is_ok());
        let names: Vec<String> = cfg.variants().iter().map(|v| cfg.name(v)).collect();
        assert_eq!(
            names,
            [
                "contiguous",
                "plain",
                "plain-mapped",
                "mpich-atomic",
                "atomio:ching:list:one-try"
            ]
        );
        let l = cfg.command_line(&Variant::Contiguous, "t").join(" ");
        assert!(
            l.ends_with("./strided_io --block 384 --per-rank 1048576 --calls 16 --contiguous --path /s/atomio_mpi_strided_io_t.dat --label contiguous"),
            "{l}"
        );
        let m = cfg.command_line(&Variant::PlainMapped, "t").join(" ");
        assert!(
            m.ends_with(
                "--plain-mapped --path /s/atomio_mpi_strided_io_t.dat --label plain-mapped"
            ),
            "{m}"
        );
        let p = cfg.command_line(&Variant::Plain, "t").join(" ");
        assert!(
            p.ends_with("--calls 16 --plain --path /s/atomio_mpi_strided_io_t.dat --label plain")
                && !p.contains("LD_PRELOAD"),
            "{p}"
        );
        let a = cfg
            .command_line(&Variant::Atomio("ching:list:one-try".into()), "t")
            .join(" ");
        assert!(
            a.contains("--path atomio:/s/atomio_mpi_strided_io_t.dat --atomic"),
            "{a}"
        );
        let h = cfg
            .command_line(&Variant::Atomio("ching:list:one-try+host".into()), "t")
            .join(" ");
        assert!(
            h.contains("-genv ATOMIO_STRATEGY ching:list:one-try -genv ATOMIO_LOCKS host"),
            "{h}"
        );
        let bad = MpiBenchConfig {
            program: Program::Strided(StridedGeometry {
                block: 100,
                ..StridedGeometry::default()
            }),
            ..cfg.clone()
        };
        assert!(bad.check().is_err());
        let tile_reference = MpiBenchConfig {
            program: Program::Tile(TileGeometry::default()),
            ..cfg
        };
        assert!(tile_reference.check().is_err());
    }

    #[test]
    fn strided_reads_pass_read_and_have_no_mapped_reference_row() {
        let cfg = MpiBenchConfig {
            program: Program::Strided(StridedGeometry {
                block: 47008,
                per_rank: 47008 * 64,
                calls: 64,
                read: true,
            }),
            reference_rows: true,
            baselines: vec![Baseline::ALL[2]],
            strategies: vec!["auto".into()],
            mpiio_lib: Some("/x/libatomio_mpiio.so".into()),
            dir: "/s".into(),
            ..MpiBenchConfig::default()
        };
        assert!(cfg.check().is_ok());
        let names: Vec<String> = cfg.variants().iter().map(|v| cfg.name(v)).collect();
        assert_eq!(
            names,
            ["contiguous", "plain", "mpich-atomic", "atomio:auto"]
        );
        let a = cfg
            .command_line(&Variant::Atomio("auto".into()), "t")
            .join(" ");
        assert!(
            a.contains(
                "./strided_io --block 47008 --per-rank 3008512 --calls 64 --read --path atomio:"
            ),
            "{a}"
        );
    }

    #[test]
    fn noncontig_runs_pass_mode_memory_and_geometry_and_reads_get_the_plain_row() {
        let g = NoncontigGeometry {
            ncmem: true,
            ..NoncontigGeometry::default()
        };
        let cfg = MpiBenchConfig {
            program: Program::Noncontig(g.clone()),
            reference_rows: true,
            baselines: vec![Baseline::ALL[2]],
            strategies: vec!["auto".into()],
            mpiio_lib: Some("/x/libatomio_mpiio.so".into()),
            dir: "/s".into(),
            ..MpiBenchConfig::default()
        };
        assert!(cfg.check().is_ok());
        let names: Vec<String> = cfg.variants().iter().map(|v| cfg.name(v)).collect();
        assert_eq!(names, ["plain", "mpich-atomic", "atomio:auto"]);
        let p = cfg.command_line(&Variant::Plain, "t").join(" ");
        assert!(
            p.ends_with("./noncontig_io --read --ncmem --element-bytes 4 --elements 2500 --calls 256 --plain --path /s/atomio_mpi_noncontig_io_t.dat --label plain"),
            "{p}"
        );
        let a = cfg
            .command_line(&Variant::Atomio("auto".into()), "t")
            .join(" ");
        assert!(
            a.contains("--path atomio:/s/atomio_mpi_noncontig_io_t.dat --atomic"),
            "{a}"
        );
        let writes = MpiBenchConfig {
            program: Program::Noncontig(NoncontigGeometry { read: false, ..g }),
            ..cfg.clone()
        };
        assert!(writes.check().is_err(), "no reference row for writes");
        assert!(MpiBenchConfig {
            collective: true,
            ..cfg
        }
        .check()
        .is_err());
    }

    #[test]
    fn openmpi_flavor_uses_x_and_oversubscribe() {
        let cfg = MpiBenchConfig {
            flavor: Flavor::Openmpi,
            baselines: vec![Baseline::ALL[2]],
            env: vec![("A".into(), "1".into())],
            ..MpiBenchConfig::default()
        };
        let c = cfg
            .command_line(&Variant::Baseline(Baseline::ALL[2]), "t")
            .join(" ");
        assert!(c.starts_with("mpirun.openmpi --oversubscribe"), "{c}");
        assert!(c.contains("-x A=1 -n 4 ./tile_io.ompi"), "{c}");
        assert!(cfg.check().is_ok());
        let bad = MpiBenchConfig {
            baselines: Baseline::ALL.to_vec(),
            ..cfg
        };
        assert!(bad.check().is_err());
    }

    fn run_of(mib: f64, verify: &str) -> ProgramRun {
        ProgramRun {
            mib_per_s: mib,
            seconds: 1.0,
            iter_seconds: vec![1.0],
            bytes: 1.0,
            verify: verify.into(),
            violation: String::new(),
            bad_elements: 0,
            atomicity_get: 1,
            atomicity_set_rc: 0,
            mpi_library: "x".into(),
            dataset_x: 1,
            dataset_y: 1,
        }
    }

    fn row(config: &str, kind: &str, mib: Option<f64>, verified: &str) -> MpiBenchRow {
        MpiBenchRow {
            config: config.into(),
            kind: kind.into(),
            atomic: true,
            no_sieving: false,
            strategy: None,
            skipped: None,
            error: None,
            mib_per_s: mib,
            seconds: None,
            ratio_to_mpi_atomic: None,
            verified: verified.into(),
            runs: Vec::new(),
        }
    }

    #[test]
    fn verdict_summarizes_runs() {
        assert_eq!(
            verdict(&[run_of(1.0, "atomic"), run_of(1.0, "atomic")]),
            "atomic"
        );
        assert_eq!(
            verdict(&[run_of(1.0, "atomic"), run_of(1.0, "violated")]),
            "VIOLATED 1/2"
        );
        assert_eq!(verdict(&[run_of(1.0, "n/a")]), "n/a");
    }

    #[test]
    fn key_takes_the_best_verified_atomio_row() {
        let rows = vec![
            row("mpich-atomic", "baseline", Some(100.0), "atomic"),
            row("mpich-atomic-nods", "baseline", Some(150.0), "atomic"),
            row(
                "atomio:fast-but-wrong",
                "atomio",
                Some(900.0),
                "VIOLATED 1/3",
            ),
            row("atomio:a", "atomio", Some(320.0), "atomic"),
            row("atomio:b", "atomio", Some(250.0), "atomic"),
            row("atomio:skipped", "atomio", None, "skipped"),
        ];
        let k = key_figure(&rows, Flavor::Mpich, 3.0).unwrap();
        assert_eq!(k.best, "atomio:a");
        assert!((k.ratio - 3.2).abs() < 1e-12 && k.met);
        assert!((k.ratio_to_best_mpi_atomic.unwrap() - 320.0 / 150.0).abs() < 1e-12);
        assert!(key_figure(&rows[..2], Flavor::Mpich, 3.0).is_none());
        // A reference row below target × base caps the target: 320 ≥ 300 meets it; 250
        // does not.
        let mut with_reference = rows.clone();
        with_reference.push(row("contiguous", "reference", Some(300.0), "atomic"));
        let k = key_figure(&with_reference, Flavor::Mpich, 5.0).unwrap();
        assert_eq!((k.needed_mib_per_s, k.met), (300.0, true));
        with_reference.retain(|r| r.config != "atomio:a");
        assert!(!key_figure(&with_reference, Flavor::Mpich, 5.0).unwrap().met);
        // The lower of the two caps: plain at 240 lets 250 meet it.
        with_reference.push(row("plain", "reference", Some(240.0), "atomic"));
        let k = key_figure(&with_reference, Flavor::Mpich, 5.0).unwrap();
        assert_eq!((k.needed_mib_per_s, k.met), (240.0, true));
        assert_eq!(k.plain_mib_per_s, Some(240.0));
        // The pattern's cap is its faster way: plain-mapped at 270 caps, 250 misses it.
        with_reference.push(row("plain-mapped", "reference", Some(270.0), "atomic"));
        let k = key_figure(&with_reference, Flavor::Mpich, 5.0).unwrap();
        assert_eq!(k.capped_by.as_deref(), Some("plain-mapped"));
        assert_eq!((k.needed_mib_per_s, k.met), (270.0, false));
        // … and a slower mapped row leaves plain capping.
        with_reference.retain(|r| r.config != "plain-mapped");
        with_reference.push(row("plain-mapped", "reference", Some(200.0), "atomic"));
        let k = key_figure(&with_reference, Flavor::Mpich, 5.0).unwrap();
        assert_eq!(k.capped_by.as_deref(), Some("plain"));
        assert_eq!((k.needed_mib_per_s, k.met), (240.0, true));
    }
}
