//! Same-host byte-range locks: one lock table in shared memory that every client of a file
//! on one host takes its calls' locks in directly — no lock server, no round trip.
//!
//! Why: a lock server on the same host still costs a loopback round trip per call, and on
//! this kind of VM each of its two wake-ups costs ~20 µs; on workloads of many small calls
//! (IOR hard: 47 KB per call) that is 40 % of the run (`rtt-floor`). A kernel `fcntl` costs
//! ~2 µs because its table is in the kernel, shared by every process of the host. This is
//! the same for atomio's locks: the table is in `/dev/shm`, a call takes its locks under a
//! short mutex, and only a call that must wait sleeps (on a futex), so an uncontended call
//! costs two atomic operations and a scan of the calls in flight. It keeps what the lock
//! servers give over `fcntl`: a call's locks are exactly its pieces (or whatever its
//! technique plans), taken all at once — atomic over every range, with no ordering to
//! deadlock on — and granted first-come-first-served.
//!
//! When: every client of the file runs on this host (an MPI job on one node, a native job
//! of local processes). The table knows nothing of a lock server's locks, so all clients of
//! a file must use the same lock service (`File::use_host_locks`, `--locks host`, MPI:
//! `ATOMIO_LOCKS=host`); a job across hosts uses lock servers.
//!
//! The table (`/dev/shm/atomio-hostlocks-<uid>-<hash of the lock key>`, sparse, ~256 MiB of
//! address space, of which a call in flight touches its directory entry and its ranges):
//!
//! ```text
//!   page 0:   layout version · mutex (futex: holder's pid) · mutex sleepers · seq (futex) · seq sleepers
//!   page 1…:  next ticket · high-water record · RECORDS directory entries:
//!             state · owner · pid · pid start time · mode · ticket · n · hull
//!   +64 KiB:  RECORDS arrays of MAX_RUNS runs (start, len, stride, count): the call's
//!             ranges folded into arithmetic runs (`runs`)
//! ```
//!
//! A call fills a free record (state `WANTED`, a new ticket) and is granted (`HELD`) when no
//! held record and no earlier-ticketed wanted record conflicts with it (overlapping bytes,
//! not both reads); otherwise it sleeps on `seq`, which every release bumps. Waiting only
//! on holders (who wait for nothing) and on earlier tickets cannot cycle: no deadlock, no
//! starvation. A call's ranges are folded into arithmetic runs (`runs`: S3D's 50,688 pieces
//! of a call take a few thousand); a call whose runs exceed a record is coarsened (smallest
//! gaps merged): it then locks more, never less.
//!
//! A table whose every process died (no `Drop` ran) is removed by the next `open` of any
//! table of this user on the host (`sweep_abandoned`): no live handle holds its `flock`.
//!
//! Crashes: every change a call makes is one store of a record's state, made last, so a
//! process killed inside the mutex leaves a consistent table; a waiter that slept
//! `PATIENCE` checks the mutex's holder and the records' owners (pid *and* start time,
//! since pids are reused) and takes back what a dead process held. A process that lives
//! but never releases holds its locks, as with `fcntl`.
//!
//! **Invariants:** two records in state `HELD` never conflict; a record becomes `HELD` only
//! under the mutex after a scan that found no conflicting `HELD` record and no conflicting
//! `WANTED` record with a smaller ticket; a record's fields are written before its state
//! makes it visible; a granted call's ranges cover every range it asked for.

mod runs;

use atomio_layout::ByteRange;
use atomio_proto::{ErrorCode, LockMode, WireError};
use nix::libc;
use runs::Run;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::time::Duration;

