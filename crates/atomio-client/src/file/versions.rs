//! `File`'s versioning (Tran et al.): the versioned store opened at first use, snapshot
//! reads, listing and collection, and the materialization of the newest snapshot into a
//! file's base.
//!
//! **Invariants:** a file's versioned store is opened once, with the geometry and retention
//! set before its first versioning call; materialization writes only the runs that are not
//! already the base, then makes that snapshot the base.

use super::*;

impl File {
    /// The chunk size and fan-out of the file's versions, if this client makes them (before
    /// the first versioning call; default `Geometry::default()` or `ATOMIO_VERSION_CHUNK`).
    pub fn set_version_geometry(&mut self, g: atomio_version::Geometry) {
        self.version_geometry = Some(g);
    }

    /// Versioned writes keep at most `keep_last` published snapshots stored: a write
    /// collects the older ones itself first when no collector has (see
    /// `VersionedFile::set_retention`). `None` (the default): unbounded.
    pub fn set_version_retention(&mut self, keep_last: Option<u64>) {
        self.version_retention = keep_last;
        if let Some(v) = self.versioned.as_mut() {
            v.set_retention(keep_last);
        }
    }

    /// The file's versioned store, opened at first use.
    pub(super) async fn versions(
        &mut self,
        c: &mut ClusterClient,
    ) -> Result<&mut crate::versioned::VersionedFile, WireError> {
        if self.versioned.is_none() {
            let (id, name) = match &self.placement {
                Placement::Servers(info) => (info.id(), info.meta.path.clone()),
                Placement::Direct(d) => (d.lock_id(), d.lock_key().to_string()),
            };
            use crate::versioned::VersionedFile;
            let mut v = match self.version_geometry {
                Some(g) => VersionedFile::open(c, id, &name, Some(g)).await?,
                // Not chosen here: the file's own, or the default for a new one.
                None => match VersionedFile::open(c, id, &name, None).await {
                    Err(e) if e.code == ErrorCode::NotFound => {
                        let g = version_geometry_from_env()?;
                        VersionedFile::open(c, id, &name, Some(g)).await?
                    }
                    r => r?,
                },
            };
            v.set_retention(self.version_retention);
            self.versioned = Some(v);
        }
        Ok(self.versioned.as_mut().expect("opened above"))
    }

    /// Negative control for tests: this client's versions are built without forward
    /// references to in-flight writers (overlapping concurrent writes then tear).
    pub async fn ignore_version_hints_unsafely(
        &mut self,
        c: &mut ClusterClient,
    ) -> Result<(), WireError> {
        self.versions(c).await?.ignore_hints_unsafely();
        Ok(())
    }

    /// Whether versioned reads use the boards and node logs of servers on this host
    /// (default on; see `atomio_data::version_board`).
    pub async fn use_version_boards(
        &mut self,
        c: &mut ClusterClient,
        on: bool,
    ) -> Result<(), WireError> {
        self.versions(c).await?.use_boards(on);
        Ok(())
    }

    /// Whether a reader of the newest snapshot on the servers' host follows their node logs
    /// in a background thread (default on; see `node_logs`).
    pub async fn use_node_follower(
        &mut self,
        c: &mut ClusterClient,
        on: bool,
    ) -> Result<(), WireError> {
        self.versions(c).await?.use_node_follower(on);
        Ok(())
    }

    /// What the file's versioned store did (`None`: no versioning call yet).
    pub fn version_stats(&self) -> Option<crate::versioned::VersionStats> {
        self.versioned.as_ref().map(|v| v.stats())
    }

    /// Steps 1–4 by the versioned store: a write becomes a new snapshot; a read reads the
    /// newest published one, laying the file's base under what no version wrote.
    pub(super) async fn versioned_io(
        &mut self,
        c: &mut ClusterClient,
        access: &Access,
        op: Op<'_>,
    ) -> Result<(), WireError> {
        match op {
            Op::Write(data) => {
                self.versions(c).await?.write(c, access, data).await?;
                Ok(())
            }
            Op::Read { out, holes_ok } => self.read_snapshot(c, None, access, out, holes_ok).await,
        }
    }

