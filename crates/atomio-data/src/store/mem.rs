//! `MemStore`: objects, metadata, staged writes and decisions in memory.

use super::*;

/// Objects and metadata in memory.
#[derive(Default)]
pub struct MemStore {
    objects: HashMap<(FileId, u32), Vec<u8>>,
    meta: HashMap<FileId, FileMeta>,
    /// Staged bytes by slot (the process is the failure domain: nothing to recover).
    staged: HashMap<u64, Vec<u8>>,
    next_slot: u64,
    /// The extent log (kept so a service made again on this store, a test's restart,
    /// replays it).
    extent_log: Vec<u8>,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }
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

    fn punch(&mut self, file: FileId, object: u32, offset: u64, len: u64) -> io::Result<()> {
        if let Some(obj) = self.objects.get_mut(&(file, object)) {
            let n = obj.len() as u64;
            let (s, e) = (
                offset.min(n) as usize,
                offset.saturating_add(len).min(n) as usize,
            );
            obj[s..e].fill(0);
        }
        Ok(())
    }

    fn stage(&mut self, _w: &StagedWrite, data: &[u8]) -> io::Result<u64> {
        let slot = self.next_slot;
        self.next_slot += 1;
        self.staged.insert(slot, data.to_vec());
        Ok(slot)
    }

    fn apply_staged(&mut self, slot: u64, w: &StagedWrite) -> io::Result<()> {
        let data = self.staged.get(&slot).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("nothing staged in slot {slot}"),
            )
        })?;
        self.write(w.file, w.object, &w.pieces, &data)
    }

    fn unstage(&mut self, slot: u64) -> io::Result<()> {
        self.staged.remove(&slot);
        Ok(())
    }

    fn log_decision(&mut self, _record: DecisionRecord) -> io::Result<()> {
        Ok(())
    }

    fn rewrite_decisions(&mut self, _live: &[(TxnId, bool)]) -> io::Result<()> {
        Ok(())
    }

    fn take_recovered(&mut self) -> Recovered {
        Recovered {
            extent_log: self.extent_log.clone(),
            ..Recovered::default()
        }
    }

    fn log_extents(&mut self, records: &[u8]) -> io::Result<()> {
        self.extent_log.extend_from_slice(records);
        Ok(())
    }

    fn rewrite_extent_log(&mut self, records: &[u8]) -> io::Result<()> {
        self.extent_log = records.to_vec();
        Ok(())
    }
}
