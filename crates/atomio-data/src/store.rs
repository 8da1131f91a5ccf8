//! Object stores: where a server keeps the bytes of the objects it holds and the metadata
//! records of the files whose metadata server it is.
//!
//! * `MemStore` — in memory; for tests, simulation and embedded demos.
//! * `FileStore` — one local file per object under `<dir>/objects/`, one JSON record per file
//!   under `<dir>/meta/`. Writes are `pwrite`s into the page cache; `sync` `fsync`s every
//!   object of the file written since the last sync (dirty set), plus the directories, so a
//!   completed sync survives a crash. Metadata records are written to a temporary file,
//!   fsynced and renamed, so a record is either the old one or the new one.
//!
//! Both also keep what all-or-nothing writes need (see `txn`): *staged* writes (bytes kept
//! aside under a slot number, invisible to reads, until applied or dropped) and the *decision
//! log* of the writes this server decides. `FileStore` keeps each staged write in
//! `<dir>/staging/<slot>.stage` — a pool of files reused from write to write, whose length
//! word, written last and zeroed when freed, says whether a slot holds a whole record —
//! after reserving its bytes in the object file (`fallocate`, size unchanged), so a full
//! disk fails the staging, never the apply; decisions are appended to
//! `<dir>/decisions.log`. Neither is `fsync`ed per write: both live in the page cache, which
//! survives the server process being killed (`kill -9`); `sync` makes them durable against
//! a machine crash with the objects.
//!
//! **Invariants:** reading a byte never written (a hole, or past an object's end) yields
//! zero; pieces are applied in order; a store never panics on I/O errors, it returns them;
//! a staged write is never visible to `read` before `apply_staged`; applying a staged write
//! twice leaves the same bytes (recovery may redo one).

mod file;
mod mem;

pub use file::*;
pub use mem::*;

use atomio_layout::ServerId;
use atomio_proto::{FileId, FileMeta, ObjPiece, TxnId};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A write staged under a transaction: where its bytes go once it commits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedWrite {
    pub txn: TxnId,
    /// The server deciding the write; `None` when this server decides it.
    pub decider: Option<ServerId>,
    pub file: FileId,
    pub object: u32,
    pub pieces: Vec<ObjPiece>,
}

/// One record of the decision log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionRecord {
    Committed(TxnId),
    Aborted(TxnId),
    /// Every decision of `origin` below `seq` is forgotten (its writes are settled).
    ForgetBelow {
        origin: u64,
        seq: u64,
    },
}

impl DecisionRecord {
    pub fn of(txn: TxnId, committed: bool) -> Self {
        if committed {
            DecisionRecord::Committed(txn)
        } else {
            DecisionRecord::Aborted(txn)
        }
    }
}

/// What a store found when it opened: the staged writes and decisions its server left.
#[derive(Debug, Default)]
pub struct Recovered {
    pub staged: Vec<(u64, StagedWrite)>,
    /// Live decisions (`true`: committed), after replaying the log.
    pub decisions: Vec<(TxnId, bool)>,
    /// SeqDLM's extent log as found (see `extent_log`).
    pub extent_log: Vec<u8>,
}

