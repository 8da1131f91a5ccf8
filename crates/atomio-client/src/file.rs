//! A file with an atomicity strategy: the Rust client API, and the one place where the
//! steps of a call (lock → I/O → release → publish, see `technique`) are run.
//!
//! A `File` is a technique (its `Strategy`) crossed with a placement: `Direct` (the user's
//! ordinary file; atomio servers hold only locks) or `Servers` (atomio's striped objects).
//! Calls take a `ClusterClient` for the lock service and server data; `write_local` and
//! friends run techniques that need neither (`none`, `posix-fcntl`, `romio` on a direct
//! file) without one.
//!
//! **Invariants:** in atomic mode no byte of a call is written or read before every lock of
//! the call is held, and no lock is released before the call's I/O has returned (servers:
//! acknowledged by every server; direct: the `pwrite`s returned, and with NFS coherence the
//! data was flushed). Locks are released even when the I/O failed. A strategy is accepted
//! only on a placement it supports.

use crate::call::{CallIo, CallOp};
use crate::direct::DirectData;
use crate::host_locks::HostLocks;
use crate::interval::{refuse_foreign, IntervalGeometry, Parts};
use crate::interval_file::{undeclared, IntervalOutput};
use crate::objects::ObjectFiles;
use crate::strategy::Strategy;
use crate::technique::{IoMethod, LockGeometry, Locks, PlacementKind, Publish};
use atomio_interval::{Choice, IntervalLayout, IntervalSet, PieceClass};
use atomio_layout::{Access, Layout};
use std::sync::Arc;

mod dlm;
mod intervals;
mod versions;

/// How a direct file's lock space is spread over the lock servers. No data is striped in
/// direct placement, so this only trades lock-load spreading against the servers a call
/// must visit: every one adds a round trip to a handoff (a client that waited at one server
/// takes its later ones in order) and a message to each release. Since the lock server
/// grants a lone writer's structured bytes in one step (leaps), its work per call is small,
/// and fewer servers per call win: in A/B/A/B runs of 6 invocations each, 64 MiB put
/// `bench tile` one-try / bounding-extent at 1.00x (4 MiB: 0.95x) and S3D datatype one-try
/// at 97.8 % of `none` (4 MiB: 92.5 %), ior-hard alike. 64 KiB stripes walk ~480 boundaries
/// on a contended 30 MiB tile call (0.46x). Files much larger than `servers x` this still spread their locks
/// over every server. Every client of a file must use the same value: it is a constant.
pub const DIRECT_LOCK_STRIPE: u64 = 64 << 20;
use atomio_lock::{Contention, LockOp};
use atomio_net::{ClusterClient, DataOp, FileInfo};
use atomio_proto::{metadata_server, ErrorCode, FileId, LockMode, WireError};
use nix::libc;
use serde::Serialize;

/// What a file's calls cost in locking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IoStats {
    pub calls: u64,
    pub bytes: u64,
    /// Lock requests (sub-requests, or `fcntl` calls) made.
    pub lock_requests: u64,
    /// Lock messages sent (acquires, partial and full releases).
    pub lock_messages: u64,
    /// Calls (interval I/O) whose every byte was private to this client: no lock taken.
    pub lock_free_calls: u64,
    /// Calls (interval I/O) that locked bytes no declared view covers, or ran before the
    /// file had an interval set: correct, but locked like a plain byte-range technique.
    pub interval_fallbacks: u64,
    /// Ranges in the lock requests made: a list request's ranges, an `fcntl` lock's one,
    /// and for a structured (datatype) request the runs of its access (an upper bound).
    pub lock_ranges: u64,
    /// `pread` system calls made on the user's file (direct placement).
    pub read_syscalls: u64,
    /// `pwrite` system calls made on the user's file (direct placement; bytes copied
    /// through a mapping make none).
    pub write_syscalls: u64,
}

/// Where the file's bytes are.
#[derive(Debug)]
pub enum Placement {
    /// The user's ordinary file.
    Direct(DirectData),
    /// Objects on atomio's data servers.
    Servers(FileInfo),
}

impl Placement {
    pub fn kind(&self) -> PlacementKind {
        match self {
            Placement::Direct(_) => PlacementKind::Direct,
            Placement::Servers(_) => PlacementKind::Servers,
        }
    }
}

