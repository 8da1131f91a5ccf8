//! File operations on a `ClusterClient`: create/open/remove by path, and list I/O of byte
//! ranges, run as a `DataOp` (the sans-IO data plane: pieces per object, one message per
//! object chunk, all sent at once); the call returns when every server has answered. No
//! locking here: atomicity is the caller's (see `atomio-client`).
//!
//! **Invariants:** data order is the ranges' order (increasing file offset); a call either
//! succeeds for every byte or returns an error; ranges are validated before anything is sent.

use crate::client::ClusterClient;
use crate::data_op::DataOp;
use atomio_layout::ServerId;
use atomio_layout::{Access, ByteRange, Layout, RangeList};
use atomio_proto::{metadata_server, ErrorCode, FileId, FileMeta, Reply, Request, WireError};

/// An open file: its metadata and layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub meta: FileMeta,
    pub layout: Layout,
}

impl FileInfo {
    fn new(meta: FileMeta) -> Result<Self, WireError> {
        Ok(Self {
            layout: meta.layout()?,
            meta,
        })
    }

    pub fn id(&self) -> FileId {
        self.meta.file
    }
}

fn need(what: &str, have: usize, want: u64) -> Result<(), WireError> {
    if have as u64 != want {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!("{what} buffer holds {have} bytes but the ranges cover {want}"),
        ));
    }
    Ok(())
}

fn unexpected(what: &str, r: &Reply) -> WireError {
    WireError::new(
        ErrorCode::Internal,
        format!("{what}: unexpected reply {r:?}"),
    )
}

impl ClusterClient {
    /// Creates (or, unless `exclusive`, opens) the file at `path`, striped over
    /// `stripe_count` objects starting at its metadata server.
    pub async fn create(
        &mut self,
        path: &str,
        stripe_size: u64,
        stripe_count: u32,
        exclusive: bool,
    ) -> Result<FileInfo, WireError> {
        let n = self.servers() as u32;
        let meta_server = metadata_server(path, n);
        let layout = Layout::round_robin(stripe_size, stripe_count, n, meta_server.0)?;
        let request = Request::Create {
            path: path.to_string(),
            stripe_size,
            object_servers: layout.object_servers().to_vec(),
            exclusive,
        };
        match self.rpc_all(vec![(meta_server, request)]).await?.pop() {
            Some(Reply::File(meta)) => FileInfo::new(meta),
            Some(other) => Err(unexpected("create", &other)),
            None => Err(unexpected("create", &Reply::Done)),
        }
    }

    /// Opens an existing file.
    pub async fn open(&mut self, path: &str) -> Result<FileInfo, WireError> {
        let meta_server = metadata_server(path, self.servers() as u32);
        match self
            .rpc_all(vec![(
                meta_server,
                Request::Open {
                    path: path.to_string(),
                },
            )])
            .await?
            .pop()
        {
            Some(Reply::File(meta)) => FileInfo::new(meta),
            Some(other) => Err(unexpected("open", &other)),
            None => Err(unexpected("open", &Reply::Done)),
        }
    }

    /// `rpc_all` for changes that take no lock: while a server refuses one because another
    /// client holds a lock on its bytes (mandatory locks), wait and send them all again
    /// (resizes and drops are idempotent).
    async fn rpc_all_patiently(
        &mut self,
        calls: Vec<(ServerId, Request)>,
    ) -> Result<Vec<Reply>, WireError> {
        let mut backoff = crate::patience::LockedBackoff::default();
        loop {
            match self.rpc_all(calls.clone()).await {
                Err(e) if backoff.again(&e).await => continue,
                r => return r,
            }
        }
    }

    /// Deletes the file's objects everywhere, then its metadata.
    pub async fn remove(&mut self, path: &str) -> Result<(), WireError> {
        let info = self.open(path).await?;
        let calls = info
            .layout
            .servers()
            .into_iter()
            .map(|s| (s, Request::DropObjects { file: info.id() }))
            .collect();
        self.rpc_all_patiently(calls).await?;
        let meta_server = metadata_server(path, self.servers() as u32);
        self.rpc_all(vec![(
            meta_server,
            Request::Remove {
                path: path.to_string(),
            },
        )])
        .await?;
        Ok(())
    }

    /// Writes `data` to the bytes of `access`, in offset order.
    pub async fn write(
        &mut self,
        f: &FileInfo,
        access: &Access,
        data: &[u8],
    ) -> Result<(), WireError> {
        need("write", data.len(), access.size())?;
        self.write_ranges(f, access.ranges(), data).await
    }

    /// Writes `data` to explicit ranges, which must be non-empty, increasing and disjoint.
    pub async fn write_list(
        &mut self,
        f: &FileInfo,
        ranges: &[ByteRange],
        data: &[u8],
    ) -> Result<(), WireError> {
        let list = RangeList::from_disjoint_sorted(ranges)?;
        need("write", data.len(), list.total_bytes())?;
        self.write_ranges(f, list.cursor(), data).await
    }

