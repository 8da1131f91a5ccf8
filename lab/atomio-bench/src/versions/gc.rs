//! Garbage collection under a writer: one writer overwrites a file again and again (the
//! whole file each time, or a stated fraction of it: window `i mod (size / window)`), while
//! a second client collects old snapshots concurrently (`collect_versions(keep_last)` in a
//! loop: the next pass at once after one that collected something, after a short pause
//! after one that found nothing). The disk usage of the servers' data directories —
//! the sum of `st_blocks × 512` over every file under them, as `du` counts — is sampled
//! after every overwrite and every `sample_ms` in between; reported: the maximum, the value
//! when the writer finished, and after one last collection, each as a multiple of the file
//! size.
//!
//! Rows: `plain` (the same overwrites `pwrite`n in place into a local file: the disk holds
//! the file once) and `posix-fcntl` (the same, each under an `fcntl` lock) beside
//! `versioning` on the servers (file-backed storage, embedded in this process, reached over
//! loopback TCP; the client on the same host writes chunks through the object files).
//!
//! Verified at the end: the newest snapshot, read by a fresh client (nothing cached),
//! equals exactly what the overwrites left; so does every kept snapshot (the `keep_last`
//! newest), each against the state after its own overwrite. The plain rows' files are
//! checked the same way.

use super::{disk_usage, io, mib_s, percentile, wire};
use crate::workload::RowSpec;
use atomio_client::{DirectData, File, PlacementKind, Strategy};
use atomio_layout::{Access, ByteRange};
use atomio_net::{ClusterClient, EmbeddedCluster};
use atomio_proto::WireError;
use serde::Serialize;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct GcConfig {
    pub overwrites: u64,
    pub file_bytes: u64,
    /// Of the file each overwrite writes (1: all of it).
    pub fraction: f64,
    pub keep_last: u64,
    /// The writer bounds the storage itself (`File::set_version_retention(keep_last)`):
    /// before a write, it collects what the collector has not yet. `false`: the collector
    /// alone frees, and the disk grows while it lags.
    pub writer_retention: bool,
    /// The collector's pause after a pass that found nothing to collect (none after one
    /// that did).
    pub gc_idle_ms: u64,
    pub strategies: Vec<RowSpec>,
    /// Where versioning keeps its base: `servers` (a server file) or `direct`.
    pub data: PlacementKind,
    pub servers: u32,
    pub stripe_size: u64,
    pub sample_ms: u64,
    pub scratch: PathBuf,
    pub progress: bool,
}

impl GcConfig {
    /// Bytes per overwrite (whole 4 KiB pages, at least one).
    pub fn window(&self) -> u64 {
        if self.fraction >= 1.0 {
            return self.file_bytes;
        }
        let w = (self.file_bytes as f64 * self.fraction / 4096.0).round() as u64 * 4096;
        w.clamp(4096, self.file_bytes)
    }

    fn slots(&self) -> u64 {
        (self.file_bytes / self.window()).max(1)
    }

    /// The byte range overwrite `i` writes.
    pub fn range(&self, i: u64) -> ByteRange {
        let w = self.window();
        let s = (i % self.slots()) * w;
        ByteRange {
            start: s,
            end: s + w,
        }
    }

