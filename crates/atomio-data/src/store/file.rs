//! `FileStore`: objects as local files, metadata records, the staging pool and the decision
//! log on disk (see the parent module for the layout and what survives a crash).

use super::*;

/// Most object files kept open at once (a cache: see `FileStore::handle`).
pub const MAX_OPEN_OBJECTS: usize = 256;

/// Objects as local files.
pub struct FileStore {
    objects_dir: PathBuf,
    meta_dir: PathBuf,
    /// Written to `objects/.atomio-store-id`; a client reading the same id there shares
    /// this store's file system.
    id: String,
    open: HashMap<(FileId, u32), File>,
    dirty: HashSet<(FileId, u32)>,
    staging_dir: PathBuf,
    /// Staging files not in use (their length word is 0), reused so staging writes into
    /// page-cache pages already allocated instead of creating and unlinking a file per
    /// message (7× cheaper per MiB here); open handles of staging files; the next new slot.
    free_slots: Vec<u64>,
    staging_files: HashMap<u64, File>,
    next_slot: u64,
    /// The decision log, opened for appending.
    decisions: File,
    decisions_path: PathBuf,
    /// SeqDLM's extent log (`<dir>/extents.log`), opened for appending.
    extents: File,
    extents_path: PathBuf,
    /// Versioning's boards and node logs (`version_board`): their directory (`None`: it
    /// could not be made; none are kept), and the files opened, by file.
    versions_dir: Option<PathBuf>,
    boards: HashMap<FileId, File>,
    node_logs: HashMap<FileId, File>,
    /// What `open` found, until the data service takes it.
    recovered: Option<Recovered>,
    /// Holds an exclusive lock on `<dir>/.atomio-server.lock` while the store lives: two
    /// servers on one directory would overwrite each other's objects.
    _owner: File,
}

/// The file in a `FileStore`'s directory that its server holds locked.
pub const OWNER_LOCK_FILE: &str = ".atomio-server.lock";

impl FileStore {
    /// Uses (and creates) `<dir>/objects` and `<dir>/meta`.
    /// Opens (or creates) the store in `dir`; fails if another live store (another server,
    /// in this process or another) has it open.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let objects_dir = dir.join("objects");
        let meta_dir = dir.join("meta");
        fs::create_dir_all(&objects_dir)?;
        fs::create_dir_all(&meta_dir)?;
        let owner = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(OWNER_LOCK_FILE))?;
        match owner.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "{} is in use by another atomio server (one server per data directory)",
                        dir.display()
                    ),
                ))
            }
            Err(fs::TryLockError::Error(e)) => return Err(e),
        }
        let id_path = objects_dir.join(STORE_ID_FILE);
        let id = match fs::read_to_string(&id_path) {
            Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
            _ => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                let id = format!(
                    "{nanos:x}-{:x}-{}",
                    std::process::id(),
                    objects_dir.display()
                );
                fs::write(&id_path, &id)?;
                id
            }
        };
        // Boards and node logs describe the last server's versions, which died with it.
        let versions_dir = open_versions_dir(&objects_dir, &id)?;
        let staging_dir = dir.join("staging");
        fs::create_dir_all(&staging_dir)?;
        let decisions_path = dir.join("decisions.log");
        let (staged, free_slots) = recover_staged(&staging_dir)?;
        let next_slot = staged
            .iter()
            .map(|(slot, _)| *slot)
            .chain(free_slots.iter().copied())
            .max()
            .map_or(0, |m| m + 1);
        let extents_path = dir.join("extents.log");
        let extent_log = match fs::read(&extents_path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        // A torn tail (a record cut by a crash) goes, so appends start on a boundary.
        let whole = crate::extent_log::replay(&extent_log).whole;
        if whole < extent_log.len() {
            OpenOptions::new()
                .write(true)
                .open(&extents_path)?
                .set_len(whole as u64)?;
        }
        let extents = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&extents_path)?;
        let recovered = Recovered {
            staged,
            decisions: recover_decisions(&decisions_path)?,
            extent_log: extent_log[..whole].to_vec(),
        };
        let decisions = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&decisions_path)?;
        Ok(Self {
            objects_dir,
            meta_dir,
            id,
            open: HashMap::new(),
            dirty: HashSet::new(),
            staging_dir,
            free_slots,
            staging_files: HashMap::new(),
            next_slot,
            decisions,
            decisions_path,
            extents,
            extents_path,
            versions_dir,
            boards: HashMap::new(),
            node_logs: HashMap::new(),
            recovered: Some(recovered),
            _owner: owner,
        })
    }

    fn staged_path(&self, slot: u64) -> PathBuf {
        self.staging_dir.join(format!("{slot:016x}.stage"))
    }

    /// Reserves the blocks `pieces` will need in the object without changing its size.
    fn reserve(&mut self, file: FileId, object: u32, pieces: &[ObjPiece]) -> io::Result<()> {
        use nix::fcntl::{fallocate, FallocateFlags};
        use std::os::fd::AsRawFd;
        let (Some(first), Some(last)) = (pieces.first(), pieces.last()) else {
            return Ok(());
        };
        let total: u64 = pieces.iter().map(|p| p.len).sum();
        let hull = (first.offset, last.offset + last.len);
        // One call over the hull when the pieces are dense; else one per piece (a sparse
        // hull would allocate its holes).
        let ranges: Vec<(u64, u64)> = if hull.1 - hull.0 <= total.saturating_mul(4) {
            vec![hull]
        } else {
            pieces
                .iter()
                .map(|p| (p.offset, p.offset + p.len))
                .collect()
        };
        let fd = self
            .handle(file, object, true)?
            .expect("created")
            .as_raw_fd();
        for (start, end) in ranges {
            match fallocate(
                fd,
                FallocateFlags::FALLOC_FL_KEEP_SIZE,
                start as i64,
                (end - start) as i64,
            ) {
                Ok(()) => {}
                // A file system without fallocate: applying may still run out of space.
                Err(nix::errno::Errno::EOPNOTSUPP) => return Ok(()),
                Err(e) => return Err(io::Error::from(e)),
            }
        }
        Ok(())
    }
}

