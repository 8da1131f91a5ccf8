//! Tran et al. 2010 §6.3: the same bytes, more regions. One client writes `bytes` split
//! into R equal regions (the `regions` workload: gap = region size by default, so the
//! extent is twice the data whatever R is) in one call, then reads the same regions back in
//! one call; R = 1, 2, 4, …, 1024. Write and read are timed apart (the paper's
//! `NONCONT_WRITE` and `NONCONT_READ` throughput as the client sees it).
//!
//! Rows: `plain` — the same bytes `pwrite`n (then `pread`) one region at a time into a
//! local file, no locks: what the machine does for that layout; the strategies on direct
//! placement by default (the user's file; `versioning` keeps its snapshots' chunks on the
//! servers, on disk, and the user's file is their base). The client is in this process
//! with the embedded servers (one client: no `fcntl` subtlety).
//!
//! **Steady state, not fresh files.** Each row has one file for the whole sweep, and every
//! run overwrites the regions with new bytes — an application checkpointing into its file
//! again and again; one untimed pass over every region count first. Versioning's store is
//! collected after each run (`collect_versions(keep_last = 1)`, untimed), so its dead
//! chunks are punched. Fresh files per run were tried first: their dirty pages (versioning's
//! chunks cannot be removed) piled up until the kernel throttled every row's writes to the
//! disk's speed, and writing them back each run instead made the disk (journal, discard)
//! the noise; here the bytes in flight stay bounded by the rows' files.
//!
//! What is and is not timed: buffers are filled before the clock starts; opening a file
//! (for `versioning`, its version store) is not timed; a versioning write is timed until
//! its snapshot is published; materializing the newest snapshot into the user's file (what
//! the MPI library does once at close) is timed apart and reported beside, not inside, the
//! write figure; collection is not timed.
//!
//! Every read is compared byte for byte with what was written (every run writes different
//! bytes); for `versioning` the user's file after materializing is compared too.

use super::{io, mib_s, wire};
use crate::stats::median;
use crate::workload::RowSpec;
use atomio_client::{DirectData, File, PlacementKind};
use atomio_layout::Access;
use atomio_net::{ClusterClient, EmbeddedCluster};
use atomio_proto::{ErrorCode, WireError};
use atomio_workloads::{RegionsParams, Workload};
use serde::Serialize;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// Bytes written (and read) per call.
    pub bytes: u64,
    /// Region counts, in order (each must divide `bytes`).
    pub regions: Vec<u64>,
    /// Bytes between regions (default: the region size).
    pub gap_bytes: Option<u64>,
    pub strategies: Vec<RowSpec>,
    /// Where strategies that run on either placement keep the bytes.
    pub data: PlacementKind,
    pub servers: u32,
    pub stripe_size: u64,
    pub runs: usize,
    /// Read back through a newly opened file (versioning: no tree node cached) instead of
    /// the writer's.
    pub fresh_reader: bool,
    pub scratch: PathBuf,
    pub progress: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    pub strategy: String,
    /// `local` (plain), `direct` (the user's file) or `servers`.
    pub data: String,
    pub regions: u64,
    pub region_bytes: u64,
    pub gap_bytes: u64,
    pub bytes: u64,
    /// Medians over runs.
    pub write_seconds: f64,
    pub read_seconds: f64,
    pub write_mib_s: f64,
    pub read_mib_s: f64,
    pub write_runs: Vec<f64>,
    pub read_runs: Vec<f64>,
    /// Versioning: median seconds to write the newest snapshot into the base afterwards
    /// (not part of the write figure).
    pub materialize_seconds: Option<f64>,
    /// Lock requests of one run's write + read.
    pub lock_requests: u64,
    /// Every read returned exactly the bytes written (and versioning's base holds them
    /// after materializing).
    pub verified: bool,
    pub mismatch: Option<String>,
}

/// Throughput at the last region count over the first, per strategy.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRatio {
    pub strategy: String,
    pub from_regions: u64,
    pub to_regions: u64,
    pub write: f64,
    pub read: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    pub bytes: u64,
    pub servers: u32,
    pub runs: usize,
    pub fresh_reader: bool,
    pub rows: Vec<SweepRow>,
    pub ratios: Vec<SweepRatio>,
}

