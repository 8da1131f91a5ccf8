//! Versioning's same-host read path: files a server keeps beside its objects so that a
//! reader on the server's host resolves the newest snapshot and its tree with no round
//! trip (a round trip to a server busy with writers costs milliseconds at p99 here).
//!
//! Both live in memory (`/dev/shm/atomio-versions-<store>`, else `<objects>/.versions`):
//! like the server's node store they are lost with it, and they are not storage — a file's
//! bytes on disk are its chunks and its base alone.
//!
//! * **The board** (`<file>.board`, kept by the file's metadata
//!   server): the newest published snapshot — version, size and the base — rewritten in
//!   place *before* any `Published` reply that makes it newest leaves the server, so a
//!   reader that opens it after a write returned (on any process of this host) sees that
//!   write's snapshot or a newer one: the same guarantee as `VersionSnapshot`.
//! * **The node log** (`<file>.nodes`, one per server): every node the
//!   server stored for the file, appended when it is put (so before its version can be
//!   published). A reader pulls what was appended since its last pull into its node cache.
//!   The log is a hint: a node missing from it (an append that failed, a log rewritten to
//!   drop collected nodes) is fetched with `NodeGet` as before.
//!
//! Both are read while the server writes them: every board and record carries a checksum,
//! and a reader takes only what checks (a torn board is read again; a torn record ends the
//! pull until the next one). A server deletes the directory when it starts (its versions
//! are in memory: a board left by the last server would be stale) and when it stops.
//! A killed server cannot: its directory names its process (`owner`: pid and start
//! time, since pids are reused), and any server starting on the host removes the
//! directories of its own user whose process is gone (`sweep_stale`) — node logs in
//! `/dev/shm` are memory, and would otherwise stay until the next boot.
//!
//! **Invariants:** `decode_board(encode_board(b)) == Some(b)`; `decode_records` returns
//! only whole records whose checksum holds, in log order, and how many bytes they span;
//! `sweep_stale` removes only trusted directories under the versions prefix whose owner is
//! provably gone (an owner that cannot be read is kept unless the directory is old).

use atomio_proto::FileId;
use atomio_version::{NodeKey, Pos, Version};
use std::hash::Hasher;
use std::path::{Path, PathBuf};

/// The directory of the boards and node logs of the store with id `store_id` (whose
/// objects are in `objects_dir`): in shared memory when the host has it.
pub fn versions_dir(objects_dir: &Path, store_id: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    match shm.is_dir() {
        true => shm.join(format!(
            "atomio-versions-{:016x}",
            checksum(store_id.trim().as_bytes())
        )),
        false => objects_dir.join(".versions"),
    }
}

/// Whether `dir` may be taken as the versions directory of the store whose objects are in
/// `objects_dir`: a directory (not a link) of the objects directory's owner. `/dev/shm` is
/// writable by every user; a directory someone else made there under the name is never
/// read, nor removed.
pub fn trusted(dir: &Path, objects_dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (
        std::fs::symlink_metadata(dir),
        std::fs::metadata(objects_dir),
    ) {
        (Ok(d), Ok(o)) => d.file_type().is_dir() && d.uid() == o.uid(),
        _ => false,
    }
}

const BOARD_MAGIC: u32 = 0x4442_4d41; // "AMBD"
/// A board's size on disk.
pub const BOARD_BYTES: usize = 4 + 8 + 8 + 8 + 8;
/// A node record's header: body length, checksum of the body.
const RECORD_HEADER: usize = 4 + 8;
/// A record body's key: level, index, version.
const RECORD_KEY: usize = 1 + 8 + 8;
/// A record's bytes besides its node's.
pub const RECORD_OVERHEAD: usize = RECORD_HEADER + RECORD_KEY;

/// The newest published snapshot of a file, as a board says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Board {
    pub version: Version,
    pub size: u64,
    /// The newest snapshot the file's base holds (see `Reply::Snapshot`).
    pub base: Version,
}