impl FileStore {
    fn object_path(&self, file: FileId, object: u32) -> PathBuf {
        self.objects_dir.join(object_file_name(file, object))
    }

    fn meta_path(&self, file: FileId) -> PathBuf {
        self.meta_dir.join(format!("{:016x}.json", file.0))
    }

    /// The open handle of an object, creating the file when `create`. At most
    /// `MAX_OPEN_OBJECTS` are open: past it a clean handle is closed, or else a dirty one is
    /// synced (`fdatasync`: what a later `sync` would have done for it) and closed, so no
    /// sequence of requests runs the server out of descriptors (20,100 writes to distinct
    /// objects without a sync used to keep 20,100 open and then fail everything, `Sync`
    /// included, with `EMFILE`).
    fn handle(&mut self, file: FileId, object: u32, create: bool) -> io::Result<Option<&File>> {
        if !self.open.contains_key(&(file, object)) {
            if self.open.len() >= MAX_OPEN_OBJECTS {
                self.evict_one()?;
            }
            let path = self.object_path(file, object);
            let f = match OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if !create && e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            self.open.insert((file, object), f);
        }
        Ok(self.open.get(&(file, object)))
    }

    /// Closes one open object handle: a clean one if any, else a dirty one once its bytes
    /// are durable (a failed sync keeps it open and dirty, and is the caller's error).
    fn evict_one(&mut self) -> io::Result<()> {
        let clean = self.open.keys().find(|k| !self.dirty.contains(k)).copied();
        let victim = match clean {
            Some(k) => k,
            None => {
                let Some((&k, f)) = self.open.iter().next() else {
                    return Ok(());
                };
                f.sync_data()?;
                self.dirty.remove(&k);
                k
            }
        };
        self.open.remove(&victim);
        Ok(())
    }

    /// Object handles open now (bounded by `MAX_OPEN_OBJECTS`).
    pub fn open_handles(&self) -> usize {
        self.open.len()
    }

    fn objects_of(&self, file: FileId) -> io::Result<Vec<(u32, PathBuf)>> {
        let prefix = format!("{:016x}.", file.0);
        let mut v = Vec::new();
        for entry in fs::read_dir(&self.objects_dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(o) = name
                .strip_prefix(&prefix)
                .and_then(|s| s.parse::<u32>().ok())
            {
                v.push((o, entry.path()));
            }
        }
        v.sort_unstable();
        Ok(v)
    }
}