/// One run of one row.
struct Sample {
    write_s: f64,
    read_s: f64,
    materialize_s: Option<f64>,
    lock_requests: u64,
    mismatch: Option<String>,
}

/// A row's file for the whole sweep.
enum RowFile {
    Plain(std::fs::File),
    Strategy {
        f: Box<File>,
        /// Needs the servers (else `write_local`/`read_local`).
        remote: bool,
        on_servers: bool,
        strategy: atomio_client::Strategy,
    },
}

impl RowFile {
    fn data(&self) -> &'static str {
        match self {
            RowFile::Plain(_) => "local",
            RowFile::Strategy {
                on_servers: true, ..
            } => "servers",
            RowFile::Strategy { .. } => "direct",
        }
    }
}

struct Env<'a> {
    cfg: &'a SweepConfig,
    c: ClusterClient,
}

/// The single call's access for `regions` regions.
pub fn regions_access(
    bytes: u64,
    regions: u64,
    gap: Option<u64>,
) -> Result<(Access, u64), WireError> {
    let w = Workload::Regions(RegionsParams {
        regions,
        bytes_per_client: bytes,
        gap_bytes: gap,
        read_back: false,
    });
    let plan = w
        .plan(1)
        .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?;
    let gap = plan.params["gap_bytes"].as_u64().unwrap_or(bytes / regions);
    let access = plan.clients[0].calls[0]
        .access
        .clone()
        .ok_or_else(|| wire("the regions plan has no access"))?;
    Ok((access, gap))
}

fn first_difference(got: &[u8], want: &[u8]) -> Option<String> {
    if got == want {
        return None;
    }
    let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
    Some(format!(
        "byte {i} of the call's data differs (read {:#04x}, wrote {:#04x}; {} bytes)",
        got.get(i).copied().unwrap_or(0),
        want.get(i).copied().unwrap_or(0),
        want.len()
    ))
}

