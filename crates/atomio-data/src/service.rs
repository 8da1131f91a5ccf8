//! The data service: answers metadata and object-I/O requests from an `ObjectStore`.
//! A state machine like the lock server (request in, reply out), so the same code serves
//! embedded, TCP and simulated clusters.
//!
//! **Fencing:** a client whose lease lapsed at this server's lock service is `fence`d here
//! *before* its locks are released; from then on every data request it sends is refused
//! (`LeaseExpired`). Requests it sent earlier were applied while it still held its locks.
//!
//! **All-or-nothing writes** (`Stage`, `Decide`, `Finish`, `Resolve`) are run by `txn::Txns`;
//! every plain access (`Write`, `Read`, `SetObjectSize`, `DropObjects`) is first checked
//! against writes in doubt and answered `InDoubt` when it touches one.
//!
//! **Invariants:** every request is validated before it touches the store; every store error
//! becomes an `Io` error reply naming the operation; the service never panics on input; no
//! request of a fenced client reaches the store.

use crate::seq_writes::SeqWrites;
use crate::store::ObjectStore;
use crate::txn::Txns;
use atomio_layout::Layout;
use atomio_proto::data::{file_id, validate_path, validate_pieces, Bytes};
use atomio_proto::limits::MAX_FRAME_BYTES;
use atomio_proto::{ClientId, ErrorCode, FileId, FileMeta, ObjPiece, Reply, Request, WireError};
use std::collections::HashSet;

pub struct DataService<S: ObjectStore> {
    store: S,
    fenced: HashSet<ClientId>,
    txns: Txns,
    /// SeqDLM's SN-ordered writes (`SeqWrite`).
    seq: SeqWrites,
    /// Objects whose writers the lock service must synchronize (see `seq_writes`).
    to_synchronize: Vec<(FileId, u32)>,
    /// Versioning: version managers and this server's share of the node store.
    versions: crate::versions::Versions,
    /// Answers made outside a request (versions aborted when their writer was fenced).
    pending: crate::versions::Out,
}

/// The client `handle` acts for (tests and tools that call the service directly).
pub const LOCAL_CLIENT: ClientId = ClientId(u64::MAX);

fn io_err(what: &str, e: std::io::Error) -> WireError {
    WireError::new(ErrorCode::Io, format!("{what}: {e}"))
}

impl<S: ObjectStore> DataService<S> {
    /// Serves `store`, first recovering the all-or-nothing writes its last server left.
    pub fn new(mut store: S) -> Self {
        let mut found = store.take_recovered();
        let seq = SeqWrites::recover(&std::mem::take(&mut found.extent_log));
        let txns = Txns::recover(&mut store, found);
        let mut versions = crate::versions::Versions::default();
        versions.keep_files(store.keeps_version_files());
        Self {
            store,
            fenced: HashSet::new(),
            txns,
            seq,
            to_synchronize: Vec::new(),
            versions,
            pending: Vec::new(),
        }
    }

    /// Passes the server's clock in (versioning's patience with stalled writers).
    pub fn set_now(&mut self, now_ms: u64) {
        self.versions.set_now(now_ms);
    }

    /// Versioning's state (for tests and reports).
    pub fn versions(&self) -> &crate::versions::Versions {
        &self.versions
    }

    /// Answers `request` into `out` (with whatever else it answers: a version's publication
    /// answers every writer waiting for it), and what was left from earlier events.
    pub fn handle_all(
        &mut self,
        client: ClientId,
        tag: u64,
        request: Request,
        out: &mut crate::versions::Out,
    ) {
        out.append(&mut self.pending);
        if crate::versions::Versions::handles(&request) && !self.fenced.contains(&client) {
            self.versions.handle(client, tag, request, out);
            self.write_version_files();
        } else {
            out.push((client, tag, self.handle_from(client, request)));
        }
    }

    /// Writes what versioning's same-host readers read (`version_board`), before the
    /// answers that made it go out. A board that cannot be written is removed (readers
    /// then ask the server): a stale board would hide a published write.
    fn write_version_files(&mut self) {
        use crate::versions::Effect;
        for effect in self.versions.take_effects() {
            let (file, done) = match &effect {
                Effect::Board(file, board) => {
                    let bytes = crate::version_board::encode_board(board);
                    (*file, self.store.write_board(*file, &bytes))
                }
                Effect::AppendNodes(file, records) => {
                    (*file, self.store.append_node_log(*file, records))
                }
                Effect::RewriteNodes(file, records) => {
                    (*file, self.store.rewrite_node_log(*file, records))
                }
            };
            let Err(e) = done else { continue };
            tracing::warn!(
                file = format!("{:016x}", file.0),
                "versioning's same-host read files: {e}"
            );
            if matches!(effect, Effect::Board(..)) {
                if let Err(e) = self.store.remove_board(file) {
                    tracing::error!(
                        file = format!("{:016x}", file.0),
                        "a board that could not be written cannot be removed either: {e}"
                    );
                }
            }
        }
    }