impl Drop for FileStore {
    /// Versioning's boards and node logs die with the server (they live in memory).
    fn drop(&mut self) {
        if let Some(dir) = &self.versions_dir {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

impl ObjectStore for FileStore {
    fn local(&self) -> Option<(PathBuf, String)> {
        Some((self.objects_dir.clone(), self.id.clone()))
    }

    fn keeps_version_files(&self) -> bool {
        self.versions_dir.is_some()
    }

    fn write_board(&mut self, file: FileId, board: &[u8]) -> io::Result<()> {
        let Some(dir) = &self.versions_dir else {
            return Ok(());
        };
        let f = match self.boards.entry(file) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(crate::version_board::board_path(dir, file))?,
            ),
        };
        // In place, one `pwrite`: readers check the board's checksum and read it again.
        f.write_all_at(board, 0)
    }

    fn remove_board(&mut self, file: FileId) -> io::Result<()> {
        self.boards.remove(&file);
        let Some(dir) = &self.versions_dir else {
            return Ok(());
        };
        match fs::remove_file(crate::version_board::board_path(dir, file)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn append_node_log(&mut self, file: FileId, records: &[u8]) -> io::Result<()> {
        let Some(dir) = &self.versions_dir else {
            return Ok(());
        };
        let log = match self.node_logs.entry(file) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(crate::version_board::node_log_path(dir, file))?,
            ),
        };
        io::Write::write_all(log, records)
    }

    fn rewrite_node_log(&mut self, file: FileId, records: &[u8]) -> io::Result<()> {
        // A new file renamed over the old: a reader that has the old one open finds a new
        // inode at its next pull and reads the new log from its start.
        self.node_logs.remove(&file);
        let Some(dir) = &self.versions_dir else {
            return Ok(());
        };
        let path = crate::version_board::node_log_path(dir, file);
        let tmp = path.with_extension("nodes.tmp");
        fs::write(&tmp, records)?;
        fs::rename(&tmp, &path)
    }

    fn put_meta(&mut self, meta: &FileMeta) -> io::Result<()> {
        let path = self.meta_path(meta.file);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_vec(&serde_json::json!({
            "file": meta.file.0,
            "path": meta.path,
            "stripe_size": meta.stripe_size,
            "object_servers": meta.object_servers.iter().map(|s| s.0).collect::<Vec<_>>(),
        }))
        .map_err(io::Error::other)?;
        {
            let f = File::create(&tmp)?;
            f.write_all_at(&text, 0)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        sync_dir(&self.meta_dir)
    }

    fn get_meta(&mut self, file: FileId) -> io::Result<Option<FileMeta>> {
        let text = match fs::read(self.meta_path(file)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let v: serde_json::Value = serde_json::from_slice(&text).map_err(io::Error::other)?;
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("corrupt metadata record for {file}"),
            )
        };
        Ok(Some(FileMeta {
            file: FileId(v["file"].as_u64().ok_or_else(bad)?),
            path: v["path"].as_str().ok_or_else(bad)?.to_string(),
            stripe_size: v["stripe_size"].as_u64().ok_or_else(bad)?,
            object_servers: v["object_servers"]
                .as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|s| {
                    s.as_u64()
                        .map(|s| atomio_layout::ServerId(s as u32))
                        .ok_or_else(bad)
                })
                .collect::<io::Result<_>>()?,
        }))
    }

