//! The lock techniques atomio has today, each one implementation of `Technique`.
//!
//! | name | locks for one call | I/O | placements |
//! |---|---|---|---|
//! | `none` | nothing (no atomicity: the upper bound) | pieces | both |
//! | `whole-file` | one exclusive lock on the whole file, at the central lock server | pieces | both |
//! | `bounding-extent` | one lock from the call's first to last byte, at the central server (what ROMIO and OMPIO lock, on atomio's lock service) | pieces | both |
//! | `bounding-extent:sieve` | the same lock | data sieving in 4 MiB windows: ROMIO's atomic mode on atomio's lock service (the extent is held, so its holes may be rewritten) | direct |
//! | `block:<bytes>` / `block:stripe` | every range rounded out to whole blocks (as Lustre and GPFS lock), list method, one-try: `ching:list:one-try` plus the rounding, so the difference is false sharing | pieces | both |
//! | `ching:<method>:<protocol>` | Ching et al.'s byte-range locks | pieces | both |
//! | `posix-fcntl` | one `fcntl` lock over the bounding extent of the user's file | pieces (`pwrite` per run) | direct |
//! | `romio` | one `fcntl` lock over the bounding extent (ROMIO's `ADIOI_WRITE_LOCK`) | data sieving in 4 MiB windows (ROMIO's `ADIOI_GEN_WriteStrided`) | direct |
//! | `dlm-basic`, `dlm-lustre`, `seqdlm[:…]` | cached stripe locks, one per object the call touches, on each object's hull (see `dlm`) | into the client's write-back cache; flushed with SNs when a lock is given back | servers |
//! | `versioning` | none: each write is a new snapshot of immutable chunks, published in version order (see `versioned`) | chunks on the servers; the file's base is the user's file (direct) or the server file | both |
//!
//! **Invariant:** every plan covers every byte of the access (checked by the tests below
//! against the access's ranges); `romio` and `bounding-extent:sieve` sieve only under a
//! lock on the whole extent.

use crate::technique::{IoMethod, LockGeometry, Locks, PlacementKind, Technique};
use atomio_layout::{Access, ByteRange, RangeList, MAX_OFFSET};
use atomio_lock::{plan, Method, Protocol, SubRequest, DEFAULT_LIST_RANGES};
use atomio_proto::{LockMode, ValidDesc, WireError};

const BOTH: &[PlacementKind] = &[PlacementKind::Direct, PlacementKind::Servers];
const DIRECT: &[PlacementKind] = &[PlacementKind::Direct];
const SERVERS: &[PlacementKind] = &[PlacementKind::Servers];

/// A cached-lock DLM (SeqDLM and the traditional DLMs): its client takes and keeps the
/// locks and moves the bytes, so the plan is only which DLM.
#[derive(Debug)]
pub struct CachedStripeLocks(pub crate::dlm::DlmSpec);

impl Technique for CachedStripeLocks {
    fn name(&self) -> String {
        self.0.name()
    }
    fn placements(&self) -> &'static [PlacementKind] {
        SERVERS
    }
    fn uses_lock_service(&self) -> bool {
        true
    }
    fn locks(
        &self,
        _: LockMode,
        access: &Access,
        _: &LockGeometry,
    ) -> Result<Option<Locks>, WireError> {
        Ok(access.hull().map(|_| Locks::Cached(self.0)))
    }
}

/// Versioning (Tran et al.): no locks; the file's versioned store moves the bytes.
#[derive(Debug)]
pub struct Versioning;

impl Technique for Versioning {
    fn name(&self) -> String {
        "versioning".into()
    }
    fn placements(&self) -> &'static [PlacementKind] {
        BOTH
    }
    fn uses_lock_service(&self) -> bool {
        true
    }
    fn locks(
        &self,
        _: LockMode,
        access: &Access,
        _: &LockGeometry,
    ) -> Result<Option<Locks>, WireError> {
        Ok(access.hull().map(|_| Locks::Versioned))
    }
}

/// ROMIO's default data sieving buffer for writes (`ind_wr_buffer_size`, 512 KiB) is
/// smaller than for reads (4 MiB); the faithful baseline uses 4 MiB windows, as
/// `romio_ds_write` with `ind_wr_buffer_size=4194304` does. Kept here in one place.
pub const ROMIO_SIEVE_BUFFER: u64 = 4 << 20;

/// No atomicity.
#[derive(Debug)]
pub struct NoLocks;

impl Technique for NoLocks {
    fn name(&self) -> String {
        "none".into()
    }
    fn atomic(&self) -> bool {
        false
    }
    fn placements(&self) -> &'static [PlacementKind] {
        BOTH
    }
    fn uses_lock_service(&self) -> bool {
        false
    }
    fn locks(&self, _: LockMode, _: &Access, _: &LockGeometry) -> Result<Option<Locks>, WireError> {
        Ok(None)
    }
}

