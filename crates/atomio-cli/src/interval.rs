//! `atomio interval`: interval files (Logan & Dickens §3.4–3.5) — what one holds, and
//! translating one to the flat file or to the interval set of a workload's accesses (another
//! rank count or another view), streaming with bounded memory.

use crate::table::render;
use anyhow::{anyhow, bail, Context};
use atomio_interval::ifile::IntervalFile;
use atomio_interval::translate::{
    flat_to_set_with, translate_to_flat_with, translate_to_set_with, Options, Progress,
};
use atomio_interval::{IntervalSet, Limits, Owner, TranslateReport};
use atomio_layout::Access;
use atomio_workloads::{CallKind, Workload};
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Subcommand)]
pub enum IntervalCmd {
    /// An interval file's header, per-rank regions, families, intervals and its private and
    /// shared bytes.
    Info(InfoArgs),
    /// Translate an interval file (or, with `--from flat`, a flat file) to the flat file
    /// (`--to flat`) or to the interval file of a workload's accesses for N clients
    /// (`--workload NAME --clients N [-- workload params]`).
    Translate(TranslateArgs),
}

#[derive(Args)]
pub struct InfoArgs {
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Print every rank's region (by default the first 16 when there are more than 32).
    #[arg(long)]
    all_ranks: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// An interval file.
    Intervals,
    /// An ordinary (flat) file.
    Flat,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Calls {
    All,
    Write,
    Read,
}

#[derive(Args)]
#[command(
    after_help = "Workload parameters go after `--`; `atomio-lab bench list` lists the \
workloads. Examples:\n  atomio interval translate tiles.iv tiles.flat --to flat\n  \
atomio interval translate tiles.iv readers.iv --workload tile --clients 9 -- --tile-x 64"
)]
pub struct TranslateArgs {
    src: PathBuf,
    dst: PathBuf,
    /// What SRC is.
    #[arg(long, value_enum, default_value = "intervals")]
    from: Kind,
    /// Write the flat file (`flat`; the only value).
    #[arg(long, value_enum, conflicts_with = "workload")]
    to: Option<ToKind>,
    /// The target interval set: this workload's accesses, analyzed.
    #[arg(long)]
    workload: Option<String>,
    /// Clients (ranks) of the target workload.
    #[arg(long, default_value_t = 4)]
    clients: u32,
    /// Which of the workload's calls declare the target's intervals.
    #[arg(long, value_enum, default_value = "all")]
    calls: Calls,
    /// Largest chunk moved at once (MiB).
    #[arg(long, default_value_t = 8)]
    chunk_mib: usize,
    /// Do not fsync the target at the end.
    #[arg(long)]
    no_sync: bool,
    #[arg(long)]
    no_progress: bool,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Workload parameters, after `--`.
    #[arg(last = true)]
    params: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ToKind {
    Flat,
}

pub fn run(cmd: IntervalCmd) -> anyhow::Result<()> {
    match cmd {
        IntervalCmd::Info(a) => info(a),
        IntervalCmd::Translate(a) => translate(a),
    }
}

#[derive(Serialize)]
struct RankRow {
    rank: u32,
    offset: u64,
    bytes: u64,
    families: u64,
}

#[derive(Serialize)]
struct Info {
    file: String,
    header: atomio_interval::Header,
    file_len: u64,
    families: u64,
    intervals: u64,
    private_intervals: u64,
    shared_intervals: u64,
    unresolved_intervals: u64,
    private_bytes: u64,
    shared_bytes: u64,
    unresolved_bytes: u64,
    owner_sets: u64,
    ranks: Vec<RankRow>,
}

fn info(a: InfoArgs) -> anyhow::Result<()> {
    let f = IntervalFile::open(&a.file).with_context(|| format!("{}", a.file.display()))?;
    let h = f.header().clone();
    let mut i = Info {
        file: a.file.display().to_string(),
        file_len: f.file_len(),
        families: h.families,
        intervals: h.intervals,
        private_intervals: 0,
        shared_intervals: 0,
        unresolved_intervals: 0,
        private_bytes: 0,
        shared_bytes: 0,
        unresolved_bytes: 0,
        owner_sets: h.owner_sets,
        ranks: f
            .layout()
            .regions()
            .iter()
            .enumerate()
            .map(|(r, g)| RankRow {
                rank: r as u32,
                offset: g.offset,
                bytes: g.len,
                families: g.families,
            })
            .collect(),
        header: h.clone(),
    };
    for (fam, o) in f.set().families() {
        let (n, b) = match o {
            Owner::Ranks(rs) if rs.len() == 1 => (&mut i.private_intervals, &mut i.private_bytes),
            Owner::Ranks(_) => (&mut i.shared_intervals, &mut i.shared_bytes),
            Owner::Unresolved => (&mut i.unresolved_intervals, &mut i.unresolved_bytes),
        };
        *n += fam.count;
        *b += fam.bytes();
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&i)?);
        return Ok(());
    }
    print_info(&i, a.all_ranks);
    Ok(())
}