/// The name of every versions directory in `/dev/shm` starts with this.
const SHM_PREFIX: &str = "atomio-versions-";
/// The file in a versions directory that names the server process keeping it.
pub const OWNER_FILE: &str = "owner";
/// A directory with no readable owner older than this is taken as a crashed start's.
const OWNERLESS_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// This process as an owner file names it: `pid start-time` (the start time in clock
/// ticks after boot, `/proc/<pid>/stat` field 22), `None` where `/proc` is missing.
pub fn this_process() -> Option<String> {
    let pid = std::process::id();
    Some(format!("{pid} {}", start_time(pid)?))
}

/// When process `pid` started (clock ticks after boot), `None` when it does not run.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process an owner file names still runs (`None`: not an owner file).
pub fn owner_alive(owner: &str) -> Option<bool> {
    let mut it = owner.split_whitespace();
    let pid: u32 = it.next()?.parse().ok()?;
    let start: u64 = it.next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some(start_time(pid) == Some(start))
}

/// Removes the versions directories in `parent` (`/dev/shm`) that a server of this
/// user left behind when it was killed: trusted (see `trusted`) and either naming a
/// process that is gone, or with no readable owner and older than a minute (a server
/// killed between `mkdir` and writing its owner). Returns how many it removed.
pub fn sweep_stale(parent: &Path, objects_dir: &Path) -> usize {
    // Without `/proc` no owner can be judged.
    if this_process().is_none() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(SHM_PREFIX) {
            continue;
        }
        let dir = e.path();
        if !trusted(&dir, objects_dir) {
            continue;
        }
        let stale = match std::fs::read_to_string(dir.join(OWNER_FILE))
            .ok()
            .and_then(|o| owner_alive(&o))
        {
            Some(alive) => !alive,
            None => std::fs::metadata(&dir)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > OWNERLESS_GRACE),
        };
        if stale && std::fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

pub fn board_path(versions_dir: &Path, file: FileId) -> PathBuf {
    versions_dir.join(format!("{:016x}.board", file.0))
}

pub fn node_log_path(versions_dir: &Path, file: FileId) -> PathBuf {
    versions_dir.join(format!("{:016x}.nodes", file.0))
}

fn checksum(bytes: &[u8]) -> u64 {
    let mut h = fnv::FnvHasher::default();
    h.write(bytes);
    h.finish()
}

pub fn encode_board(b: &Board) -> [u8; BOARD_BYTES] {
    let mut out = [0u8; BOARD_BYTES];
    out[0..4].copy_from_slice(&BOARD_MAGIC.to_le_bytes());
    out[4..12].copy_from_slice(&b.version.to_le_bytes());
    out[12..20].copy_from_slice(&b.size.to_le_bytes());
    out[20..28].copy_from_slice(&b.base.to_le_bytes());
    let sum = checksum(&out[..28]);
    out[28..36].copy_from_slice(&sum.to_le_bytes());
    out
}

/// `None` when `bytes` is not a whole board (torn, truncated or not a board).
pub fn decode_board(bytes: &[u8]) -> Option<Board> {
    let b: &[u8; BOARD_BYTES] = bytes.get(..BOARD_BYTES)?.try_into().ok()?;
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    (u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")) == BOARD_MAGIC
        && u64_at(28) == checksum(&b[..28]))
    .then(|| Board {
        version: u64_at(4),
        size: u64_at(12),
        base: u64_at(20),
    })
}

/// Appends one node's record to `out`.
pub fn encode_record(key: &NodeKey, node: &[u8], out: &mut Vec<u8>) {
    let body_len = RECORD_KEY + node.len();
    let start = out.len();
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.push(key.pos.level);
    out.extend_from_slice(&key.pos.index.to_le_bytes());
    out.extend_from_slice(&key.version.to_le_bytes());
    out.extend_from_slice(node);
    let sum = checksum(&out[start + RECORD_HEADER..]);
    out[start + 4..start + RECORD_HEADER].copy_from_slice(&sum.to_le_bytes());
}

