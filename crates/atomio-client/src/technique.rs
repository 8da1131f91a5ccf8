//! The shape every atomicity technique has: the steps of one call.
//!
//! ```text
//!   lock ──► I/O ──► release ──► publish
//! ```
//!
//! A technique says, for one call, *which locks* it takes (`locks`: none, byte ranges on
//! the atomio lock service, or one `fcntl` range on the user's file), *how the bytes move*
//! under them (`io`: exactly the call's pieces, or ROMIO's data sieving over the locked
//! extent), and *what it publishes* after release (`publish`: nothing for lock techniques;
//! a snapshot commit for versioning). The call driver (`File` in Rust; the MPI library's
//! backend table in C) runs the steps in that order; it is the only place lock-then-write
//! lives. A technique is crossed with a data **placement** (`Placement`): the user's own
//! file (`Direct`) or atomio's data servers (`Servers`); `placements()` says which it
//! supports.
//!
//! Where the techniques beyond byte-range locks plug in: the sequencer DLM is a technique
//! whose `locks` are cached stripe locks (`Locks::Cached`, served by its lock client) on
//! `Servers` placement; versioning is `Locks::Versioned` — no locks, the file's versioned
//! store writes a snapshot and publishes it (the commit is its step 4) — on either
//! placement, the placement giving the snapshots' base; interval I/O's `auto` is a technique
//! that picks one of the others per file from the interval analysis.
//!
//! **Invariants:** a technique's locks cover every byte the call touches (coarse ones cover
//! more); `io() == Sieve` only when the locks cover the call's whole bounding extent (data
//! sieving rewrites the holes, which is safe only under a lock on them), and `Windows`
//! only when they cover its windows; techniques are
//! pure (no I/O): the same call gives the same plan.

use atomio_layout::{Access, ByteRange, Layout, ServerId};
use atomio_lock::{Protocol, SubRequest};
use atomio_proto::{LockMode, WireError};
use std::fmt;

/// Where a file's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlacementKind {
    /// The user's ordinary file on the user's file system; atomio holds only locks.
    Direct,
    /// atomio's own data servers (striped objects).
    Servers,
}

impl PlacementKind {
    pub const ALL: [PlacementKind; 2] = [PlacementKind::Direct, PlacementKind::Servers];
    pub fn name(self) -> &'static str {
        match self {
            PlacementKind::Direct => "direct",
            PlacementKind::Servers => "servers",
        }
    }
}

impl fmt::Display for PlacementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PlacementKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        PlacementKind::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown data placement '{s}' (expected direct or servers)"))
    }
}

/// What a call's locks are computed against: how the lock space of the file is striped
/// over the lock servers, and which server is its central one (metadata server).
#[derive(Clone, Debug)]
pub struct LockGeometry {
    pub layout: Layout,
    pub central: ServerId,
    /// The file's interval set, once its views are declared (techniques that split by
    /// intervals: `interval`, `auto`).
    pub intervals: Option<crate::interval::IntervalGeometry>,
}

/// Step 1: the locks of one call.
#[derive(Clone, Debug)]
pub enum Locks {
    /// Byte-range locks on the atomio lock service, acquired with `protocol`.
    Service {
        protocol: Protocol,
        subs: Vec<SubRequest>,
    },
    /// One `fcntl(F_SETLKW)` lock on a range of the user's file (the kernel's, or the file
    /// system's, lock manager): what ROMIO and OMPIO use.
    Fcntl(ByteRange),
    /// Cached stripe locks of a DLM (SeqDLM, dlm-basic, dlm-lustre), taken and kept by the
    /// file's DLM client, which also moves the bytes (write-back cache, SN-tagged flushes):
    /// steps 1–3 of the call are its, and what it caches is flushed when a lock is given
    /// back, at `sync` and at close.
    Cached(crate::dlm::DlmSpec),
    /// No locks: the call is a write of a new snapshot, or a read of the newest published
    /// one, through the file's versioned store (`versioned`): steps 1–4 are its.
    Versioned,
}

impl Locks {
    /// Lock requests this plan makes (for statistics).
    pub fn requests(&self) -> u64 {
        match self {
            Locks::Service { subs, .. } => subs.len() as u64,
            Locks::Fcntl(_) | Locks::Cached(_) => 1,
            Locks::Versioned => 0,
        }
    }

