//! A file on an atomio cluster with an atomicity strategy: the Rust client API.
//!
//! In atomic mode a write takes the strategy's exclusive locks on the call's bytes, writes,
//! and releases; a read takes shared locks. The locks are released even when the I/O fails.
//!
//! **Invariant:** in atomic mode no byte of a call is written or read before every lock of
//! the call is held, and no lock is released before the call's I/O has been acknowledged by
//! every server.

use crate::strategy::{lock_plan, Strategy};
use atomio_layout::Access;
use atomio_net::{ClusterClient, FileInfo};
use atomio_proto::{metadata_server, ErrorCode, LockMode, WireError};
use serde::Serialize;

/// What a file's calls cost in locking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IoStats {
    pub calls: u64,
    pub bytes: u64,
    /// Lock requests (sub-requests) made.
    pub lock_requests: u64,
    /// Lock messages sent (acquires, partial and full releases).
    pub lock_messages: u64,
}

pub struct File {
    info: FileInfo,
    atomic: Option<Strategy>,
    stats: IoStats,
}

impl File {
    pub async fn create(
        c: &mut ClusterClient,
        path: &str,
        stripe_size: u64,
        stripe_count: u32,
    ) -> Result<Self, WireError> {
        Ok(Self::from_info(
            c.create(path, stripe_size, stripe_count, false).await?,
        ))
    }

    pub async fn open(c: &mut ClusterClient, path: &str) -> Result<Self, WireError> {
        Ok(Self::from_info(c.open(path).await?))
    }

    pub fn from_info(info: FileInfo) -> Self {
        Self {
            info,
            atomic: None,
            stats: IoStats::default(),
        }
    }

    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    pub fn stats(&self) -> IoStats {
        self.stats
    }

    /// Turns atomic mode on with a strategy (`None` or `Some(Strategy::None)`: off).
    pub fn set_atomic(&mut self, strategy: Option<Strategy>) -> Result<(), WireError> {
        if let Some(s) = strategy.filter(|s| !s.on_cluster()) {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("{s} is not a strategy for files on an atomio cluster"),
            ));
        }
        self.atomic = strategy.filter(Strategy::is_atomic);
        Ok(())
    }

    pub fn atomic(&self) -> Option<Strategy> {
        self.atomic
    }

    async fn locked<T>(
        &mut self,
        c: &mut ClusterClient,
        mode: LockMode,
        access: &Access,
        io: impl AsyncFnOnce(&mut ClusterClient, &FileInfo) -> Result<T, WireError>,
    ) -> Result<T, WireError> {
        self.stats.calls += 1;
        self.stats.bytes += access.size();
        let central = metadata_server(&self.info.meta.path, c.servers() as u32);
        let plan = match self.atomic {
            Some(s) => lock_plan(s, access, &self.info.layout, central)?,
            None => None,
        };
        let Some((protocol, subs)) = plan else {
            return io(c, &self.info).await;
        };
        self.stats.lock_requests += subs.len() as u64;
        let held = c.lock_plan(self.info.id(), mode, protocol, subs).await?;
        let result = io(c, &self.info).await;
        let released = c.unlock(held).await;
        if let Ok(st) = &released {
            self.stats.lock_messages += st.messages;
        }
        let value = result?;
        released?;
        Ok(value)
    }

    /// Writes `data` (offset order) to the bytes of `access`, atomically in atomic mode.
    pub async fn write(
        &mut self,
        c: &mut ClusterClient,
        access: &Access,
        data: &[u8],
    ) -> Result<(), WireError> {
        self.locked(c, LockMode::Write, access, async |c, f| {
            c.write(f, access, data).await
        })
        .await
    }

    /// Reads the bytes of `access` into `out`, atomically (shared locks) in atomic mode.
    pub async fn read(
        &mut self,
        c: &mut ClusterClient,
        access: &Access,
        out: &mut [u8],
    ) -> Result<(), WireError> {
        self.locked(c, LockMode::Read, access, async |c, f| {
            c.read(f, access, out).await
        })
        .await
    }

    /// Like `read`, but bytes past the end of the file read as zeros instead of failing the
    /// call (for readers racing writers that are still extending the file).
    pub async fn read_allowing_holes(
        &mut self,
        c: &mut ClusterClient,
        access: &Access,
        out: &mut [u8],
    ) -> Result<(), WireError> {
        crate::check_len("read", out.len(), access.size())?;
        self.locked(c, LockMode::Read, access, async |c, f| {
            c.read_ranges(f, access.ranges(), out).await
        })
        .await
    }

    pub async fn sync(&mut self, c: &mut ClusterClient) -> Result<(), WireError> {
        c.sync(&self.info).await
    }

    pub async fn size(&mut self, c: &mut ClusterClient) -> Result<u64, WireError> {
        c.size(&self.info).await
    }
}