/// `info`'s text: the header's facts, the owners' totals and the rank table (the first
/// 16 ranks of more than 32 unless `all_ranks`).
fn print_info(i: &Info, all_ranks: bool) {
    let h = &i.header;
    println!(
        "interval file {} (format {}): {} ranks, flat size {} bytes",
        i.file, h.version, h.ranks, h.flat_size
    );
    println!(
        "metadata: {} bytes after the {}-byte header; data from offset {}, {} bytes \
         (regions aligned to {}); file length {}",
        h.meta_len,
        atomio_interval::ifile::HEADER_LEN,
        h.data_start,
        h.data_len,
        h.region_align,
        i.file_len
    );
    println!(
        "{} families of {} intervals, {} owner sets",
        h.families, h.intervals, h.owner_sets
    );
    println!(
        "private: {} bytes in {} intervals; shared: {} bytes in {} intervals{}",
        i.private_bytes,
        i.private_intervals,
        i.shared_bytes,
        i.shared_intervals,
        if i.unresolved_intervals > 0 {
            format!(
                "; unresolved: {} bytes in {} intervals",
                i.unresolved_bytes, i.unresolved_intervals
            )
        } else {
            String::new()
        }
    );
    let show = if all_ranks || i.ranks.len() <= 32 {
        i.ranks.len()
    } else {
        16
    };
    let rows: Vec<Vec<String>> = i.ranks[..show]
        .iter()
        .map(|r| {
            vec![
                r.rank.to_string(),
                r.offset.to_string(),
                r.bytes.to_string(),
                r.families.to_string(),
            ]
        })
        .collect();
    print!(
        "{}",
        render(&["rank", "offset", "bytes", "families"], &rows)
    );
    if show < i.ranks.len() {
        println!(
            "… {} more ranks (--all-ranks or --json lists them)",
            i.ranks.len() - show
        );
    }
}

/// The interval set of a workload's accesses for `clients` clients.
fn workload_set(
    name: &str,
    params: &[String],
    clients: u32,
    calls: Calls,
) -> anyhow::Result<IntervalSet> {
    let w = Workload::from_name(name, params).map_err(|e| anyhow!("{e}"))?;
    let plan = atomio_workloads::plan(&w, clients).map_err(|e| anyhow!("{e}"))?;
    let keep = |k: CallKind| match calls {
        Calls::All => k != CallKind::Sync,
        Calls::Write => k == CallKind::Write,
        Calls::Read => k == CallKind::Read,
    };
    let declared: Vec<(u32, Access)> = plan
        .clients
        .iter()
        .flat_map(|c| {
            c.calls
                .iter()
                .filter(|call| keep(call.kind))
                .filter_map(move |call| call.access.clone().map(|a| (c.rank, a)))
        })
        .collect();
    if declared.is_empty() {
        bail!("workload {name} has no such calls for {clients} clients");
    }
    atomio_interval::views::from_accesses(clients, &declared, Limits::default())
        .map_err(|e| anyhow!("analyzing workload {name}: {e}"))
}

fn translate(a: TranslateArgs) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let mut last = 0.0f64;
    let quiet = a.no_progress;
    let mut progress = move |p: Progress| {
        if quiet || p.seconds < 2.0 || p.seconds - last < 1.0 {
            return;
        }
        last = p.seconds;
        eprintln!(
            "translate: {:.0}% ({} of {} MiB, {:.1} s)",
            100.0 * p.done_bytes as f64 / p.total_bytes.max(1) as f64,
            p.done_bytes >> 20,
            p.total_bytes >> 20,
            p.seconds
        );
    };
    let mut opts = Options {
        chunk_bytes: a.chunk_mib.clamp(1, 1024) << 20,
        sync: !a.no_sync,
        progress: Some(&mut progress),
        ..Default::default()
    };
    let rep: TranslateReport = match (a.from, a.to, &a.workload) {
        (_, Some(_), Some(_)) => bail!("--to flat and --workload exclude each other"),
        (_, None, None) => bail!("say where to: --to flat, or --workload NAME --clients N"),
        (Kind::Flat, Some(ToKind::Flat), None) => {
            bail!("--from flat --to flat: nothing to translate (copy the file)")
        }
        (Kind::Intervals, Some(ToKind::Flat), None) => {
            let src = IntervalFile::open(&a.src).with_context(|| format!("{}", a.src.display()))?;
            translate_to_flat_with(&src, &a.dst, &mut opts)?
        }
        (from, None, Some(name)) => {
            let set = workload_set(name, &a.params, a.clients, a.calls)?;
            let s = set.stats();
            println!(
                "target: {name} for {} clients: {} families of {} intervals ({} private bytes, \
                 {} shared), analyzed in {:.3} s",
                a.clients, s.entries, s.intervals, s.private_bytes, s.shared_bytes, s.seconds
            );
            match from {
                Kind::Flat => flat_to_set_with(&a.src, &set, &a.dst, &mut opts)?,
                Kind::Intervals => {
                    let src = IntervalFile::open(&a.src)
                        .with_context(|| format!("{}", a.src.display()))?;
                    translate_to_set_with(&src, &set, &a.dst, &mut opts)?
                }
            }
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{} → {} ({}): {} bytes of intervals, {} read, {} written ({} holes left zero); \
         {} chunks, {} reads, {} writes; {:.3} s ({:.1} MiB/s), {:.3} s in all",
        a.src.display(),
        a.dst.display(),
        rep.target,
        rep.bytes,
        rep.bytes_read,
        rep.bytes_written,
        rep.hole_bytes,
        rep.chunks,
        rep.reads,
        rep.writes,
        rep.seconds,
        rep.bytes_written as f64 / (1 << 20) as f64 / rep.seconds.max(1e-9),
        secs
    );
    if let Some(p) = &a.json {
        crate::output::write_json(p, &rep)?;
    }
    Ok(())
}