/// The I/O of one call.
enum Op<'a> {
    Write(&'a [u8]),
    Read { out: &'a mut [u8], holes_ok: bool },
}

impl Op<'_> {
    fn mode(&self) -> LockMode {
        match self {
            Op::Write(_) => LockMode::Write,
            Op::Read { .. } => LockMode::Read,
        }
    }
}

pub struct File {
    placement: Placement,
    /// Same-host bypass of a server file's data path (see `objects`).
    objects: Option<ObjectFiles>,
    atomic: Strategy,
    /// How the file's lock space is striped over the lock servers (direct files: computed
    /// from the lock key once the number of servers is known).
    geometry: Option<LockGeometry>,
    stats: IoStats,
    /// What this file's lock operations met lately: how the next one opens.
    contention: Contention,
    /// The cached-lock DLM client of this file (started at its first DLM call; dropping
    /// it flushes what it caches).
    dlm: Option<crate::dlm::agent::DlmAgent>,
    /// Keep a record of every DLM lock's life (`keep_dlm_log`).
    dlm_log: bool,
    /// The file's versions (strategy `versioning`; opened at its first call).
    versioned: Option<crate::versioned::VersionedFile>,
    /// The trees' shape for versions this client makes (`set_version_geometry`).
    version_geometry: Option<atomio_version::Geometry>,
    /// `VersionedFile::set_retention`, applied when the versions are opened.
    version_retention: Option<u64>,
    /// The file's interval set and this client's rank in it (`set_intervals`).
    intervals: Option<(Arc<IntervalSet>, u32)>,
    /// Atomic mode was asked for with `auto`: re-decide whenever the interval set changes.
    auto: bool,
    /// What `auto` chose last, and why.
    choice: Option<Choice>,
    /// The file is an interval file (`set_interval_format`): this rank's cache and layout.
    ifile: Option<IntervalOutput>,
    /// The host's shared lock table, when the file's locks are taken there instead of on
    /// lock servers (`use_host_locks`).
    host_locks: Option<HostLocks>,
    /// Atomic writes on servers are all-or-nothing (`set_all_or_nothing`).
    all_or_nothing: bool,
}

fn no_client(what: &str) -> WireError {
    WireError::new(
        ErrorCode::InvalidArgument,
        format!("{what} needs a connection to atomio servers"),
    )
}

impl File {
    /// Creates (or opens) a file on atomio's data servers.
    pub async fn create(
        c: &mut ClusterClient,
        path: &str,
        stripe_size: u64,
        stripe_count: u32,
    ) -> Result<Self, WireError> {
        let info = c.create(path, stripe_size, stripe_count, false).await?;
        Ok(Self::with_local_objects(c, info).await)
    }

    /// Opens an existing file on atomio's data servers.
    pub async fn open(c: &mut ClusterClient, path: &str) -> Result<Self, WireError> {
        let info = c.open(path).await?;
        Ok(Self::with_local_objects(c, info).await)
    }

    /// A server file whose bytes this client moves through the object files when every
    /// server of the file is on this host (`objects`), else through messages.
    pub async fn with_local_objects(c: &mut ClusterClient, info: FileInfo) -> Self {
        let objects = ObjectFiles::locate(c, &info).await;
        let mut f = Self::from_info(info);
        f.objects = objects;
        f
    }

    /// True when bytes go through the servers' object files on this host (all but atomic
    /// writes, which are staged through the servers).
    pub fn bypasses_messages(&self) -> bool {
        self.objects.is_some()
    }

    /// The object files can be used for this call: on this host, and no server has writes
    /// in doubt (those are resolved only through messages).
    fn local_objects_usable(&self) -> bool {
        self.objects.as_ref().is_some_and(|o| !o.any_in_doubt())
    }

    pub fn from_info(info: FileInfo) -> Self {
        Self::new(Placement::Servers(info))
    }

    /// The user's own file (see `DirectData`): atomio holds only its locks.
    pub fn direct(data: DirectData) -> Self {
        Self::new(Placement::Direct(data))
    }