/// One lock on the central server: the whole file, or the call's bounding extent.
/// `sieve`: under the extent lock, ROMIO's data sieving instead of the pieces (the
/// extent is ours, so rewriting its holes is safe) — ROMIO's atomic mode on atomio's lock
/// service; on the user's file only.
#[derive(Debug)]
pub struct CentralLock {
    pub whole_file: bool,
    pub sieve: bool,
}

impl Technique for CentralLock {
    fn name(&self) -> String {
        match (self.whole_file, self.sieve) {
            (true, _) => "whole-file".into(),
            (false, false) => "bounding-extent".into(),
            (false, true) => "bounding-extent:sieve".into(),
        }
    }
    fn placements(&self) -> &'static [PlacementKind] {
        if self.sieve {
            DIRECT
        } else {
            BOTH
        }
    }
    fn locks_extent(&self) -> bool {
        true
    }
    fn io(&self) -> IoMethod {
        if self.sieve {
            IoMethod::Sieve {
                buffer: ROMIO_SIEVE_BUFFER,
            }
        } else {
            IoMethod::Pieces
        }
    }
    fn uses_lock_service(&self) -> bool {
        true
    }
    fn locks(
        &self,
        _: LockMode,
        access: &Access,
        g: &LockGeometry,
    ) -> Result<Option<Locks>, WireError> {
        let Some(hull) = access.hull() else {
            return Ok(None);
        };
        let r = if self.whole_file {
            ByteRange::new(0, MAX_OFFSET)?
        } else {
            hull
        };
        Ok(Some(Locks::Service {
            protocol: Protocol::TwoPhase,
            subs: vec![SubRequest {
                server: g.central,
                first: r.start,
                tier: atomio_lock::plan::server_tier(g.central),
                desc: ValidDesc::Ranges(RangeList::from_disjoint_sorted(&[r])?),
            }],
        }))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockSize {
    Bytes(u64),
    /// The file's (lock) stripe size.
    Stripe,
}

/// Ranges rounded out to blocks: page- or stripe-granular locking.
#[derive(Debug)]
pub struct BlockLocks(pub BlockSize);

impl Technique for BlockLocks {
    fn name(&self) -> String {
        match self.0 {
            BlockSize::Bytes(n) => format!("block:{n}"),
            BlockSize::Stripe => "block:stripe".into(),
        }
    }
    fn placements(&self) -> &'static [PlacementKind] {
        BOTH
    }
    fn locks_windows(&self) -> bool {
        true
    }
    fn uses_lock_service(&self) -> bool {
        true
    }
    fn locks(
        &self,
        _: LockMode,
        access: &Access,
        g: &LockGeometry,
    ) -> Result<Option<Locks>, WireError> {
        if access.hull().is_none() {
            return Ok(None);
        }
        let b = match self.0 {
            BlockSize::Bytes(n) => n,
            BlockSize::Stripe => g.layout.stripe_size(),
        };
        let rounded = RangeList::from_ranges(
            access
                .ranges()
                .map(|r| ByteRange {
                    start: r.start / b * b,
                    end: r.end.div_ceil(b).saturating_mul(b).min(MAX_OFFSET),
                })
                .collect(),
        );
        let as_access = Access::from_list(&rounded)?;
        let method = Method::List {
            max_ranges: DEFAULT_LIST_RANGES,
        };
        Ok(Some(Locks::Service {
            protocol: Protocol::OneTry,
            subs: plan(&as_access, &g.layout, method),
        }))
    }
}

/// Ching et al.'s byte-range locks.
#[derive(Debug)]
pub struct Ching {
    pub method: Method,
    pub protocol: Protocol,
}

impl Technique for Ching {
    fn name(&self) -> String {
        match self.method {
            Method::List { max_ranges } if max_ranges != DEFAULT_LIST_RANGES => {
                format!("ching:list/{max_ranges}:{}", self.protocol)
            }
            m => format!("ching:{m}:{}", self.protocol),
        }
    }
    fn placements(&self) -> &'static [PlacementKind] {
        BOTH
    }
    fn locks_windows(&self) -> bool {
        true
    }
    fn uses_lock_service(&self) -> bool {
        true
    }
    fn locks(
        &self,
        _: LockMode,
        access: &Access,
        g: &LockGeometry,
    ) -> Result<Option<Locks>, WireError> {
        if access.hull().is_none() {
            return Ok(None);
        }
        Ok(Some(Locks::Service {
            protocol: self.protocol,
            subs: plan(access, &g.layout, self.method),
        }))
    }
}

