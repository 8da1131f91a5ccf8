//! Same-host bypass of the servers' data path: a client on the host of the servers it uses
//! moves bytes through their object files (`pwrite`/`pread`) instead of through messages.
//!
//! At open the client asks every server of the file where its objects live (`Locate`); the
//! bypass is used only when every such server keeps them as files and the client reads the
//! same store id in each directory (proof it sees the same file system, not just a same
//! named directory). Locks are taken exactly as before, on the servers; only the bytes take
//! the short way, so clients on other hosts (going through messages) and clients here stay
//! coherent through the page cache of one file — so the bypass is used only where the
//! directory's file system shares pages between processes (`fs_caches::Caches::Shared`,
//! never on NFS or FUSE, whose clients cache privately). Sizes, truncation and removal stay
//! with the servers (they act on the same files). `ATOMIO_LOCAL_BYPASS=0` turns it off.
//!
//! Atomic writes never take this path: they are all-or-nothing, staged at every server and
//! committed at one (`atomio_data::txn`), which object files cannot do. Reads take it
//! unless a server has writes in doubt (its `IN_DOUBT_FILE` exists), which only the
//! servers can resolve.
//!
//! **Invariants:** bytes are written only inside the call's pieces; `sync` fsyncs every
//! object file this client wrote before asking the servers to sync theirs; bytes past an
//! object's end read as zero, as the servers return them.

use crate::direct::io_err;
use atomio_data::{object_file_name, IN_DOUBT_FILE, STORE_ID_FILE};
use atomio_layout::{ByteRange, ServerId};
use atomio_net::data_op::object_chunks;
use atomio_net::{ClusterClient, FileInfo};
use atomio_proto::{Reply, Request, WireError};
use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A server's store directory `dir` as this client sees it, if the bypass may use it: the
/// store id read there is the server's `id` (the same files, not a same-named directory),
/// and every process shares its pages (`fs_caches`: on a file system whose clients cache
/// privately, this client's copy of an object file may be stale).
pub(crate) fn local_store_dir(dir: &str, id: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(dir);
    let found = std::fs::read_to_string(dir.join(STORE_ID_FILE)).ok()?;
    let d = std::fs::File::open(&dir).ok()?;
    (found.trim() == id
        && crate::fs_caches::detect_env(&d).caches == crate::fs_caches::Caches::Shared)
        .then_some(dir)
}

#[derive(Debug)]
pub struct ObjectFiles {
    /// Objects directory of each server of the cluster (None: not local).
    dirs: Vec<Option<PathBuf>>,
    open: HashMap<u32, std::fs::File>,
}

impl ObjectFiles {
    /// Asks the file's servers where their objects are; `Some` when all are reachable here.
    pub async fn locate(c: &mut ClusterClient, info: &FileInfo) -> Option<Self> {
        if std::env::var("ATOMIO_LOCAL_BYPASS").is_ok_and(|v| v == "0") {
            return None;
        }
        let servers = info.layout.servers();
        let calls = servers.iter().map(|&s| (s, Request::Locate)).collect();
        let replies = c.rpc_all(calls).await.ok()?;
        let mut dirs = vec![None; c.servers()];
        for (s, r) in servers.iter().zip(replies) {
            let Reply::Located(Some(lo)) = r else {
                return None;
            };
            *dirs.get_mut(s.0 as usize)? = Some(local_store_dir(&lo.dir, &lo.id)?);
        }
        Some(Self {
            dirs,
            open: HashMap::new(),
        })
    }

    /// Whether a server here has writes in doubt (a vanished writer's staged bytes): reads
    /// must then go through the servers, which resolve them.
    pub fn any_in_doubt(&self) -> bool {
        self.dirs
            .iter()
            .flatten()
            .any(|d| d.join(IN_DOUBT_FILE).exists())
    }

    fn file(
        &mut self,
        info: &FileInfo,
        server: ServerId,
        object: u32,
    ) -> Result<&std::fs::File, WireError> {
        if !self.open.contains_key(&object) {
            let dir = self
                .dirs
                .get(server.0 as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| io_err("locating object", 0, format!("{server} is not local")))?;
            let path = dir.join(object_file_name(info.id(), object));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| io_err(&format!("opening {}", path.display()), 0, e))?;
            self.open.insert(object, f);
        }
        Ok(&self.open[&object])
    }

    pub fn write(
        &mut self,
        info: &FileInfo,
        ranges: impl Iterator<Item = ByteRange>,
        data: &[u8],
    ) -> Result<(), WireError> {
        for c in object_chunks(&info.layout, ranges) {
            let f = self.file(info, c.server, c.object)?;
            if let Some((runs, hull)) = mappable(&c) {
                let dense = crate::mapped::dense(c.bytes as u64, hull.len());
                if crate::mapped::write_runs(
                    f,
                    runs.into_iter(),
                    hull,
                    dense,
                    data,
                    &Default::default(),
                )? {
                    continue;
                }
            }
            for (p, &(at, len)) in c.pieces.iter().zip(&c.spans) {
                f.write_all_at(&data[at..at + len], p.offset)
                    .map_err(|e| io_err("pwrite (object file)", p.offset, e))?;
            }
        }
        Ok(())
    }

    pub fn read(
        &mut self,
        info: &FileInfo,
        ranges: impl Iterator<Item = ByteRange>,
        out: &mut [u8],
    ) -> Result<(), WireError> {
        for c in object_chunks(&info.layout, ranges) {
            let f = self.file(info, c.server, c.object)?;
            for (p, &(at, len)) in c.pieces.iter().zip(&c.spans) {
                let dst = &mut out[at..at + len];
                let mut done = 0;
                while done < len {
                    match f.read_at(&mut dst[done..], p.offset + done as u64) {
                        Ok(0) => {
                            dst[done..].fill(0);
                            break;
                        }
                        Ok(k) => done += k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(io_err("pread (object file)", p.offset, e)),
                    }
                }
            }
        }
        Ok(())
    }

    /// `fdatasync`s every object file this client opened.
    pub fn sync(&self) -> Result<(), WireError> {
        for f in self.open.values() {
            f.sync_data()
                .map_err(|e| io_err("fdatasync (object file)", 0, e))?;
        }
        Ok(())
    }
}

/// A chunk's pieces as mapping runs (object range, offset in the caller's buffer) and their
/// hull, when many small pieces make a mapping cheaper than a `pwrite` each (the rule of
/// `mapped::worth`, as for the user's file in direct placement).
fn mappable(c: &atomio_net::data_op::Chunk) -> Option<(Vec<(ByteRange, usize)>, ByteRange)> {
    if std::env::var("ATOMIO_MMAP").is_ok_and(|v| v == "0") {
        return None;
    }
    let runs: Vec<(ByteRange, usize)> = c
        .pieces
        .iter()
        .zip(&c.spans)
        .map(|(p, &(at, len))| {
            (
                ByteRange {
                    start: p.offset,
                    end: p.offset + len as u64,
                },
                at,
            )
        })
        .collect();
    let start = runs.iter().map(|(r, _)| r.start).min()?;
    let end = runs.iter().map(|(r, _)| r.end).max()?;
    crate::mapped::worth(
        crate::mapped::Way::Write,
        runs.len() as u64,
        c.bytes as u64,
        end - start,
    )
    .then_some((runs, ByteRange { start, end }))
}