    /// The file's bytes after overwrite `last` (zeros where nothing was written).
    fn expected(&self, last: u64) -> Result<Vec<u8>, WireError> {
        let slots = self.slots();
        let end = self.range(slots - 1).end;
        let mut out = vec![0u8; end as usize];
        for s in 0..slots.min(last + 1) {
            // The last overwrite ≤ `last` of slot s.
            let i = last - ((last + slots - s) % slots);
            let r = self.range(i);
            atomio_verify::fill(
                0,
                i,
                std::iter::once(r),
                &mut out[r.start as usize..r.end as usize],
            )
            .map_err(wire)?;
        }
        Ok(out)
    }
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct GcSample {
    /// Seconds since the first overwrite started.
    pub t: f64,
    /// Overwrites finished.
    pub overwrites: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CollectorStats {
    pub passes: u64,
    pub versions_collected: u64,
    pub nodes_freed: u64,
    pub bytes_punched: u64,
    pub seconds_collecting: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct GcRow {
    pub strategy: String,
    pub data: String,
    pub overwrites: u64,
    pub file_bytes: u64,
    pub bytes_per_overwrite: u64,
    pub keep_last: Option<u64>,
    /// Disk usage before the first overwrite (the servers' own files: lease mark, store
    /// id, logs), included in every figure below.
    pub baseline_bytes: u64,
    pub max_bytes: u64,
    pub end_of_writes_bytes: u64,
    pub final_bytes: u64,
    pub max_x: f64,
    pub end_of_writes_x: f64,
    pub final_x: f64,
    /// Bytes written over the time spent in write calls.
    pub write_mib_s: f64,
    pub write_median_ms: f64,
    pub write_p99_ms: f64,
    pub seconds: f64,
    pub collector: Option<CollectorStats>,
    /// Collections the writer ran itself because the collector lagged (versioning with
    /// `writer_retention`).
    pub writer_collections: Option<u64>,
    pub verified: bool,
    pub mismatch: Option<String>,
    /// Snapshots (or files) compared byte for byte.
    pub snapshots_checked: usize,
    pub samples: Vec<GcSample>,
}

/// Samples disk usage on a thread of its own until dropped.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(
        paths: Vec<PathBuf>,
        every: Duration,
        t0: Instant,
        done: Arc<AtomicU64>,
        out: Arc<Mutex<Vec<GcSample>>>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let bytes = disk_usage(&paths);
                let sample = GcSample {
                    t: t0.elapsed().as_secs_f64(),
                    overwrites: done.load(Ordering::Relaxed),
                    bytes,
                };
                out.lock().expect("sampler").push(sample);
                std::thread::sleep(every);
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

enum Writer {
    Plain(std::fs::File),
    Local(Box<File>),
    Versioned(Box<ClusterClient>, Box<File>),
}

impl Writer {
    async fn write(&mut self, a: &Access, data: &[u8]) -> Result<(), WireError> {
        match self {
            Writer::Plain(f) => {
                let r = a.hull().expect("non-empty");
                f.write_all_at(data, r.start)
                    .map_err(|e| WireError::new(atomio_proto::ErrorCode::Io, e.to_string()))
            }
            Writer::Local(f) => f.write_local(a, data),
            Writer::Versioned(c, f) => f.write(c, a, data).await,
        }
    }
}

async fn open_versioned(
    cfg: &GcConfig,
    addrs: &[String],
    path: &str,
    local: &std::path::Path,
    create: bool,
) -> Result<(ClusterClient, File), WireError> {
    let mut c = ClusterClient::connect_tcp(addrs).await?;
    let mut f = match cfg.data {
        PlacementKind::Servers => match create {
            true => File::create(&mut c, path, cfg.stripe_size, cfg.servers).await?,
            false => File::open(&mut c, path).await?,
        },
        PlacementKind::Direct => File::direct(DirectData::open(local, create)?),
    };
    f.set_atomic(Some(Strategy::versioning()))?;
    f.list_versions(&mut c).await?; // opens (or makes) the version store
    Ok((c, f))
}

/// Compares `got` with the state after overwrite `last`.
fn compare(cfg: &GcConfig, got: &[u8], last: u64, what: &str) -> Result<Option<String>, WireError> {
    let want = cfg.expected(last)?;
    if got.len() < want.len() {
        return Ok(Some(format!(
            "{what}: {} bytes, expected {}",
            got.len(),
            want.len()
        )));
    }
    Ok(got[..want.len()]
        .iter()
        .zip(&want)
        .position(|(a, b)| a != b)
        .map(|i| format!("{what}: byte {i} differs from overwrite {last}'s state")))
}

async fn one_row(
    cfg: &GcConfig,
    spec: &RowSpec,
    addrs: &[String],
    server_dirs: &[PathBuf],
    bar: &indicatif::ProgressBar,
) -> Result<GcRow, WireError> {
    let tag = format!("{}-{}", std::process::id(), spec.name().replace(':', "-"));
    let local = cfg.scratch.join(format!("file-{tag}.dat"));
    let path = format!("/version-gc/{tag}");
    let versioning = matches!(spec, RowSpec::Strategy(s) if s.is_versioning());
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut writer = match spec {
        RowSpec::Plain => Writer::Plain(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&local)
                .map_err(|e| io(&local, e))?,
        ),
        RowSpec::RttFloor | RowSpec::Contiguous | RowSpec::PlainMapped | RowSpec::HostLocks(_) => {
            return Err(WireError::new(
                atomio_proto::ErrorCode::InvalidArgument,
                format!("{} is a row of the workload benchmarks", spec.name()),
            ))
        }
        RowSpec::IntervalFile(s) => {
            return Err(WireError::new(
                atomio_proto::ErrorCode::InvalidArgument,
                format!("{s}+ifile: interval files are for workload benchmarks"),
            ))
        }
        RowSpec::Strategy(s) if !versioning => {
            if s.uses_lock_service() {
                return Err(wire(format!(
                    "version-gc runs plain, versioning and strategies without servers \
                     (posix-fcntl, romio, none), not {s}"
                )));
            }
            let mut f = File::direct(DirectData::open(&local, true)?);
            f.set_atomic(Some(s.clone()))?;
            Writer::Local(Box::new(f))
        }
        RowSpec::Strategy(_) => {
            let (c, mut f) = open_versioned(cfg, addrs, &path, &local, true).await?;
            if cfg.writer_retention {
                f.set_version_retention(Some(cfg.keep_last));
            }
            Writer::Versioned(Box::new(c), Box::new(f))
        }
    };
    if versioning {
        paths.extend(server_dirs.iter().cloned());
    }
    if !versioning || cfg.data == PlacementKind::Direct {
        paths.push(local.clone());
    }
    let data = if !versioning {
        "local"
    } else if cfg.data == PlacementKind::Servers {
        "servers"
    } else {
        "direct"
    };
    // What is there before the first write: the servers' own files (or the empty file).
    let baseline_bytes = disk_usage(&paths);
    let samples = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let sampler = Sampler::start(
        paths.clone(),
        Duration::from_millis(cfg.sample_ms.max(1)),
        t0,
        done.clone(),
        samples.clone(),
    );
    // The collector: its own client and file, passes until the writer is done.
    let writing = Arc::new(AtomicBool::new(true));
    let collector = if versioning {
        let (mut c, mut f) = open_versioned(cfg, addrs, &path, &local, false).await?;
        let writing = writing.clone();
        let (keep, pause) = (cfg.keep_last, Duration::from_millis(cfg.gc_idle_ms));
        Some(tokio::spawn(async move {
            let mut st = CollectorStats::default();
            loop {
                let last = !writing.load(Ordering::Relaxed);
                let t = Instant::now();
                let r = f.collect_versions(&mut c, keep, None).await?;
                st.seconds_collecting += t.elapsed().as_secs_f64();
                st.passes += 1;
                st.versions_collected += r.collected.len() as u64;
                st.nodes_freed += r.nodes_freed;
                st.bytes_punched += r.bytes_punched;
                if last {
                    return Ok::<CollectorStats, WireError>(st);
                }
                if r.collected.is_empty() {
                    tokio::time::sleep(pause).await;
                }
            }
        }))
    } else {
        None
    };
    let window = cfg.window();
    let mut buf = vec![0u8; window as usize];
    let mut lat = Vec::with_capacity(cfg.overwrites as usize);
    let written = async {
        for i in 0..cfg.overwrites {
            let r = cfg.range(i);
            atomio_verify::fill(0, i, std::iter::once(r), &mut buf).map_err(wire)?;
            let a = Access::contiguous(r).map_err(wire)?;
            let t = Instant::now();
            writer.write(&a, &buf).await?;
            lat.push(t.elapsed().as_secs_f64());
            done.store(i + 1, Ordering::Relaxed);
            let bytes = disk_usage(&paths);
            samples.lock().expect("samples").push(GcSample {
                t: t0.elapsed().as_secs_f64(),
                overwrites: i + 1,
                bytes,
            });
            bar.inc(1);
            if i % 8 == 0 {
                bar.set_message(format!(
                    "{}: disk {:.2}x the file",
                    spec.name(),
                    bytes as f64 / cfg.file_bytes as f64
                ));
            }
        }
        Ok::<(), WireError>(())
    }
    .await;
    let end_of_writes = disk_usage(&paths);
    writing.store(false, Ordering::Relaxed);
    let collected = match collector {
        Some(h) => Some(h.await.map_err(wire)??),
        None => None,
    };
    written?;
    let seconds = t0.elapsed().as_secs_f64();
    drop(sampler);
    let final_bytes = disk_usage(&paths);
    let mut samples = std::mem::take(&mut *samples.lock().expect("samples"));
    samples.push(GcSample {
        t: t0.elapsed().as_secs_f64(),
        overwrites: cfg.overwrites,
        bytes: final_bytes,
    });
    samples.sort_by(|a, b| a.t.total_cmp(&b.t));
    let max_bytes = samples.iter().map(|s| s.bytes).max().unwrap_or(0);
    // Verification.
    let last = cfg.overwrites.saturating_sub(1);
    let (mismatch, checked) = match &mut writer {
        Writer::Plain(_) | Writer::Local(_) => {
            let got = std::fs::read(&local).map_err(|e| io(&local, e))?;
            (compare(cfg, &got, last, "the file")?, 1)
        }
        Writer::Versioned(..) => {
            // A fresh client: nothing cached, every node and chunk from the servers.
            let (mut c, mut f) = open_versioned(cfg, addrs, &path, &local, false).await?;
            let end = cfg.range(cfg.slots() - 1).end as usize;
            let all =
                Access::contiguous(ByteRange::new(0, end as u64).map_err(wire)?).map_err(wire)?;
            let mut got = vec![0u8; end];
            f.read_snapshot(&mut c, None, &all, &mut got, true).await?;
            let mut mismatch = compare(cfg, &got, last, "the newest snapshot")?;
            let mut checked = 1;
            let mut published: Vec<u64> = f
                .list_versions(&mut c)
                .await?
                .into_iter()
                .filter(|r| r.state == atomio_version::VersionState::Published)
                .map(|r| r.version)
                .collect();
            published.sort_unstable();
            let newest = published.last().copied().unwrap_or(0);
            if newest != cfg.overwrites && mismatch.is_none() {
                mismatch = Some(format!(
                    "newest published version is {newest}, expected {} (one per overwrite)",
                    cfg.overwrites
                ));
            }
            for (k, v) in published.iter().rev().enumerate().skip(1) {
                if mismatch.is_some() {
                    break;
                }
                got.fill(0);
                f.read_snapshot(&mut c, Some(*v), &all, &mut got, true)
                    .await?;
                mismatch = compare(cfg, &got, last - k as u64, &format!("kept snapshot {v}"))?;
                checked += 1;
            }
            if mismatch.is_none() && published.len() as u64 > cfg.keep_last {
                mismatch = Some(format!(
                    "{} snapshots still published after the last collection (keep {})",
                    published.len(),
                    cfg.keep_last
                ));
            }
            (mismatch, checked)
        }
    };
    let writer_collections = match &writer {
        Writer::Versioned(_, f) => f.version_stats().map(|s| s.writer_collections),
        _ => None,
    };
    drop(writer);
    let mut l = lat.clone();
    l.sort_by(f64::total_cmp);
    let total_write: f64 = lat.iter().sum();
    let x = |b: u64| b as f64 / cfg.file_bytes as f64;
    Ok(GcRow {
        strategy: spec.name(),
        data: data.to_string(),
        overwrites: cfg.overwrites,
        file_bytes: cfg.file_bytes,
        bytes_per_overwrite: window,
        keep_last: versioning.then_some(cfg.keep_last),
        baseline_bytes,
        max_bytes,
        end_of_writes_bytes: end_of_writes,
        final_bytes,
        max_x: x(max_bytes),
        end_of_writes_x: x(end_of_writes),
        final_x: x(final_bytes),
        write_mib_s: mib_s(window * cfg.overwrites, total_write),
        write_median_ms: percentile(&l, 50.0) * 1e3,
        write_p99_ms: percentile(&l, 99.0) * 1e3,
        seconds,
        collector: collected,
        writer_collections,
        verified: mismatch.is_none(),
        mismatch,
        snapshots_checked: checked,
        samples,
    })
}

pub async fn run(cfg: &GcConfig) -> Result<Vec<GcRow>, WireError> {
    std::fs::create_dir_all(&cfg.scratch).map_err(|e| io(&cfg.scratch, e))?;
    let dir = cfg.scratch.join("servers");
    let cluster = EmbeddedCluster::start_on_disk(cfg.servers, &dir)?;
    let addrs = cluster.serve_tcp().await?;
    let server_dirs: Vec<PathBuf> = (0..cfg.servers)
        .map(|i| dir.join(format!("server-{i}")))
        .collect();
    let bar = crate::progress::bar(cfg.overwrites * cfg.strategies.len() as u64, cfg.progress);
    let mut rows = Vec::new();
    for spec in &cfg.strategies {
        let row = one_row(cfg, spec, &addrs, &server_dirs, &bar).await;
        let _ = std::fs::remove_file(cfg.scratch.join(format!(
            "file-{}-{}.dat",
            std::process::id(),
            spec.name().replace(':', "-")
        )));
        rows.push(row?);
    }
    bar.finish_and_clear();
    drop(cluster);
    Ok(rows)
}