    fn new(placement: Placement) -> Self {
        Self {
            placement,
            objects: None,
            atomic: Strategy::none(),
            geometry: None,
            stats: IoStats::default(),
            contention: Contention::from_env(),
            dlm: None,
            dlm_log: false,
            versioned: None,
            version_geometry: None,
            version_retention: None,
            intervals: None,
            auto: false,
            choice: None,
            ifile: None,
            host_locks: None,
            all_or_nothing: true,
        }
    }

    /// Whether this server file's atomic writes are staged at every server and committed at
    /// one, so that a writer killed mid-call leaves its write whole or absent (the
    /// default). A file whose bytes count only once a collective step copies them out —
    /// the MPI library's forwarded files, exported at sync and close, which a job that lost
    /// a rank never reaches — gains nothing from it and turns it off: its writes are then
    /// atomic against concurrent writers, and one cut short is discarded with the copy.
    pub fn set_all_or_nothing(&mut self, on: bool) {
        self.all_or_nothing = on;
    }

    /// Step 2 on a direct file: its ordinary bytes, or an interval file's physical places.
    fn placed_io(
        &self,
        d: &DirectData,
        method: IoMethod,
        access: &Access,
        op: Op<'_>,
    ) -> Result<(), WireError> {
        match (&self.ifile, op) {
            (None, op) => direct_io(d, method, access, op),
            (Some(o), Op::Write(data)) => o.write_in_place(d.raw_file(), access.ranges(), data),
            (Some(o), Op::Read { out, .. }) => o.read_in_place(d.raw_file(), access.ranges(), out),
        }
    }

    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The file on the servers (None for a direct file).
    pub fn info(&self) -> Option<&FileInfo> {
        match &self.placement {
            Placement::Servers(i) => Some(i),
            Placement::Direct(_) => None,
        }
    }

    pub fn stats(&self) -> IoStats {
        let mut s = self.stats;
        if let Placement::Direct(d) = &self.placement {
            s.read_syscalls = d.preads();
            s.write_syscalls = d.pwrites();
        }
        s
    }

