//! Versioning's server side: the version manager of every file this server is the
//! metadata server of, and this server's share of the segment-tree node store (a DHT:
//! `NodeKey::server` picks the server of each node).
//!
//! Answers go out through `out` because one request may answer others: a `VersionComplete`
//! is answered only once its version is published, which the completion of a lower version
//! (another client's request) may cause; an abort answers every waiter above it.
//!
//! Writers that vanish (disconnect, lease lapse) have their in-flight versions aborted at
//! once; a writer that merely stalls is aborted after `patience` (checked on every
//! versioning request — waiting writers repeat their `VersionComplete` every second, so the
//! check runs even when nobody else writes).
//!
//! **Invariants:** nodes are immutable (a put of an existing key with other bytes is
//! refused); with files kept (`keep_files`), a request's board and node-log effects are
//! queued before its answers, so the data service writes them before any answer leaves
//! (`version_board`: a `Published` never precedes its board); a `VersionComplete` is answered exactly once per request, `Published` only for
//! a published version; the node store holds at most `MAX_NODE_BYTES` per server; nothing
//! here panics on input. State is in memory: a restarted server has lost its versioned
//! files' metadata (their chunks survive as objects) — see docs/versioning.md.

use crate::version_board::{encode_record, Board};
use atomio_proto::{ClientId, ErrorCode, FileId, Reply, Request, WireError};
use atomio_version::{FileVersions, ManagerError, NodeKey, Version};
use std::collections::{BTreeMap, HashMap};

/// Node bytes a server keeps, over all files (a 1 TiB file of 256 KiB chunks, fully
/// written, has ~4 Mi leaves: about 200 MiB of nodes per snapshot's unshared part).
pub const MAX_NODE_BYTES: usize = 1 << 30;
/// Node bytes one `NodeGet` answer may carry (well under the frame limit).
pub const MAX_NODE_REPLY_BYTES: usize = 32 << 20;
/// Files with versions a server manages.
pub const MAX_VERSIONED_FILES: usize = 1 << 16;
/// Versions in flight per file (each holds its regions as hints for the next writers).
pub const MAX_IN_FLIGHT: usize = 4096;
/// Regions one write may name (its hint to later writers).
pub const MAX_REGIONS_PER_WRITE: usize = 1 << 16;
/// One node's encoded size at most (a leaf of a 4 GiB chunk in 1-byte pieces would be more;
/// such a write is refused at the client).
pub const MAX_NODE_SIZE: usize = 16 << 20;

/// Answers to send: (client, tag, reply).
pub type Out = Vec<(ClientId, u64, Reply)>;

/// What the data service must write for same-host readers (`version_board`) before it
/// sends the answers of the request that caused it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// The file's newest published snapshot (or its base) changed.
    Board(FileId, Board),
    /// Records of nodes just stored, for the file's node log.
    AppendNodes(FileId, Vec<u8>),
    /// The file's node log, rewritten to hold only the nodes still stored.
    RewriteNodes(FileId, Vec<u8>),
}

/// A node log is rewritten once it holds more than twice the live nodes and this much.
const NODE_LOG_SLACK: usize = 1 << 20;

struct FileState {
    versions: FileVersions,
    /// `VersionComplete` requests waiting for their version's publication.
    waiting: BTreeMap<Version, Vec<(ClientId, u64)>>,
    /// The client writing each in-flight version.
    writer_of: HashMap<Version, ClientId>,
}

pub struct Versions {
    files: HashMap<FileId, FileState>,
    nodes: HashMap<FileId, HashMap<NodeKey, atomio_proto::data::Bytes>>,
    node_bytes: usize,
    now_ms: u64,
    patience_ms: u64,
    /// Whether to make boards and node logs at all (the store keeps them).
    keep_files: bool,
    /// The board last written for each file, and what is still to be written.
    boards: HashMap<FileId, Board>,
    /// Bytes in each file's node log (live or not).
    logged: HashMap<FileId, usize>,
    effects: Vec<Effect>,
}

