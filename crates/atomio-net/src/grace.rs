//! A restarted server's grace period.
//!
//! A server that dies (`kill -9`, a crash, a stop) loses its lock table; a client that
//! held locks there may be in the middle of its I/O and does not know yet. It stops acting
//! on those locks only when its own lease view lapses (its renewals at the new instance
//! fail): at most 3/4 of a lease after its last acknowledged renewal, which was before the
//! death. So a server restarted on the same data directory serves nothing until one lease
//! after its previous instance was last alive; then no old holder can still act, and the
//! empty table is the truth.
//!
//! The previous instance's liveness is the modification time of `ALIVE_FILE` in the data
//! directory, rewritten every quarter lease (its content: the lease in ms). The grace period
//! ends at that time + the lease + a quarter lease (the touch interval): at least one lease
//! after the death. A directory never used, or whose last instance died longer ago than
//! that, serves at once.
//!
//! **Invariants:** with leases on, the file is rewritten at least every quarter lease while
//! the server runs; a connection is served only after the grace deadline.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The file in a server's data directory that says it is (or was last) alive.
pub const ALIVE_FILE: &str = ".atomio-alive";

fn alive_file(dir: &Path) -> PathBuf {
    dir.join(ALIVE_FILE)
}

/// How long from now a server starting on `dir` must wait before serving (`None`: at
/// once). `lease_ms` is this instance's lease; the previous instance's counts if longer.
pub fn grace_period(dir: &Path, lease_ms: Option<u64>) -> Option<Duration> {
    let path = alive_file(dir);
    let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
    // An unreadable lease (a file cut short by the crash) counts as this one or the default.
    let previous = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let lease = previous
        .or(lease_ms)
        .unwrap_or(atomio_lock::LeaseConfig::DEFAULT_MS)
        .max(lease_ms.unwrap_or(0));
    let until = modified + Duration::from_millis(lease + lease / 4);
    until.duration_since(SystemTime::now()).ok()
}

/// Marks this instance alive in `dir` now and every quarter lease after, for as long as
/// the returned task runs (abort it, or let the runtime end, when the server stops). With
/// leases off nobody relies on a lease, so the file is removed and nothing runs.
pub fn keep_alive(dir: &Path, lease_ms: Option<u64>) -> Option<tokio::task::JoinHandle<()>> {
    let path = alive_file(dir);
    let Some(ms) = lease_ms else {
        let _ = std::fs::remove_file(&path);
        return None;
    };
    let every = Duration::from_millis((ms / 4).max(1));
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if let Err(e) = std::fs::write(&path, format!("{ms}\n")) {
                tracing::warn!(path = %path.display(), "cannot mark the server alive: {e}");
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("atomio-grace-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_fresh_directory_serves_at_once() {
        assert_eq!(grace_period(&dir("fresh"), Some(1000)), None);
    }

    #[test]
    fn a_directory_just_left_waits_out_the_longer_lease() {
        let d = dir("recent");
        std::fs::write(d.join(ALIVE_FILE), "2000\n").unwrap();
        let g = grace_period(&d, Some(1000)).expect("a grace period");
        // 2000 + 500 ms from the file's time, which is about now.
        assert!(
            g > Duration::from_millis(2000) && g <= Duration::from_millis(2500),
            "{g:?}"
        );
        // A cut-short file counts this instance's lease.
        std::fs::write(d.join(ALIVE_FILE), "").unwrap();
        let g = grace_period(&d, Some(1000)).expect("a grace period");
        assert!(
            g > Duration::from_millis(1000) && g <= Duration::from_millis(1250),
            "{g:?}"
        );
    }

    #[test]
    fn a_directory_left_long_ago_serves_at_once() {
        let d = dir("old");
        let f = std::fs::File::create(d.join(ALIVE_FILE)).unwrap();
        std::io::Write::write_all(&mut &f, b"1000\n").unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(10))
            .unwrap();
        assert_eq!(grace_period(&d, Some(1000)), None);
    }

    #[tokio::test]
    async fn a_running_server_keeps_its_mark_fresh() {
        let d = dir("alive");
        let task = keep_alive(&d, Some(200)).expect("leases on");
        tokio::time::sleep(Duration::from_millis(120)).await;
        let age = |d: &Path| {
            SystemTime::now()
                .duration_since(
                    std::fs::metadata(d.join(ALIVE_FILE))
                        .unwrap()
                        .modified()
                        .unwrap(),
                )
                .unwrap_or_default()
        };
        assert!(age(&d) < Duration::from_millis(100), "{:?}", age(&d));
        task.abort();
        assert!(keep_alive(&d, None).is_none());
        assert!(!d.join(ALIVE_FILE).exists(), "leases off: no mark");
    }
}