    /// Turns atomic mode on with a strategy (`None` or `none`: off). A strategy the
    /// placement cannot run is refused.
    pub fn set_atomic(&mut self, strategy: Option<Strategy>) -> Result<(), WireError> {
        let s = strategy.unwrap_or_else(Strategy::none);
        let kind = self.placement.kind();
        if !s.supports(kind) {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("{s} does not run on {kind} placement"),
            ));
        }
        self.auto = s.is_auto();
        self.choice = None;
        self.atomic = s;
        if let (true, Some((set, rank))) = (self.auto, self.intervals.clone()) {
            self.set_intervals(set, rank);
        }
        Ok(())
    }

    /// Takes this file's locks in the host's shared lock table (`host_locks`) instead of
    /// on lock servers: no round trip per call. Every client of the file must run on this
    /// host and take its locks there too (the table and the servers do not know of each
    /// other's locks). Direct placement only; techniques that lock nothing, lock with
    /// `fcntl`, cache or version are unaffected.
    pub fn use_host_locks(&mut self) -> Result<(), WireError> {
        let Placement::Direct(d) = &self.placement else {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                "host locks work on the user's file (direct placement) only",
            ));
        };
        self.host_locks = Some(HostLocks::open(d.lock_key())?);
        Ok(())
    }

    /// The strategy in force, `None` when atomic mode is off.
    pub fn atomic(&self) -> Option<&Strategy> {
        Some(&self.atomic).filter(|s| s.is_atomic())
    }

    fn lock_id(&self) -> FileId {
        match &self.placement {
            Placement::Servers(i) => i.id(),
            Placement::Direct(d) => d.lock_id(),
        }
    }

    /// The file's lock geometry in a cluster of `servers`: a server file's own layout with
    /// its metadata server as the central one (whole-file and extent locks live there); a
    /// direct file's lock space striped over every server in `DIRECT_LOCK_STRIPE`s, named
    /// by its lock key.
    fn geometry(&mut self, servers: usize) -> Result<&LockGeometry, WireError> {
        if self.geometry.is_none() {
            let n = servers.max(1) as u32;
            self.geometry = Some(match &self.placement {
                Placement::Servers(info) => LockGeometry {
                    layout: info.layout.clone(),
                    central: metadata_server(&info.meta.path, n),
                    intervals: None,
                },
                Placement::Direct(d) => {
                    let central = metadata_server(d.lock_key(), n);
                    LockGeometry {
                        layout: Layout::round_robin(DIRECT_LOCK_STRIPE, n, n, central.0)?,
                        central,
                        intervals: None,
                    }
                }
            });
        }
        Ok(self.geometry.as_ref().expect("set above"))
    }

    /// Step 1's plan: the locks the strategy takes for this call.
    fn plan_locks(
        &mut self,
        servers: usize,
        mode: LockMode,
        access: &Access,
    ) -> Result<Option<Locks>, WireError> {
        if !self.atomic.is_atomic() {
            return Ok(None);
        }
        let technique = self.atomic.clone();
        // A call of many small pieces on the user's file locks its windows: a few ranges
        // instead of one per piece, which every method then sends as few requests and the
        // lock service (or the host table) indexes as few ranges. A write does so only when
        // it then rewrites those windows (`io_method`), under exclusive locks on them.
        let windows = match (&self.placement, mode) {
            (Placement::Direct(_), LockMode::Read) if technique.technique().locks_windows() => {
                crate::direct::read_lock_windows(access)
            }
            (Placement::Direct(_), LockMode::Write)
                if technique.technique().locks_windows()
                    && self.io_method(mode, access) == IoMethod::Windows =>
            {
                crate::direct::write_lock_windows(access)
            }
            _ => None,
        };
        let access = windows.as_ref().unwrap_or(access);
        let mut geometry = self.geometry(servers)?.clone();
        geometry.intervals = self.intervals.as_ref().map(|(set, rank)| IntervalGeometry {
            set: set.clone(),
            rank: *rank,
            by_group: matches!(self.placement, Placement::Direct(_)),
        });
        let locks = technique.technique().locks(mode, access, &geometry)?;
        self.stats.lock_requests += locks.as_ref().map_or(0, Locks::requests);
        self.stats.lock_ranges += locks.as_ref().map_or(0, Locks::ranges);
        Ok(locks)
    }

    /// How a call's bytes move: the technique's method, except that a write of many small
    /// dense pieces on a user's file whose pages every process shares is rewritten by
    /// windows (`IoMethod::Windows`: a `pread` and a `pwrite` per window, not a system call
    /// or a mapped store per piece) when the call's exclusive locks cover those windows —
    /// the technique locks the extent, or locks windows (`plan_locks` then locks
    /// `direct::write_lock_windows`). The same for every call of the same access, so the
    /// plan and the I/O agree.
    fn io_method(&self, mode: LockMode, access: &Access) -> IoMethod {
        let t = self.atomic.technique();
        let method = t.io();
        match &self.placement {
            Placement::Direct(d)
                if mode == LockMode::Write
                    && method == IoMethod::Pieces
                    && self.atomic.is_atomic()
                    && self.ifile.is_none()
                    && (t.locks_windows() || t.locks_extent())
                    && d.rewrites_windows(access) =>
            {
                IoMethod::Windows
            }
            _ => method,
        }
    }

    /// Step 2 done here: on the user's file (direct placement), or through the object
    /// files of servers on this host; under whatever the call holds.
    fn local_io(&mut self, access: &Access, op: Op<'_>) -> Result<(), WireError> {
        let method = self.io_method(op.mode(), access);
        match (&self.placement, &mut self.objects) {
            (Placement::Direct(d), _) => self.placed_io(d, method, access, op),
            (Placement::Servers(info), Some(objects)) => match op {
                Op::Write(data) => objects.write(info, access.ranges(), data),
                Op::Read { out, .. } => objects.read(info, access.ranges(), out),
            },
            (Placement::Servers(_), None) => Err(WireError::new(
                ErrorCode::Internal,
                "local I/O on a file whose servers are not on this host",
            )),
        }
    }

    /// A direct-placement call whose lock (if any) is a local `fcntl`: all steps here.
    fn fcntl_call(
        &self,
        lock: Option<atomio_layout::ByteRange>,
        mode: LockMode,
        access: &Access,
        op: Op<'_>,
    ) -> Result<(), WireError> {
        let Placement::Direct(d) = &self.placement else {
            return Err(no_direct(&self.atomic));
        };
        let method = self.io_method(mode, access);
        let Some(r) = lock else {
            return self.placed_io(d, method, access, op);
        };
        let kind = match mode {
            LockMode::Write => libc::F_WRLCK,
            LockMode::Read => libc::F_RDLCK,
        };
        d.fcntl(kind, r)?;
        let result = io_under_lock(d, mode, r, || direct_io(d, method, access, op));
        let unlocked = d.fcntl(libc::F_UNLCK, r);
        result?;
        unlocked
    }

    /// A direct-placement call whose locks are taken in the host's lock table: all steps
    /// here, no server. The table gets exactly what the technique planned for the lock
    /// servers (every sub-request's bytes), all at once.
    fn host_locked_call(
        &self,
        subs: &[atomio_lock::SubRequest],
        mode: LockMode,
        access: &Access,
        op: Op<'_>,
    ) -> Result<(), WireError> {
        use atomio_layout::RangeCursor;
        let (Placement::Direct(d), Some(table), Some(hull)) =
            (&self.placement, &self.host_locks, access.hull())
        else {
            return Err(no_direct(&self.atomic));
        };
        let mut ranges: Vec<atomio_layout::ByteRange> = Vec::new();
        for sub in subs {
            let mut c = sub.desc.cursor();
            while let Some(r) = c.next_range() {
                match ranges.last_mut() {
                    Some(last) if last.end == r.start => last.end = r.end,
                    _ => ranges.push(r),
                }
            }
        }
        let held = table.acquire(mode, &ranges)?;
        let method = self.io_method(mode, access);
        let result = io_under_lock(d, mode, hull, || self.placed_io(d, method, access, op));
        let released = table.release(held);
        result?;
        released
    }

    /// Runs one call's steps in order (lock, I/O, release, then publish); locks are
    /// released even when the I/O failed.
    async fn call(
        &mut self,
        mut c: Option<&mut ClusterClient>,
        access: &Access,
        op: Op<'_>,
    ) -> Result<(), WireError> {
        self.stats.calls += 1;
        self.stats.bytes += access.size();
        match op {
            // A write refused because another client holds a lock on its bytes (mandatory
            // locks: only a write that took no lock of its own there) waits for them.
            Op::Write(data) => {
                let mut backoff = atomio_net::patience::LockedBackoff::default();
                loop {
                    match self.steps(c.as_deref_mut(), access, Op::Write(data)).await {
                        Err(e) if backoff.again(&e).await => continue,
                        r => break r,
                    }
                }
            }
            op => self.steps(c, access, op).await,
        }?;
        match self.atomic.technique().publish() {
            Publish::Nothing => Ok(()),
        }
    }

    /// Steps 1–3 of one call, cut by the interval set first when the technique asks.
    async fn steps(
        &mut self,
        c: Option<&mut ClusterClient>,
        access: &Access,
        op: Op<'_>,
    ) -> Result<(), WireError> {
        if self.atomic.is_atomic() && self.atomic.technique().splits_by_intervals() {
            match self.intervals.clone() {
                Some((set, rank)) => return self.interval_call(c, access, op, &set, rank).await,
                None => self.stats.interval_fallbacks += 1,
            }
        }
        let servers = c.as_ref().map_or(0, |c| c.servers());
        let locks = self.plan_locks(servers, op.mode(), access)?;
        self.locked_io(c, access, op, locks).await
    }

    /// Steps 1–3 with the locks planned: lock, I/O, release.
    async fn locked_io(
        &mut self,
        c: Option<&mut ClusterClient>,
        access: &Access,
        op: Op<'_>,
        locks: Option<Locks>,
    ) -> Result<(), WireError> {
        let mode = op.mode();
        let service = match locks {
            Some(Locks::Fcntl(r)) => return self.fcntl_call(Some(r), mode, access, op),
            None if matches!(self.placement, Placement::Direct(_)) => {
                return self.fcntl_call(None, mode, access, op)
            }
            Some(Locks::Service { subs, .. }) if self.host_locks.is_some() => {
                return self.host_locked_call(&subs, mode, access, op)
            }
            Some(Locks::Service { protocol, subs }) => Some(
                LockOp::new(self.lock_id(), mode, protocol, subs)
                    .with_start(self.contention.start()),
            ),
            Some(Locks::Cached(spec)) => {
                let c = c.ok_or_else(|| no_client(&self.atomic.name()))?;
                return self.cached_io(c, access, op, spec).await;
            }
            Some(Locks::Versioned) => {
                let c = c.ok_or_else(|| no_client(&self.atomic.name()))?;
                return self.versioned_io(c, access, op).await;
            }
            None => None,
        };
        let what = self.atomic.name();
        let c = c.ok_or_else(|| no_client(&what))?;
        let io = self.call_io(c, access, &op);
        let mut call = CallOp::new(service, io);
        let mut sends = Vec::new();
        call.start(&mut sends);
        let locked = c.run(&mut call, sends).await;
        self.stats.lock_messages += call.lock_messages();
        if let Some(l) = call.lock_op() {
            self.contention.observe(l);
        }
        if let Some((txn, settled)) = call.txn() {
            c.txn_done(txn, settled);
        }
        locked?;
        if call.needs_local_io() {
            return self.local_io_in_call(c, &mut call, access, op).await;
        }
        if let (Placement::Servers(info), Op::Read { out, holes_ok }) = (&self.placement, op) {
            out.copy_from_slice(&call.take_data());
            if !holes_ok {
                check_size(c, info, access).await?;
            }
        }
        Ok(())
    }

    /// How a call under the lock service moves its bytes: messages to the data servers, or
    /// local I/O by the driver (direct placement, or the same-host object files).
    fn call_io(&self, c: &mut ClusterClient, access: &Access, op: &Op<'_>) -> CallIo {
        // An atomic write on the servers is all-or-nothing: staged everywhere, then
        // committed at one server (never through the object files, which cannot stage).
        let all_or_nothing = self.atomic.is_atomic()
            && matches!(op, Op::Write(_))
            && self.all_or_nothing
            && staged_writes_enabled();
        match (&self.placement, op) {
            (Placement::Servers(_), _) if !all_or_nothing && self.local_objects_usable() => {
                CallIo::Local
            }
            (Placement::Servers(info), Op::Write(data)) if all_or_nothing => {
                let (txn, settled_below) = c.next_txn();
                CallIo::Data(DataOp::write_atomic(
                    info.id(),
                    &info.layout,
                    access.ranges(),
                    data,
                    txn,
                    settled_below,
                ))
            }
            (Placement::Servers(info), Op::Write(data)) => CallIo::Data(DataOp::write(
                info.id(),
                &info.layout,
                access.ranges(),
                data,
            )),
            (Placement::Servers(info), Op::Read { out, .. }) => CallIo::Data(DataOp::read(
                info.id(),
                &info.layout,
                access.ranges(),
                out.len(),
            )),
            (Placement::Direct(_), _) => CallIo::Local,
        }
    }

    /// The local I/O of a call whose locks `call` holds: the lease checked (servers cannot
    /// fence local I/O), the cache made coherent around it, the bytes moved, then the
    /// release sent with the result.
    async fn local_io_in_call(
        &mut self,
        c: &mut ClusterClient,
        call: &mut CallOp,
        access: &Access,
        op: Op<'_>,
    ) -> Result<(), WireError> {
        let mode = op.mode();
        let (holes_ok, is_read) = match &op {
            Op::Read { holes_ok, .. } => (*holes_ok, true),
            Op::Write(_) => (true, false),
        };
        let coherence = |f: &Self, acquire: bool| match &f.placement {
            Placement::Direct(d) if acquire => access.hull().map_or(Ok(()), |h| d.after_acquire(h)),
            Placement::Direct(d) if mode == LockMode::Write => d.before_release(),
            _ => Ok(()),
        };
        // Servers cannot fence local I/O: do not start it on a lease that may be gone.
        let mut result = c
            .ensure_lease()
            .await
            .and_then(|()| coherence(self, true))
            .and_then(|()| self.local_io(access, op));
        if result.is_ok() {
            result = coherence(self, false);
        }
        // A read of a server file through its object files must not reach past the end.
        if let (Ok(()), true, false, Placement::Servers(info)) =
            (&result, is_read, holes_ok, &self.placement)
        {
            let info = info.clone();
            result = check_size(c, &info, access).await;
        }
        let mut sends = Vec::new();
        call.local_io_done(result, &mut sends);
        let released = c.run(call, sends).await;
        self.stats.lock_messages += call.lock_messages();
        released
    }

    /// Writes `data` (offset order) to the bytes of `access`, atomically in atomic mode.
    pub async fn write(
        &mut self,
        c: &mut ClusterClient,
        access: &Access,
        data: &[u8],
    ) -> Result<(), WireError> {
        self.call(Some(c), access, Op::Write(data)).await
    }

    /// Reads the bytes of `access` into `out`, atomically (shared locks) in atomic mode.
    /// Reading past the end of the file is an error.
    pub async fn read(
        &mut self,
        c: &mut ClusterClient,
        access: &Access,
        out: &mut [u8],
    ) -> Result<(), WireError> {
        let op = Op::Read {
            out,
            holes_ok: false,
        };
        self.call(Some(c), access, op).await
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
        let op = Op::Read {
            out,
            holes_ok: true,
        };
        self.call(Some(c), access, op).await
    }

    /// `write` with the client optional (techniques and placements that need no servers
    /// run without one).
    pub async fn write_via(
        &mut self,
        c: Option<&mut ClusterClient>,
        access: &Access,
        data: &[u8],
    ) -> Result<(), WireError> {
        self.call(c, access, Op::Write(data)).await
    }

    /// `read` with the client optional.
    pub async fn read_via(
        &mut self,
        c: Option<&mut ClusterClient>,
        access: &Access,
        out: &mut [u8],
    ) -> Result<(), WireError> {
        let op = Op::Read {
            out,
            holes_ok: false,
        };
        self.call(c, access, op).await
    }

    /// `write` for techniques that need no servers (`none`, `posix-fcntl`, `romio` on a
    /// direct file).
    pub fn write_local(&mut self, access: &Access, data: &[u8]) -> Result<(), WireError> {
        block_on_local(self.call(None, access, Op::Write(data)))
    }

    /// `read` for techniques that need no servers.
    pub fn read_local(&mut self, access: &Access, out: &mut [u8]) -> Result<(), WireError> {
        let op = Op::Read {
            out,
            holes_ok: false,
        };
        block_on_local(self.call(None, access, op))
    }

    /// Makes everything written durable (servers: on every server; direct: `fdatasync`).
    pub async fn sync(&mut self, mut c: Option<&mut ClusterClient>) -> Result<(), WireError> {
        self.flush_cache().await?;
        if let (Some(v), Some(c)) = (self.versioned.as_mut(), c.as_deref_mut()) {
            v.sync(c).await?;
        }
        match &self.placement {
            Placement::Direct(d) => d.sync(),
            Placement::Servers(info) => {
                if let Some(o) = &self.objects {
                    o.sync()?;
                }
                let c = c.ok_or_else(|| no_client("sync"))?;
                c.sync(info).await
            }
        }
    }

    /// Truncates or zero-extends the file to `size` bytes.
    pub async fn set_size(
        &mut self,
        c: Option<&mut ClusterClient>,
        size: u64,
    ) -> Result<(), WireError> {
        self.flush_cache().await?;
        match &self.placement {
            Placement::Direct(d) => d.set_size(size),
            Placement::Servers(info) => {
                let c = c.ok_or_else(|| no_client("set_size"))?;
                c.set_size(info, size).await
            }
        }
    }

    pub async fn size(&mut self, mut c: Option<&mut ClusterClient>) -> Result<u64, WireError> {
        // A DLM client's cached bytes are not at the servers yet.
        self.flush_cache().await?;
        if self.atomic.is_versioning() {
            if let Some(c) = c.as_deref_mut() {
                let (_, snap) = self.versions(c).await?.snapshot(c, None).await?;
                let base = match &self.placement {
                    Placement::Direct(d) => d.size()?,
                    Placement::Servers(info) => c.size(info).await?,
                };
                return Ok(snap.max(base));
            }
        }
        match &self.placement {
            Placement::Direct(d) => d.size(),
            Placement::Servers(info) => {
                let c = c.ok_or_else(|| no_client("size"))?;
                c.size(info).await
            }
        }
    }
}