    /// Answers made since the last request (see `handle_all`).
    pub fn take_pending(&mut self) -> crate::versions::Out {
        std::mem::take(&mut self.pending)
    }

    /// SN-ordered writes (for tests, reports and the lock service's SN floor).
    pub fn seq_writes(&self) -> &SeqWrites {
        &self.seq
    }

    /// The SN-ordered writes, to change (negative controls in the simulators).
    pub fn seq_writes_mut(&mut self) -> &mut SeqWrites {
        &mut self.seq
    }

    /// Synchronize objects past `entries` extent-cache entries (tests lower it).
    pub fn with_sync_threshold(mut self, entries: usize) -> Self {
        self.seq =
            std::mem::replace(&mut self.seq, SeqWrites::recover(&[])).with_threshold(entries);
        self
    }

    /// Objects whose writers the lock service should synchronize, since the last call.
    pub fn take_synchronize(&mut self) -> Vec<(FileId, u32)> {
        std::mem::take(&mut self.to_synchronize)
    }

    /// Refuses every later request of `client` (its lease lapsed; its locks are about to
    /// be released). Its staged writes are settled or left in doubt first, so nobody who
    /// gets its locks next can see half of one.
    pub fn fence(&mut self, client: ClientId) {
        self.fenced.insert(client);
        self.txns.client_gone(&mut self.store, client);
        self.versions.client_gone(client, &mut self.pending);
    }

    /// `client` disconnected: settle or leave in doubt its staged writes, abort the
    /// versions it was writing, and forget it.
    pub fn forget(&mut self, client: ClientId) {
        self.fenced.remove(&client);
        self.txns.client_gone(&mut self.store, client);
        self.versions.client_gone(client, &mut self.pending);
    }

    /// The transaction state (for tests and reports).
    pub fn txns(&self) -> &Txns {
        &self.txns
    }

    /// The store (for tests).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Takes the store back (a test's "crash": a new service on it recovers).
    pub fn into_store(self) -> S {
        self.store
    }

    /// `handle` for a request from `client`: refused if `client` is fenced.
    pub fn handle_from(&mut self, client: ClientId, request: Request) -> Reply {
        if self.fenced.contains(&client) {
            return Reply::Error(WireError::new(
                ErrorCode::LeaseExpired,
                "refused: this client's lease lapsed and its locks were released (fenced)",
            ));
        }
        if crate::versions::Versions::handles(&request) {
            // Called directly (tests, tools): the answer to this request, if it has one now.
            let mut out = Vec::new();
            self.versions.handle(client, 0, request, &mut out);
            self.write_version_files();
            let mine = out.iter().position(|(c, t, _)| *c == client && *t == 0);
            self.pending.extend(
                out.iter()
                    .filter(|(c, t, _)| (*c, *t) != (client, 0))
                    .cloned(),
            );
            return mine.map_or(Reply::Done, |i| out.swap_remove(i).2);
        }
        match self.answer(client, request) {
            Ok(r) => r,
            Err(e) => Reply::Error(e),
        }
    }

    /// True for the requests this service answers.
    pub fn handles(request: &Request) -> bool {
        matches!(
            request,
            Request::Create { .. }
                | Request::Open { .. }
                | Request::Remove { .. }
                | Request::DropObjects { .. }
                | Request::Write { .. }
                | Request::Stage { .. }
                | Request::Decide { .. }
                | Request::Finish { .. }
                | Request::Resolve { .. }
                | Request::Read { .. }
                | Request::Sync { .. }
                | Request::ObjectSizes { .. }
                | Request::SetObjectSize { .. }
                | Request::Locate
                | Request::SeqWrite { .. }
                | Request::Punch { .. }
        ) || crate::versions::Versions::handles(request)
    }

    /// `handle_from` for `LOCAL_CLIENT`.
    pub fn handle(&mut self, request: Request) -> Reply {
        self.handle_from(LOCAL_CLIENT, request)
    }

    /// An access to `pieces` of an object: `Some(InDoubt)` when it touches a write in
    /// doubt (settled here first when this server decides it).
    fn in_doubt(
        &mut self,
        file: FileId,
        object: u32,
        pieces: &[ObjPiece],
    ) -> Result<Option<Reply>, WireError> {
        Ok(self
            .txns
            .check_access(&mut self.store, file, object, pieces)?
            .map(|(txn, decider)| Reply::InDoubt { txn, decider }))
    }

    fn file_in_doubt(
        &mut self,
        file: FileId,
        object: Option<u32>,
    ) -> Result<Option<Reply>, WireError> {
        Ok(self
            .txns
            .check_file(&mut self.store, file, object)?
            .map(|(txn, decider)| Reply::InDoubt { txn, decider }))
    }