impl Default for Versions {
    fn default() -> Self {
        Self::new(patience_from_env())
    }
}

/// How long a version may stay in flight before it is aborted (`ATOMIO_VERSION_PATIENCE_MS`,
/// default 10 s: building a tree takes milliseconds; only a stalled writer takes seconds).
fn patience_from_env() -> u64 {
    std::env::var("ATOMIO_VERSION_PATIENCE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn manager_err(e: ManagerError) -> WireError {
    let code = match e {
        ManagerError::Aborted(_) => ErrorCode::Aborted,
        ManagerError::Unknown(_)
        | ManagerError::NotPublished(_)
        | ManagerError::Collected(_)
        | ManagerError::BelowBase(..) => ErrorCode::NotFound,
        ManagerError::Empty | ManagerError::Geometry(_) => ErrorCode::InvalidArgument,
    };
    WireError::new(code, e.to_string())
}

fn no_versions(file: FileId) -> WireError {
    WireError::new(
        ErrorCode::NotFound,
        format!("file {:016x} has no versions here", file.0),
    )
}

impl Versions {
    pub fn new(patience_ms: u64) -> Self {
        Self {
            files: HashMap::new(),
            nodes: HashMap::new(),
            node_bytes: 0,
            now_ms: 0,
            patience_ms,
            keep_files: false,
            boards: HashMap::new(),
            logged: HashMap::new(),
            effects: Vec::new(),
        }
    }

    /// Makes boards and node logs for same-host readers (`take_effects`) from now on.
    pub fn keep_files(&mut self, on: bool) {
        self.keep_files = on;
    }

    /// What to write for same-host readers since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// A new board for `file` when its newest snapshot or base changed.
    fn update_board(&mut self, file: FileId) {
        let Some(f) = self.files.get(&file).filter(|_| self.keep_files) else {
            return;
        };
        let version = f.versions.published();
        let Ok(size) = f.versions.size(version) else {
            return;
        };
        let board = Board {
            version,
            size,
            base: f.versions.base(),
        };
        if self.boards.get(&file) != Some(&board) {
            self.boards.insert(file, board);
            self.effects.push(Effect::Board(file, board));
        }
    }

    /// Stores `nodes` of `file`, appending each new one's record to `records`.
    fn put_nodes(
        &mut self,
        file: FileId,
        nodes: Vec<(NodeKey, atomio_proto::data::Bytes)>,
        records: &mut Vec<u8>,
    ) -> Result<(), WireError> {
        let store = self.nodes.entry(file).or_default();
        for (key, bytes) in nodes {
            if bytes.len() > MAX_NODE_SIZE {
                return Err(WireError::new(
                    ErrorCode::LimitExceeded,
                    format!("a node of {} bytes (at most {MAX_NODE_SIZE})", bytes.len()),
                ));
            }
            match store.get(&key) {
                Some(old) if *old == bytes => continue,
                Some(_) => {
                    return Err(WireError::new(
                        ErrorCode::Exists,
                        format!("node {key:?} exists with other contents (nodes never change)"),
                    ))
                }
                None => {}
            }
            if self.node_bytes + bytes.len() > MAX_NODE_BYTES {
                return Err(WireError::new(
                    ErrorCode::LimitExceeded,
                    format!("this server holds {MAX_NODE_BYTES} bytes of nodes, its limit"),
                ));
            }
            self.node_bytes += bytes.len();
            if self.keep_files {
                encode_record(&key, &bytes, records);
            }
            store.insert(key, bytes);
        }
        Ok(())
    }

    /// After nodes of `file` were dropped: its log is rewritten when mostly garbage.
    fn compact_node_log(&mut self, file: FileId) {
        if !self.keep_files {
            return;
        }
        let live: usize = self.nodes.get(&file).map_or(0, |s| {
            s.values()
                .map(|b| b.len() + crate::version_board::RECORD_OVERHEAD)
                .sum()
        });
        let logged = self.logged.get(&file).copied().unwrap_or(0);
        if logged <= 2 * live + NODE_LOG_SLACK {
            return;
        }
        let mut records = Vec::with_capacity(live);
        if let Some(store) = self.nodes.get(&file) {
            let mut keys: Vec<&NodeKey> = store.keys().collect();
            keys.sort_unstable();
            for k in keys {
                encode_record(k, &store[k], &mut records);
            }
        }
        self.logged.insert(file, records.len());
        self.effects.push(Effect::RewriteNodes(file, records));
    }

    pub fn set_now(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    pub fn handles(request: &Request) -> bool {
        matches!(
            request,
            Request::VersionOpen { .. }
                | Request::VersionAssign { .. }
                | Request::VersionComplete { .. }
                | Request::VersionSnapshot { .. }
                | Request::VersionList { .. }
                | Request::VersionGcPlan { .. }
                | Request::VersionGcDone { .. }
                | Request::VersionBase { .. }
                | Request::NodePut { .. }
                | Request::NodeGet { .. }
                | Request::NodeDrop { .. }
                | Request::NodeDropVersions { .. }
        )
    }

    /// Aborts what waited too long, then what `client` was writing if it is gone.
    fn abort(&mut self, file: FileId, versions: Vec<Version>, out: &mut Out) {
        let Some(f) = self.files.get_mut(&file) else {
            return;
        };
        for v in versions {
            f.writer_of.remove(&v);
            for (client, tag) in f.waiting.remove(&v).unwrap_or_default() {
                out.push((
                    client,
                    tag,
                    Reply::Error(manager_err(ManagerError::Aborted(v))),
                ));
            }
        }
    }

    fn expire(&mut self, file: FileId, out: &mut Out) {
        let (now, patience) = (self.now_ms, self.patience_ms);
        if let Some(f) = self.files.get_mut(&file) {
            let aborted = f.versions.expire(now, patience);
            if !aborted.is_empty() {
                tracing::warn!(
                    file = format!("{:016x}", file.0),
                    ?aborted,
                    "versions aborted: a writer stalled past {patience} ms"
                );
                self.abort(file, aborted, out);
            }
        }
    }

    /// `client` is gone (disconnected or fenced): its in-flight versions are aborted.
    pub fn client_gone(&mut self, client: ClientId, out: &mut Out) {
        let files: Vec<FileId> = self.files.keys().copied().collect();
        for file in files {
            let f = self.files.get_mut(&file).expect("listed");
            let Some(lowest) = f
                .writer_of
                .iter()
                .filter(|(_, c)| **c == client)
                .map(|(v, _)| *v)
                .min()
            else {
                continue;
            };
            let aborted = f.versions.abort_from(lowest);
            self.abort(file, aborted, out);
        }
        for f in self.files.values_mut() {
            for waiters in f.waiting.values_mut() {
                waiters.retain(|(c, _)| *c != client);
            }
        }
    }

    pub fn handle(&mut self, client: ClientId, tag: u64, request: Request, out: &mut Out) {
        let file = match &request {
            Request::VersionOpen { file, .. }
            | Request::VersionAssign { file, .. }
            | Request::VersionComplete { file, .. }
            | Request::VersionSnapshot { file, .. }
            | Request::VersionList { file }
            | Request::VersionGcPlan { file, .. }
            | Request::VersionGcDone { file, .. }
            | Request::VersionBase { file, .. } => Some(*file),
            _ => None,
        };
        if let Some(file) = file {
            self.expire(file, out);
        }
        let answer = self.answer(client, tag, request, out);
        if let Some(file) = file {
            // Before any answer leaves: a `Published` must find the board already new.
            self.update_board(file);
        }
        match answer {
            Ok(Some(reply)) => out.push((client, tag, reply)),
            Ok(None) => {}
            Err(e) => out.push((client, tag, Reply::Error(e))),
        }
    }

    fn file(&mut self, file: FileId) -> Result<&mut FileState, WireError> {
        self.files.get_mut(&file).ok_or_else(|| no_versions(file))
    }

    fn answer(
        &mut self,
        client: ClientId,
        tag: u64,
        request: Request,
        out: &mut Out,
    ) -> Result<Option<Reply>, WireError> {
        let reply = match request {
            Request::VersionOpen { file, geometry } => self.open(file, geometry)?,
            Request::VersionAssign {
                file,
                writer,
                regions,
            } => self.assign(client, file, writer, regions)?,
            Request::VersionComplete { file, version } => {
                return self.complete(client, tag, file, version, out)
            }
            Request::VersionSnapshot { file, version } => {
                let f = self.file(file)?;
                let v = version.unwrap_or_else(|| f.versions.published());
                Reply::Snapshot {
                    version: v,
                    size: f.versions.size(v).map_err(manager_err)?,
                    geometry: f.versions.geometry,
                    base: f.versions.base(),
                }
            }
            Request::VersionList { file } => Reply::Versions(self.file(file)?.versions.list()),
            Request::VersionGcPlan {
                file,
                keep_last,
                newer_than_ms,
            } => Reply::GcPlan(self.file(file)?.versions.gc_plan(keep_last, newer_than_ms)),
            Request::VersionGcDone { file, plan } => {
                self.file(file)?.versions.gc_done(&plan);
                Reply::Done
            }
            Request::VersionBase {
                file,
                version,
                done,
            } => {
                self.file(file)?.versions.set_base(version, done);
                Reply::Done
            }
            other => self.answer_nodes(other)?,
        };
        Ok(Some(reply))
    }

    /// Opens `file`'s versions (made with `geometry` if new) and numbers a new writer.
    fn open(
        &mut self,
        file: FileId,
        geometry: Option<atomio_version::Geometry>,
    ) -> Result<Reply, WireError> {
        let full = self.files.len() >= MAX_VERSIONED_FILES;
        let f = match (self.files.get_mut(&file), geometry) {
            (Some(f), Some(g)) if f.versions.geometry != g => {
                return Err(WireError::new(
                    ErrorCode::InvalidArgument,
                    format!(
                        "the file's versions have chunks of {} bytes and fan-out {}",
                        f.versions.geometry.chunk, f.versions.geometry.fanout
                    ),
                ))
            }
            (Some(f), _) => f,
            (None, Some(_)) if full => {
                return Err(WireError::new(
                    ErrorCode::LimitExceeded,
                    format!(
                        "this server manages versions of {MAX_VERSIONED_FILES} files, its limit"
                    ),
                ))
            }
            (None, Some(g)) => {
                let g = g
                    .validate()
                    .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?;
                self.files.entry(file).or_insert(FileState {
                    versions: FileVersions::new(g),
                    waiting: BTreeMap::new(),
                    writer_of: HashMap::new(),
                })
            }
            (None, None) => return Err(no_versions(file)),
        };
        Ok(Reply::VersionWriter {
            object: f.versions.new_writer(),
            geometry: f.versions.geometry,
        })
    }

    /// Assigns writer `writer` of `client` the next version of `file`, over `regions`.
    fn assign(
        &mut self,
        client: ClientId,
        file: FileId,
        writer: u64,
        regions: atomio_layout::RangeList,
    ) -> Result<Reply, WireError> {
        let now = self.now_ms;
        if regions.len() > MAX_REGIONS_PER_WRITE {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "a versioned write of {} regions (at most {MAX_REGIONS_PER_WRITE})",
                    regions.len()
                ),
            ));
        }
        let f = self.file(file)?;
        if f.writer_of.len() >= MAX_IN_FLIGHT {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!("{MAX_IN_FLIGHT} versions of this file are in flight, its limit"),
            ));
        }
        let a = f
            .versions
            .assign(writer, regions, now)
            .map_err(manager_err)?;
        f.writer_of.insert(a.version, client);
        Ok(Reply::Assigned(a))
    }

    /// `client` completes `version`: answered now if it is already published, else (in
    /// `out`) once it is, as is every waiter of a version that publishes with it.
    fn complete(
        &mut self,
        client: ClientId,
        tag: u64,
        file: FileId,
        version: Version,
        out: &mut Out,
    ) -> Result<Option<Reply>, WireError> {
        let f = self.file(file)?;
        match f.versions.state(version) {
            Some(
                atomio_version::VersionState::Published
                | atomio_version::VersionState::Collecting
                | atomio_version::VersionState::Collected,
            ) => return Ok(Some(Reply::Published { version })),
            Some(atomio_version::VersionState::Complete) => {
                // A repeated completion: wait (again) for publication.
                f.waiting.entry(version).or_default().push((client, tag));
                return Ok(None);
            }
            _ => {}
        }
        if f.writer_of.get(&version).is_some_and(|w| *w != client) {
            return Err(WireError::new(
                ErrorCode::NotOwner,
                format!("version {version} is another client's to complete"),
            ));
        }
        let published = f.versions.complete(version).map_err(manager_err)?;
        f.waiting.entry(version).or_default().push((client, tag));
        for v in published {
            f.writer_of.remove(&v);
            for (c, t) in f.waiting.remove(&v).unwrap_or_default() {
                out.push((c, t, Reply::Published { version: v }));
            }
        }
        Ok(None)
    }

    /// The requests on tree nodes (`answer` serves the version manager's).
    fn answer_nodes(&mut self, request: Request) -> Result<Reply, WireError> {
        Ok(match request {
            Request::NodePut { file, nodes } => {
                let mut records = Vec::new();
                let stored = self.put_nodes(file, nodes, &mut records);
                if !records.is_empty() {
                    *self.logged.entry(file).or_default() += records.len();
                    self.effects.push(Effect::AppendNodes(file, records));
                }
                stored?;
                Reply::Done
            }
            Request::NodeGet { file, keys } => {
                let store = self.nodes.get(&file);
                let found: Vec<_> = keys
                    .iter()
                    .map(|k| store.and_then(|s| s.get(k)).cloned())
                    .collect();
                let bytes: usize = found.iter().flatten().map(|b| b.len() + 8).sum();
                if bytes > MAX_NODE_REPLY_BYTES {
                    return Err(WireError::new(
                        ErrorCode::LimitExceeded,
                        format!("{bytes} bytes of nodes in one reply (at most {MAX_NODE_REPLY_BYTES}): ask for fewer"),
                    ));
                }
                Reply::Nodes(found)
            }
            Request::NodeDrop { file, keys } => {
                if let Some(store) = self.nodes.get_mut(&file) {
                    for k in keys {
                        if let Some(b) = store.remove(&k) {
                            self.node_bytes -= b.len();
                        }
                    }
                }
                self.compact_node_log(file);
                Reply::Done
            }
            Request::NodeDropVersions { file, versions } => {
                if let Some(store) = self.nodes.get_mut(&file) {
                    let before: usize = store.values().map(|b| b.len()).sum();
                    store.retain(|k, _| !versions.contains(&k.version));
                    let after: usize = store.values().map(|b| b.len()).sum();
                    self.node_bytes -= before - after;
                }
                self.compact_node_log(file);
                Reply::Done
            }
            other => {
                return Err(WireError::new(
                    ErrorCode::Internal,
                    format!("not a versioning request: {other:?}"),
                ))
            }
        })
    }

    /// Nodes held (for reports and tests).
    pub fn node_count(&self) -> usize {
        self.nodes.values().map(|s| s.len()).sum()
    }
}