/// The default shape of versions this client makes: `ATOMIO_VERSION_CHUNK` (bytes) and
/// `ATOMIO_VERSION_FANOUT` override `Geometry::default()`.
fn version_geometry_from_env() -> Result<atomio_version::Geometry, WireError> {
    let d = atomio_version::Geometry::default();
    let get = |name: &str, default: u64| {
        std::env::var(name).ok().map_or(Ok(default), |v| {
            v.parse::<u64>().map_err(|_| format!("{name}={v}"))
        })
    };
    let bad = |e: String| WireError::new(ErrorCode::InvalidArgument, format!("bad {e}"));
    let chunk = get("ATOMIO_VERSION_CHUNK", d.chunk).map_err(bad)?;
    let fanout = get("ATOMIO_VERSION_FANOUT", d.fanout as u64).map_err(bad)?;
    atomio_version::Geometry::new(chunk, fanout as u32, atomio_version::geometry::DEFAULT_SPAN)
        .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))
}

/// Whether atomic writes on servers are all-or-nothing (staged, committed at one server).
/// `ATOMIO_STAGED_WRITES=0` turns it off — atomic against concurrent writers still, but a
/// crash mid-write may tear — to measure what staging costs.
fn staged_writes_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ATOMIO_STAGED_WRITES").map_or(true, |v| v != "0"))
}