/// The table's layout version (a table of another layout is refused, not misread).
const LAYOUT: u32 = 4;
const PAGE: usize = 4096;
/// Calls in flight (held or waiting) at once, over every process of the host.
pub const RECORDS: usize = 256;
/// A record's directory entry: what a scan reads, packed so a scan touches few pages.
const ENTRY_WORDS: usize = 16;
/// Words of one record's runs (see `runs`): 32 Ki runs of 4 words (1 MiB of address
/// space; only what a call writes is touched). A call of many small pieces must fit whole:
/// coarsening interleaved pieces would make them conflict; folded into runs, S3D's 50,688
/// pieces per call take a few thousand.
const RANGE_WORDS: usize = 1 << 17;
const RUN_WORDS: usize = 4;
/// Most runs one record holds; a call with more is coarsened to this many ranges.
pub const MAX_RUNS: usize = RANGE_WORDS / RUN_WORDS;
/// Word 0: the ticket counter; word 1: one past the highest record ever used (scans stop
/// there: records are taken lowest first, so a few clients scan a few entries).
const W_TICKET: usize = 0;
const W_HIGH: usize = 1;
const DIR_AT: usize = 8;
const RANGES_AT: usize = 8192;
const TABLE_WORDS: usize = RANGES_AT + RECORDS * RANGE_WORDS;
const TABLE_BYTES: usize = PAGE + TABLE_WORDS * 8;

// Header words (u32, page 0).
const H_LAYOUT: usize = 0;
const H_MUTEX: usize = 1;
const H_MUTEX_SLEEPERS: usize = 2;
const H_SEQ: usize = 3;
const H_SEQ_SLEEPERS: usize = 4;
const HEADER_WORDS: usize = 16;

// Record states and fields.
const FREE: u64 = 0;
const WANTED: u64 = 1;
const HELD: u64 = 2;
/// Taken by a call that writes its ranges outside the mutex: not yet in any scan.
const RESERVED: u64 = 3;
const F_STATE: usize = 0;
const F_OWNER: usize = 1;
const F_PID: usize = 2;
const F_START: usize = 3;
const F_MODE: usize = 4;
const F_TICKET: usize = 5;
const F_N: usize = 6;
const F_HULL_START: usize = 7;
const F_HULL_END: usize = 8;

/// Spins on the mutex before sleeping: it is held for a scan of the calls in flight.
const SPINS: u32 = 200;
/// Calls of more runs than this write and compare them outside the mutex.
const OUTSIDE_MIN: usize = 64;
/// How long a sleeper waits before it checks whether the processes it waits for live.
const PATIENCE: Duration = Duration::from_millis(20);

/// Where the table's bytes are (kept for as long as the handle points into them).
#[allow(dead_code)]
enum Memory {
    /// A shared mapping of the table's file.
    Shared(memmap2::MmapRaw),
    /// Anonymous memory of this process (tests: the same code, no file).
    Private(memmap2::MmapMut),
}

/// One client's handle on a host lock table.
pub struct HostLocks {
    base: *const u8,
    _memory: Memory,
    path: Option<PathBuf>,
    /// The table's file, under a shared `flock` while the handle lives.
    file: Option<std::fs::File>,
    /// This handle's owner token: unique over the host's processes and handles.
    owner: u64,
    pid: u32,
    start: u64,
    /// What happened (for statistics and tests).
    stats: std::sync::Mutex<HostLockStats>,
}

// SAFETY: `base` points into `_memory`, which lives as long as the handle and is only
// accessed through atomics (see `header` / `word`).
unsafe impl Send for HostLocks {}
unsafe impl Sync for HostLocks {}

/// Counts of one handle's lock calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostLockStats {
    pub acquired: u64,
    /// Acquisitions that had to sleep at least once.
    pub waited: u64,
    /// Records taken back from processes that died holding or wanting them.
    pub reaped: u64,
    /// Calls whose ranges were coarsened to fit a record.
    pub coarsened: u64,
}

/// A granted call's locks: give it back with `HostLocks::release`.
#[derive(Debug)]
#[must_use = "host locks are held until released"]
pub struct HostHeld {
    slot: usize,
    ticket: u64,
}

/// Where this user's tables live, and the prefix of their names.
fn table_dir_and_prefix() -> (PathBuf, String) {
    let dir = match Path::new("/dev/shm").is_dir() {
        true => PathBuf::from("/dev/shm"),
        false => std::env::temp_dir(),
    };
    let uid = nix::unistd::getuid().as_raw();
    (dir, format!("atomio-hostlocks-{uid}-"))
}

/// The path in `dir` of the table of the file whose locks are named `lock_key`.
fn table_path(dir: &Path, prefix: &str, lock_key: &str) -> PathBuf {
    // Named by the lock key's file id (the hash every client of the file agrees on).
    let id = atomio_proto::file_id(lock_key).0;
    dir.join(format!("{prefix}{id:016x}"))
}

