//! The version manager of one file (§5.3.4): versions are assigned first-come-first-served
//! *after* a writer stored its chunks, the in-flight writers' regions are handed out as
//! hints, and versions are published strictly in order once their trees are complete.
//!
//! A writer that never completes would block every later version forever, so a version
//! assigned longer ago than the manager's patience is **aborted** — with every in-flight
//! version above it, which may hold forward references to its nodes; their writers are told
//! and retry with new versions. Publication skips aborted numbers. What this costs a slow
//! but live writer is a retry, never a torn snapshot.
//!
//! **Invariants:** `published < next`; every version `≤ published` is published or aborted;
//! a hint lists exactly the in-flight versions between the published one and the version
//! assigned; no published tree references an aborted version (every version that could
//! hold such a reference was aborted with it).

use crate::geometry::Geometry;
use crate::Version;
use atomio_layout::RangeList;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VersionState {
    InFlight,
    Complete,
    Published,
    Aborted,
    /// Published, then handed to a collection plan: its unshared nodes and chunks are being
    /// freed (readers are refused from the plan on; a later plan hands it out again, so a
    /// collector that dies mid-pass leaks nothing).
    Collecting,
    /// Published, then dropped by garbage collection (its unshared nodes and chunks freed).
    Collected,
    /// Aborted, and its nodes freed.
    Discarded,
}

impl VersionState {
    /// Aborted (its writer must write again under a new version).
    pub fn aborted(self) -> bool {
        matches!(self, VersionState::Aborted | VersionState::Discarded)
    }

    /// Published once, and dropped (or being dropped) by a collection.
    pub fn collected(self) -> bool {
        matches!(self, VersionState::Collecting | VersionState::Collected)
    }
}

/// What `atomio versions` lists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRecord {
    pub version: Version,
    /// Unix milliseconds at assignment.
    pub time_ms: u64,
    pub writer: u64,
    pub bytes: u64,
    /// The file's size in this snapshot.
    pub size: u64,
    pub state: VersionState,
}

/// The answer to an assignment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assigned {
    pub version: Version,
    pub published: Version,
    /// The newest snapshot the file's base holds: a `published` at or below it is the
    /// base itself (no tree to read).
    pub base: Version,
    /// Every in-flight version between `published` and `version`, with its regions.
    pub hints: Vec<(Version, RangeList)>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManagerError {
    #[error("version {0} was aborted (its writer, or one below it, took too long); write again")]
    Aborted(Version),
    #[error("version {0} is not assigned")]
    Unknown(Version),
    #[error("version {0} is not published")]
    NotPublished(Version),
    #[error("version {0} was garbage-collected")]
    Collected(Version),
    #[error("an empty write makes no version")]
    Empty,
    #[error(
        "version {0} is older than version {1}, which the file itself now holds (materialized)"
    )]
    BelowBase(Version, Version),
    #[error("{0}")]
    Geometry(#[from] crate::geometry::GeometryError),
}

struct InFlight {
    regions: RangeList,
    complete: bool,
    assigned_ms: u64,
    /// The published version its writer builds on (reads nodes of).
    base: Version,
}

/// Versions of one file.
pub struct FileVersions {
    pub geometry: Geometry,
    next: Version,
    published: Version,
    inflight: BTreeMap<Version, InFlight>,
    history: BTreeMap<Version, VersionRecord>,
    writers: u32,
    /// The file's base holds this snapshot (materialized): snapshots up to it read from
    /// the base alone, and their trees are garbage once no writer in flight builds on them.
    base: Version,
    /// Snapshots below this are refused (a materialization of this one is under way, or
    /// done).
    floor: Version,
}

/// What a garbage collection pass frees: the published versions `collect` (increasing)
/// against the oldest version it keeps, `keep` (`0`: none is published), and every node of
/// the aborted versions `aborted` (not their chunks: their writers stored them once and
/// write them again under new versions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcPlan {
    pub keep: Version,
    pub collect: Vec<Version>,
    pub aborted: Vec<Version>,
}

impl FileVersions {
    pub fn new(geometry: Geometry) -> Self {
        Self {
            geometry,
            next: 1,
            published: 0,
            inflight: BTreeMap::new(),
            history: BTreeMap::new(),
            writers: 0,
            base: 0,
            floor: 0,
        }
    }

    /// Materialization of snapshot `v` into the base starts (`done: false`: older
    /// snapshots are refused from now on) or is done (the base is `v`).
    pub fn set_base(&mut self, v: Version, done: bool) {
        self.floor = self.floor.max(v);
        if done {
            self.base = self.base.max(v);
        }
    }

    /// The newest snapshot the base holds.
    pub fn base(&self) -> Version {
        self.base
    }

    /// A new writer's number: the object its chunks go to in the file's chunk space.
    pub fn new_writer(&mut self) -> u32 {
        self.writers = self.writers.wrapping_add(1);
        self.writers
    }

    pub fn published(&self) -> Version {
        self.published
    }