/// Step 2 on the user's file with the technique's I/O method.
fn direct_io(
    d: &DirectData,
    method: IoMethod,
    access: &Access,
    op: Op<'_>,
) -> Result<(), WireError> {
    match (op, method) {
        (Op::Write(data), IoMethod::Pieces) => d.write_pieces(access, data),
        (Op::Write(data), IoMethod::PieceSyscalls) => d.write_each(access, data),
        (Op::Write(data), IoMethod::Sieve { buffer }) => d.write_sieved(access, data, buffer),
        (Op::Write(data), IoMethod::Windows) => d.write_windows(access, data),
        // Never chosen for reads (`io_method`); a read of the windows is a sieved read.
        (Op::Read { out, holes_ok }, IoMethod::Windows) => d.read_pieces(access, out, holes_ok),
        (Op::Read { out, holes_ok }, IoMethod::Pieces) => d.read_pieces(access, out, holes_ok),
        (Op::Read { out, holes_ok }, IoMethod::PieceSyscalls) => d.read_each(access, out, holes_ok),
        (Op::Read { out, holes_ok }, IoMethod::Sieve { buffer }) => {
            d.read_sieved(access, out, buffer, holes_ok)
        }
    }
}

/// A read must not reach past the end of a server file.
async fn check_size(
    c: &mut ClusterClient,
    info: &FileInfo,
    access: &Access,
) -> Result<(), WireError> {
    check_size_beyond(c, info, access, 0).await
}