/// Removes the tables in `dir` named `prefix…` (other than `keep`) that no handle holds:
/// tables whose every process died (a job killed whole) are not unlinked by a last
/// `Drop`, and would stay in `/dev/shm` until a job on the same file came again. A table
/// is removed only under an exclusive `flock`, which no live handle's shared one allows,
/// and only while its name still points at the inode locked — as `Drop` does, so an opener
/// racing with the sweep opens again (`open_at`). Best effort; returns how many went.
fn sweep_abandoned(dir: &Path, prefix: &str, keep: &Path) -> usize {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let uid = nix::unistd::getuid().as_raw();
    let mut removed = 0;
    for e in entries.flatten() {
        let path = e.path();
        let ours = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(prefix));
        if !ours || path == keep {
            continue;
        }
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
        else {
            continue;
        };
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() || meta.uid() != uid {
            continue;
        }
        if unlink_if_unheld(&file, &path) {
            removed += 1;
        }
    }
    removed
}

/// Unlinks `path` if no other handle holds `file` (an exclusive `flock` is granted only
/// when no shared one is held) and `path` still names `file`'s inode; true if it did. An
/// opener that took its shared lock after this sees the name gone or moved and opens again
/// (`open_at`).
fn unlink_if_unheld(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if flock(file, libc::LOCK_EX | libc::LOCK_NB).is_err() {
        return false;
    }
    let ours = file.metadata().ok().map(|m| (m.dev(), m.ino()));
    let named = std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()));
    ours.is_some() && ours == named && std::fs::remove_file(path).is_ok()
}

fn io_error(what: &str, path: &Path, e: impl std::fmt::Display) -> WireError {
    WireError::new(
        ErrorCode::Io,
        format!("host lock table {}: {what}: {e}", path.display()),
    )
}

static HANDLES: AtomicU64 = AtomicU64::new(1);

impl HostLocks {
    /// Opens (creating it if needed) the host's table of the file named `lock_key`.
    /// Tables of this user that no process holds any more are removed first
    /// (`sweep_abandoned`).
    pub fn open(lock_key: &str) -> Result<Self, WireError> {
        let (dir, prefix) = table_dir_and_prefix();
        let path = table_path(&dir, &prefix, lock_key);
        sweep_abandoned(&dir, &prefix, &path);
        Self::open_at(&path)
    }