    fn remove_meta(&mut self, file: FileId) -> io::Result<bool> {
        match fs::remove_file(self.meta_path(file)) {
            Ok(()) => sync_dir(&self.meta_dir).map(|_| true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn write(
        &mut self,
        file: FileId,
        object: u32,
        pieces: &[ObjPiece],
        data: &[u8],
    ) -> io::Result<()> {
        let f = self.handle(file, object, true)?.expect("created");
        let mut at = 0usize;
        for p in pieces {
            let len = p.len as usize;
            f.write_all_at(&data[at..at + len], p.offset)?;
            at += len;
        }
        self.dirty.insert((file, object));
        Ok(())
    }

    fn read(
        &mut self,
        file: FileId,
        object: u32,
        pieces: &[ObjPiece],
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        let Some(f) = self.handle(file, object, false)? else {
            let total: u64 = pieces.iter().map(|p| p.len).sum();
            out.resize(out.len() + total as usize, 0);
            return Ok(());
        };
        for p in pieces {
            let start = out.len();
            out.resize(start + p.len as usize, 0);
            let buf = &mut out[start..];
            let mut done = 0;
            while done < buf.len() {
                match f.read_at(&mut buf[done..], p.offset + done as u64) {
                    Ok(0) => break, // past the end: the rest stays zero
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    fn sync(&mut self, file: FileId) -> io::Result<()> {
        let mine: Vec<(FileId, u32)> = self
            .dirty
            .iter()
            .filter(|(f, _)| *f == file)
            .copied()
            .collect();
        for k in mine {
            if let Some(f) = self.handle(k.0, k.1, false)? {
                f.sync_data()?;
            }
            self.dirty.remove(&k);
        }
        // Commit records must be as durable as the bytes they let others apply; extent
        // records as durable as the bytes they describe.
        self.decisions.sync_data()?;
        self.extents.sync_data()?;
        sync_dir(&self.objects_dir)
    }

    fn sizes(&mut self, file: FileId) -> io::Result<Vec<(u32, u64)>> {
        self.objects_of(file)?
            .into_iter()
            .map(|(o, p)| Ok((o, fs::metadata(p)?.len())))
            .collect()
    }

    fn set_size(&mut self, file: FileId, object: u32, size: u64) -> io::Result<()> {
        let f = self.handle(file, object, true)?.expect("created");
        f.set_len(size)?;
        self.dirty.insert((file, object));
        Ok(())
    }

    fn punch(&mut self, file: FileId, object: u32, offset: u64, len: u64) -> io::Result<()> {
        use nix::fcntl::{fallocate, FallocateFlags};
        let Some(f) = self.handle(file, object, false)? else {
            return Ok(());
        };
        let (off, len) = (
            i64::try_from(offset).map_err(|_| too_big(offset))?,
            i64::try_from(len).map_err(|_| too_big(len))?,
        );
        let flags = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
        fallocate(std::os::fd::AsRawFd::as_raw_fd(f), flags, off, len).map_err(io::Error::from)?;
        Ok(())
    }

    fn drop_objects(&mut self, file: FileId) -> io::Result<()> {
        self.open.retain(|(f, _), _| *f != file);
        self.dirty.retain(|(f, _)| *f != file);
        for (_, p) in self.objects_of(file)? {
            fs::remove_file(p)?;
        }
        Ok(())
    }

    fn stage(&mut self, w: &StagedWrite, data: &[u8]) -> io::Result<u64> {
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.next_slot += 1;
                self.next_slot - 1
            }
        };
        let done = self.stage_into(slot, w, data);
        if done.is_err() {
            // Whatever was written stays invisible: the length word was not.
            self.free_slot(slot);
        }
        done.map(|()| slot)
    }

    fn apply_staged(&mut self, slot: u64, w: &StagedWrite) -> io::Result<()> {
        // The caller has the header; only where the data start is needed.
        let staged = self.staging_file(slot, false)?;
        let mut len = [0u8; 4];
        staged.read_exact_at(&mut len, 0)?;
        let data_at = match u32::from_le_bytes(len) {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("staging slot {slot} is free"),
                ))
            }
            n => 4 + u64::from(n),
        };
        let out = self.handle(w.file, w.object, true)?.expect("created");
        let mut from = data_at as i64;
        for p in &w.pieces {
            let mut to = p.offset as i64;
            let mut left = p.len as usize;
            while left > 0 {
                let n =
                    nix::fcntl::copy_file_range(&staged, Some(&mut from), out, Some(&mut to), left)
                        .map_err(io::Error::from)?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("staged write {slot} is shorter than its pieces"),
                    ));
                }
                left -= n;
            }
        }
        self.dirty.insert((w.file, w.object));
        Ok(())
    }

    fn unstage(&mut self, slot: u64) -> io::Result<()> {
        let f = self.staging_file(slot, false)?;
        f.write_all_at(&[0; 4], 0)?;
        self.free_slot(slot);
        Ok(())
    }

    fn log_decision(&mut self, record: DecisionRecord) -> io::Result<()> {
        use std::io::Write;
        self.decisions.write_all(&encode_decision(record))
    }

    fn rewrite_decisions(&mut self, live: &[(TxnId, bool)]) -> io::Result<()> {
        let tmp = self.decisions_path.with_extension("log.tmp");
        let mut bytes = Vec::with_capacity(live.len() * DECISION_BYTES);
        for &(t, committed) in live {
            bytes.extend_from_slice(&encode_decision(DecisionRecord::of(t, committed)));
        }
        fs::write(&tmp, &bytes)?;
        fs::rename(&tmp, &self.decisions_path)?;
        self.decisions = OpenOptions::new().append(true).open(&self.decisions_path)?;
        Ok(())
    }

    fn take_recovered(&mut self) -> Recovered {
        self.recovered.take().unwrap_or_default()
    }

    fn log_extents(&mut self, records: &[u8]) -> io::Result<()> {
        use std::io::Write;
        self.extents.write_all(records)
    }

    fn rewrite_extent_log(&mut self, records: &[u8]) -> io::Result<()> {
        let tmp = self.extents_path.with_extension("log.tmp");
        fs::write(&tmp, records)?;
        File::open(&tmp)?.sync_data()?;
        fs::rename(&tmp, &self.extents_path)?;
        self.extents = OpenOptions::new().append(true).open(&self.extents_path)?;
        Ok(())
    }

    fn set_in_doubt(&mut self, any: bool) -> io::Result<()> {
        let path = self.objects_dir.join(IN_DOUBT_FILE);
        if any {
            fs::write(path, b"")
        } else {
            match fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        }
    }
}