/// `check_size` for a file known to be at least `known` bytes long.
async fn check_size_beyond(
    c: &mut ClusterClient,
    info: &FileInfo,
    access: &Access,
    known: u64,
) -> Result<(), WireError> {
    let Some(h) = access.hull() else {
        return Ok(());
    };
    if h.end <= known {
        return Ok(());
    }
    let size = c.size(info).await?.max(known);
    if h.end > size {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!(
                "read of {h} reaches past the end of '{}' ({size} bytes)",
                info.meta.path
            ),
        ));
    }
    Ok(())
}

fn no_direct(s: &Strategy) -> WireError {
    WireError::new(
        ErrorCode::InvalidArgument,
        format!("{s} works on the user's file (direct placement) only"),
    )
}

/// Step 2 under a lock taken on this host (`fcntl` or the host lock table): `io`, with the
/// coherence steps around it (`covered`: the bytes the lock covers).
fn io_under_lock(
    d: &DirectData,
    mode: LockMode,
    covered: atomio_layout::ByteRange,
    io: impl FnOnce() -> Result<(), WireError>,
) -> Result<(), WireError> {
    d.after_acquire(covered)
        .and_then(|()| io())
        .and_then(|()| match mode {
            LockMode::Write => d.before_release(),
            LockMode::Read => Ok(()),
        })
}

/// Drives a call that never awaits anything (no client: local I/O and `fcntl` only).
fn block_on_local(
    f: impl std::future::Future<Output = Result<(), WireError>>,
) -> Result<(), WireError> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => Err(WireError::new(
            ErrorCode::Internal,
            "a call without a client tried to wait",
        )),
    }
}