    /// Opens (creating it if needed) the table at `path`. Only a file of this user is
    /// trusted: another user's file under the name is refused.
    pub fn open_at(path: &Path) -> Result<Self, WireError> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        // The last handle to close removes the file (see `Drop`): one that opened a file
        // being removed sees it unlinked once it holds its shared lock, and opens anew.
        let file = loop {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .map_err(|e| io_error("open", path, e))?;
            flock(&file, libc::LOCK_SH).map_err(|e| io_error("flock", path, e))?;
            let meta = file.metadata().map_err(|e| io_error("stat", path, e))?;
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.ino() == meta.ino() && m.dev() == meta.dev() => break file,
                _ => continue,
            }
        };
        let meta = file.metadata().map_err(|e| io_error("stat", path, e))?;
        if meta.uid() != nix::unistd::getuid().as_raw() {
            return Err(io_error("owner", path, "belongs to another user"));
        }
        // A zeroed table is an empty one: growing the file is all its creation needs, and
        // growing it again (a racing opener) changes nothing.
        if meta.len() < TABLE_BYTES as u64 {
            file.set_len(TABLE_BYTES as u64)
                .map_err(|e| io_error("size", path, e))?;
        }
        let map = memmap2::MmapOptions::new()
            .len(TABLE_BYTES)
            .map_raw(&file)
            .map_err(|e| io_error("map", path, e))?;
        let base = map.as_ptr();
        let mut t = Self::with_memory(base, Memory::Shared(map));
        t.path = Some(path.to_path_buf());
        t.file = Some(file);
        t.check_layout()?;
        Ok(t)
    }

    /// A table in this process's memory only (tests: threads play the processes).
    pub fn private() -> Self {
        let map = memmap2::MmapOptions::new()
            .len(TABLE_BYTES)
            .map_anon()
            .expect("anonymous memory for a private host lock table");
        let base = map.as_ptr();
        let t = Self::with_memory(base, Memory::Private(map));
        t.check_layout().expect("a fresh table has no layout yet");
        t
    }

    fn with_memory(base: *const u8, memory: Memory) -> Self {
        let pid = std::process::id();
        Self {
            base,
            _memory: memory,
            path: None,
            file: None,
            owner: (u64::from(pid) << 32) | (HANDLES.fetch_add(1, Relaxed) & 0xffff_ffff),
            pid,
            start: atomio_data::version_board::start_time(pid).unwrap_or(0),
            stats: Default::default(),
        }
    }

    fn check_layout(&self) -> Result<(), WireError> {
        match self
            .header(H_LAYOUT)
            .compare_exchange(0, LAYOUT, AcqRel, Acquire)
        {
            Ok(_) => Ok(()),
            Err(LAYOUT) => Ok(()),
            Err(other) => Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "host lock table {}: layout {other}, this build reads {LAYOUT} \
                     (a job of another atomio version runs on this file)",
                    self.path
                        .as_deref()
                        .unwrap_or(Path::new("(private)"))
                        .display()
                ),
            )),
        }
    }

    pub fn stats(&self) -> HostLockStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn header(&self, i: usize) -> &AtomicU32 {
        debug_assert!(i < HEADER_WORDS);
        // SAFETY: page 0 of the table holds HEADER_WORDS u32 words; the table is a
        // page-aligned mapping of TABLE_BYTES, and
        // its header is only ever accessed as AtomicU32 — atomics, so other processes'
        // stores are no data race.
        unsafe { &*(self.base.add(i * 4) as *const AtomicU32) }
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < TABLE_WORDS);
        // SAFETY: as `header`; the words after page 0 are only accessed as AtomicU64.
        unsafe { &*(self.base.add(PAGE + i * 8) as *const AtomicU64) }
    }

    fn field(&self, slot: usize, f: usize) -> &AtomicU64 {
        debug_assert!(f < ENTRY_WORDS);
        self.word(DIR_AT + slot * ENTRY_WORDS + f)
    }

    fn run(&self, slot: usize, k: usize) -> Run {
        let at = RANGES_AT + slot * RANGE_WORDS + RUN_WORDS * k;
        let w = |i: usize| self.word(at + i).load(Relaxed);
        // A torn read (a precheck racing a refill, whose answer is then dropped) must not
        // make arithmetic that panics: clamp to a valid run.
        let (len, count) = (w(1).max(1), w(3).max(1));
        Run {
            start: w(0).min(atomio_layout::MAX_OFFSET),
            len: len.min(atomio_layout::MAX_OFFSET),
            stride: w(2).max(len).min(atomio_layout::MAX_OFFSET),
            count: count.min(atomio_layout::MAX_OFFSET),
        }
    }

    /// Blocks until every byte of `ranges` is locked in `mode` for this handle (all at
    /// once), then returns the grant. `ranges` need not be sorted; empty ones are ignored.
    pub fn acquire(&self, mode: LockMode, ranges: &[ByteRange]) -> Result<HostHeld, WireError> {
        self.take(mode, ranges, true)
            .map(|h| h.expect("a waiting take is granted or fails"))
    }

    /// `acquire` without waiting: `None` (and nothing left in the table) when a held call,
    /// or an earlier waiting one, conflicts.
    pub fn try_acquire(
        &self,
        mode: LockMode,
        ranges: &[ByteRange],
    ) -> Result<Option<HostHeld>, WireError> {
        self.take(mode, ranges, false)
    }

    fn take(
        &self,
        mode: LockMode,
        ranges: &[ByteRange],
        wait: bool,
    ) -> Result<Option<HostHeld>, WireError> {
        let (runs, coarsened) = normalized(ranges)?;
        let mut waited = false;
        let mut reaped = self.lock_table().reaped;
        let Some(slot) = (0..RECORDS).find(|&s| self.field(s, F_STATE).load(Acquire) == FREE)
        else {
            self.unlock_table();
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!("host lock table full: {RECORDS} calls in flight on one file"),
            ));
        };
        self.word(W_HIGH).fetch_max(slot as u64 + 1, Relaxed);
        self.field(slot, F_OWNER).store(self.owner, Relaxed);
        self.field(slot, F_PID).store(u64::from(self.pid), Relaxed);
        self.field(slot, F_START).store(self.start, Relaxed);
        // A call of many ranges writes them and compares them with the calls in flight
        // outside the mutex (the mutex would otherwise be held for the whole walk, and
        // every other client of the host would wait for it); small calls do it all inside.
        let mut known = Vec::new();
        if runs.len() > OUTSIDE_MIN {
            self.field(slot, F_STATE).store(RESERVED, Release);
            self.unlock_table();
            self.fill(slot, mode, &runs);
            known = self.precheck(slot, &runs);
            reaped += self.lock_table().reaped;
        } else {
            self.fill(slot, mode, &runs);
        }
        let ticket = self.word(W_TICKET).fetch_add(1, Relaxed) + 1;
        self.field(slot, F_TICKET).store(ticket, Release);
        self.field(slot, F_STATE).store(WANTED, Release);
        loop {
            if !self.blocked(slot, mode, ticket, &runs, &known) {
                self.field(slot, F_STATE).store(HELD, Release);
                self.unlock_table();
                break;
            }
            if !wait {
                self.field(slot, F_STATE).store(FREE, Release);
                self.unlock_table();
                return Ok(None);
            }
            waited = true;
            let seq = self.header(H_SEQ).load(SeqCst);
            self.header(H_SEQ_SLEEPERS).fetch_add(1, SeqCst);
            self.unlock_table();
            let timed_out = futex_wait(self.header(H_SEQ), seq, PATIENCE);
            self.header(H_SEQ_SLEEPERS).fetch_sub(1, SeqCst);
            reaped += self.lock_table().reaped;
            if timed_out {
                reaped += self.reap_dead();
            }
        }
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.acquired += 1;
        s.waited += u64::from(waited);
        s.reaped += reaped;
        s.coarsened += u64::from(coarsened);
        Ok(Some(HostHeld { slot, ticket }))
    }

    /// Gives a grant back and wakes whoever waits.
    pub fn release(&self, held: HostHeld) -> Result<(), WireError> {
        let state = self.field(held.slot, F_STATE);
        // The record is ours until we free it; a mismatch means another process reaped it
        // (it judged us dead): nothing of ours is left to free.
        if self.field(held.slot, F_OWNER).load(Acquire) == self.owner
            && self.field(held.slot, F_TICKET).load(Acquire) == held.ticket
        {
            state.store(FREE, Release);
        }
        self.bump_seq();
        Ok(())
    }

    fn bump_seq(&self) {
        self.header(H_SEQ).fetch_add(1, SeqCst);
        if self.header(H_SEQ_SLEEPERS).load(SeqCst) > 0 {
            futex_wake(self.header(H_SEQ), i32::MAX);
        }
    }

    /// Writes a call's mode and ranges into its record (not yet visible: its ticket and
    /// state are stored after, with release ordering).
    fn fill(&self, slot: usize, mode: LockMode, runs: &[Run]) {
        let at = RANGES_AT + slot * RANGE_WORDS;
        for (k, r) in runs.iter().enumerate() {
            let w = at + RUN_WORDS * k;
            self.word(w).store(r.start, Relaxed);
            self.word(w + 1).store(r.len, Relaxed);
            self.word(w + 2).store(r.stride, Relaxed);
            self.word(w + 3).store(r.count, Relaxed);
        }
        self.field(slot, F_MODE).store(mode_word(mode), Relaxed);
        self.field(slot, F_N).store(runs.len() as u64, Relaxed);
        self.field(slot, F_HULL_START).store(runs[0].start, Relaxed);
        self.field(slot, F_HULL_END)
            .store(runs[runs.len() - 1].end(), Relaxed);
    }

    /// Outside the mutex: whether each call in flight overlaps `ranges`, keyed by its
    /// (slot, ticket). A record's ranges never change while its ticket is live, and a
    /// refill stores its ranges before its new ticket, so an answer whose ticket read the
    /// same before and after the walk is that ticket's — and a ticket, once released,
    /// never comes back: a stale answer is never looked up.
    fn precheck(&self, slot: usize, runs: &[Run]) -> Vec<(usize, u64, bool)> {
        let mut known = Vec::new();
        for s in (0..self.high()).filter(|&s| s != slot) {
            if !matches!(self.field(s, F_STATE).load(Acquire), WANTED | HELD) {
                continue;
            }
            let ticket = self.field(s, F_TICKET).load(Acquire);
            let overlaps = self.overlaps(s, runs);
            std::sync::atomic::fence(Acquire);
            if self.field(s, F_TICKET).load(Relaxed) == ticket {
                known.push((s, ticket, overlaps));
            }
        }
        known
    }

    /// Under the mutex: whether a held record, or a wanted one with an earlier ticket,
    /// conflicts with the call in `slot` (`known`: overlaps found by `precheck`).
    fn blocked(
        &self,
        slot: usize,
        mode: LockMode,
        ticket: u64,
        runs: &[Run],
        known: &[(usize, u64, bool)],
    ) -> bool {
        (0..self.high()).filter(|&s| s != slot).any(|s| {
            let state = self.field(s, F_STATE).load(Acquire);
            let theirs = self.field(s, F_TICKET).load(Relaxed);
            let before = match state {
                HELD => true,
                WANTED => theirs < ticket,
                _ => false,
            };
            before
                && (mode == LockMode::Write || self.field(s, F_MODE).load(Relaxed) != 0)
                && known
                    .iter()
                    .find(|k| k.0 == s && k.1 == theirs)
                    .map_or_else(|| self.overlaps(s, runs), |k| k.2)
        })
    }

    /// One past the highest record ever used.
    fn high(&self) -> usize {
        (self.word(W_HIGH).load(Relaxed) as usize).min(RECORDS)
    }

    /// Whether record `s`'s runs share a byte with `runs`.
    fn overlaps(&self, s: usize, runs: &[Run]) -> bool {
        let (lo, hi) = (
            self.field(s, F_HULL_START).load(Relaxed),
            self.field(s, F_HULL_END).load(Relaxed),
        );
        if hi <= runs[0].start || runs[runs.len() - 1].end() <= lo {
            return false;
        }
        let n = (self.field(s, F_N).load(Relaxed) as usize).min(MAX_RUNS);
        runs::overlap_with(n, |k| self.run(s, k), runs)
    }

    /// Under the mutex: frees the records of processes that are gone.
    fn reap_dead(&self) -> u64 {
        let mut reaped = 0;
        for s in 0..self.high() {
            if self.field(s, F_STATE).load(Acquire) == FREE {
                continue;
            }
            let pid = self.field(s, F_PID).load(Relaxed) as u32;
            let start = self.field(s, F_START).load(Relaxed);
            if !process_alive(pid, start) {
                self.field(s, F_STATE).store(FREE, Release);
                reaped += 1;
            }
        }
        if reaped > 0 {
            self.bump_seq();
        }
        reaped
    }

    /// Takes the table's mutex (robust: a holder that died is overtaken).
    fn lock_table(&self) -> MutexTaken {
        let m = self.header(H_MUTEX);
        for _ in 0..SPINS {
            if m.compare_exchange_weak(0, self.pid, Acquire, Relaxed)
                .is_ok()
            {
                return MutexTaken { reaped: 0 };
            }
            std::hint::spin_loop();
        }
        loop {
            self.header(H_MUTEX_SLEEPERS).fetch_add(1, SeqCst);
            let holder = m.load(SeqCst);
            let timed_out = holder != 0 && futex_wait(m, holder, PATIENCE);
            self.header(H_MUTEX_SLEEPERS).fetch_sub(1, SeqCst);
            if m.compare_exchange(0, self.pid, Acquire, Relaxed).is_ok() {
                return MutexTaken { reaped: 0 };
            }
            // Every change under the mutex ends with one store, so a dead holder left the
            // table consistent: take the mutex over.
            if timed_out
                && holder != self.pid
                && !process_alive(holder, 0)
                && m.compare_exchange(holder, self.pid, Acquire, Relaxed)
                    .is_ok()
            {
                return MutexTaken { reaped: 1 };
            }
        }
    }

    fn unlock_table(&self) {
        self.header(H_MUTEX).store(0, SeqCst);
        if self.header(H_MUTEX_SLEEPERS).load(SeqCst) > 0 {
            futex_wake(self.header(H_MUTEX), 1);
        }
    }
}