/// Free staging files kept for reuse; more are deleted.
const MAX_FREE_STAGING_FILES: usize = 256;
/// A free staging file larger than this is deleted rather than kept (one message's record
/// is at most about a MiB; a larger one came in a frame of its own).
const MAX_POOLED_STAGING_BYTES: u64 = 4 << 20;

impl FileStore {
    /// The staging file of `slot` (an open handle is kept for the pool's files).
    fn staging_file(&mut self, slot: u64, create: bool) -> io::Result<File> {
        if let Some(f) = self.staging_files.get(&slot) {
            return f.try_clone();
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(self.staged_path(slot))?;
        if self.staging_files.len() < MAX_FREE_STAGING_FILES + 64 {
            self.staging_files.insert(slot, f.try_clone()?);
        }
        Ok(f)
    }

    /// Returns a slot to the pool (or deletes its file).
    fn free_slot(&mut self, slot: u64) {
        let big = self
            .staging_files
            .get(&slot)
            .and_then(|f| f.metadata().ok())
            .is_none_or(|m| m.len() > MAX_POOLED_STAGING_BYTES);
        if big || self.free_slots.len() >= MAX_FREE_STAGING_FILES {
            self.staging_files.remove(&slot);
            if let Err(e) = fs::remove_file(self.staged_path(slot)) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!("removing staging slot {slot}: {e}");
                }
            }
        } else {
            self.free_slots.push(slot);
        }
    }

    /// Writes a staged record: data and header first, the length word last.
    fn stage_into(&mut self, slot: u64, w: &StagedWrite, data: &[u8]) -> io::Result<()> {
        self.reserve(w.file, w.object, &w.pieces)?;
        let header = postcard::to_stdvec(w).map_err(io::Error::other)?;
        let f = self.staging_file(slot, true)?;
        let data_at = 4 + header.len() as u64;
        f.write_all_at(&header, 4)?;
        f.write_all_at(data, data_at)?;
        f.write_all_at(&(header.len() as u32).to_le_bytes(), 0)
    }
}

#[cfg(test)]
mod handle_cache_tests {
    use super::*;

    /// Writes to many more objects than handles may be open, none synced: the handles stay
    /// within `MAX_OPEN_OBJECTS` (dirty ones synced and closed), every `sync` works and
    /// every byte reads back.
    #[test]
    fn dirty_handles_are_synced_and_closed_under_pressure() {
        let dir = std::env::temp_dir().join(format!("atomio-store-fds-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut store = FileStore::open(&dir).unwrap();
        let n = 3 * MAX_OPEN_OBJECTS as u64;
        let one = [ObjPiece { offset: 7, len: 1 }];
        for i in 0..n {
            store.write(FileId(i), 0, &one, &[i as u8]).unwrap();
            assert!(store.open_handles() <= MAX_OPEN_OBJECTS);
        }
        for i in 0..n {
            store.sync(FileId(i)).unwrap();
            let mut out = Vec::new();
            store.read(FileId(i), 0, &one, &mut out).unwrap();
            assert_eq!(out, [i as u8], "object of file {i}");
        }
        assert!(store.dirty.is_empty());
        assert!(store.open_handles() <= MAX_OPEN_OBJECTS);
        drop(store);
        let _ = fs::remove_dir_all(&dir);
    }
}
