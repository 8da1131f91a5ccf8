//! Pulling the servers' node logs on this host (`atomio_data::version_board`) into a
//! versioned file's node cache, and following them in the background so that a reader of
//! the newest snapshot finds a new snapshot's tree already decoded.
//!
//! A reader that pulled the logs only when it met a snapshot it had not walked paid the
//! pull (open, `statx`, read and decode of four logs: ~44 µs, p90 ~73 µs) inside that
//! read: with 80 snapshots a second beside a read every ~0.3 ms, those ~2 % of reads are
//! the reader's p99. The follower thread takes the pull out of the read: it waits on
//! `inotify` for appends to this file's logs and pulls them as they are written — the
//! servers append a version's nodes before its `NodePut` answers, so before the version
//! can be published — into an inbox the reader drains (a vector swap) before a walk.
//!
//! **Invariants:** every node in the inbox is a whole record whose checksum held, so it is
//! a node some server stored (nodes are immutable: as good as fetched); a log's bytes are
//! decoded at most once per (inode, offset) unless `restart` is called; the inbox holds at
//! most `MAX_INBOX` nodes (beyond that the follower pauses and the reader's own pull takes
//! over); the follower holds only a `Weak` reference and ends once the file is dropped or
//! its stop flag is set.

use atomio_proto::FileId;
use atomio_version::{Geometry, Node, NodeKey};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Bytes read from a log in one `pread`, at most.
const MAX_PULL: u64 = 64 << 20;
/// Decoded nodes waiting for the reader before the follower pauses.
const MAX_INBOX: usize = 1 << 16;
/// How often the follower looks at its stop flag while no log changes.
const POLL_MS: u16 = 200;

/// The node logs of one versioned file on every server of this host.
#[derive(Debug)]
pub(crate) struct NodeLogs {
    file: FileId,
    geometry: Geometry,
    /// Each server's versions directory (by server number).
    dirs: Vec<PathBuf>,
    /// Per server: the log's inode and how far it has been pulled.
    pulled: Vec<(u64, u64)>,
    /// Decoded nodes the reader has not taken yet.
    inbox: Vec<(NodeKey, Node)>,
}

impl NodeLogs {
    pub(crate) fn new(file: FileId, geometry: Geometry, dirs: Vec<PathBuf>) -> Self {
        let n = dirs.len();
        Self {
            file,
            geometry,
            dirs,
            pulled: vec![(0, 0); n],
            inbox: Vec::new(),
        }
    }

    /// Pulls what every log gained since the last pull into the inbox.
    pub(crate) fn pull_all(&mut self) {
        for s in 0..self.dirs.len() {
            self.pull(s);
        }
    }

    /// Pulls what server `s`'s log gained since the last pull into the inbox. Best effort:
    /// a missing log, or a record being appended, is left for a later pull.
    pub(crate) fn pull(&mut self, s: usize) {
        let path = atomio_data::version_board::node_log_path(&self.dirs[s], self.file);
        let Ok(f) = std::fs::File::open(&path) else {
            return;
        };
        let Ok(meta) = f.metadata() else { return };
        let (ino, mut at) = self.pulled[s];
        if meta.ino() != ino || meta.len() < at {
            at = 0; // a new log (rewritten by a collection): read it whole
        }
        while at < meta.len() {
            let want = (meta.len() - at).min(MAX_PULL) as usize;
            let mut buf = vec![0u8; want];
            let Ok(n) = f.read_at(&mut buf, at) else {
                break;
            };
            let (records, used) = atomio_data::version_board::decode_records(&buf[..n]);
            for (key, bytes) in records {
                if let Ok(node) = Node::decode(bytes, &self.geometry, key.pos) {
                    self.inbox.push((key, node));
                }
            }
            at += used as u64;
            if used == 0 {
                break; // a record being appended: the next pull takes it
            }
        }
        self.pulled[s] = (meta.ino(), at);
    }

    /// The decoded nodes not taken yet (the inbox is left empty).
    pub(crate) fn take(&mut self) -> Vec<(NodeKey, Node)> {
        std::mem::take(&mut self.inbox)
    }

    /// Forgets what was pulled: the next pull reads every log from its start.
    pub(crate) fn restart(&mut self) {
        self.pulled.fill((0, 0));
        self.inbox.clear();
    }
}