/// The whole, checked records at the start of `log` (in order) and the bytes they span;
/// stops at the first record that is incomplete or does not check.
pub fn decode_records(log: &[u8]) -> (Vec<(NodeKey, &[u8])>, usize) {
    let mut found = Vec::new();
    let mut at = 0usize;
    while let Some(header) = log.get(at..at + RECORD_HEADER) {
        let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
        let sum = u64::from_le_bytes(header[4..12].try_into().expect("8 bytes"));
        let Some(body) = log.get(at + RECORD_HEADER..at + RECORD_HEADER + len) else {
            break;
        };
        if len < RECORD_KEY || checksum(body) != sum {
            break;
        }
        let key = NodeKey {
            pos: Pos {
                level: body[0],
                index: u64::from_le_bytes(body[1..9].try_into().expect("8 bytes")),
            },
            version: u64::from_le_bytes(body[9..17].try_into().expect("8 bytes")),
        };
        found.push((key, &body[RECORD_KEY..]));
        at += RECORD_HEADER + len;
    }
    (found, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_owner_is_alive_while_its_process_runs_and_a_reused_pid_is_not_it() {
        let me = this_process().expect("/proc");
        assert_eq!(owner_alive(&me), Some(true));
        let pid = std::process::id();
        let start = start_time(pid).unwrap();
        // Same pid, another start time: the pid was reused.
        assert_eq!(owner_alive(&format!("{pid} {}", start + 1)), Some(false));
        // Above any pid the kernel hands out.
        assert_eq!(owner_alive("4194304 1"), Some(false));
        for bad in ["", "12", "x 1", "1 y", "1 2 3"] {
            assert_eq!(owner_alive(bad), None, "{bad:?}");
        }
    }

    /// Only this user's versions directories whose server is gone (or ownerless and old)
    /// are swept; live ones, fresh ownerless ones and other names stay.
    #[test]
    fn a_sweep_removes_the_directories_of_gone_servers_only() {
        let parent = std::env::temp_dir().join(format!("atomio-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&parent);
        let objects = parent.join("objects");
        std::fs::create_dir_all(&objects).unwrap();
        let make = |name: &str, owner: Option<&str>| {
            let d = parent.join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("0000000000000007.nodes"), b"x").unwrap();
            if let Some(o) = owner {
                std::fs::write(d.join(OWNER_FILE), o).unwrap();
            }
            d
        };
        let me = this_process().unwrap();
        let gone = make("atomio-versions-gone", Some("4194304 1"));
        let live = make("atomio-versions-live", Some(&me));
        let fresh = make("atomio-versions-fresh", None);
        let old = make("atomio-versions-old", None);
        let other = make("not-atomio-gone", Some("4194304 1"));
        // Another user's (root only: needs `chown`): never swept, whatever its owner says.
        let foreign = make("atomio-versions-foreign", Some("4194304 1"));
        let foreign_made = std::os::unix::fs::chown(&foreign, Some(65534), None).is_ok();
        if !foreign_made {
            std::fs::remove_dir_all(&foreign).unwrap();
        }
        let long_ago = std::time::SystemTime::now() - 2 * OWNERLESS_GRACE;
        std::fs::File::open(&old)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        assert_eq!(sweep_stale(&parent, &objects), 2);
        assert!(!gone.exists() && !old.exists());
        assert!(live.exists() && fresh.exists() && other.exists());
        assert_eq!(foreign.exists(), foreign_made);
        assert_eq!(sweep_stale(&parent, &objects), 0);
        std::fs::remove_dir_all(&parent).unwrap();
    }

    fn key(level: u8, index: u64, version: u64) -> NodeKey {
        NodeKey {
            pos: Pos { level, index },
            version,
        }
    }

    /// The service on a `FileStore`: a publication is on the board before its answer
    /// leaves, every node put is in the log, a collection that leaves the log mostly
    /// garbage rewrites it, and the files go when the server stops and at its next start.
    #[test]
    fn a_publication_is_on_the_board_before_its_answer_and_every_node_put_is_logged() {
        use crate::{DataService, FileStore, ObjectStore};
        use atomio_layout::{ByteRange, RangeList};
        use atomio_proto::{ClientId, Reply, Request};
        let dir = std::env::temp_dir().join(format!("atomio-board-test-{}", std::process::id()));
        let store = FileStore::open(&dir).unwrap();
        let (objects, id) = store.local().unwrap();
        let vdir = versions_dir(&objects, &id);
        let owner = std::fs::read_to_string(vdir.join(OWNER_FILE)).unwrap();
        assert_eq!(owner_alive(&owner), Some(true), "{owner:?}");
        let mut svc = DataService::new(store);
        let file = FileId(7);
        let client = ClientId(1);
        let mut call = |r: Request| {
            let mut out = Vec::new();
            svc.handle_all(client, 1, r, &mut out);
            out
        };
        let g = atomio_version::Geometry::new(4096, 4, 1 << 20).unwrap();
        call(Request::VersionOpen {
            file,
            geometry: Some(g),
        });
        let read_board = || decode_board(&std::fs::read(board_path(&vdir, file)).unwrap());
        assert_eq!(read_board().map(|b| b.version), Some(0));
        let mut put = Vec::new();
        for v in 1..=40u64 {
            let regions = RangeList::from_ranges(vec![ByteRange::new(0, 100).unwrap()]);
            let out = call(Request::VersionAssign {
                file,
                writer: 1,
                regions,
            });
            assert!(matches!(out[0].2, Reply::Assigned(_)), "{out:?}");
            // A big node, so that collected ones soon outweigh the live ones.
            let nodes: Vec<(NodeKey, atomio_proto::data::Bytes)> = (0..4)
                .map(|i| (key(0, i, v), vec![v as u8; 100_000].into()))
                .collect();
            put.extend(nodes.iter().map(|(k, _)| *k));
            call(Request::NodePut { file, nodes });
            let out = call(Request::VersionComplete { file, version: v });
            assert_eq!(out[0].2, Reply::Published { version: v });
            let b = read_board().expect("a whole board");
            assert_eq!((b.version, b.size), (v, 100), "board behind its answer");
        }
        let log = std::fs::read(node_log_path(&vdir, file)).unwrap();
        let (records, used) = decode_records(&log);
        assert_eq!(used, log.len());
        let logged: Vec<NodeKey> = records.iter().map(|(k, _)| *k).collect();
        assert_eq!(logged, put);
        // Dropping all but the last version's nodes: the log is rewritten to those alone.
        call(Request::NodeDropVersions {
            file,
            versions: (1..40).collect(),
        });
        let log = std::fs::read(node_log_path(&vdir, file)).unwrap();
        let (records, _) = decode_records(&log);
        assert_eq!(records.len(), 4);
        assert!(records.iter().all(|(k, _)| k.version == 40));
        drop(svc);
        assert!(!vdir.exists(), "a stopped server's boards must go");
        // A board left behind (a killed server) is gone when the next one starts.
        std::fs::create_dir_all(&vdir).unwrap();
        std::fs::write(
            board_path(&vdir, file),
            encode_board(&Board {
                version: 9,
                size: 1,
                base: 0,
            }),
        )
        .unwrap();
        let store = FileStore::open(&dir).unwrap();
        assert!(!board_path(&vdir, file).exists());
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A directory of the objects' owner is trusted; a link to one, or nothing, is not.
    #[test]
    fn only_a_real_directory_of_the_objects_owner_is_trusted() {
        let base = std::env::temp_dir().join(format!("atomio-trust-{}", std::process::id()));
        let (objects, dir, link) = (base.join("objects"), base.join("v"), base.join("l"));
        std::fs::create_dir_all(&objects).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(trusted(&dir, &objects));
        assert!(!trusted(&link, &objects), "a link could point anywhere");
        assert!(!trusted(&base.join("missing"), &objects));
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A directory another user made under the store's name is left alone and the store
    /// keeps no boards (root only: making another user's directory needs `chown`).
    #[test]
    fn a_store_leaves_another_users_directory_alone_and_keeps_no_boards() {
        use crate::{FileStore, ObjectStore};
        let base = std::env::temp_dir().join(format!("atomio-foreign-{}", std::process::id()));
        let store = FileStore::open(&base).unwrap();
        let (objects, id) = store.local().unwrap();
        let vdir = versions_dir(&objects, &id);
        assert!(store.keeps_version_files());
        drop(store);
        std::fs::create_dir(&vdir).unwrap();
        if let Err(e) = std::os::unix::fs::chown(&vdir, Some(65534), None) {
            eprintln!("skipped: making another user's directory needs root ({e})");
            let _ = std::fs::remove_dir_all(&vdir);
            let _ = std::fs::remove_dir_all(&base);
            return;
        }
        let store = FileStore::open(&base).unwrap();
        assert!(!store.keeps_version_files());
        assert!(vdir.exists(), "another user's directory was removed");
        drop(store);
        assert!(
            vdir.exists(),
            "another user's directory was removed at stop"
        );
        let _ = std::fs::remove_dir_all(&vdir);
        let _ = std::fs::remove_dir_all(&base);
    }

    proptest! {
        #[test]
        fn boards_round_trip_and_any_changed_byte_is_refused(
            version in any::<u64>(), size in any::<u64>(), base in any::<u64>(),
            at in 0..BOARD_BYTES, flip in 1u8..=255,
        ) {
            let b = Board { version, size, base };
            let mut bytes = encode_board(&b);
            prop_assert_eq!(decode_board(&bytes), Some(b));
            bytes[at] ^= flip;
            prop_assert_eq!(decode_board(&bytes), None);
            prop_assert_eq!(decode_board(&encode_board(&b)[..BOARD_BYTES - 1]), None);
        }

        #[test]
        fn records_decode_in_order_and_a_cut_or_torn_tail_ends_the_pull(
            nodes in prop::collection::vec((any::<u8>(), any::<u64>(), any::<u64>(),
                prop::collection::vec(any::<u8>(), 0..64)), 1..12),
            cut in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let mut log = Vec::new();
            let mut ends = Vec::new();
            for (l, i, v, bytes) in &nodes {
                encode_record(&key(*l, *i, *v), bytes, &mut log);
                ends.push(log.len());
            }
            let (all, used) = decode_records(&log);
            prop_assert_eq!(used, log.len());
            prop_assert_eq!(all.len(), nodes.len());
            for ((k, b), (l, i, v, bytes)) in all.iter().zip(&nodes) {
                prop_assert_eq!(*k, key(*l, *i, *v));
                prop_assert_eq!(*b, &bytes[..]);
            }
            // Cut anywhere: exactly the records wholly before the cut.
            let at = cut.index(log.len());
            let (some, used) = decode_records(&log[..at]);
            let whole = ends.iter().filter(|e| **e <= at).count();
            prop_assert_eq!(some.len(), whole);
            prop_assert_eq!(used, if whole == 0 { 0 } else { ends[whole - 1] });
            // A changed byte: the pull stops at (or before) the record it is in.
            let mut torn = log.clone();
            torn[at] ^= flip;
            let (kept, _) = decode_records(&torn);
            let first_bad = ends.iter().position(|e| *e > at).expect("inside the log");
            prop_assert!(kept.len() <= first_bad);
            for ((k, b), (l, i, v, bytes)) in kept.iter().zip(&nodes) {
                prop_assert_eq!(*k, key(*l, *i, *v));
                prop_assert_eq!(*b, &bytes[..]);
            }
        }
    }
}