/// The baselines MPI users have: one `fcntl` lock over the call's bounding extent of the
/// user's file. `sieve: false` is `posix-fcntl` (one `pwrite` per piece); `sieve: true` is
/// `romio` (what ROMIO's UFS driver does in atomic mode: lock the extent, then data-sieve).
#[derive(Debug)]
pub struct FcntlExtent {
    pub sieve: bool,
}

impl Technique for FcntlExtent {
    fn name(&self) -> String {
        if self.sieve {
            "romio".into()
        } else {
            "posix-fcntl".into()
        }
    }
    fn placements(&self) -> &'static [PlacementKind] {
        DIRECT
    }
    fn uses_lock_service(&self) -> bool {
        false
    }
    fn locks(
        &self,
        _: LockMode,
        access: &Access,
        _: &LockGeometry,
    ) -> Result<Option<Locks>, WireError> {
        Ok(access.hull().map(Locks::Fcntl))
    }
    fn locks_extent(&self) -> bool {
        true
    }
    fn io(&self) -> IoMethod {
        if self.sieve {
            IoMethod::Sieve {
                buffer: ROMIO_SIEVE_BUFFER,
            }
        } else {
            IoMethod::PieceSyscalls
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_layout::{Layout, Pattern, ServerId};

    fn geometry() -> LockGeometry {
        LockGeometry {
            intervals: None,
            layout: Layout::round_robin(65536, 2, 2, 0).unwrap(),
            central: ServerId(1),
        }
    }

    fn covered(locks: &Locks) -> RangeList {
        match locks {
            Locks::Fcntl(r) => RangeList::from_ranges(vec![*r]),
            // The DLM client locks each object's hull of the call: everything. A versioned
            // call is one snapshot: all its bytes become visible at once.
            Locks::Cached(_) | Locks::Versioned => RangeList::from_ranges(vec![ByteRange {
                start: 0,
                end: MAX_OFFSET,
            }]),
            Locks::Service { subs, .. } => {
                let mut all = Vec::new();
                for s in subs {
                    match &s.desc {
                        ValidDesc::Ranges(l) => all.extend_from_slice(l.as_slice()),
                        ValidDesc::Pattern { access, .. } => all.extend(access.ranges()),
                    }
                }
                RangeList::from_ranges(all)
            }
        }
    }

    fn strided() -> Access {
        Access::new(
            100,
            Pattern::hvector(3, 1, 100_000, &Pattern::bytes(10).unwrap()).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn every_technique_covers_the_access() {
        let a = strided();
        let techniques: Vec<Box<dyn Technique>> = vec![
            Box::new(CentralLock {
                whole_file: true,
                sieve: false,
            }),
            Box::new(CentralLock {
                whole_file: false,
                sieve: false,
            }),
            Box::new(CentralLock {
                whole_file: false,
                sieve: true,
            }),
            Box::new(BlockLocks(BlockSize::Bytes(4096))),
            Box::new(BlockLocks(BlockSize::Stripe)),
            Box::new(Ching {
                method: Method::Posix,
                protocol: Protocol::OneTry,
            }),
            Box::new(Ching {
                method: Method::Datatype,
                protocol: Protocol::AltTry,
            }),
            Box::new(FcntlExtent { sieve: true }),
            Box::new(Versioning),
        ];
        for t in techniques {
            let locks = t
                .locks(LockMode::Write, &a, &geometry())
                .unwrap()
                .unwrap_or_else(|| panic!("{} takes no lock", t.name()));
            let c = covered(&locks);
            for r in a.ranges() {
                assert!(
                    c.as_slice()
                        .iter()
                        .any(|l| l.start <= r.start && r.end <= l.end),
                    "{}: {r} not covered by {:?}",
                    t.name(),
                    c.as_slice()
                );
            }
            if matches!(t.io(), IoMethod::Sieve { .. }) {
                assert!(
                    c.as_slice().iter().any(|l| *l == a.hull().unwrap()),
                    "{} sieves without the whole extent locked",
                    t.name()
                );
            }
        }
        assert!(NoLocks
            .locks(LockMode::Write, &a, &geometry())
            .unwrap()
            .is_none());
    }

    #[test]
    fn block_rounding_covers_more_than_the_access() {
        let a = Access::new(
            100,
            Pattern::hvector(3, 1, 10_000, &Pattern::bytes(10).unwrap()).unwrap(),
        )
        .unwrap();
        let locks = BlockLocks(BlockSize::Bytes(4096))
            .locks(LockMode::Write, &a, &geometry())
            .unwrap()
            .unwrap();
        assert_eq!(
            covered(&locks).as_slice(),
            &[
                ByteRange::new(0, 4096).unwrap(),
                ByteRange::new(8192, 12288).unwrap(),
                ByteRange::new(16384, 20480).unwrap()
            ]
        );
    }
}