/// The background thread that pulls a file's node logs as the servers append to them.
/// Dropping it stops the thread (within `POLL_MS`).
#[derive(Debug)]
pub(crate) struct Follower {
    stop: Arc<AtomicBool>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Follower {
    /// Starts following `logs` (`None` when the host cannot watch files: the reader then
    /// pulls by itself, as without a follower).
    pub(crate) fn start(logs: &Arc<Mutex<NodeLogs>>) -> Option<Self> {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        let (dirs, name) = {
            let l = logs.lock().ok()?;
            let name = atomio_data::version_board::node_log_path(&l.dirs[0], l.file)
                .file_name()?
                .to_owned();
            (l.dirs.clone(), name)
        };
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        let mut watches = Vec::with_capacity(dirs.len());
        for dir in &dirs {
            let flags =
                AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE;
            watches.push(inotify.add_watch(dir, flags).ok()?);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let weak = Arc::downgrade(logs);
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("atomio-node-logs".into())
            .spawn(move || follow(inotify, watches, name, weak, flag))
            .ok()?;
        Some(Self { stop })
    }
}

/// The follower's loop: wait for a change to one of the file's logs, pull that log.
fn follow(
    inotify: nix::sys::inotify::Inotify,
    watches: Vec<nix::sys::inotify::WatchDescriptor>,
    name: std::ffi::OsString,
    logs: Weak<Mutex<NodeLogs>>,
    stop: Arc<AtomicBool>,
) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut changed = vec![false; watches.len()];
    while !stop.load(Ordering::Relaxed) {
        let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(POLL_MS)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        let events = match inotify.read_events() {
            Ok(events) => events,
            Err(nix::errno::Errno::EAGAIN) => continue,
            Err(_) => return,
        };
        for e in events {
            if e.name.as_deref() == Some(name.as_os_str()) {
                if let Some(s) = watches.iter().position(|w| *w == e.wd) {
                    changed[s] = true;
                }
            }
        }
        let Some(logs) = logs.upgrade() else { return };
        let Ok(mut l) = logs.lock() else { return };
        if l.inbox.len() >= MAX_INBOX {
            // The reader is not reading new snapshots: leave the logs to its own pull.
            changed.fill(false);
            continue;
        }
        for (s, c) in changed.iter_mut().enumerate() {
            if std::mem::take(c) {
                l.pull(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_data::version_board::encode_record;

    fn geometry() -> Geometry {
        Geometry::new(1 << 20, 4, 1 << 30).expect("geometry")
    }

    fn leaf0(version: u64) -> (NodeKey, Vec<u8>) {
        let key = NodeKey {
            pos: atomio_version::Pos { level: 0, index: 0 },
            version,
        };
        (key, Node::Leaf(Default::default()).encode())
    }

    /// The log record of `leaf0(version)`.
    fn record(version: u64) -> Vec<u8> {
        let (key, node) = leaf0(version);
        let mut rec = Vec::new();
        encode_record(&key, &node, &mut rec);
        rec
    }

    #[test]
    fn pulls_take_each_record_once_and_start_over_on_a_new_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let g = geometry();
        let file = FileId(7);
        let log = atomio_data::version_board::node_log_path(dir.path(), file);
        let key = |v| leaf0(v).0;
        std::fs::write(&log, record(1)).expect("log");
        let mut logs = NodeLogs::new(file, g, vec![dir.path().to_path_buf()]);
        logs.pull_all();
        logs.pull_all();
        let got: Vec<NodeKey> = logs.take().into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, vec![key(1)]);
        // A torn append is not taken until it is whole.
        let more = record(2);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open");
        std::io::Write::write_all(&mut f, &more[..more.len() - 1]).expect("append");
        logs.pull_all();
        assert!(logs.take().is_empty());
        std::io::Write::write_all(&mut f, &more[more.len() - 1..]).expect("append");
        logs.pull_all();
        let got: Vec<NodeKey> = logs.take().into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, vec![key(2)]);
        // A rewritten log (a new inode) is read from its start.
        let tmp = log.with_extension("tmp");
        std::fs::write(&tmp, &more).expect("tmp");
        std::fs::rename(&tmp, &log).expect("rename");
        logs.pull_all();
        let got: Vec<NodeKey> = logs.take().into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, vec![key(2)]);
    }

    #[test]
    fn the_follower_takes_appends_in_without_being_asked_and_stops_when_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let g = geometry();
        let file = FileId(9);
        let log = atomio_data::version_board::node_log_path(dir.path(), file);
        let logs = Arc::new(Mutex::new(NodeLogs::new(
            file,
            g,
            vec![dir.path().to_path_buf()],
        )));
        let follower = Follower::start(&logs).expect("inotify");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("open");
        let mut taken = Vec::new();
        for v in 1..=20 {
            std::io::Write::write_all(&mut f, &record(v)).expect("append");
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while taken.len() < 20 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            let got = logs.lock().expect("lock").take();
            taken.extend(got.into_iter().map(|(k, _)| k.version));
        }
        assert_eq!(taken, (1..=20).collect::<Vec<_>>());
        drop(follower);
        // Stopped: a later append stays in the log until the reader pulls.
        std::thread::sleep(std::time::Duration::from_millis(3 * POLL_MS as u64));
        std::io::Write::write_all(&mut f, &record(21)).expect("append");
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(logs.lock().expect("lock").take().is_empty());
        logs.lock().expect("lock").pull_all();
        let got: Vec<u64> = logs
            .lock()
            .expect("lock")
            .take()
            .into_iter()
            .map(|(k, _)| k.version)
            .collect();
        assert_eq!(got, vec![21]);
    }
}