impl Env<'_> {
    fn local(&self, si: usize) -> PathBuf {
        self.cfg
            .scratch
            .join(format!("file-{}-{si}.dat", std::process::id()))
    }

    fn path(si: usize) -> String {
        format!("/regions-sweep/{}-{si}", std::process::id())
    }

    async fn open(
        &mut self,
        si: usize,
        spec: &RowSpec,
        create: bool,
    ) -> Result<RowFile, WireError> {
        let local = self.local(si);
        Ok(match spec {
            RowSpec::Plain => RowFile::Plain(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(create)
                    .truncate(create)
                    .open(&local)
                    .map_err(|e| io(&local, e))?,
            ),
            RowSpec::RttFloor
            | RowSpec::Contiguous
            | RowSpec::PlainMapped
            | RowSpec::HostLocks(_) => {
                return Err(WireError::new(
                    atomio_proto::ErrorCode::InvalidArgument,
                    format!("{} is a row of the workload benchmarks", spec.name()),
                ))
            }
            RowSpec::IntervalFile(s) => {
                return Err(WireError::new(
                    ErrorCode::InvalidArgument,
                    format!("{s}+ifile: interval files are for workload benchmarks"),
                ))
            }
            RowSpec::Strategy(s) => {
                let on_servers = s.supports(PlacementKind::Servers)
                    && (self.cfg.data == PlacementKind::Servers
                        || !s.supports(PlacementKind::Direct));
                let c = &mut self.c;
                let mut f = match (on_servers, create) {
                    (true, true) => {
                        let _ = c.remove(&Self::path(si)).await;
                        File::create(c, &Self::path(si), self.cfg.stripe_size, self.cfg.servers)
                            .await?
                    }
                    (true, false) => File::open(c, &Self::path(si)).await?,
                    (false, _) => {
                        if create {
                            std::fs::File::create(&local).map_err(|e| io(&local, e))?;
                        }
                        File::direct(DirectData::open(&local, false)?)
                    }
                };
                f.set_atomic(Some(s.clone()))?;
                if s.is_versioning() {
                    // Opening the version store (untimed, like an open).
                    f.list_versions(c).await?;
                }
                RowFile::Strategy {
                    f: Box::new(f),
                    remote: on_servers || s.uses_lock_service(),
                    on_servers,
                    strategy: s.clone(),
                }
            }
        })
    }

    async fn measure(
        &mut self,
        si: usize,
        spec: &RowSpec,
        row: &mut RowFile,
        access: &Access,
        data: &[u8],
        out: &mut [u8],
    ) -> Result<Sample, WireError> {
        out.fill(0);
        let s = match row {
            RowFile::Plain(f) => {
                let t = Instant::now();
                let mut at = 0usize;
                for r in access.ranges() {
                    let n = r.len() as usize;
                    f.write_all_at(&data[at..at + n], r.start)
                        .map_err(|e| io(&self.local(si), e))?;
                    at += n;
                }
                let write_s = t.elapsed().as_secs_f64();
                let t = Instant::now();
                let mut at = 0usize;
                for r in access.ranges() {
                    let n = r.len() as usize;
                    f.read_exact_at(&mut out[at..at + n], r.start)
                        .map_err(|e| io(&self.local(si), e))?;
                    at += n;
                }
                let read_s = t.elapsed().as_secs_f64();
                Sample {
                    write_s,
                    read_s,
                    materialize_s: None,
                    lock_requests: 0,
                    mismatch: first_difference(out, data),
                }
            }
            RowFile::Strategy {
                f,
                remote,
                strategy,
                ..
            } => {
                let remote = *remote;
                let before = f.stats().lock_requests;
                let t = Instant::now();
                match remote {
                    true => f.write(&mut self.c, access, data).await?,
                    false => f.write_local(access, data)?,
                }
                let write_s = t.elapsed().as_secs_f64();
                let mut lock_requests = f.stats().lock_requests - before;
                let mut reader = match self.cfg.fresh_reader {
                    true => Some(self.open(si, spec, false).await?),
                    false => None,
                };
                let rf = match &mut reader {
                    Some(RowFile::Strategy { f, .. }) => f,
                    _ => &mut *f,
                };
                let before = rf.stats().lock_requests;
                let t = Instant::now();
                match remote {
                    true => rf.read(&mut self.c, access, out).await?,
                    false => rf.read_local(access, out)?,
                }
                let read_s = t.elapsed().as_secs_f64();
                lock_requests += rf.stats().lock_requests - before;
                drop(reader);
                let mut mismatch = first_difference(out, data);
                let mut materialize_s = None;
                if strategy.is_versioning() {
                    let local = self.local(si);
                    let c = &mut self.c;
                    let t = Instant::now();
                    f.materialize(c).await?;
                    materialize_s = Some(t.elapsed().as_secs_f64());
                    // The base alone must now hold the bytes.
                    out.fill(0);
                    match f.info().cloned() {
                        Some(info) => c.read_ranges(&info, access.ranges(), out).await?,
                        None => DirectData::open(&local, false)?.read_pieces(access, out, false)?,
                    }
                    if mismatch.is_none() {
                        mismatch = first_difference(out, data)
                            .map(|m| format!("after materializing, the base: {m}"));
                    }
                    // Dead chunks punched: what is in flight stays bounded (untimed).
                    f.collect_versions(c, 1, None).await?;
                }
                Sample {
                    write_s,
                    read_s,
                    materialize_s,
                    lock_requests,
                    mismatch,
                }
            }
        };
        Ok(s)
    }
}

