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
//! **Invariants:** reading a byte never written (a hole, or past an object's end) yields
//! zero; pieces are applied in order; a store never panics on I/O errors, it returns them.

use atomio_proto::{FileId, FileMeta, ObjPiece};
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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
    /// The directory of object files (named by `object_file_name`) and the store's id, for
    /// clients on the same host; `None` when objects are not files.
    fn local(&self) -> Option<(PathBuf, String)> {
        None
    }
}

/// The name of an object's file in a `FileStore`'s objects directory.
pub fn object_file_name(file: FileId, object: u32) -> String {
    format!("{:016x}.{object}", file.0)
}

/// The file in a `FileStore`'s objects directory that holds the store's id.
pub const STORE_ID_FILE: &str = ".atomio-store-id";

/// Objects and metadata in memory.
#[derive(Default)]
pub struct MemStore {
    objects: HashMap<(FileId, u32), Vec<u8>>,
    meta: HashMap<FileId, FileMeta>,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }
}

fn too_big(what: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("offset {what} does not fit in memory"),
    )
}

impl ObjectStore for MemStore {
    fn put_meta(&mut self, meta: &FileMeta) -> io::Result<()> {
        self.meta.insert(meta.file, meta.clone());
        Ok(())
    }

    fn get_meta(&mut self, file: FileId) -> io::Result<Option<FileMeta>> {
        Ok(self.meta.get(&file).cloned())
    }

    fn remove_meta(&mut self, file: FileId) -> io::Result<bool> {
        Ok(self.meta.remove(&file).is_some())
    }

    fn write(
        &mut self,
        file: FileId,
        object: u32,
        pieces: &[ObjPiece],
        data: &[u8],
    ) -> io::Result<()> {
        let obj = self.objects.entry((file, object)).or_default();
        let mut at = 0usize;
        for p in pieces {
            let start = usize::try_from(p.offset).map_err(|_| too_big(p.offset))?;
            let len = usize::try_from(p.len).map_err(|_| too_big(p.len))?;
            let end = start.checked_add(len).ok_or_else(|| too_big(p.offset))?;
            if end > obj.len() {
                obj.resize(end, 0);
            }
            obj[start..end].copy_from_slice(&data[at..at + len]);
            at += len;
        }
        Ok(())
    }

    fn read(
        &mut self,
        file: FileId,
        object: u32,
        pieces: &[ObjPiece],
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        let empty = Vec::new();
        let obj = self.objects.get(&(file, object)).unwrap_or(&empty);
        for p in pieces {
            let start = usize::try_from(p.offset).unwrap_or(usize::MAX);
            let len = usize::try_from(p.len).map_err(|_| too_big(p.len))?;
            let have = obj.len().saturating_sub(start).min(len);
            if have > 0 {
                out.extend_from_slice(&obj[start..start + have]);
            }
            out.resize(out.len() + (len - have), 0);
        }
        Ok(())
    }

    fn sync(&mut self, _file: FileId) -> io::Result<()> {
        Ok(())
    }

    fn sizes(&mut self, file: FileId) -> io::Result<Vec<(u32, u64)>> {
        let mut v: Vec<(u32, u64)> = self
            .objects
            .iter()
            .filter(|((f, _), _)| *f == file)
            .map(|((_, o), b)| (*o, b.len() as u64))
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    fn drop_objects(&mut self, file: FileId) -> io::Result<()> {
        self.objects.retain(|(f, _), _| *f != file);
        Ok(())
    }

    fn set_size(&mut self, file: FileId, object: u32, size: u64) -> io::Result<()> {
        let size = usize::try_from(size).map_err(|_| too_big(size))?;
        let obj = self.objects.entry((file, object)).or_default();
        obj.resize(size, 0);
        Ok(())
    }
}

/// Most object files kept open at once.
const MAX_OPEN_OBJECTS: usize = 256;

/// Objects as local files.
pub struct FileStore {
    objects_dir: PathBuf,
    meta_dir: PathBuf,
    /// Written to `objects/.atomio-store-id`; a client reading the same id there shares
    /// this store's file system.
    id: String,
    open: HashMap<(FileId, u32), File>,
    dirty: HashSet<(FileId, u32)>,
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
        Ok(Self {
            objects_dir,
            meta_dir,
            id,
            open: HashMap::new(),
            dirty: HashSet::new(),
            _owner: owner,
        })
    }

    fn object_path(&self, file: FileId, object: u32) -> PathBuf {
        self.objects_dir.join(object_file_name(file, object))
    }

    fn meta_path(&self, file: FileId) -> PathBuf {
        self.meta_dir.join(format!("{:016x}.json", file.0))
    }

    /// The open handle of an object, creating the file when `create`.
    fn handle(&mut self, file: FileId, object: u32, create: bool) -> io::Result<Option<&File>> {
        if !self.open.contains_key(&(file, object)) {
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
            if self.open.len() >= MAX_OPEN_OBJECTS {
                // Evict a clean handle if there is one; dirty ones stay until synced.
                let victim = self.open.keys().find(|k| !self.dirty.contains(k)).copied();
                if let Some(k) = victim {
                    self.open.remove(&k);
                }
            }
            self.open.insert((file, object), f);
        }
        Ok(self.open.get(&(file, object)))
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

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl ObjectStore for FileStore {
    fn local(&self) -> Option<(PathBuf, String)> {
        Some((self.objects_dir.clone(), self.id.clone()))
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

    fn drop_objects(&mut self, file: FileId) -> io::Result<()> {
        self.open.retain(|(f, _), _| *f != file);
        self.dirty.retain(|(f, _)| *f != file);
        for (_, p) in self.objects_of(file)? {
            fs::remove_file(p)?;
        }
        Ok(())
    }
}