impl Drop for HostLocks {
    /// The last handle on a table removes its file: an exclusive `flock` is granted only
    /// when no other handle holds its shared one (openers re-check the path, see `open_at`).
    /// A table left by killed processes is harmless: its dead records are reaped.
    fn drop(&mut self) {
        if let (Some(file), Some(path)) = (&self.file, &self.path) {
            unlink_if_unheld(file, path);
        }
    }
}

fn flock(file: &std::fs::File, op: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor the `File` owns; it touches no memory of ours.
        match unsafe { libc::flock(file.as_raw_fd(), op) } {
            0 => return Ok(()),
            _ => match std::io::Error::last_os_error() {
                e if e.kind() == std::io::ErrorKind::Interrupted => continue,
                e => return Err(e),
            },
        }
    }
}

/// The mutex was taken (`reaped`: overtaken from a dead holder).
struct MutexTaken {
    reaped: u64,
}

fn mode_word(mode: LockMode) -> u64 {
    match mode {
        LockMode::Read => 0,
        LockMode::Write => 1,
    }
}

/// A call's ranges validated, sorted, merged and folded into runs; coarsened when they
/// fold into more than `MAX_RUNS` (and whether they were).
fn normalized(ranges: &[ByteRange]) -> Result<(Vec<Run>, bool), WireError> {
    for r in ranges {
        r.validate().map_err(|e| {
            WireError::new(ErrorCode::InvalidArgument, format!("host lock range: {e}"))
        })?;
    }
    // Calls' ranges usually arrive sorted and apart (a cursor's output): keep them as
    // they are; anything else is sorted and merged.
    let v = match ranges.windows(2).all(|w| w[0].end < w[1].start)
        && ranges.iter().all(|r| !r.is_empty())
    {
        true => ranges.to_vec(),
        false => atomio_layout::RangeList::from_ranges(ranges.to_vec())
            .as_slice()
            .to_vec(),
    };
    if v.is_empty() {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            "host lock of no bytes",
        ));
    }
    let runs = runs::fold(&v);
    if runs.len() <= MAX_RUNS {
        return Ok((runs, false));
    }
    Ok((runs::fold(&coarsen(&v, MAX_RUNS)), true))
}

