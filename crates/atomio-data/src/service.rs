//! The data service: answers metadata and object-I/O requests from an `ObjectStore`.
//! A state machine like the lock server (request in, reply out), so the same code serves
//! embedded, TCP and simulated clusters.
//!
//! **Fencing:** a client whose lease lapsed at this server's lock service is `fence`d here
//! *before* its locks are released; from then on every data request it sends is refused
//! (`LeaseExpired`). Requests it sent earlier were applied while it still held its locks.
//!
//! **Invariants:** every request is validated before it touches the store; every store error
//! becomes an `Io` error reply naming the operation; the service never panics on input; no
//! request of a fenced client reaches the store.

use crate::store::ObjectStore;
use atomio_layout::Layout;
use atomio_proto::data::{file_id, validate_path, validate_pieces, Bytes};
use atomio_proto::limits::MAX_FRAME_BYTES;
use atomio_proto::{ClientId, ErrorCode, FileId, FileMeta, Reply, Request, WireError};
use std::collections::HashSet;

pub struct DataService<S: ObjectStore> {
    store: S,
    fenced: HashSet<ClientId>,
}

fn io_err(what: &str, e: std::io::Error) -> WireError {
    WireError::new(ErrorCode::Io, format!("{what}: {e}"))
}

impl<S: ObjectStore> DataService<S> {
    pub fn new(store: S) -> Self {
        Self {
            store,
            fenced: HashSet::new(),
        }
    }

    /// Refuses every later request of `client` (its lease lapsed; its locks are about to
    /// be released).
    pub fn fence(&mut self, client: ClientId) {
        self.fenced.insert(client);
    }

    /// `client` disconnected: forget it.
    pub fn forget(&mut self, client: ClientId) {
        self.fenced.remove(&client);
    }

    /// `handle` for a request from `client`: refused if `client` is fenced.
    pub fn handle_from(&mut self, client: ClientId, request: Request) -> Reply {
        if self.fenced.contains(&client) {
            return Reply::Error(WireError::new(
                ErrorCode::LeaseExpired,
                "refused: this client's lease lapsed and its locks were released (fenced)",
            ));
        }
        self.handle(request)
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
                | Request::Read { .. }
                | Request::Sync { .. }
                | Request::ObjectSizes { .. }
                | Request::SetObjectSize { .. }
                | Request::Locate
        )
    }

    pub fn handle(&mut self, request: Request) -> Reply {
        match self.answer(request) {
            Ok(r) => r,
            Err(e) => Reply::Error(e),
        }
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

    fn answer(&mut self, request: Request) -> Result<Reply, WireError> {
        match request {
            Request::Create {
                path,
                stripe_size,
                object_servers,
                exclusive,
            } => {
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
            Request::Open { path } => match self.lookup(&path)? {
                Some(m) => Ok(Reply::File(m)),
                None => Err(WireError::new(
                    ErrorCode::NotFound,
                    format!("no file '{path}'"),
                )),
            },
            Request::Remove { path } => match self.lookup(&path)? {
                Some(m) => {
                    self.store
                        .remove_meta(m.file)
                        .map_err(|e| io_err("removing metadata", e))?;
                    Ok(Reply::Done)
                }
                None => Err(WireError::new(
                    ErrorCode::NotFound,
                    format!("no file '{path}'"),
                )),
            },
            Request::DropObjects { file } => {
                self.store
                    .drop_objects(file)
                    .map_err(|e| io_err("dropping objects", e))?;
                Ok(Reply::Done)
            }
            Request::Write {
                file,
                object,
                pieces,
                data,
            } => {
                let total = validate_pieces(&pieces)?;
                if total != data.len() as u64 {
                    return Err(WireError::new(
                        ErrorCode::InvalidArgument,
                        format!(
                            "pieces cover {total} bytes but {} bytes came with them",
                            data.len()
                        ),
                    ));
                }
                self.store
                    .write(file, object, &pieces, &data)
                    .map_err(|e| io_err(&format!("writing {file} object {object}"), e))?;
                Ok(Reply::Written { bytes: total })
            }
            Request::Read {
                file,
                object,
                pieces,
            } => {
                let total = validate_pieces(&pieces)?;
                if total > (MAX_FRAME_BYTES / 2) as u64 {
                    return Err(WireError::new(
                        ErrorCode::LimitExceeded,
                        format!(
                            "a read of {total} bytes exceeds the per-request limit of {}",
                            MAX_FRAME_BYTES / 2
                        ),
                    ));
                }
                let mut out = Vec::with_capacity(total as usize);
                self.store
                    .read(file, object, &pieces, &mut out)
                    .map_err(|e| io_err(&format!("reading {file} object {object}"), e))?;
                Ok(Reply::Data(Bytes::from(out)))
            }
            Request::Sync { file } => {
                self.store
                    .sync(file)
                    .map_err(|e| io_err(&format!("syncing {file}"), e))?;
                Ok(Reply::Done)
            }
            Request::SetObjectSize { file, object, size } => {
                if size > atomio_layout::MAX_OFFSET {
                    return Err(WireError::new(
                        ErrorCode::InvalidArgument,
                        format!("object size {size} passes the largest offset"),
                    ));
                }
                self.store
                    .set_size(file, object, size)
                    .map_err(|e| io_err(&format!("resizing {file} object {object}"), e))?;
                Ok(Reply::Done)
            }
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
}

/// Ids are derived from paths; exposed for clients that need one without a round trip.
pub fn id_of(path: &str) -> FileId {
    file_id(path)
}
