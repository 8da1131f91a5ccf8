//! The versioning client (Tran et al.; `atomio_version` has the sans-IO parts): a write
//! stores its bytes as new chunks, gets a version, builds and puts its tree, and waits for
//! publication; a read resolves a published snapshot through its tree. No locks anywhere.
//!
//! ```text
//!  write: chunks ─► VersionAssign ─► TreeBuilder (NodeGet, cached) ─► NodePut ─► VersionComplete
//!  read:  VersionSnapshot ─► TreeReader (NodeGet, cached) ─► chunk bytes + the file's base
//! ```
//!
//! * **Chunks** are appended to this writer's own objects on each server (writer number `w`
//!   from the version manager owns objects `8w … 8w+7`, so no two writers share one; its
//!   writes take them in turn): a chunk is immutable once written. Taking them in turn
//!   keeps the few snapshots a collector retains in different object files: appended to
//!   one file, five live 16 MiB regions between punched holes outgrew the four extents an
//!   ext4 inode holds and cost an extent-index block (`bench version-gc`'s 5.0002x).
//!   The provider manager is a pure function every client computes — leaf block
//!   `b` goes to server `(h + b) mod n` — so placement costs no round trip and balances
//!   every writer's bytes over all servers. A client on the servers' host writes and reads
//!   chunk objects through their files (the same-host bypass of `objects`).
//! * **Nodes** live at `NodeKey::server` (a DHT) and are cached here forever (immutable).
//! * **The base**: bytes no version wrote are the file's base — the user's file as it is
//!   (direct placement) or the server file's objects — read by the caller (`File`).
//! * A write whose version was aborted (a lower writer stalled or vanished) is assigned again
//!   with the same chunks and rebuilt; after 8 aborts in a row the call fails.
//!
//! **Invariants:** a chunk byte is written once, before any version refers to it; a write
//! returns only once its version is published (so a later read — this client's or, after
//! synchronization, anyone's — sees it); nodes in the cache are exactly what was put.

use crate::node_logs::{Follower, NodeLogs};
use atomio_layout::{Access, ByteRange, RangeList, ServerId};
use atomio_net::ClusterClient;
use atomio_proto::data::{file_id, Striping};
use atomio_proto::{metadata_server, ErrorCode, FileId, ObjPiece, Reply, Request, WireError};
use atomio_version::build::{coalesce, WritePieces};
use atomio_version::gc::{Garbage, GcStep, GcWalker};
use atomio_version::{
    BuildStep, ChunkRef, Geometry, Node, NodeKey, ReadStep, Segment, TreeBuilder, TreeReader,
    Version, VersionRecord,
};
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Chunk objects per chunk-space file id (a server's object numbers are below the stripe
/// count limit; writer `w` uses object `w % 4096` of space `w / 4096`).
const OBJECTS_PER_SPACE: u32 = atomio_layout::MAX_STRIPE_COUNT as u32;
/// Nodes kept in a client's cache before it starts over.
const MAX_CACHED_NODES: usize = 1 << 20;
/// Regions a write declares to the version manager at most (its hint to other writers).
const MAX_DECLARED_REGIONS: usize = 4096;
/// Chunk objects each writer takes in turn, one per write (see the module docs).
const OBJECTS_PER_WRITER: u32 = 8;
const _: () = assert!(OBJECTS_PER_SPACE.is_multiple_of(OBJECTS_PER_WRITER));
/// Versions whose nodes a read of a snapshot not walked yet asks for at once, at most.
const SPECULATIVE_VERSIONS: Version = 8;
/// Keys such a read asks for at most (else it walks level by level).
const MAX_SPECULATIVE_KEYS: usize = 1024;
/// Aborts in a row before a write gives up.
const MAX_RETRIES: u32 = 8;

/// Whether a versioned file follows the servers' node logs in the background: started
/// when it first reads the newest snapshot through a board (`ATOMIO_NODE_FOLLOWER=0`:
/// never).
#[derive(Debug)]
enum Following {
    Off,
    NotYet,
    /// Held for its drop, which stops the thread.
    On {
        _follower: Follower,
    },
    /// It could not start (no `inotify`): reads pull by themselves.
    Unavailable,
}

/// What a versioned file did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VersionStats {
    pub writes: u64,
    pub reads: u64,
    pub retries: u64,
    pub nodes_put: u64,
    pub nodes_fetched: u64,
    /// Round trips made for tree nodes (each asks every server it needs at once).
    pub node_rounds: u64,
    pub nodes_cached: u64,
    /// Nodes taken from the servers' node logs on this host (no round trip).
    pub nodes_from_logs: u64,
    /// Of those, nodes the follower had pulled before a read needed them.
    pub nodes_followed: u64,
    /// Pulls of the node logs a read made itself (a node it needed was missing).
    pub log_pulls: u64,
    /// Newest-snapshot lookups asked of the metadata server (`VersionSnapshot`) and read
    /// from its board on this host.
    pub snapshot_rounds: u64,
    pub board_reads: u64,
    pub chunk_bytes: u64,
    /// Collections this writer ran itself before a write because more snapshots than its
    /// retention were still stored (see `set_retention`).
    pub writer_collections: u64,
}

/// What a collection freed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    pub kept_from: Version,
    pub collected: Vec<Version>,
    pub nodes_freed: u64,
    pub bytes_punched: u64,
}