    /// Checks a write's pieces against its data.
    fn check_write(pieces: &[ObjPiece], data: &[u8]) -> Result<u64, WireError> {
        let total = validate_pieces(pieces)?;
        if total != data.len() as u64 {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "pieces cover {total} bytes but {} bytes came with them",
                    data.len()
                ),
            ));
        }
        Ok(total)
    }

    fn lookup(&mut self, path: &str) -> Result<Option<FileMeta>, WireError> {
        validate_path(path)?;
        let id = file_id(path);
        match self
            .store
            .get_meta(id)
            .map_err(|e| io_err("reading metadata", e))?
        {
            Some(m) if m.path == path => Ok(Some(m)),
            Some(m) => Err(WireError::new(
                ErrorCode::Exists,
                format!(
                    "'{path}' hashes to the id of '{}'; rename one of them",
                    m.path
                ),
            )),
            None => Ok(None),
        }
    }

    fn answer(&mut self, client: ClientId, request: Request) -> Result<Reply, WireError> {
        match request {
            Request::Stage {
                txn,
                decider,
                file,
                object,
                pieces,
                data,
                striping: _,
            } => {
                let total = Self::check_write(&pieces, &data)?;
                if let Some(r) = self.in_doubt(file, object, &pieces)? {
                    return Ok(r);
                }
                self.txns.stage(
                    &mut self.store,
                    client,
                    txn,
                    decider,
                    file,
                    object,
                    pieces,
                    data,
                )?;
                Ok(Reply::Written { bytes: total })
            }
            Request::Decide { txn, settled_below } => {
                self.txns
                    .decide(&mut self.store, client, txn, settled_below)?;
                Ok(Reply::Done)
            }
            Request::Finish { txn, outcome } => {
                self.txns.finish(&mut self.store, client, txn, outcome)?;
                Ok(Reply::Done)
            }
            Request::Resolve { txn } => Ok(Reply::Outcome {
                committed: self.txns.resolve(&mut self.store, txn)?,
            }),
            Request::Create {
                path,
                stripe_size,
                object_servers,
                exclusive,
            } => self.create(path, stripe_size, object_servers, exclusive),
            Request::Open { path } => match self.lookup(&path)? {
                Some(m) => Ok(Reply::File(m)),
                None => Err(no_file(&path)),
            },
            Request::Remove { path } => match self.lookup(&path)? {
                Some(m) => {
                    self.store
                        .remove_meta(m.file)
                        .map_err(|e| io_err("removing metadata", e))?;
                    Ok(Reply::Done)
                }
                None => Err(no_file(&path)),
            },
            Request::DropObjects { file } => {
                if let Some(r) = self.file_in_doubt(file, None)? {
                    return Ok(r);
                }
                self.store
                    .drop_objects(file)
                    .map_err(|e| io_err("dropping objects", e))?;
                self.seq.drop_file(file);
                Ok(Reply::Done)
            }
            other => self.answer_io(other),
        }
    }

    /// The requests on objects' bytes and sizes (`answer` serves transactions and the
    /// namespace).
    fn answer_io(&mut self, request: Request) -> Result<Reply, WireError> {
        match request {
            // (`striping` served the lock service's admission.)
            Request::Write {
                file,
                object,
                pieces,
                data,
                striping: _,
            } => {
                let total = Self::check_write(&pieces, &data)?;
                if let Some(r) = self.in_doubt(file, object, &pieces)? {
                    return Ok(r);
                }
                self.store
                    .write(file, object, &pieces, &data)
                    .map_err(|e| io_err(&format!("writing {file} object {object}"), e))?;
                Ok(Reply::Written { bytes: total })
            }
            Request::SeqWrite {
                file,
                object,
                blocks,
                data,
                msn,
            } => self.seq_write(file, object, &blocks, &data, msn),
            Request::Read {
                file,
                object,
                pieces,
            } => self.read(file, object, &pieces),
            Request::Sync { file } => {
                self.store
                    .sync(file)
                    .map_err(|e| io_err(&format!("syncing {file}"), e))?;
                Ok(Reply::Done)
            }
            Request::SetObjectSize { file, object, size } => {
                self.set_object_size(file, object, size)
            }
            Request::Punch {
                file,
                object,
                ranges,
            } => self.punch(file, object, ranges),
            Request::Locate => Ok(Reply::Located(self.store.local().map(|(dir, id)| {
                atomio_proto::LocalObjects {
                    dir: dir.display().to_string(),
                    id,
                }
            }))),
            Request::ObjectSizes { file } => Ok(Reply::Sizes(
                self.store
                    .sizes(file)
                    .map_err(|e| io_err(&format!("sizing {file}"), e))?,
            )),
            other => Err(WireError::new(
                ErrorCode::Internal,
                format!("the data service was handed a non-data request: {other:?}"),
            )),
        }
    }

    /// Creates the file at `path` (or opens it, unless `exclusive`).
    fn create(
        &mut self,
        path: String,
        stripe_size: u64,
        object_servers: Vec<atomio_layout::ServerId>,
        exclusive: bool,
    ) -> Result<Reply, WireError> {
        Layout::new(stripe_size, object_servers.clone())?;
        if let Some(m) = self.lookup(&path)? {
            if exclusive {
                return Err(WireError::new(
                    ErrorCode::Exists,
                    format!("'{path}' already exists"),
                ));
            }
            return Ok(Reply::File(m));
        }
        let meta = FileMeta {
            file: file_id(&path),
            path,
            stripe_size,
            object_servers,
        };
        self.store
            .put_meta(&meta)
            .map_err(|e| io_err("writing metadata", e))?;
        Ok(Reply::File(meta))
    }

    /// A write in sequence-numbered blocks (the seqdlm protocol).
    fn seq_write(
        &mut self,
        file: FileId,
        object: u32,
        blocks: &[atomio_proto::dlm::SnBlock],
        data: &Bytes,
        msn: u64,
    ) -> Result<Reply, WireError> {
        atomio_proto::dlm::validate_sn_blocks(blocks, data.len())?;
        let pieces = covered_pieces(blocks);
        if let Some(r) = self.in_doubt(file, object, &pieces)? {
            return Ok(r);
        }
        let applied = self
            .seq
            .apply(&mut self.store, file, object, blocks, data, msn)
            .map_err(|e| io_err(&format!("writing {file} object {object}"), e))?;
        if applied.synchronize {
            self.to_synchronize.push((file, object));
        }
        Ok(Reply::Written {
            bytes: data.len() as u64,
        })
    }

    fn read(&mut self, file: FileId, object: u32, pieces: &[ObjPiece]) -> Result<Reply, WireError> {
        let total = validate_pieces(pieces)?;
        if total > (MAX_FRAME_BYTES / 2) as u64 {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "a read of {total} bytes exceeds the per-request limit of {}",
                    MAX_FRAME_BYTES / 2
                ),
            ));
        }
        if let Some(r) = self.in_doubt(file, object, pieces)? {
            return Ok(r);
        }
        let mut out = Vec::with_capacity(total as usize);
        self.store
            .read(file, object, pieces, &mut out)
            .map_err(|e| io_err(&format!("reading {file} object {object}"), e))?;
        Ok(Reply::Data(Bytes::from(out)))
    }

    fn set_object_size(
        &mut self,
        file: FileId,
        object: u32,
        size: u64,
    ) -> Result<Reply, WireError> {
        if size > atomio_layout::MAX_OFFSET {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("object size {size} passes the largest offset"),
            ));
        }
        if let Some(r) = self.file_in_doubt(file, Some(object))? {
            return Ok(r);
        }
        self.store
            .set_size(file, object, size)
            .map_err(|e| io_err(&format!("resizing {file} object {object}"), e))?;
        Ok(Reply::Done)
    }

    fn punch(
        &mut self,
        file: FileId,
        object: u32,
        ranges: Vec<atomio_layout::ByteRange>,
    ) -> Result<Reply, WireError> {
        if ranges.len() > atomio_proto::limits::MAX_PIECES_PER_REQUEST {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "{} ranges to punch (at most {})",
                    ranges.len(),
                    atomio_proto::limits::MAX_PIECES_PER_REQUEST
                ),
            ));
        }
        for r in ranges {
            let r = r
                .validate()
                .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?;
            self.store
                .punch(file, object, r.start, r.len())
                .map_err(|e| io_err("punching a hole", e))?;
        }
        Ok(Reply::Done)
    }
}

fn no_file(path: &str) -> WireError {
    WireError::new(ErrorCode::NotFound, format!("no file '{path}'"))
}

/// The object bytes `blocks` touch, as sorted disjoint pieces (for the in-doubt check).
fn covered_pieces(blocks: &[atomio_proto::dlm::SnBlock]) -> Vec<ObjPiece> {
    let mut r: Vec<(u64, u64)> = blocks
        .iter()
        .map(|b| (b.offset, b.offset + b.len))
        .collect();
    r.sort_unstable();
    let mut out: Vec<ObjPiece> = Vec::with_capacity(r.len());
    for (s, e) in r {
        match out.last_mut() {
            Some(p) if s <= p.offset + p.len => p.len = p.len.max(e - p.offset),
            _ => out.push(ObjPiece {
                offset: s,
                len: e - s,
            }),
        }
    }
    out
}

/// Ids are derived from paths; exposed for clients that need one without a round trip.
pub fn id_of(path: &str) -> FileId {
    file_id(path)
}