    /// Reads the bytes of `access` as snapshot `version` has them (strategy `versioning`;
    /// `None`: the newest published one). Bytes past the snapshot's end read as zeros
    /// when `holes_ok`, else the call fails.
    pub async fn read_snapshot(
        &mut self,
        c: &mut ClusterClient,
        version: Option<atomio_version::Version>,
        access: &Access,
        out: &mut [u8],
        holes_ok: bool,
    ) -> Result<(), WireError> {
        if !self.atomic.is_versioning() {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                "snapshots exist only for files written with strategy versioning",
            ));
        }
        crate::check_len("read", out.len(), access.size())?;
        let ranges = atomio_layout::RangeList::from_ranges(access.ranges().collect());
        let (_, size, base) = self
            .versions(c)
            .await?
            .read(c, version, &ranges, out)
            .await?;
        let base_size = self.read_base(c, &base, out).await?;
        if let (false, Some(h)) = (holes_ok, access.hull()) {
            let end = size.max(base_size);
            if h.end > end {
                return Err(WireError::new(
                    ErrorCode::InvalidArgument,
                    format!("read of {h} reaches past the end of the file ({end} bytes)"),
                ));
            }
        }
        Ok(())
    }

    /// Every snapshot's record (version, time, writer, bytes, size, state).
    pub async fn list_versions(
        &mut self,
        c: &mut ClusterClient,
    ) -> Result<Vec<atomio_version::VersionRecord>, WireError> {
        self.versions(c).await?.list(c).await
    }

    /// Frees what no kept snapshot reaches: keeps the newest `keep_last` and those made
    /// after `newer_than_ms` (Unix ms). Safe while others write and read.
    pub async fn collect_versions(
        &mut self,
        c: &mut ClusterClient,
        keep_last: u64,
        newer_than_ms: Option<u64>,
    ) -> Result<crate::versioned::GcReport, WireError> {
        self.versions(c)
            .await?
            .collect(c, keep_last, newer_than_ms)
            .await
    }

    /// Fills the base pieces of a versioned read from the file's base; returns its size.
    pub(super) async fn read_base(
        &mut self,
        c: &mut ClusterClient,
        base: &[(atomio_version::Segment, usize)],
        out: &mut [u8],
    ) -> Result<u64, WireError> {
        let size = match &self.placement {
            Placement::Direct(d) => d.size()?,
            Placement::Servers(info) => c.size(info).await?,
        };
        let wanted: Vec<atomio_layout::ByteRange> = base
            .iter()
            .filter(|(s, _)| s.start < size)
            .map(|(s, _)| atomio_layout::ByteRange {
                start: s.start,
                end: (s.start + s.len).min(size),
            })
            .collect();
        if wanted.is_empty() {
            return Ok(size);
        }
        let list = atomio_layout::RangeList::from_ranges(wanted.clone());
        let access = Access::from_list(&list)?;
        let mut buf = vec![0u8; access.size() as usize];
        match &self.placement {
            Placement::Direct(d) => d.read_pieces(&access, &mut buf, true)?,
            Placement::Servers(info) => {
                let info = info.clone();
                c.read_ranges(&info, access.ranges(), &mut buf).await?
            }
        }
        // `wanted` is in offset order and disjoint (segments are), as `list` is.
        let mut at = 0usize;
        for ((s, dst), r) in base.iter().filter(|(s, _)| s.start < size).zip(&wanted) {
            let _ = s;
            let n = r.len() as usize;
            out[*dst..*dst + n].copy_from_slice(&buf[at..at + n]);
            at += n;
        }
        Ok(size)
    }

    /// Writes the newest snapshot's bytes into the file's base (the user's file, or the
    /// server file's objects): after it, the base alone holds the file as every version
    /// made it. Idempotent; run by one process (the MPI library: rank 0 at close).
    pub async fn materialize(&mut self, c: &mut ClusterClient) -> Result<(), WireError> {
        if !self.atomic.is_versioning() {
            return Ok(());
        }
        let vf = self.versions(c).await?;
        let (v, size, base) = vf.snapshot_and_base(c, None).await?;
        if v <= base {
            return Ok(()); // the base holds it already
        }
        // Older snapshots' unwritten bytes are about to change in the base: refuse them.
        vf.set_base(c, v, false).await?;
        // Same host, user's file: the kernel copies chunk bytes straight into the file.
        if let Placement::Direct(d) = &self.placement {
            let vf = self.versioned.as_mut().expect("opened above");
            let whole = atomio_layout::ByteRange {
                start: 0,
                end: size,
            };
            if vf.copy_stored_into(c, v, whole, d.raw_file()).await? {
                return vf.set_base(c, v, true).await;
            }
        }
        const WINDOW: u64 = 64 << 20;
        let mut start = 0;
        while start < size {
            let end = (start + WINDOW).min(size);
            let r = atomio_layout::ByteRange { start, end };
            let ranges = atomio_layout::RangeList::from_ranges(vec![r]);
            let mut buf = vec![0u8; r.len() as usize];
            let vf = self.versioned.as_mut().expect("opened above");
            let (_, _, base) = vf.read(c, Some(v), &ranges, &mut buf).await?;
            // Write every run that is not base (the base already holds those bytes).
            let mut at = start;
            let mut runs = Vec::new();
            for (s, _) in base.iter().chain(std::iter::once(&(
                atomio_version::Segment {
                    start: end,
                    len: 0,
                    at: None,
                },
                0,
            ))) {
                if s.start > at {
                    runs.push(atomio_layout::ByteRange {
                        start: at,
                        end: s.start,
                    });
                }
                at = s.start + s.len;
            }
            for run in runs {
                let data = &buf[(run.start - start) as usize..(run.end - start) as usize];
                let access = Access::contiguous(run)?;
                match &self.placement {
                    Placement::Direct(d) => d.write_each(&access, data)?,
                    Placement::Servers(info) => {
                        let info = info.clone();
                        c.write(&info, &access, data).await?
                    }
                }
            }
            start = end;
        }
        // The base is snapshot `v` now: reads of it (and older) need no tree.
        let vf = self.versioned.as_mut().expect("opened above");
        vf.set_base(c, v, true).await
    }
}