    async fn write_ranges(
        &mut self,
        f: &FileInfo,
        ranges: impl Iterator<Item = ByteRange>,
        data: &[u8],
    ) -> Result<(), WireError> {
        // These writes take no lock: wait out others' (mandatory locks; see `patience`).
        let ranges: Vec<ByteRange> = ranges.collect();
        let mut backoff = crate::patience::LockedBackoff::default();
        loop {
            let mut op = DataOp::write(f.id(), &f.layout, ranges.iter().copied(), data);
            let mut sends = Vec::new();
            op.start(&mut sends);
            match self.run(&mut op, sends).await {
                Err(e) if backoff.again(&e).await => continue,
                r => return r,
            }
        }
    }

    /// Reads the bytes of `access` into `out` (offset order). Reading past the end of the
    /// file is an error (the file size is asked first).
    pub async fn read(
        &mut self,
        f: &FileInfo,
        access: &Access,
        out: &mut [u8],
    ) -> Result<(), WireError> {
        need("read", out.len(), access.size())?;
        if let Some(h) = access.hull() {
            self.check_within_file(f, h).await?;
        }
        self.read_ranges(f, access.ranges(), out).await
    }

    /// Reads explicit ranges (non-empty, increasing, disjoint) into `out`.
    pub async fn read_list(
        &mut self,
        f: &FileInfo,
        ranges: &[ByteRange],
        out: &mut [u8],
    ) -> Result<(), WireError> {
        let list = RangeList::from_disjoint_sorted(ranges)?;
        need("read", out.len(), list.total_bytes())?;
        if let Some(h) = list.hull() {
            self.check_within_file(f, h).await?;
        }
        self.read_ranges(f, list.cursor(), out).await
    }

    async fn check_within_file(&mut self, f: &FileInfo, hull: ByteRange) -> Result<(), WireError> {
        let size = self.size(f).await?;
        if hull.end > size {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "read of {hull} reaches past the end of '{}' ({size} bytes)",
                    f.meta.path
                ),
            ));
        }
        Ok(())
    }

    /// Reads without checking the file size (holes and bytes past the end read as zero).
    pub async fn read_ranges(
        &mut self,
        f: &FileInfo,
        ranges: impl Iterator<Item = ByteRange>,
        out: &mut [u8],
    ) -> Result<(), WireError> {
        let mut op = DataOp::read(f.id(), &f.layout, ranges, out.len());
        let mut sends = Vec::new();
        op.start(&mut sends);
        self.run(&mut op, sends).await?;
        out.copy_from_slice(&op.take_data());
        Ok(())
    }

    /// The file's whole logical contents.
    pub async fn read_all(&mut self, f: &FileInfo) -> Result<Vec<u8>, WireError> {
        let size = self.size(f).await?;
        let mut out = vec![0u8; size as usize];
        if size > 0 {
            self.read_ranges(f, std::iter::once(ByteRange::new(0, size)?), &mut out)
                .await?;
        }
        Ok(out)
    }

    /// Makes everything written to the file durable on every server.
    pub async fn sync(&mut self, f: &FileInfo) -> Result<(), WireError> {
        let calls = f
            .layout
            .servers()
            .into_iter()
            .map(|s| (s, Request::Sync { file: f.id() }))
            .collect();
        self.rpc_all(calls).await.map(|_| ())
    }

    /// Truncates or extends (with zeros) the file to `size` bytes.
    pub async fn set_size(&mut self, f: &FileInfo, size: u64) -> Result<(), WireError> {
        if size > atomio_layout::MAX_OFFSET {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("size {size} is too large"),
            ));
        }
        let calls = (0..f.layout.stripe_count())
            .map(|o| {
                (
                    f.layout.server_of_object(o),
                    Request::SetObjectSize {
                        file: f.id(),
                        object: o,
                        size: f.layout.object_size_for(size, o),
                    },
                )
            })
            .collect();
        self.rpc_all_patiently(calls).await.map(|_| ())
    }

    /// The file's size: one past its last written byte.
    pub async fn size(&mut self, f: &FileInfo) -> Result<u64, WireError> {
        let calls = f
            .layout
            .servers()
            .into_iter()
            .map(|s| (s, Request::ObjectSizes { file: f.id() }))
            .collect();
        let mut size = 0;
        for r in self.rpc_all(calls).await? {
            let Reply::Sizes(objects) = r else {
                return Err(unexpected("size", &r));
            };
            for (object, len) in objects {
                if len > 0 && object < f.layout.stripe_count() {
                    if let Some(end) = f.layout.file_offset(object, len - 1) {
                        size = size.max(end + 1);
                    }
                }
            }
        }
        Ok(size)
    }
}