    /// Ranges this plan's requests carry (for statistics): a list request's ranges, one
    /// per `fcntl` or DLM lock, and for a structured request the runs of its access (an
    /// upper bound, without walking it).
    pub fn ranges(&self) -> u64 {
        match self {
            Locks::Service { subs, .. } => subs
                .iter()
                .map(|s| match &s.desc {
                    atomio_proto::ValidDesc::Ranges(l) => l.len() as u64,
                    atomio_proto::ValidDesc::Pattern { access, .. } => {
                        access.pattern().run_count_upper()
                    }
                })
                .sum(),
            Locks::Fcntl(_) | Locks::Cached(_) => 1,
            Locks::Versioned => 0,
        }
    }
}

/// Step 2: how the call's bytes move under its locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMethod {
    /// Exactly the call's pieces, the fastest way atomio has: on the user's file copies
    /// through a shared mapping when the call has many small pieces (`mapped.rs`), else
    /// one `pwrite`/`pread` per contiguous run; on servers one message per server.
    Pieces,
    /// Exactly the call's pieces, one `pwrite`/`pread` per contiguous run and never a
    /// mapping: what an application that locks with `fcntl` and writes each piece itself
    /// does (the `posix-fcntl` baseline must stay that). On servers the same as `Pieces`.
    PieceSyscalls,
    /// ROMIO's data sieving: the call's bounding extent in windows of `buffer` bytes, each
    /// read whole, patched with the call's pieces, and (writes) written back whole.
    Sieve { buffer: u64 },
    /// A write's windows read, patched with its pieces and written back, one span from the
    /// first piece to the last per 4 MiB window (`DirectData::write_windows`). Never a
    /// technique's own method: the call driver picks it for a write of many small dense
    /// pieces on the user's file where every process shares its pages, when the call's
    /// exclusive locks cover its windows (`locks_windows`, `locks_extent`).
    Windows,
}

/// Step 4: what the call publishes after its locks are released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// Lock techniques: the bytes are in place when the I/O step returns.
    Nothing,
}

/// One atomicity technique. Implementations live in `techniques`; users pick one by name
/// through `Strategy`.
pub trait Technique: fmt::Debug + Send + Sync {
    /// The name users type; `Strategy::from_str(name)` gives this technique back.
    fn name(&self) -> String;
    /// False only for `none`.
    fn atomic(&self) -> bool {
        true
    }
    /// The placements this technique can run on.
    fn placements(&self) -> &'static [PlacementKind];
    /// True when its locks are taken on the atomio lock service (a client is needed).
    fn uses_lock_service(&self) -> bool;
    /// Step 1: the locks of a call of `mode` on `access` (`None`: no locks).
    fn locks(
        &self,
        mode: LockMode,
        access: &Access,
        geometry: &LockGeometry,
    ) -> Result<Option<Locks>, WireError>;
    /// True when the call driver must cut each call by the file's interval set: bytes
    /// private to the caller moved with no lock, the rest through `locks` (interval I/O).
    fn splits_by_intervals(&self) -> bool {
        false
    }
    /// True when a call of many small pieces on the user's file may be locked by its
    /// windows instead of its pieces: a read under shared locks on
    /// `direct::read_lock_windows`, a write under exclusive locks on
    /// `direct::write_lock_windows`, its windows then read, patched and written back whole
    /// (`IoMethod::Windows`). More bytes, few ranges. Safe for any technique whose locks are
    /// a function of the bytes alone: a lock on more bytes excludes more calls, never
    /// fewer, and a shared lock never excludes another reader. Not for interval I/O, whose
    /// locks depend on whose bytes they are (and whose private bytes are written with no
    /// lock, so no other rank may rewrite them).
    fn locks_windows(&self) -> bool {
        false
    }
    /// True when every call's locks cover its whole bounding extent (or more): a write of
    /// many small pieces may then be rewritten by windows (`IoMethod::Windows`) under the
    /// locks the technique takes anyway.
    fn locks_extent(&self) -> bool {
        false
    }
    /// Step 2: how bytes move under the locks.
    fn io(&self) -> IoMethod {
        IoMethod::Pieces
    }
    /// Step 4: what is published after release.
    fn publish(&self) -> Publish {
        Publish::Nothing
    }
}