    /// The file's size in version `v` (0 for version 0).
    pub fn size(&self, v: Version) -> Result<u64, ManagerError> {
        if v < self.floor {
            return Err(ManagerError::BelowBase(v, self.floor));
        }
        if v == 0 {
            return Ok(0);
        }
        match self.history.get(&v) {
            Some(r) if r.state == VersionState::Published => Ok(r.size),
            Some(r) if r.state.aborted() => Err(ManagerError::Aborted(v)),
            Some(r) if r.state.collected() => Err(ManagerError::Collected(v)),
            Some(_) => Err(ManagerError::NotPublished(v)),
            None => Err(ManagerError::Unknown(v)),
        }
    }

    fn size_below(&self, v: Version) -> u64 {
        self.history
            .range(..v)
            .rev()
            .find(|(_, r)| !r.state.aborted())
            .map_or(0, |(_, r)| r.size)
    }

    /// Assigns the next version to a writer whose chunks are stored.
    pub fn assign(
        &mut self,
        writer: u64,
        regions: RangeList,
        now_ms: u64,
    ) -> Result<Assigned, ManagerError> {
        let hull = regions.hull().ok_or(ManagerError::Empty)?;
        self.geometry.check(hull.end)?;
        let version = self.next;
        self.next += 1;
        let hints = self
            .inflight
            .iter()
            .map(|(u, f)| (*u, f.regions.clone()))
            .collect();
        let size = self.size_below(version).max(hull.end);
        self.history.insert(
            version,
            VersionRecord {
                version,
                time_ms: now_ms,
                writer,
                bytes: regions.total_bytes(),
                size,
                state: VersionState::InFlight,
            },
        );
        self.inflight.insert(
            version,
            InFlight {
                regions,
                complete: false,
                assigned_ms: now_ms,
                base: self.published,
            },
        );
        Ok(Assigned {
            version,
            published: self.published,
            base: self.base,
            hints,
        })
    }

    /// The writer of `v` put every node of its tree. Returns the versions this publishes.
    pub fn complete(&mut self, v: Version) -> Result<Vec<Version>, ManagerError> {
        match self.inflight.get_mut(&v) {
            Some(f) => f.complete = true,
            None => {
                return Err(match self.history.get(&v).map(|r| r.state) {
                    Some(s) if s.aborted() => ManagerError::Aborted(v),
                    Some(_) => ManagerError::Unknown(v),
                    None => ManagerError::Unknown(v),
                })
            }
        }
        if let Some(r) = self.history.get_mut(&v) {
            r.state = VersionState::Complete;
        }
        Ok(self.publish_ready())
    }

    fn publish_ready(&mut self) -> Vec<Version> {
        let mut out = Vec::new();
        while let Some(entry) = self.inflight.first_entry() {
            if !entry.get().complete {
                break;
            }
            let (v, _) = entry.remove_entry();
            self.published = v;
            if let Some(r) = self.history.get_mut(&v) {
                r.state = VersionState::Published;
            }
            out.push(v);
        }
        out
    }

    /// Aborts the oldest incomplete version if assigned more than `patience_ms` ago, and
    /// every in-flight version above it. Returns the aborted versions.
    pub fn expire(&mut self, now_ms: u64, patience_ms: u64) -> Vec<Version> {
        let Some((&v, _)) = self
            .inflight
            .iter()
            .find(|(_, f)| !f.complete && now_ms.saturating_sub(f.assigned_ms) > patience_ms)
        else {
            return Vec::new();
        };
        self.abort_from(v)
    }

    /// Aborts `v` and every in-flight version above it (a writer that gave up).
    pub fn abort_from(&mut self, v: Version) -> Vec<Version> {
        let aborted: Vec<Version> = self.inflight.range(v..).map(|(u, _)| *u).collect();
        for u in &aborted {
            self.inflight.remove(u);
            if let Some(r) = self.history.get_mut(u) {
                r.state = VersionState::Aborted;
            }
        }
        aborted
    }

    pub fn state(&self, v: Version) -> Option<VersionState> {
        self.history.get(&v).map(|r| r.state)
    }

    pub fn list(&self) -> Vec<VersionRecord> {
        self.history.values().cloned().collect()
    }