/// Runs every (region count, strategy) `runs` times, interleaved: run k of every row
/// (strategies in an order rotated by k) before run k+1 of any.
pub async fn run(cfg: &SweepConfig) -> Result<SweepReport, WireError> {
    std::fs::create_dir_all(&cfg.scratch).map_err(|e| io(&cfg.scratch, e))?;
    let cluster = EmbeddedCluster::start_on_disk(cfg.servers, &cfg.scratch.join("servers"))?;
    let addrs = cluster.serve_tcp().await?;
    let mut env = Env {
        cfg,
        c: ClusterClient::connect_tcp(&addrs).await?,
    };
    let accesses: Vec<(u64, Access, u64)> = cfg
        .regions
        .iter()
        .map(|&r| regions_access(cfg.bytes, r, cfg.gap_bytes).map(|(a, g)| (r, a, g)))
        .collect::<Result<_, _>>()?;
    let n = cfg.strategies.len();
    let bar = crate::progress::bar((accesses.len() * n * (cfg.runs + 1)) as u64, cfg.progress);
    let mut files = Vec::new();
    for (si, spec) in cfg.strategies.iter().enumerate() {
        files.push(env.open(si, spec, true).await?);
    }
    let mut data = vec![0u8; cfg.bytes as usize];
    let mut out = vec![0u8; cfg.bytes as usize];
    // samples[region index][strategy index]
    let mut samples: Vec<Vec<Vec<Sample>>> = accesses
        .iter()
        .map(|_| (0..n).map(|_| Vec::new()).collect())
        .collect();
    let mut warm_mismatch: Vec<Option<String>> = vec![None; n];
    // Pass 0 is the untimed warm-up (every region count once: the files reach their
    // steady state).
    for pass in 0..=cfg.runs {
        for (ri, (r, access, _)) in accesses.iter().enumerate() {
            for k in 0..n {
                let si = (k + pass + ri) % n;
                let spec = &cfg.strategies[si];
                bar.set_message(match pass {
                    0 => format!("warm-up: R = {r}, {}", spec.name()),
                    p => format!("R = {r}, {} run {p}", spec.name()),
                });
                // Distinct bytes every run: a stale read cannot pass the comparison.
                let op = (pass * accesses.len() * n + ri * n + si) as u64;
                atomio_verify::fill(0, op, access.ranges(), &mut data).map_err(wire)?;
                let s = env
                    .measure(si, spec, &mut files[si], access, &data, &mut out)
                    .await?;
                if pass > 0 {
                    samples[ri][si].push(s);
                } else if let Some(m) = s.mismatch {
                    warm_mismatch[si].get_or_insert(format!("R={r} (warm-up): {m}"));
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let data_of: Vec<&'static str> = files.iter().map(RowFile::data).collect();
    drop(files);
    for (si, spec) in cfg.strategies.iter().enumerate() {
        if matches!(spec, RowSpec::Strategy(s) if s.supports(PlacementKind::Servers)) {
            let _ = env.c.remove(&Env::path(si)).await;
        }
        let _ = std::fs::remove_file(env.local(si));
    }
    let mut rows = Vec::new();
    for ((r, access, gap), per) in accesses.iter().zip(samples) {
        for (si, (spec, ss)) in cfg.strategies.iter().zip(per).enumerate() {
            let w: Vec<f64> = ss.iter().map(|s| s.write_s).collect();
            let rd: Vec<f64> = ss.iter().map(|s| s.read_s).collect();
            let mat: Vec<f64> = ss.iter().filter_map(|s| s.materialize_s).collect();
            let mismatch = ss
                .iter()
                .find_map(|s| s.mismatch.clone())
                .or_else(|| warm_mismatch[si].clone());
            let (ws, rs) = (median(&w), median(&rd));
            rows.push(SweepRow {
                strategy: spec.name(),
                data: data_of[si].to_string(),
                regions: *r,
                region_bytes: cfg.bytes / r,
                gap_bytes: *gap,
                bytes: access.size(),
                write_seconds: ws,
                read_seconds: rs,
                write_mib_s: mib_s(access.size(), ws),
                read_mib_s: mib_s(access.size(), rs),
                write_runs: w,
                read_runs: rd,
                materialize_seconds: (!mat.is_empty()).then(|| median(&mat)),
                lock_requests: ss[0].lock_requests,
                verified: mismatch.is_none(),
                mismatch,
            });
        }
    }
    let (first, last) = (
        cfg.regions.first().copied().unwrap_or(1),
        cfg.regions.last().copied().unwrap_or(1),
    );
    let ratios = cfg
        .strategies
        .iter()
        .filter_map(|spec| {
            let get = |r: u64| {
                rows.iter()
                    .find(|x| x.regions == r && x.strategy == spec.name())
            };
            let (a, b) = (get(first)?, get(last)?);
            Some(SweepRatio {
                strategy: spec.name(),
                from_regions: first,
                to_regions: last,
                write: b.write_mib_s / a.write_mib_s,
                read: b.read_mib_s / a.read_mib_s,
            })
        })
        .collect();
    drop(env);
    drop(cluster);
    Ok(SweepReport {
        bytes: cfg.bytes,
        servers: cfg.servers,
        runs: cfg.runs,
        fresh_reader: cfg.fresh_reader,
        rows,
        ratios,
    })
}