#[derive(Debug)]
pub struct VersionedFile {
    id: FileId,
    meta: ServerId,
    servers: u32,
    geometry: Geometry,
    slot: u32,
    /// Next free byte of each of this writer's chunk objects on each server, by
    /// `turn * servers + server`.
    cursors: Vec<u64>,
    /// Which of this writer's objects (0 … OBJECTS_PER_WRITER − 1) the next write takes.
    turn: u32,
    /// Object directories of every server when all are on this host.
    local: Option<Vec<PathBuf>>,
    /// Their boards' and node logs' directories (`version_board::versions_dir`).
    versions_dirs: Option<Vec<PathBuf>>,
    /// Chunk object files opened, by (server, object).
    open: HashMap<(u32, u32), std::fs::File>,
    /// Whether reads of the newest snapshot use the servers' boards and node logs when on
    /// their host (`version_board`; `ATOMIO_VERSION_BOARDS=0` turns it off).
    boards: bool,
    /// The servers' node logs for this file (`versions_dirs`), pulled by reads and by
    /// the follower.
    logs: Option<Arc<Mutex<NodeLogs>>>,
    /// The background follower of the node logs (`node_logs`).
    following: Following,
    cache: HashMap<NodeKey, Node>,
    /// The newest snapshot this client has walked (its nodes on the paths walked are
    /// cached): a newer one's nodes are asked for at once (`segments`).
    walked: Version,
    stats: VersionStats,
    /// Negative control: build trees ignoring the in-flight writers (see
    /// `TreeBuilder::ignoring_hints`).
    ignore_hints: bool,
    /// Keep at most this many published snapshots stored when a write starts (`None`: no
    /// bound; collection is left to whoever calls `collect`).
    retention: Option<u64>,
}

fn unexpected(what: &str, r: &Reply) -> WireError {
    WireError::new(
        ErrorCode::Internal,
        format!("{what}: unexpected reply {r:?}"),
    )
}

fn io_err(what: &str, e: std::io::Error) -> WireError {
    WireError::new(ErrorCode::Io, format!("{what}: {e}"))
}

/// Bytes one chunk-writing system call takes at most. Into a chunk object's new blocks,
/// a larger call is several times slower on this kernel (6.18, ext4) once memory is
/// fragmented — writes of 16 MiB: ~40 ms each against ~8 ms as 256 KiB calls, measured in
/// `bench regions-sweep` — the page cache then backs them with large folios that must be
/// found first.
const MAX_CHUNK_CALL: usize = 256 << 10;

/// Writes `pieces` one after another from `offset` of `f`: small pieces gathered by
/// `pwritev` (no copy) into calls of up to `MAX_CHUNK_CALL` bytes, larger ones a call
/// each; resumes after a short write.
fn write_all_vectored_at(
    f: &std::fs::File,
    pieces: &[&[u8]],
    mut offset: u64,
) -> std::io::Result<()> {
    use std::io::IoSlice;
    const IOV_MAX: usize = 1024;
    let mut iov: Vec<IoSlice> = pieces.iter().map(|p| IoSlice::new(p)).collect();
    let mut left = &mut iov[..];
    while !left.is_empty() {
        // At least one piece; more while they fit.
        let mut n = 1;
        let mut bytes = left[0].len();
        while n < left.len().min(IOV_MAX) && bytes + left[n].len() <= MAX_CHUNK_CALL {
            bytes += left[n].len();
            n += 1;
        }
        let at = i64::try_from(offset).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        let wrote = nix::sys::uio::pwritev(f, &left[..n], at)?;
        if wrote == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        offset += wrote as u64;
        IoSlice::advance_slices(&mut left, wrote);
    }
    Ok(())
}

/// The writer whose chunk object `object` is.
fn writer_of(object: u32) -> u32 {
    object / OBJECTS_PER_WRITER
}

/// The chunk space (file id) and object number there of chunk object `object`.
fn chunk_home(id: FileId, object: u32) -> (FileId, u32) {
    let space = file_id(&format!(
        "{:016x}/chunks/{}",
        id.0,
        object / OBJECTS_PER_SPACE
    ));
    (space, object % OBJECTS_PER_SPACE)
}

/// The striping every chunk `Write` names (chunk spaces take no locks; admission needs one).
fn chunk_striping() -> Striping {
    Striping {
        stripe_size: 1 << 20,
        objects: OBJECTS_PER_SPACE,
    }
}

impl VersionedFile {
    /// Opens the versions of the file `id` named `name` (its metadata server is
    /// `hash(name) mod n`), making them with `geometry` if new (`None`: they must exist).
    pub async fn open(
        c: &mut ClusterClient,
        id: FileId,
        name: &str,
        geometry: Option<Geometry>,
    ) -> Result<Self, WireError> {
        let servers = c.servers() as u32;
        let meta = metadata_server(name, servers);
        let reply = one(c, meta, Request::VersionOpen { file: id, geometry }).await?;
        let Reply::VersionWriter { object, geometry } = reply else {
            return Err(unexpected("VersionOpen", &reply));
        };
        if object.checked_mul(OBJECTS_PER_WRITER).is_none() {
            return Err(WireError::new(
                ErrorCode::Internal,
                format!("writer number {object} leaves no room for its chunk objects"),
            ));
        }
        let located = locate_all(c).await;
        // Only directories of the objects' owner (`/dev/shm` is everyone's): else ask.
        let versions_dirs = located.as_ref().and_then(|l| {
            l.iter()
                .map(|(dir, id)| {
                    let v = atomio_data::version_board::versions_dir(dir, id);
                    atomio_data::version_board::trusted(&v, dir).then_some(v)
                })
                .collect::<Option<Vec<PathBuf>>>()
        });
        let local = located.map(|l| l.into_iter().map(|(dir, _)| dir).collect());
        let logs = versions_dirs
            .clone()
            .map(|dirs| Arc::new(Mutex::new(NodeLogs::new(id, geometry, dirs))));
        Ok(Self {
            id,
            meta,
            servers,
            geometry,
            slot: object,
            cursors: vec![0; (OBJECTS_PER_WRITER * servers) as usize],
            turn: 0,
            local,
            versions_dirs,
            open: HashMap::new(),
            boards: std::env::var("ATOMIO_VERSION_BOARDS").map_or(true, |v| v != "0"),
            logs,
            following: match std::env::var("ATOMIO_NODE_FOLLOWER").as_deref() {
                Ok("0") => Following::Off,
                _ => Following::NotYet,
            },
            cache: HashMap::new(),
            walked: 0,
            stats: VersionStats::default(),
            ignore_hints: false,
            retention: None,
        })
    }

    /// Whether reads of the newest snapshot use the boards and node logs of servers on
    /// this host (default: on unless `ATOMIO_VERSION_BOARDS=0`).
    pub fn use_boards(&mut self, on: bool) {
        self.boards = on;
    }