/// `ranges` (sorted, disjoint) merged across their smallest gaps until at most `max`
/// remain: a superset of the bytes.
pub fn coarsen(ranges: &[ByteRange], max: usize) -> Vec<ByteRange> {
    if ranges.len() <= max {
        return ranges.to_vec();
    }
    let mut gaps: Vec<(u64, usize)> = ranges
        .windows(2)
        .enumerate()
        .map(|(i, w)| (w[1].start - w[0].end, i))
        .collect();
    gaps.sort_unstable();
    let mut merge = vec![false; ranges.len()];
    for &(_, i) in gaps.iter().take(ranges.len() - max.max(1)) {
        merge[i] = true;
    }
    let mut out: Vec<ByteRange> = Vec::with_capacity(max);
    let mut open = false;
    for (i, r) in ranges.iter().enumerate() {
        match out.last_mut() {
            Some(last) if open => last.end = r.end,
            _ => out.push(*r),
        }
        open = merge[i];
    }
    out
}

/// Whether process `pid` runs (and, if `start` is not 0, is the one that started then).
fn process_alive(pid: u32, start: u64) -> bool {
    if pid == 0 {
        return false;
    }
    match atomio_data::version_board::start_time(pid) {
        Some(s) => start == 0 || s == start,
        // No /proc: ask the kernel whether the pid exists (EPERM: another user's, alive).
        None => !matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None),
            Err(nix::errno::Errno::ESRCH)
        ),
    }
}