pub trait ObjectStore: Send + 'static {
    fn put_meta(&mut self, meta: &FileMeta) -> io::Result<()>;
    fn get_meta(&mut self, file: FileId) -> io::Result<Option<FileMeta>>;
    fn remove_meta(&mut self, file: FileId) -> io::Result<bool>;
    /// Writes `data` into `pieces` of the object, in order (`data.len()` = total length).
    fn write(
        &mut self,
        file: FileId,
        object: u32,
        pieces: &[ObjPiece],
        data: &[u8],
    ) -> io::Result<()>;
    /// Appends the bytes of `pieces` to `out`.
    fn read(
        &mut self,
        file: FileId,
        object: u32,
        pieces: &[ObjPiece],
        out: &mut Vec<u8>,
    ) -> io::Result<()>;
    fn sync(&mut self, file: FileId) -> io::Result<()>;
    /// (object, size) of every object of `file` held here.
    fn sizes(&mut self, file: FileId) -> io::Result<Vec<(u32, u64)>>;
    fn drop_objects(&mut self, file: FileId) -> io::Result<()>;
    /// Truncates or zero-extends one object.
    fn set_size(&mut self, file: FileId, object: u32, size: u64) -> io::Result<()>;
    /// Frees `len` bytes of an object from `offset` (they read as zeros; the size stays).
    fn punch(&mut self, file: FileId, object: u32, offset: u64, len: u64) -> io::Result<()>;
    /// The directory of object files (named by `object_file_name`) and the store's id, for
    /// clients on the same host; `None` when objects are not files.
    fn local(&self) -> Option<(PathBuf, String)> {
        None
    }
    /// Keeps `data` for `w` aside, invisible, and makes sure applying it later cannot run
    /// out of space; returns the slot it is kept under.
    fn stage(&mut self, w: &StagedWrite, data: &[u8]) -> io::Result<u64>;
    /// Writes what `slot` staged into its object (idempotent).
    fn apply_staged(&mut self, slot: u64, w: &StagedWrite) -> io::Result<()>;
    /// Forgets what `slot` staged.
    fn unstage(&mut self, slot: u64) -> io::Result<()>;
    /// Appends to the decision log.
    fn log_decision(&mut self, record: DecisionRecord) -> io::Result<()>;
    /// Rewrites the decision log to hold exactly `live` (compaction).
    fn rewrite_decisions(&mut self, live: &[(TxnId, bool)]) -> io::Result<()>;
    /// What the store found at open (taken once).
    fn take_recovered(&mut self) -> Recovered {
        Recovered::default()
    }
    /// Tells clients on this host that some staged writes are in doubt, so they must read
    /// through the server (which resolves them) instead of the object files.
    fn set_in_doubt(&mut self, _any: bool) -> io::Result<()> {
        Ok(())
    }
    /// Appends whole records to SeqDLM's extent log (see `extent_log`); made durable by
    /// `sync`, after the objects.
    fn log_extents(&mut self, _records: &[u8]) -> io::Result<()> {
        Ok(())
    }
    /// Replaces the extent log with `records` (compaction).
    fn rewrite_extent_log(&mut self, _records: &[u8]) -> io::Result<()> {
        Ok(())
    }
    /// Whether this store keeps versioning's boards and node logs (`version_board`);
    /// when not, the version managers make none.
    fn keeps_version_files(&self) -> bool {
        false
    }
    /// Versioning's same-host reads (`version_board`): rewrites `file`'s board in place.
    fn write_board(&mut self, _file: FileId, _board: &[u8]) -> io::Result<()> {
        Ok(())
    }
    /// Removes `file`'s board (readers then ask the server).
    fn remove_board(&mut self, _file: FileId) -> io::Result<()> {
        Ok(())
    }
    /// Appends whole records to `file`'s node log.
    fn append_node_log(&mut self, _file: FileId, _records: &[u8]) -> io::Result<()> {
        Ok(())
    }
    /// Replaces `file`'s node log with `records` (collected nodes dropped).
    fn rewrite_node_log(&mut self, _file: FileId, _records: &[u8]) -> io::Result<()> {
        Ok(())
    }
}

/// The file in a `FileStore`'s objects directory that exists while writes are in doubt.
pub const IN_DOUBT_FILE: &str = ".atomio-in-doubt";

/// Replays decision records into the live decisions.
fn replay_decisions(records: impl Iterator<Item = DecisionRecord>) -> Vec<(TxnId, bool)> {
    let mut live: HashMap<u64, std::collections::BTreeMap<u64, bool>> = HashMap::new();
    for r in records {
        match r {
            DecisionRecord::Committed(t) => {
                live.entry(t.origin).or_default().insert(t.seq, true);
            }
            DecisionRecord::Aborted(t) => {
                live.entry(t.origin).or_default().insert(t.seq, false);
            }
            DecisionRecord::ForgetBelow { origin, seq } => {
                if let Some(m) = live.get_mut(&origin) {
                    *m = m.split_off(&seq);
                }
            }
        }
    }
    let mut v: Vec<(TxnId, bool)> = live
        .into_iter()
        .flat_map(|(origin, m)| {
            m.into_iter()
                .map(move |(seq, c)| (TxnId { origin, seq }, c))
        })
        .collect();
    v.sort_unstable();
    v
}

/// A decision record on disk: origin, seq (little-endian), kind.
const DECISION_BYTES: usize = 17;

fn encode_decision(r: DecisionRecord) -> [u8; DECISION_BYTES] {
    let (origin, seq, kind) = match r {
        DecisionRecord::Committed(t) => (t.origin, t.seq, 1u8),
        DecisionRecord::Aborted(t) => (t.origin, t.seq, 2),
        DecisionRecord::ForgetBelow { origin, seq } => (origin, seq, 3),
    };
    let mut b = [0u8; DECISION_BYTES];
    b[..8].copy_from_slice(&origin.to_le_bytes());
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16] = kind;
    b
}

fn decode_decision(b: &[u8]) -> Option<DecisionRecord> {
    let origin = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    let seq = u64::from_le_bytes(b.get(8..16)?.try_into().ok()?);
    let t = TxnId { origin, seq };
    match b.get(16)? {
        1 => Some(DecisionRecord::Committed(t)),
        2 => Some(DecisionRecord::Aborted(t)),
        3 => Some(DecisionRecord::ForgetBelow { origin, seq }),
        _ => None,
    }
}

