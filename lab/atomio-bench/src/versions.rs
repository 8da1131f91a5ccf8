//! Versioning's benchmarks (Tran et al. 2010 §6), each against the same bytes written by
//! a plain local `pwrite` (the `plain` row) and by lock strategies:
//!
//! * `sweep` — Tran §6.3: one client writes the same bytes split into 1, 2, 4, …, 1024
//!   regions and reads them back; write and read throughput per region count.
//! * `readers` — readers read the newest snapshot in a loop while writers write overlapping
//!   tiles: read latency with and without writers (versioning readers never wait for a
//!   writer; lock readers do). Every client is a process of its own (`client`).
//! * `gc` — one writer overwrites a file again and again while a second client collects
//!   old snapshots: the servers' disk usage over time.
//!
//! **Invariants:** every row of one invocation runs on the same servers with the same bytes;
//! what a read returned is checked (byte for byte, or by the verifier) and a mismatch is
//! reported, never dropped; figures are medians over runs unless a table says otherwise.

pub mod gc;
pub mod readers;
pub mod sweep;

use atomio_client::{DirectData, File, Strategy};
use atomio_net::ClusterClient;
use atomio_proto::{ErrorCode, WireError};
use std::path::{Path, PathBuf};

/// Where a run's versioned file lives, for `collect_to_newest`.
pub(crate) enum VersionedAt<'a> {
    /// The user's file (direct placement).
    Direct(&'a Path),
    /// A file on the data servers.
    Servers(&'a str),
}

/// Collects a versioned file's store down to its newest snapshot, best effort; a
/// benchmark calls it before removing a run's file. The store outlives the file
/// otherwise (no request drops a store), and its chunks — dirty page-cache pages, gigabytes
/// at benchmark loads — would be written back during later runs' timed work. Punched
/// instead, their pages are dropped unwritten.
pub(crate) async fn collect_to_newest(c: &mut ClusterClient, at: VersionedAt<'_>) {
    let f = match at {
        VersionedAt::Direct(file) => DirectData::open(file, false).map(File::direct),
        VersionedAt::Servers(path) => File::open(c, path).await,
    };
    if let Ok(mut f) = f {
        if f.set_atomic(Some(Strategy::versioning())).is_ok() {
            let _ = f.collect_versions(c, 1, None).await;
        }
    }
}

pub(crate) fn wire(e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::Internal, e.to_string())
}

pub(crate) fn io(what: &Path, e: std::io::Error) -> WireError {
    WireError::new(ErrorCode::Io, format!("{}: {e}", what.display()))
}

/// Bytes the file system allocated for everything under `paths` (files or directories,
/// recursively): the sum of `st_blocks × 512`, as `du` counts. Files that vanish while
/// being counted are skipped.
pub fn disk_usage(paths: &[PathBuf]) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fn walk(p: &Path, total: &mut u64) {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            return;
        };
        if m.is_dir() {
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    walk(&e.path(), total);
                }
            }
        } else {
            *total += m.blocks() * 512;
        }
    }
    let mut total = 0;
    for p in paths {
        walk(p, &mut total);
    }
    total
}

/// The `p`-th percentile (0–100) of a sample sorted ascending (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `x` MiB per second for `bytes` in `seconds`.
pub(crate) fn mib_s(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds.max(1e-12) / (1 << 20) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
    }

    /// A versioned server file's store shrinks to its newest snapshot (`remove` alone would
    /// leave every chunk: they live in chunk spaces of their own).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn collect_to_newest_frees_a_server_files_old_chunks() {
        use atomio_layout::{Access, ByteRange};
        let dir = tempfile::tempdir().unwrap();
        let servers = dir.path().join("servers");
        let cluster = atomio_net::EmbeddedCluster::start_on_disk(2, &servers).unwrap();
        let addrs = cluster.serve_tcp().await.unwrap();
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        const WRITE: u64 = 256 << 10;
        let mut f = File::create(&mut c, "/v", 64 << 10, 2).await.unwrap();
        f.set_atomic(Some(Strategy::versioning())).unwrap();
        let all = Access::contiguous(ByteRange::new(0, WRITE).unwrap()).unwrap();
        for i in 0..16u8 {
            f.write(&mut c, &all, &vec![i; WRITE as usize])
                .await
                .unwrap();
        }
        drop(f);
        let before = disk_usage(std::slice::from_ref(&servers));
        assert!(before >= 16 * WRITE, "{before} bytes stored");
        collect_to_newest(&mut c, VersionedAt::Servers("/v")).await;
        let after = disk_usage(std::slice::from_ref(&servers));
        assert!(after <= 3 * WRITE, "{after} bytes after, {before} before");
        // The newest snapshot is intact.
        let mut f = File::open(&mut c, "/v").await.unwrap();
        f.set_atomic(Some(Strategy::versioning())).unwrap();
        let mut out = vec![0u8; WRITE as usize];
        f.read(&mut c, &all, &mut out).await.unwrap();
        assert!(out.iter().all(|&b| b == 15));
    }

    #[test]
    fn disk_usage_counts_allocated_blocks_not_length() {
        let dir = std::env::temp_dir().join(format!("atomio-du-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::write(dir.join("a/f"), vec![1u8; 1 << 20]).unwrap();
        let sparse = std::fs::File::create(dir.join("sparse")).unwrap();
        sparse.set_len(64 << 20).unwrap();
        let n = disk_usage(std::slice::from_ref(&dir));
        assert!((1 << 20..4 << 20).contains(&n), "{n}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