/// Sleeps while `word == expected`, at most `timeout`; true when the timeout ended it.
fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) -> bool {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a FUTEX_WAIT (shared: other processes map the word) on a live, aligned u32
    // with a valid timespec; the kernel only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        )
    };
    r == -1 && nix::errno::Errno::last() == nix::errno::Errno::ETIMEDOUT
}

fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: a FUTEX_WAKE on a live, aligned u32; the kernel does not touch its memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn coarsening_merges_the_smallest_gaps_and_keeps_every_byte() {
        let v = vec![r(0, 1), r(10, 11), r(12, 13), r(100, 101)];
        assert_eq!(coarsen(&v, 3), vec![r(0, 1), r(10, 13), r(100, 101)]);
        assert_eq!(coarsen(&v, 2), vec![r(0, 13), r(100, 101)]);
        assert_eq!(coarsen(&v, 1), vec![r(0, 101)]);
        assert_eq!(coarsen(&v, 4), v);
    }

    #[test]
    fn disjoint_calls_are_granted_at_once_and_conflicts_wait_for_the_release() {
        let t = std::sync::Arc::new(HostLocks::private());
        let a = t.acquire(LockMode::Write, &[r(0, 10), r(20, 30)]).unwrap();
        let b = t.acquire(LockMode::Write, &[r(10, 20)]).unwrap();
        let reads = [
            t.acquire(LockMode::Read, &[r(40, 50)]).unwrap(),
            t.acquire(LockMode::Read, &[r(45, 55)]).unwrap(),
        ];
        let granted = std::sync::Arc::new(AtomicU64::new(0));
        let waiter = {
            let (t, granted) = (t.clone(), granted.clone());
            std::thread::spawn(move || {
                let h = t.acquire(LockMode::Write, &[r(29, 41)]).unwrap();
                granted.store(1, SeqCst);
                t.release(h).unwrap();
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(granted.load(SeqCst), 0, "granted over a held write lock");
        t.release(a).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(granted.load(SeqCst), 0, "granted over two held read locks");
        for h in reads {
            t.release(h).unwrap();
        }
        waiter.join().unwrap();
        assert_eq!(granted.load(SeqCst), 1);
        t.release(b).unwrap();
        let s = t.stats();
        assert_eq!((s.acquired, s.waited, s.reaped), (5, 1, 0));
    }

    /// A pid that ran and is gone (the child of a `true` we waited for).
    fn dead_pid() -> u32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    }

    #[test]
    fn a_mutex_held_by_a_dead_process_is_taken_over_and_its_records_freed() {
        let t = HostLocks::private();
        let dead = dead_pid();
        // A process killed inside the mutex, after it had been granted a lock.
        let h = t.acquire(LockMode::Write, &[r(0, 100)]).unwrap();
        t.field(h.slot, F_PID).store(u64::from(dead), Relaxed);
        let _ = h; // never released: the process "died"
        t.header(H_MUTEX).store(dead, SeqCst);
        let t0 = std::time::Instant::now();
        let h = t.acquire(LockMode::Write, &[r(50, 60)]).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(
            t.stats().reaped,
            2,
            "the mutex and the dead process's record"
        );
        t.release(h).unwrap();
        assert_eq!(t.header(H_MUTEX).load(SeqCst), 0);
    }

    #[test]
    fn only_tables_no_handle_holds_are_swept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let prefix = "atomio-hostlocks-test-";
        let at = |n: &str| dir.path().join(format!("{prefix}{n}"));
        let live = HostLocks::open_at(&at("live")).expect("live table");
        std::fs::write(at("dead"), b"a table whose processes all died").expect("dead");
        std::fs::write(at("mine"), b"the caller's own").expect("mine");
        let unrelated = dir.path().join("unrelated");
        std::fs::write(&unrelated, b"not a table").expect("unrelated");
        std::os::unix::fs::symlink(&unrelated, at("link")).expect("symlink");
        assert_eq!(sweep_abandoned(dir.path(), prefix, &at("mine")), 1);
        assert!(!at("dead").exists(), "an unheld table is removed");
        assert!(at("live").exists(), "a held table stays");
        assert!(at("mine").exists(), "the caller's own table stays");
        assert!(unrelated.exists() && at("link").symlink_metadata().is_ok());
        // The live table still works, and its last handle still removes it.
        let held = live.acquire(LockMode::Write, &[r(0, 8)]).expect("lock");
        live.release(held).expect("release");
        drop(live);
        assert!(!at("live").exists());
        assert_eq!(sweep_abandoned(dir.path(), prefix, &at("mine")), 0);
    }

    #[test]
    fn absurd_ranges_are_refused() {
        let t = HostLocks::private();
        assert!(t.acquire(LockMode::Write, &[]).is_err());
        assert!(t.acquire(LockMode::Write, &[r(5, 5)]).is_err());
        assert!(t.acquire(LockMode::Write, &[r(9, 3)]).is_err());
        assert!(t.acquire(LockMode::Write, &[r(0, u64::MAX)]).is_err());
    }
}