/// The name of an object's file in a `FileStore`'s objects directory.
pub fn object_file_name(file: FileId, object: u32) -> String {
    format!("{:016x}.{object}", file.0)
}

/// The file in a `FileStore`'s objects directory that holds the store's id.
pub const STORE_ID_FILE: &str = ".atomio-store-id";

fn too_big(what: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("offset {what} does not fit in memory"),
    )
}

/// Reads the staged writes a server left in `dir`, and the free staging files. A staging
/// file is `[length: u32 LE][header (postcard)][data]`; the length word is written last
/// (4 bytes in one page: a process killed mid-stage leaves the old word) and zeroed when the
/// slot is freed, so a non-zero word means a whole, acknowledged-or-about-to-be record.
/// Files of the earlier one-file-per-write layout (`.tmp`) are removed.
/// Staged writes by slot, and the free slots.
type StagingPool = (Vec<(u64, StagedWrite)>, Vec<u64>);

fn recover_staged(dir: &Path) -> io::Result<StagingPool> {
    let mut staged = Vec::new();
    let mut free = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(slot) = name
            .strip_suffix(".stage")
            .and_then(|s| u64::from_str_radix(s, 16).ok())
        {
            match read_staged_header(&File::open(&path)?) {
                Ok(Some((w, _))) => staged.push((slot, w)),
                Ok(None) => free.push(slot),
                Err(e) => {
                    tracing::warn!("dropping unreadable staged write {}: {e}", path.display());
                    fs::remove_file(&path)?;
                }
            }
        } else if name.ends_with(".tmp") {
            fs::remove_file(&path)?;
        }
    }
    staged.sort_unstable_by_key(|(slot, _)| *slot);
    free.sort_unstable();
    Ok((staged, free))
}

/// A staging file's record and where its data start; `None` for a free slot.
fn read_staged_header(f: &File) -> io::Result<Option<(StagedWrite, u64)>> {
    let mut len = [0u8; 4];
    f.read_exact_at(&mut len, 0)?;
    let len = u32::from_le_bytes(len) as u64;
    if len == 0 {
        return Ok(None);
    }
    let size = f.metadata()?.len();
    if len > size.saturating_sub(4) || len > (1 << 24) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "bad header length",
        ));
    }
    let mut header = vec![0u8; len as usize];
    f.read_exact_at(&mut header, 4)?;
    let w: StagedWrite =
        postcard::from_bytes(&header).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let total: u64 = w.pieces.iter().map(|p| p.len).sum();
    if size < 4 + len + total {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{size} bytes, expected at least {}", 4 + len + total),
        ));
    }
    Ok(Some((w, 4 + len)))
}

fn recover_decisions(path: &Path) -> io::Result<Vec<(TxnId, bool)>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let whole = bytes.len() / DECISION_BYTES * DECISION_BYTES;
    if whole != bytes.len() {
        // A record cut by a crash was never acted on: drop it.
        OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(whole as u64)?;
    }
    Ok(replay_decisions(
        bytes[..whole]
            .chunks_exact(DECISION_BYTES)
            .filter_map(decode_decision),
    ))
}

/// Versioning's boards and node logs directory for a store starting (`None`: none kept).
/// A board left by the last server would be read as current, so one of ours that cannot
/// be removed stops the start; a directory of another user's under the name is left alone
/// (and never read: `version_board::trusted`), as is one that cannot be made.
fn open_versions_dir(objects_dir: &Path, id: &str) -> io::Result<Option<PathBuf>> {
    let dir = crate::version_board::versions_dir(objects_dir, id);
    if let Some(parent) = dir.parent().filter(|p| *p == Path::new("/dev/shm")) {
        let swept = crate::version_board::sweep_stale(parent, objects_dir);
        if swept > 0 {
            tracing::info!("removed {swept} versions directories of servers that are gone");
        }
    }
    let off = |why: String| {
        tracing::warn!(
            "{}: {why}; versioned reads on this host will ask the server",
            dir.display()
        );
        Ok(None)
    };
    match fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
        Ok(_) if !crate::version_board::trusted(&dir, objects_dir) => {
            return off("not a directory of this store's owner".into())
        }
        Ok(_) => fs::remove_dir_all(&dir)?,
    }
    // `create_dir`, not `create_dir_all`: a directory someone made meanwhile is not ours.
    if let Err(e) = fs::create_dir(&dir) {
        return off(e.to_string());
    }
    // Names this process, so that a server starting after this one is killed removes it.
    // (Without one, a sweep would take it for a crashed start's after a minute.)
    let me = crate::version_board::this_process().unwrap_or_default();
    if let Err(e) = fs::write(dir.join(crate::version_board::OWNER_FILE), me) {
        let _ = fs::remove_dir_all(&dir);
        return off(format!("writing its owner: {e}"));
    }
    Ok(Some(dir))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