    /// Plans a collection keeping the newest `keep_last` published versions (at least one)
    /// and, when `newer_than_ms` is given, every version assigned after it, and every
    /// version an in-flight writer builds on. Aborted versions below the kept ones are
    /// collected too (their nodes are unreachable). The versions planned become
    /// `Collecting` (see `VersionState`), and versions still `Collecting` below the kept
    /// ones are planned again: several collectors may run at once, each plan covering the
    /// earlier ones' versions.
    pub fn gc_plan(&mut self, keep_last: u64, newer_than_ms: Option<u64>) -> GcPlan {
        let published: Vec<&VersionRecord> = self
            .history
            .values()
            .filter(|r| r.state == VersionState::Published)
            .collect();
        let keep_last = keep_last.max(1) as usize;
        let mut keep = published
            .len()
            .checked_sub(keep_last)
            .and_then(|i| published.get(i))
            .map_or_else(|| published.first().map_or(0, |r| r.version), |r| r.version);
        if let Some(t) = newer_than_ms {
            if let Some(r) = published.iter().find(|r| r.time_ms > t) {
                keep = keep.min(r.version);
            }
        }
        // Snapshots up to the materialized base read from the base alone: none of their
        // trees is needed by readers.
        let mut target = keep.max(self.base + 1);
        // A writer in flight reads the tree of the version it was handed as its base (not
        // only the nodes the kept versions share): keep that version's whole tree.
        if let Some(b) = self
            .inflight
            .values()
            .map(|f| f.base)
            .filter(|&b| b > 0)
            .min()
        {
            target = target.min(b);
        }
        // The oldest kept snapshot (0: none, when everything below `target` goes).
        let keep = published
            .iter()
            .map(|r| r.version)
            .find(|&v| v >= target)
            .unwrap_or(0);
        let keep_below = if keep == 0 { target } else { keep };
        let below = |f: fn(VersionState) -> bool| -> Vec<Version> {
            self.history
                .range(..keep_below)
                .filter(|(_, r)| f(r.state))
                .map(|(v, _)| *v)
                .collect()
        };
        let plan = GcPlan {
            keep,
            collect: below(|s| matches!(s, VersionState::Published | VersionState::Collecting)),
            aborted: below(|s| s == VersionState::Aborted),
        };
        for v in &plan.collect {
            if let Some(r) = self.history.get_mut(v) {
                r.state = VersionState::Collecting;
            }
        }
        plan
    }

    /// A collection finished: its published versions become `Collected`, its aborted ones
    /// `Discarded`.
    pub fn gc_done(&mut self, plan: &GcPlan) {
        for v in &plan.collect {
            if let Some(r) = self.history.get_mut(v) {
                if matches!(r.state, VersionState::Published | VersionState::Collecting) {
                    r.state = VersionState::Collected;
                }
            }
        }
        for v in &plan.aborted {
            if let Some(r) = self.history.get_mut(v) {
                r.state = VersionState::Discarded;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_layout::ByteRange;

    fn regions(a: u64, b: u64) -> RangeList {
        RangeList::from_ranges(vec![ByteRange::new(a, b).unwrap()])
    }

    #[test]
    fn publishes_in_version_order_whatever_the_completion_order() {
        let mut m = FileVersions::new(Geometry::new(16, 4, 1 << 20).unwrap());
        let a = m.assign(1, regions(0, 10), 0).unwrap();
        let b = m.assign(2, regions(5, 20), 0).unwrap();
        assert_eq!((a.version, b.version), (1, 2));
        assert_eq!(b.hints.len(), 1);
        assert_eq!(b.hints[0].0, 1);
        assert_eq!(m.complete(2).unwrap(), Vec::<Version>::new());
        assert_eq!(m.published(), 0);
        assert_eq!(m.complete(1).unwrap(), vec![1, 2]);
        assert_eq!(m.size(2).unwrap(), 20);
    }

    #[test]
    fn a_stalled_writer_is_aborted_with_everything_above_it() {
        let mut m = FileVersions::new(Geometry::new(16, 4, 1 << 20).unwrap());
        m.assign(1, regions(0, 10), 0).unwrap();
        m.assign(2, regions(0, 10), 0).unwrap();
        m.complete(1).unwrap();
        m.assign(3, regions(0, 30), 500).unwrap();
        m.complete(3).unwrap();
        assert!(m.expire(900, 1000).is_empty());
        assert_eq!(m.expire(1001, 1000), vec![2, 3]);
        assert_eq!(m.complete(3), Err(ManagerError::Aborted(3)));
        assert_eq!(m.published(), 1);
        let d = m.assign(3, regions(0, 5), 1002).unwrap();
        assert_eq!((d.version, d.published, d.hints.len()), (4, 1, 0));
        assert_eq!(m.complete(4).unwrap(), vec![4]);
        // Version 4's size does not count the aborted writes.
        assert_eq!(m.size(4).unwrap(), 10);
        assert_eq!(m.size(3), Err(ManagerError::Aborted(3)));
    }

    #[test]
    fn gc_keeps_the_newest_published_versions() {
        let mut m = FileVersions::new(Geometry::new(16, 4, 1 << 20).unwrap());
        for i in 0..6 {
            let a = m.assign(1, regions(0, 10), i * 10).unwrap();
            m.complete(a.version).unwrap();
        }
        let plan = m.gc_plan(4, Some(5));
        assert_eq!((plan.keep, plan.collect.clone()), (2, vec![1]));
        // Planned: refused to readers at once, and planned again by the next collector
        // (the first may have died mid-pass).
        assert_eq!(m.size(1), Err(ManagerError::Collected(1)));
        assert_eq!(m.state(1), Some(VersionState::Collecting));
        let plan = m.gc_plan(4, None);
        assert_eq!(plan.keep, 3);
        assert_eq!(plan.collect, vec![1, 2]);
        m.gc_done(&plan);
        assert_eq!(m.state(2), Some(VersionState::Collected));
        assert_eq!(m.size(1), Err(ManagerError::Collected(1)));
        assert_eq!(m.gc_plan(4, None).collect, Vec::<Version>::new());
        assert!(m.assign(1, RangeList::new(), 0).is_err());
    }
}