    /// Whether a reader of the newest snapshot on the servers' host follows their node
    /// logs in the background (default: on unless `ATOMIO_NODE_FOLLOWER=0`).
    pub fn use_node_follower(&mut self, on: bool) {
        match (on, &self.following) {
            (false, _) => self.following = Following::Off,
            (true, Following::Off) => self.following = Following::NotYet,
            (true, _) => {}
        }
    }

    /// Negative control for tests: trees built without forward references.
    pub fn ignore_hints_unsafely(&mut self) {
        self.ignore_hints = true;
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Bounds the storage a writer can grow: before each write stores its chunks, the
    /// writer collects every published snapshot but the newest `keep_last` itself when a
    /// collector has not (back-pressure, as an LSM tree stalls writes behind compaction).
    /// With whole overwrites, the stored bytes then never exceed `keep_last + 1` times the
    /// file (plus the writes in flight of other writers), however far a background
    /// collector lags.
    pub fn set_retention(&mut self, keep_last: Option<u64>) {
        self.retention = keep_last.map(|k| k.max(1));
    }

    pub fn stats(&self) -> VersionStats {
        VersionStats {
            nodes_cached: self.cache.len() as u64,
            ..self.stats
        }
    }

    /// This writer's chunk object number `turn` (below OBJECTS_PER_WRITER).
    fn own_object(&self, turn: u32) -> u32 {
        // `open` checked that the multiplication fits.
        self.slot * OBJECTS_PER_WRITER + turn
    }

    /// Whether chunk object `object` is one of this writer's (it may create and write it).
    fn owns(&self, object: u32) -> bool {
        writer_of(object) == self.slot
    }

    /// The provider manager: the server that stores leaf block `block`'s new chunks.
    fn provider(&self, block: u64) -> u32 {
        ((self.id.0 % self.servers as u64 + block) % self.servers as u64) as u32
    }

    fn chunk_file(&mut self, server: u32, object: u32) -> Result<&std::fs::File, WireError> {
        if !self.open.contains_key(&(server, object)) {
            let dirs = self.local.as_ref().ok_or_else(|| {
                WireError::new(ErrorCode::Internal, "chunk files are not on this host")
            })?;
            let dir = dirs.get(server as usize).ok_or_else(|| {
                WireError::new(ErrorCode::Malformed, format!("no server {server}"))
            })?;
            let (space, number) = chunk_home(self.id, object);
            let path = dir.join(atomio_data::object_file_name(space, number));
            let own = self.owns(object);
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(own)
                .create(own)
                .truncate(false)
                .open(&path)
                .map_err(|e| io_err(&format!("opening {}", path.display()), e))?;
            if self.open.len() >= 4096 {
                let slot = self.slot;
                self.open.retain(|(_, o), _| writer_of(*o) == slot);
            }
            self.open.insert((server, object), f);
        }
        Ok(&self.open[&(server, object)])
    }

    /// Stores `data` (offset order) for the bytes of `ranges` as new chunks.
    async fn store_chunks(
        &mut self,
        c: &mut ClusterClient,
        ranges: &RangeList,
        data: &[u8],
    ) -> Result<WritePieces, WireError> {
        let g = self.geometry;
        let turn = self.turn;
        self.turn = (turn + 1) % OBJECTS_PER_WRITER;
        let object = self.own_object(turn);
        let cursor_base = (turn * self.servers) as usize;
        let mut pieces = WritePieces::default();
        // Per server: (object offset, data offset, length) of each piece, appended in order.
        let mut per: BTreeMap<u32, Vec<(u64, usize, usize)>> = BTreeMap::new();
        let mut at = 0usize;
        for r in ranges.as_slice() {
            let mut s = r.start;
            while s < r.end {
                let block = g.block(s);
                let e = r.end.min((block + 1).saturating_mul(g.chunk));
                let server = self.provider(block);
                let off = self.cursors[cursor_base + server as usize];
                let len = (e - s) as usize;
                self.cursors[cursor_base + server as usize] += len as u64;
                per.entry(server).or_default().push((off, at, len));
                pieces.add(
                    &g,
                    ByteRange { start: s, end: e },
                    ChunkRef {
                        server,
                        object,
                        offset: off,
                    },
                );
                at += len;
                s = e;
            }
        }
        if self.local.is_some() {
            for (server, list) in &per {
                let f = self.chunk_file(*server, object)?;
                // A server's pieces are contiguous in the chunk object (appended in order):
                // vectored writes straight from the caller's buffer, so 1,024 regions
                // write as fast as one (Tran §6.3) with no gathering copy.
                let pieces: Vec<&[u8]> = list
                    .iter()
                    .map(|&(_, at, len)| &data[at..at + len])
                    .collect();
                write_all_vectored_at(f, &pieces, list[0].0)
                    .map_err(|e| io_err("pwritev (chunk)", e))?;
            }
        } else {
            let (space, number) = chunk_home(self.id, object);
            let calls = per
                .iter()
                .map(|(server, list)| {
                    let total: usize = list.iter().map(|p| p.2).sum();
                    let mut buf = Vec::with_capacity(total);
                    for &(_, at, len) in list {
                        buf.extend_from_slice(&data[at..at + len]);
                    }
                    (
                        ServerId(*server),
                        Request::Write {
                            file: space,
                            object: number,
                            striping: chunk_striping(),
                            pieces: vec![ObjPiece {
                                offset: list[0].0,
                                len: total as u64,
                            }],
                            data: buf.into(),
                        },
                    )
                })
                .collect();
            c.rpc_all(calls).await?;
        }
        self.stats.chunk_bytes += data.len() as u64;
        Ok(pieces)
    }

    /// Nodes by key: from the cache, else from their servers (every key must exist).
    async fn nodes(
        &mut self,
        c: &mut ClusterClient,
        keys: Vec<NodeKey>,
    ) -> Result<Vec<(NodeKey, Node)>, WireError> {
        let got = self.nodes_maybe(c, keys).await?;
        got.into_iter()
            .map(|(k, n)| {
                n.map(|n| (k, n)).ok_or_else(|| {
                    WireError::new(
                        ErrorCode::NotFound,
                        format!("tree node {k:?} is missing (collected, or its writer's version aborted)"),
                    )
                })
            })
            .collect()
    }

    async fn nodes_maybe(
        &mut self,
        c: &mut ClusterClient,
        keys: Vec<NodeKey>,
    ) -> Result<Vec<(NodeKey, Option<Node>)>, WireError> {
        let mut out = Vec::with_capacity(keys.len());
        let mut ask: BTreeMap<u32, Vec<NodeKey>> = BTreeMap::new();
        for k in keys {
            match self.cache.get(&k) {
                Some(n) => out.push((k, Some(n.clone()))),
                None => ask
                    .entry(k.server(self.id.0, self.servers))
                    .or_default()
                    .push(k),
            }
        }
        if ask.is_empty() {
            return Ok(out);
        }
        self.stats.node_rounds += 1;
        // At most 1,024 nodes per request: answers stay far below the frame limit.
        let order: Vec<(u32, Vec<NodeKey>)> = ask
            .into_iter()
            .flat_map(|(s, keys)| {
                keys.chunks(1024)
                    .map(|c| (s, c.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let calls = order
            .iter()
            .map(|(s, keys)| {
                (
                    ServerId(*s),
                    Request::NodeGet {
                        file: self.id,
                        keys: keys.clone(),
                    },
                )
            })
            .collect();
        let replies = c.rpc_all(calls).await?;
        if self.cache.len() > MAX_CACHED_NODES {
            self.forget_nodes();
        }
        for ((_, keys), reply) in order.into_iter().zip(replies) {
            let Reply::Nodes(found) = reply else {
                return Err(unexpected("NodeGet", &reply));
            };
            if found.len() != keys.len() {
                return Err(unexpected("NodeGet", &Reply::Nodes(found)));
            }
            for (k, bytes) in keys.into_iter().zip(found) {
                let node = match bytes {
                    Some(b) => {
                        self.stats.nodes_fetched += 1;
                        let n = Node::decode(&b, &self.geometry, k.pos)
                            .map_err(|e| WireError::new(ErrorCode::Malformed, e))?;
                        self.cache.insert(k, n.clone());
                        Some(n)
                    }
                    None => None,
                };
                out.push((k, node));
            }
        }
        Ok(out)
    }

    async fn put_nodes(
        &mut self,
        c: &mut ClusterClient,
        nodes: Vec<(NodeKey, Node)>,
    ) -> Result<(), WireError> {
        let mut per: BTreeMap<u32, Vec<(NodeKey, atomio_proto::data::Bytes)>> = BTreeMap::new();
        for (k, n) in &nodes {
            per.entry(k.server(self.id.0, self.servers))
                .or_default()
                .push((*k, n.encode().into()));
        }
        self.stats.nodes_put += nodes.len() as u64;
        // Keep each frame well under the frame limit.
        let mut calls = Vec::new();
        for (s, list) in per {
            let mut batch = Vec::new();
            let mut bytes = 0usize;
            for (k, b) in list {
                bytes += b.len() + 32;
                batch.push((k, b));
                if bytes > 16 << 20 {
                    calls.push((ServerId(s), std::mem::take(&mut batch)));
                    bytes = 0;
                }
            }
            if !batch.is_empty() {
                calls.push((ServerId(s), batch));
            }
        }
        let calls = calls
            .into_iter()
            .map(|(s, nodes)| {
                (
                    s,
                    Request::NodePut {
                        file: self.id,
                        nodes,
                    },
                )
            })
            .collect();
        c.rpc_all(calls).await?;
        for (k, n) in nodes {
            self.cache.insert(k, n);
        }
        Ok(())
    }

    /// `NONCONT_WRITE`: writes `data` (offset order) to the bytes of `access` as one new
    /// snapshot; returns its version once it is published.
    pub async fn write(
        &mut self,
        c: &mut ClusterClient,
        access: &Access,
        data: &[u8],
    ) -> Result<Version, WireError> {
        crate::check_len("write", data.len(), access.size())?;
        let ranges = RangeList::from_ranges(access.ranges().collect());
        let Some(hull) = ranges.hull() else {
            return Ok(0);
        };
        self.geometry
            .check(hull.end)
            .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?;
        if let Some(keep) = self.retention {
            if !self.collect(c, keep, None).await?.collected.is_empty() {
                self.stats.writer_collections += 1;
            }
        }
        let pieces = self.store_chunks(c, &ranges, data).await?;
        self.stats.writes += 1;
        let mut tries = 0;
        loop {
            match self.commit(c, &ranges, pieces.clone()).await {
                Err(e) if e.code == ErrorCode::Aborted && tries < MAX_RETRIES => {
                    tries += 1;
                    self.stats.retries += 1;
                }
                r => return r,
            }
        }
    }

    /// Assign, build, put, complete (one try).
    async fn commit(
        &mut self,
        c: &mut ClusterClient,
        ranges: &RangeList,
        pieces: WritePieces,
    ) -> Result<Version, WireError> {
        // A write of very many pieces declares fewer, wider regions (see `coalesce`).
        let declared = coalesce(ranges, MAX_DECLARED_REGIONS);
        let reply = one(
            c,
            self.meta,
            Request::VersionAssign {
                file: self.id,
                writer: self.slot as u64,
                regions: declared.clone(),
            },
        )
        .await?;
        let Reply::Assigned(a) = reply else {
            return Err(unexpected("VersionAssign", &reply));
        };
        let version = a.version;
        // A published version the base already holds has no tree to build on.
        let on = if a.published <= a.base {
            0
        } else {
            a.published
        };
        let mut builder = TreeBuilder::new(self.geometry, version, on, a.hints, pieces, &declared);
        if self.ignore_hints {
            builder = builder.ignoring_hints();
        }
        let mut supply = Vec::new();
        let nodes = loop {
            match builder
                .advance(std::mem::take(&mut supply))
                .map_err(|e| WireError::new(ErrorCode::Internal, e))?
            {
                BuildStep::Fetch(keys) => match self.nodes(c, keys).await {
                    Ok(n) => supply = n,
                    // The base may be collected once the version was aborted: say so.
                    Err(e) if e.code == ErrorCode::NotFound => {
                        return Err(self.abort_or(c, version, e).await)
                    }
                    Err(e) => return Err(e),
                },
                BuildStep::Done(nodes) => break nodes,
            }
        };
        self.put_nodes(c, nodes).await?;
        // Published when every lower version is; the server answers then. Asking again
        // every second lets the manager notice a stalled writer below.
        loop {
            let req = Request::VersionComplete {
                file: self.id,
                version,
            };
            let call = c.rpc_all(vec![(self.meta, req)]);
            match tokio::time::timeout(std::time::Duration::from_secs(1), call).await {
                Ok(Ok(mut r)) => match r.pop() {
                    Some(Reply::Published { .. }) => return Ok(version),
                    Some(other) => return Err(unexpected("VersionComplete", &other)),
                    None => return Err(unexpected("VersionComplete", &Reply::Done)),
                },
                Ok(Err(e)) => return Err(e),
                Err(_) => continue,
            }
        }
    }

    /// `e`, or `Aborted` when `version` was aborted meanwhile.
    async fn abort_or(
        &mut self,
        c: &mut ClusterClient,
        version: Version,
        e: WireError,
    ) -> WireError {
        match self.list(c).await {
            Ok(list)
                if list
                    .iter()
                    .any(|r| r.version == version && r.state.aborted()) =>
            {
                WireError::new(ErrorCode::Aborted, format!("version {version} was aborted"))
            }
            _ => e,
        }
    }

    /// A published snapshot's version and size (`None`: the newest).
    pub async fn snapshot(
        &mut self,
        c: &mut ClusterClient,
        version: Option<Version>,
    ) -> Result<(Version, u64), WireError> {
        let (v, size, _) = self.snapshot_and_base(c, version).await?;
        Ok((v, size))
    }

    /// `snapshot`, and the newest snapshot the file's base holds (materialized).
    pub async fn snapshot_and_base(
        &mut self,
        c: &mut ClusterClient,
        version: Option<Version>,
    ) -> Result<(Version, u64, Version), WireError> {
        self.stats.snapshot_rounds += 1;
        let reply = one(
            c,
            self.meta,
            Request::VersionSnapshot {
                file: self.id,
                version,
            },
        )
        .await?;
        match reply {
            Reply::Snapshot {
                version,
                size,
                base,
                ..
            } => Ok((version, size, base)),
            other => Err(unexpected("VersionSnapshot", &other)),
        }
    }

    /// `NONCONT_READ`: the bytes of `ranges` in snapshot `version` (`None`: the newest),
    /// into `out` (offset order). Returns the version read, its size, and the pieces that
    /// are the file's base with where they go in `out` (the caller reads those; they are
    /// zeros in `out`).
    pub async fn read(
        &mut self,
        c: &mut ClusterClient,
        version: Option<Version>,
        ranges: &RangeList,
        out: &mut [u8],
    ) -> Result<(Version, u64, Vec<(Segment, usize)>), WireError> {
        let board = match version {
            None => self.board(),
            Some(_) => None,
        };
        let (mut v, mut size, mut base) = match board {
            Some(b) => (b.version, b.size, b.base),
            None => self.snapshot_and_base(c, version).await?,
        };
        let mut tries = 0;
        loop {
            let got = match v <= base {
                // The base is this snapshot (materialized): read it alone.
                true => Ok(all_base(ranges, out)),
                false => self.read_at(c, v, ranges, out).await,
            };
            match got {
                // The newest snapshot was collected under a slow reader: read the new one.
                Err(e) if e.code == ErrorCode::NotFound && version.is_none() && tries < 3 => {
                    tries += 1;
                    let (v2, size2, base2) = self.snapshot_and_base(c, None).await?;
                    if v2 == v && base2 == base {
                        return Err(e);
                    }
                    (v, size, base) = (v2, size2, base2);
                }
                Err(e) => return Err(e),
                Ok(base) => {
                    self.stats.reads += 1;
                    return Ok((v, size, base));
                }
            }
        }
    }

    /// Snapshot `v`'s segments over `ranges`, its tree walked through the node cache.
    async fn segments(
        &mut self,
        c: &mut ClusterClient,
        v: Version,
        ranges: RangeList,
    ) -> Result<Vec<Segment>, WireError> {
        let root = NodeKey {
            pos: self.geometry.root(),
            version: v,
        };
        // Logs are pulled when a node is missing, not only for a new root: a pull made
        // while another version was being put may have taken its root (from one server's
        // log) but not yet its lower nodes (from another's).
        let mut pulled = false;
        if v > self.walked {
            self.take_followed();
        }
        if v > self.walked && !self.cache.contains_key(&root) {
            self.pull_node_logs();
            pulled = true;
        }
        if v > self.walked && !self.cache.contains_key(&root) {
            // A snapshot not walked yet: ask at once for every node the versions since the
            // last one walked (up to 8) could have on this read's paths, instead of one
            // round trip per level (readers beside writers: ~29 nodes over five levels).
            let from = (self.walked + 1).max(v.saturating_sub(SPECULATIVE_VERSIONS - 1));
            if let Some(keys) = atomio_version::read::speculative_keys(
                &self.geometry,
                from..=v,
                &ranges,
                MAX_SPECULATIVE_KEYS,
            ) {
                let keys: Vec<NodeKey> = keys
                    .into_iter()
                    .filter(|k| !self.cache.contains_key(k))
                    .collect();
                self.nodes_maybe(c, keys).await?;
            }
        }
        let mut reader = TreeReader::new(self.geometry, v, ranges);
        let mut supply = Vec::new();
        let segs = loop {
            match reader
                .advance(std::mem::take(&mut supply))
                .map_err(|e| WireError::new(ErrorCode::Internal, e))?
            {
                ReadStep::Fetch(keys) => {
                    if !pulled && keys.iter().any(|k| !self.cache.contains_key(k)) {
                        self.pull_node_logs();
                        pulled = true;
                    }
                    supply = self.nodes(c, keys).await?
                }
                ReadStep::Done(segs) => break segs,
            }
        };
        self.walked = self.walked.max(v);
        Ok(segs)
    }

    /// The newest snapshot as the metadata server's board on this host says it (`None`:
    /// not on its host, turned off, or no whole board after a few reads).
    fn board(&mut self) -> Option<atomio_data::version_board::Board> {
        if !self.boards {
            return None;
        }
        let dir = self.versions_dirs.as_ref()?.get(self.meta.0 as usize)?;
        let f = std::fs::File::open(atomio_data::version_board::board_path(dir, self.id)).ok()?;
        let mut bytes = [0u8; atomio_data::version_board::BOARD_BYTES];
        for _ in 0..3 {
            // A board being rewritten reads torn: its checksum fails; read it again.
            if f.read_exact_at(&mut bytes, 0).is_err() {
                return None;
            }
            if let Some(b) = atomio_data::version_board::decode_board(&bytes) {
                self.stats.board_reads += 1;
                if matches!(self.following, Following::NotYet) {
                    self.following = match self.logs.as_ref().and_then(Follower::start) {
                        Some(f) => Following::On { _follower: f },
                        None => Following::Unavailable,
                    };
                }
                return Some(b);
            }
        }
        None
    }

    /// Takes into the node cache what the servers on this host appended to their node logs
    /// since the last pull (nodes are immutable: any node logged is as good as fetched).
    /// Best effort: what is not there is fetched with `NodeGet`.
    fn pull_node_logs(&mut self) {
        if !self.boards {
            return;
        }
        if self.cache.len() > MAX_CACHED_NODES {
            self.forget_nodes();
        }
        let Some(logs) = &self.logs else { return };
        let nodes = match logs.lock() {
            Ok(mut l) => {
                l.pull_all();
                l.take()
            }
            Err(_) => return,
        };
        self.stats.log_pulls += 1;
        self.take_in(nodes);
    }

    /// Takes into the node cache what the follower pulled since the last walk.
    fn take_followed(&mut self) {
        if !matches!(self.following, Following::On { .. }) {
            return;
        }
        let Some(logs) = &self.logs else { return };
        let nodes = match logs.lock() {
            Ok(mut l) => l.take(),
            Err(_) => return,
        };
        self.stats.nodes_followed += self.take_in(nodes);
    }

    /// Puts pulled nodes not cached yet into the cache; returns how many.
    fn take_in(&mut self, nodes: Vec<(NodeKey, Node)>) -> u64 {
        let mut taken = 0;
        for (key, node) in nodes {
            if let std::collections::hash_map::Entry::Vacant(e) = self.cache.entry(key) {
                taken += 1;
                e.insert(node);
            }
        }
        self.stats.nodes_from_logs += taken;
        taken
    }

    /// Empties the node cache (it outgrew its bound); logs are pulled again from their start.
    fn forget_nodes(&mut self) {
        self.cache.clear();
        if let Some(Ok(mut l)) = self.logs.as_ref().map(|l| l.lock()) {
            l.restart();
        }
    }

    async fn read_at(
        &mut self,
        c: &mut ClusterClient,
        v: Version,
        ranges: &RangeList,
        out: &mut [u8],
    ) -> Result<Vec<(Segment, usize)>, WireError> {
        let segs = self.segments(c, v, ranges.clone()).await?;
        // Where each segment lands in `out`: ranges are in order, segments too.
        let mut base = Vec::new();
        let mut stored: Vec<(Segment, usize)> = Vec::new();
        let (mut ri, mut at) = (0usize, 0usize);
        let rs = ranges.as_slice();
        for s in segs {
            while ri < rs.len() && rs[ri].end <= s.start {
                at += rs[ri].len() as usize;
                ri += 1;
            }
            let dst = at + (s.start - rs[ri].start) as usize;
            match s.at {
                Some(_) => stored.push((s, dst)),
                None => {
                    out[dst..dst + s.len as usize].fill(0);
                    base.push((s, dst));
                }
            }
        }
        self.fetch_chunks(c, &stored, out).await?;
        Ok(base)
    }

    /// Copies snapshot `v`'s stored bytes within `range` straight from the chunk files into
    /// `out` at their file offsets (`copy_file_range`: no user-space buffer), when the
    /// chunks are on this host; returns false (nothing copied) when they are not.
    pub async fn copy_stored_into(
        &mut self,
        c: &mut ClusterClient,
        v: Version,
        range: ByteRange,
        out: &std::fs::File,
    ) -> Result<bool, WireError> {
        if self.local.is_none() {
            return Ok(false);
        }
        let segs = self
            .segments(c, v, RangeList::from_ranges(vec![range]))
            .await?;
        for s in segs {
            let Some(at) = s.at else { continue };
            let src = self.chunk_file(at.server, at.object)?;
            let (mut from, mut to) = (at.offset as i64, s.start as i64);
            let mut left = s.len as usize;
            while left > 0 {
                let n = match nix::fcntl::copy_file_range(
                    src,
                    Some(&mut from),
                    out,
                    Some(&mut to),
                    left,
                ) {
                    Ok(n) => n,
                    // Another file system (EXDEV), or one that cannot copy in the kernel
                    // (FUSE, NFS before 4.2): through a buffer.
                    Err(
                        nix::errno::Errno::EXDEV
                        | nix::errno::Errno::EOPNOTSUPP
                        | nix::errno::Errno::EINVAL
                        | nix::errno::Errno::ENOSYS,
                    ) => copy_through_buffer(src, from as u64, out, to as u64, left).map(|()| {
                        from += left as i64;
                        to += left as i64;
                        left
                    })?,
                    Err(e) => return Err(io_err("copy_file_range (chunk → file)", e.into())),
                };
                if n == 0 {
                    return Err(WireError::new(
                        ErrorCode::Io,
                        format!(
                            "chunk bytes missing at {} (object {})",
                            at.offset, at.object
                        ),
                    ));
                }
                left -= n;
            }
        }
        Ok(true)
    }

    /// Reads stored chunk bytes into `out` at the given offsets.
    async fn fetch_chunks(
        &mut self,
        c: &mut ClusterClient,
        stored: &[(Segment, usize)],
        out: &mut [u8],
    ) -> Result<(), WireError> {
        if self.local.is_some() {
            // Pieces that follow each other both in one chunk file and in `out` (one
            // write's chunks, read back in its order) are one `pread`: regions read back
            // as fast as one region (Tran §6.3).
            let mut i = 0;
            while i < stored.len() {
                let (s, dst) = &stored[i];
                let at = s.at.expect("stored");
                let mut len = s.len;
                let mut j = i + 1;
                while let Some((n, ndst)) = stored.get(j) {
                    let nat = n.at.expect("stored");
                    if (nat.server, nat.object) != (at.server, at.object)
                        || nat.offset != at.offset + len
                        || *ndst != dst + len as usize
                    {
                        break;
                    }
                    len += n.len;
                    j += 1;
                }
                let f = self.chunk_file(at.server, at.object)?;
                f.read_exact_at(&mut out[*dst..*dst + len as usize], at.offset)
                    .map_err(|e| io_err("pread (chunk)", e))?;
                i = j;
            }
            return Ok(());
        }
        // One Read per (server, object), pieces in the order listed.
        let mut per: BTreeMap<(u32, u32), Vec<StoredPiece>> = BTreeMap::new();
        for (s, dst) in stored {
            let at = s.at.expect("stored");
            per.entry((at.server, at.object))
                .or_default()
                .push((at.offset, s.len, *dst));
        }
        // Servers take an object's pieces in increasing offset order; a snapshot's file
        // order is not its chunks' (a later write's bytes sit further on in the object).
        for list in per.values_mut() {
            list.sort_unstable_by_key(|p| p.0);
        }
        let order: Vec<((u32, u32), Vec<StoredPiece>)> = per.into_iter().collect();
        let calls = order
            .iter()
            .map(|((server, slot), list)| {
                let (space, object) = chunk_home(self.id, *slot);
                (
                    ServerId(*server),
                    Request::Read {
                        file: space,
                        object,
                        pieces: list
                            .iter()
                            .map(|&(offset, len, _)| ObjPiece { offset, len })
                            .collect(),
                    },
                )
            })
            .collect();
        let replies = c.rpc_all(calls).await?;
        for ((_, list), reply) in order.iter().zip(replies) {
            let Reply::Data(bytes) = reply else {
                return Err(unexpected("Read (chunks)", &reply));
            };
            let mut at = 0usize;
            for &(_, len, dst) in list {
                let len = len as usize;
                let src = bytes
                    .get(at..at + len)
                    .ok_or_else(|| WireError::new(ErrorCode::Malformed, "short chunk read"))?;
                out[dst..dst + len].copy_from_slice(src);
                at += len;
            }
        }
        Ok(())
    }

    /// Materialization of snapshot `version` into the file's base starts (`done: false`:
    /// older snapshots are refused from now on) or is done (the base is `version`).
    pub async fn set_base(
        &mut self,
        c: &mut ClusterClient,
        version: Version,
        done: bool,
    ) -> Result<(), WireError> {
        one(
            c,
            self.meta,
            Request::VersionBase {
                file: self.id,
                version,
                done,
            },
        )
        .await?;
        Ok(())
    }

    /// Every version's record (`atomio versions`).
    pub async fn list(&mut self, c: &mut ClusterClient) -> Result<Vec<VersionRecord>, WireError> {
        match one(c, self.meta, Request::VersionList { file: self.id }).await? {
            Reply::Versions(v) => Ok(v),
            other => Err(unexpected("VersionList", &other)),
        }
    }

    /// Makes this writer's chunks durable on every server (tree nodes and the version
    /// manager are in the servers' memory: see docs/versioning.md).
    pub async fn sync(&mut self, c: &mut ClusterClient) -> Result<(), WireError> {
        for ((_, object), f) in &self.open {
            if self.owns(*object) {
                f.sync_data().map_err(|e| io_err("fdatasync (chunk)", e))?;
            }
        }
        // A writer's objects share one chunk space (OBJECTS_PER_SPACE is a multiple of
        // OBJECTS_PER_WRITER).
        let (space, _) = chunk_home(self.id, self.own_object(0));
        let calls = (0..self.servers)
            .map(|s| (ServerId(s), Request::Sync { file: space }))
            .collect();
        c.rpc_all(calls).await?;
        Ok(())
    }

    /// Whether snapshot `v` is no longer published (a collection freed it).
    async fn collected_meanwhile(
        &mut self,
        c: &mut ClusterClient,
        v: Version,
    ) -> Result<bool, WireError> {
        Ok(self
            .list(c)
            .await?
            .iter()
            .any(|r| r.version == v && r.state != atomio_version::VersionState::Published))
    }

    /// The requests that free a collected snapshot's `garbage`: its nodes dropped at their
    /// servers (and from this client's cache), its chunk bytes punched, in requests of at
    /// most `MAX_PIECES_PER_REQUEST` ranges; what they free is counted into `report`.
    fn free_requests(
        &mut self,
        garbage: &Garbage,
        report: &mut GcReport,
    ) -> Vec<(ServerId, Request)> {
        let mut drops: BTreeMap<u32, Vec<NodeKey>> = BTreeMap::new();
        for k in &garbage.nodes {
            self.cache.remove(k);
            drops
                .entry(k.server(self.id.0, self.servers))
                .or_default()
                .push(*k);
        }
        report.nodes_freed += garbage.nodes.len() as u64;
        let mut calls: Vec<(ServerId, Request)> = drops
            .into_iter()
            .map(|(s, keys)| {
                (
                    ServerId(s),
                    Request::NodeDrop {
                        file: self.id,
                        keys,
                    },
                )
            })
            .collect();
        let mut punches: BTreeMap<(u32, u32), Vec<ByteRange>> = BTreeMap::new();
        for p in &garbage.punch {
            report.bytes_punched += p.len;
            punches
                .entry((p.at.server, p.at.object))
                .or_default()
                .push(ByteRange {
                    start: p.at.offset,
                    end: p.at.offset + p.len,
                });
        }
        for ((server, slot), ranges) in punches {
            let (space, object) = chunk_home(self.id, slot);
            for part in ranges.chunks(atomio_proto::limits::MAX_PIECES_PER_REQUEST) {
                calls.push((
                    ServerId(server),
                    Request::Punch {
                        file: space,
                        object,
                        ranges: part.to_vec(),
                    },
                ));
            }
        }
        calls
    }

    /// Garbage collection: frees the nodes and chunk bytes that no snapshot kept reaches,
    /// keeping the newest `keep_last` snapshots and those assigned after `newer_than_ms`
    /// (Unix ms). Safe while others write and read (see `atomio_version::gc`).
    pub async fn collect(
        &mut self,
        c: &mut ClusterClient,
        keep_last: u64,
        newer_than_ms: Option<u64>,
    ) -> Result<GcReport, WireError> {
        let reply = one(
            c,
            self.meta,
            Request::VersionGcPlan {
                file: self.id,
                keep_last,
                newer_than_ms,
            },
        )
        .await?;
        let Reply::GcPlan(plan) = reply else {
            return Err(unexpected("VersionGcPlan", &reply));
        };
        let mut report = GcReport {
            kept_from: plan.keep,
            collected: plan.collect.clone(),
            ..GcReport::default()
        };
        if plan.collect.is_empty() && plan.aborted.is_empty() {
            return Ok(report);
        }
        for &w in &plan.collect {
            let mut walker = GcWalker::new(self.geometry, w, plan.keep);
            let mut supply = Vec::new();
            let garbage = loop {
                match walker.advance(std::mem::take(&mut supply)) {
                    Ok(GcStep::Fetch(keys)) => supply = self.nodes_maybe(c, keys).await?,
                    Ok(GcStep::Done(g)) => break g,
                    // A concurrent collection with a newer plan collected our `keep` too:
                    // its plan covers every version of ours (and it frees what we would),
                    // so this pass stops here.
                    Err(_) if self.collected_meanwhile(c, plan.keep).await? => {
                        report.collected.retain(|v| *v < w);
                        return Ok(report);
                    }
                    Err(e) => return Err(WireError::new(ErrorCode::Internal, e)),
                }
            };
            let calls = self.free_requests(&garbage, &mut report);
            if !calls.is_empty() {
                c.rpc_all(calls).await?;
            }
        }
        if !plan.aborted.is_empty() {
            let calls = (0..self.servers)
                .map(|s| {
                    (
                        ServerId(s),
                        Request::NodeDropVersions {
                            file: self.id,
                            versions: plan.aborted.clone(),
                        },
                    )
                })
                .collect();
            c.rpc_all(calls).await?;
            self.cache.retain(|k, _| !plan.aborted.contains(&k.version));
        }
        one(
            c,
            self.meta,
            Request::VersionGcDone {
                file: self.id,
                plan,
            },
        )
        .await?;
        Ok(report)
    }
}

/// Every byte of `ranges` as base pieces (zeroed in `out`), for a snapshot the base holds.
fn all_base(ranges: &RangeList, out: &mut [u8]) -> Vec<(Segment, usize)> {
    out.fill(0);
    let mut at = 0usize;
    ranges
        .as_slice()
        .iter()
        .map(|r| {
            let seg = Segment {
                start: r.start,
                len: r.len(),
                at: None,
            };
            let dst = at;
            at += r.len() as usize;
            (seg, dst)
        })
        .collect()
}

/// Stored bytes to read: (object offset, length, where they go in the caller's buffer).
type StoredPiece = (u64, u64, usize);

/// One request to one server.
async fn one(c: &mut ClusterClient, s: ServerId, r: Request) -> Result<Reply, WireError> {
    c.rpc_all(vec![(s, r)])
        .await?
        .pop()
        .ok_or_else(|| WireError::new(ErrorCode::Internal, "no reply"))
}

/// Copies `len` bytes at `from` of `src` to `to` of `out` through a buffer (where
/// `copy_file_range` cannot cross file systems).
fn copy_through_buffer(
    src: &std::fs::File,
    from: u64,
    out: &std::fs::File,
    to: u64,
    len: usize,
) -> Result<(), WireError> {
    const CHUNK: usize = 4 << 20;
    let mut buf = vec![0u8; len.min(CHUNK)];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK);
        src.read_exact_at(&mut buf[..n], from + done as u64)
            .map_err(|e| io_err("pread (chunk)", e))?;
        out.write_all_at(&buf[..n], to + done as u64)
            .map_err(|e| io_err("pwrite (chunk → file)", e))?;
        done += n;
    }
    Ok(())
}

/// Every server's object directory and store id, when all are on this host, see the same
/// files and share their pages (`objects::local_store_dir`).
async fn locate_all(c: &mut ClusterClient) -> Option<Vec<(PathBuf, String)>> {
    if std::env::var("ATOMIO_LOCAL_BYPASS").is_ok_and(|v| v == "0") {
        return None;
    }
    let calls = (0..c.servers() as u32)
        .map(|s| (ServerId(s), Request::Locate))
        .collect();
    let replies = c.rpc_all(calls).await.ok()?;
    let mut dirs = Vec::new();
    for r in replies {
        let Reply::Located(Some(lo)) = r else {
            return None;
        };
        dirs.push((crate::objects::local_store_dir(&lo.dir, &lo.id)?, lo.id));
    }
    Some(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More pieces than one `pwritev` takes, of uneven sizes: the file holds them back to
    /// back from the offset, nothing before it touched.
    #[test]
    fn vectored_chunk_writes_span_several_batches_in_order() {
        let path = std::env::temp_dir().join(format!("atomio-pwritev-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let owned: Vec<Vec<u8>> = (0..2500u32)
            .map(|i| vec![(i % 251) as u8; 1 + (i as usize * 7) % 300])
            .collect();
        let pieces: Vec<&[u8]> = owned.iter().map(|p| &p[..]).collect();
        write_all_vectored_at(&f, &pieces, 4096).unwrap();
        let want: Vec<u8> = owned.concat();
        let mut got = vec![0u8; 4096 + want.len()];
        f.read_exact_at(&mut got, 0).unwrap();
        assert!(got[..4096].iter().all(|&b| b == 0));
        assert!(got[4096..] == want[..]);
        let _ = std::fs::remove_file(&path);
    }
}
