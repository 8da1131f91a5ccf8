//! A seeded simulation of versioned writes: writers, the version manager, a node store and
//! chunk stores in one process, every step of every writer (store chunks, assign, each node
//! fetch of the tree build, each node put, complete) interleaved in a random order drawn
//! from the seed, with garbage collection and stalled writers mixed in. After every
//! publication the new snapshot is read through its tree and compared byte for byte with a
//! model that applied the writes in version order; at the end every snapshot still kept is
//! read again.
//!
//! Negative controls prove the checks can fail: publishing a version as soon as its own
//! writer completes (out of order), and a collector that frees every node of a dropped
//! version, shared or not.
//!
//! **Invariants checked:** every published snapshot equals the model; every kept snapshot
//! stays readable and equal after collections; no node is ever asked for that was not put
//! (a reader or builder never follows a reference to a missing node); nodes added per write
//! are bounded by the positions the write touches (sharing), not by the file size.

use crate::build::{BuildStep, TreeBuilder, WritePieces};
use crate::gc::{GcStep, GcWalker};
use crate::geometry::Geometry;
use crate::manager::{FileVersions, VersionState};
use crate::node::{ChunkRef, Node, NodeKey};
use crate::read::{ReadStep, TreeReader};
use crate::Version;
use atomio_layout::{ByteRange, RangeList};
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    None,
    /// Readers see a version as soon as its writer completes, before lower versions.
    PublishOutOfOrder,
    /// The collector frees every node of a dropped version, shared or not.
    GcFreesShared,
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub writers: usize,
    pub writes_each: usize,
    pub file_size: u64,
    pub chunk: u64,
    pub fanout: u32,
    pub servers: u32,
    pub max_regions: usize,
    /// Collect keeping this many newest snapshots, now and then.
    pub gc_keep: Option<u64>,
    /// Writers sometimes stall after assignment; the manager aborts them after this long.
    pub stalls: bool,
    pub control: Control,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            writers: 4,
            writes_each: 6,
            file_size: 3000,
            chunk: 64,
            fanout: 4,
            servers: 3,
            max_regions: 6,
            gc_keep: Some(2),
            stalls: true,
            control: Control::None,
        }
    }
}

#[derive(Debug, Default)]
pub struct SimReport {
    pub published: u64,
    pub aborted: u64,
    pub collected: u64,
    pub nodes_put: u64,
    pub reads_checked: u64,
    pub steps: u64,
}

enum Phase {
    Idle,
    Assigned {
        version: Version,
        builder: TreeBuilder,
        want: Vec<NodeKey>,
    },
    Putting {
        version: Version,
        nodes: Vec<(NodeKey, Node)>,
    },
    Completing(Version),
    /// Completed; the manager answers once the version is published (or aborted under it).
    Awaiting(Version),
    Stalled {
        version: Version,
        builder: TreeBuilder,
        until_ms: u64,
    },
}

struct Writer {
    object: u32,
    cursor: Vec<u64>,
    left: usize,
    /// The current write: its regions, bytes (offset order) and stored pieces.
    write: Option<(RangeList, Vec<u8>, WritePieces)>,
    phase: Phase,
}

struct World {
    g: Geometry,
    cfg: SimConfig,
    manager: FileVersions,
    nodes: HashMap<NodeKey, Node>,
    chunks: HashMap<(u32, u32), Vec<u8>>,
    /// Each version's write (regions, bytes), by version.
    writes: BTreeMap<Version, (RangeList, Vec<u8>)>,
    /// Versions readers may read, and what they must see.
    readable: BTreeMap<Version, Vec<u8>>,
    collected: HashSet<Version>,
    report: SimReport,
}

/// Poison for punched chunk bytes: a read that reaches a freed byte sees it.
const PUNCHED: u8 = 0xEE;

impl World {
    fn fetch(&self, k: &NodeKey) -> Result<Node, String> {
        self.nodes
            .get(k)
            .cloned()
            .ok_or_else(|| format!("node {k:?} asked for but never put (or freed)"))
    }

    fn model_of(&self, v: Version) -> Vec<u8> {
        let mut bytes = vec![0u8; self.cfg.file_size as usize];
        for (u, (regions, data)) in self.writes.range(..=v) {
            if self.manager.state(*u).is_some_and(VersionState::aborted) {
                continue;
            }
            let mut at = 0usize;
            for r in regions.as_slice() {
                let n = r.len() as usize;
                bytes[r.start as usize..r.end as usize].copy_from_slice(&data[at..at + n]);
                at += n;
            }
        }
        bytes
    }

    fn read(&mut self, v: Version) -> Result<Vec<u8>, String> {
        let all = RangeList::from_ranges(vec![ByteRange::new(0, self.cfg.file_size).unwrap()]);
        let mut reader = TreeReader::new(self.g, v, all);
        let mut supply = Vec::new();
        let segs = loop {
            match reader.advance(std::mem::take(&mut supply))? {
                ReadStep::Fetch(keys) => {
                    for k in keys {
                        supply.push((k, self.fetch(&k)?));
                    }
                }
                ReadStep::Done(segs) => break segs,
            }
        };
        let mut out = vec![0u8; self.cfg.file_size as usize];
        for s in segs {
            if let Some(at) = s.at {
                let obj = self
                    .chunks
                    .get(&(at.server, at.object))
                    .ok_or("chunk object missing")?;
                let src = obj
                    .get(at.offset as usize..(at.offset + s.len) as usize)
                    .ok_or("chunk bytes missing")?;
                out[s.start as usize..(s.start + s.len) as usize].copy_from_slice(src);
            }
        }
        self.report.reads_checked += 1;
        Ok(out)
    }

    fn check(&mut self, v: Version) -> Result<(), String> {
        let want = self.model_of(v);
        let got = self.read(v)?;
        if let Some(i) = (0..want.len()).find(|&i| want[i] != got[i]) {
            return Err(format!(
                "version {v}: byte {i} reads {:#x}, the model says {:#x}",
                got[i], want[i]
            ));
        }
        self.readable.insert(v, want);
        Ok(())
    }

    fn publish(&mut self, versions: Vec<Version>) -> Result<(), String> {
        for v in versions {
            self.report.published += 1;
            if self.cfg.control == Control::PublishOutOfOrder {
                continue; // already read when its writer completed
            }
            self.check(v)?;
        }
        Ok(())
    }

    fn collect(&mut self, keep_last: u64) -> Result<(), String> {
        let plan = self.manager.gc_plan(keep_last, None);
        for &w in &plan.collect {
            if self.collected.contains(&w) {
                continue;
            }
            let garbage = if self.cfg.control == Control::GcFreesShared {
                let nodes = self
                    .nodes
                    .keys()
                    .filter(|k| k.version == w)
                    .copied()
                    .collect();
                crate::gc::Garbage {
                    nodes,
                    punch: Vec::new(),
                }
            } else {
                let mut walker = GcWalker::new(self.g, w, plan.keep);
                let mut supply = Vec::new();
                loop {
                    match walker.advance(std::mem::take(&mut supply))? {
                        GcStep::Fetch(keys) => {
                            for k in keys {
                                supply.push((k, self.nodes.get(&k).cloned()));
                            }
                        }
                        GcStep::Done(g) => break g,
                    }
                }
            };
            for k in &garbage.nodes {
                self.nodes.remove(k);
            }
            for p in &garbage.punch {
                let obj = self
                    .chunks
                    .get_mut(&(p.at.server, p.at.object))
                    .ok_or("punch in a missing object")?;
                obj[p.at.offset as usize..(p.at.offset + p.len) as usize].fill(PUNCHED);
            }
            self.collected.insert(w);
            self.readable.remove(&w);
            self.report.collected += 1;
        }
        for &a in &plan.aborted {
            self.nodes.retain(|k, _| k.version != a);
        }
        self.manager.gc_done(&plan);
        // Every snapshot still kept reads as before.
        let kept: Vec<Version> = self.readable.keys().copied().collect();
        for v in kept {
            let want = self.readable[&v].clone();
            if self.read(v)? != want {
                return Err(format!(
                    "snapshot {v} changed after collecting {:?}",
                    plan.collect
                ));
            }
        }
        Ok(())
    }
}

/// Runs one seeded simulation; `Err` names the first violated invariant.
pub fn run(seed: u64, cfg: &SimConfig) -> Result<SimReport, String> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let g = Geometry::new(cfg.chunk, cfg.fanout, cfg.file_size).map_err(|e| e.to_string())?;
    let mut w = World {
        g,
        cfg: cfg.clone(),
        manager: FileVersions::new(g),
        nodes: HashMap::new(),
        chunks: HashMap::new(),
        writes: BTreeMap::new(),
        readable: BTreeMap::new(),
        collected: HashSet::new(),
        report: SimReport::default(),
    };
    let mut writers: Vec<Writer> = (0..cfg.writers)
        .map(|_| Writer {
            object: w.manager.new_writer(),
            cursor: vec![0; cfg.servers as usize],
            left: cfg.writes_each,
            write: None,
            phase: Phase::Idle,
        })
        .collect();
    // Long enough for a live writer among many to finish (each step is one writer's), short
    // enough that stalled writers are aborted many times per run.
    let mut clock = Clock {
        now_ms: 0,
        patience_ms: 60 * (cfg.writers as u64) * g.levels as u64,
    };
    loop {
        w.report.steps += 1;
        clock.now_ms += 1;
        if w.report.steps > 1_000_000 {
            return Err("no progress".into());
        }
        let busy: Vec<usize> = (0..writers.len())
            .filter(|&i| writers[i].left > 0 || !matches!(writers[i].phase, Phase::Idle))
            .collect();
        if busy.is_empty() {
            break;
        }
        if cfg.stalls {
            let aborted = w.manager.expire(clock.now_ms, clock.patience_ms);
            w.report.aborted += aborted.len() as u64;
        }
        if let Some(keep) = cfg.gc_keep {
            if rng.gen_ratio(1, 40) {
                w.collect(keep)?;
            }
        }
        let i = busy[rng.gen_range(0..busy.len())];
        let wr = &mut writers[i];
        let phase = std::mem::replace(&mut wr.phase, Phase::Idle);
        wr.phase = w.advance(i, wr, phase, &mut rng, &clock)?;
    }
    if let Some(keep) = cfg.gc_keep {
        w.collect(keep)?;
    }
    let kept: Vec<Version> = w.readable.keys().copied().collect();
    for v in kept {
        w.check(v)?;
    }
    Ok(w.report)
}

/// The simulation's time, in steps (virtual ms), and how long the manager waits for a
/// stalled writer before it aborts it.
struct Clock {
    now_ms: u64,
    patience_ms: u64,
}

type Rng8 = rand_chacha::ChaCha8Rng;

/// One writer's steps, a phase at a time.
impl World {
    /// Writer `i` takes its next step from `phase`; the phase it is in after it.
    fn advance(
        &mut self,
        i: usize,
        wr: &mut Writer,
        phase: Phase,
        rng: &mut Rng8,
        clock: &Clock,
    ) -> Result<Phase, String> {
        Ok(match phase {
            Phase::Idle => self.start_write(i, wr, rng, clock)?,
            Phase::Awaiting(version) => match self.manager.state(version) {
                Some(s) if s.aborted() => {
                    self.writes.remove(&version);
                    Phase::Idle
                }
                Some(VersionState::Complete) => Phase::Awaiting(version),
                _ => {
                    wr.write = None;
                    Phase::Idle
                }
            },
            Phase::Stalled {
                version,
                builder,
                until_ms,
            } => {
                // A stalled writer wakes up: its version was aborted (write again) or not.
                if clock.now_ms < until_ms {
                    Phase::Stalled {
                        version,
                        builder,
                        until_ms,
                    }
                } else if self
                    .manager
                    .state(version)
                    .is_some_and(VersionState::aborted)
                {
                    Phase::Idle
                } else {
                    Phase::Assigned {
                        version,
                        builder,
                        want: Vec::new(),
                    }
                }
            }
            Phase::Assigned {
                version,
                builder,
                want,
            } => self.build(version, builder, want)?,
            Phase::Putting { version, nodes } => self.put_some(version, nodes, rng)?,
            Phase::Completing(version) => self.complete(wr, version)?,
        })
    }

    /// An idle writer stores a new write's chunks (unless a write of its was aborted: it
    /// writes that again), then asks for a version; it may stall right after.
    fn start_write(
        &mut self,
        i: usize,
        wr: &mut Writer,
        rng: &mut Rng8,
        clock: &Clock,
    ) -> Result<Phase, String> {
        if wr.write.is_none() {
            wr.left -= 1;
            let Some(write) = self.store_write(wr, rng) else {
                return Ok(Phase::Idle);
            };
            wr.write = Some(write);
        }
        let (regions, _, pieces) = wr.write.clone().expect("set above");
        // Sometimes declare fewer, wider regions than written (as a client does for
        // writes of very many pieces).
        let declared = match rng.gen_ratio(1, 3) {
            true => crate::build::coalesce(&regions, rng.gen_range(1..=3)),
            false => regions,
        };
        let a = self
            .manager
            .assign(i as u64, declared.clone(), clock.now_ms)
            .map_err(|e| e.to_string())?;
        let builder = TreeBuilder::new(self.g, a.version, a.published, a.hints, pieces, &declared);
        Ok(if self.cfg.stalls && rng.gen_ratio(1, 25) {
            Phase::Stalled {
                version: a.version,
                builder,
                until_ms: clock.now_ms + rng.gen_range(0..2 * clock.patience_ms),
            }
        } else {
            Phase::Assigned {
                version: a.version,
                builder,
                want: Vec::new(),
            }
        })
    }

    /// A new write of random regions and bytes, its chunks stored in `wr`'s objects; `None`
    /// when the regions drawn are empty.
    fn store_write(
        &mut self,
        wr: &mut Writer,
        rng: &mut Rng8,
    ) -> Option<(RangeList, Vec<u8>, WritePieces)> {
        let (g, cfg) = (self.g, &self.cfg);
        let n = rng.gen_range(1..=cfg.max_regions);
        let mut cuts: Vec<u64> = (0..2 * n)
            .map(|_| rng.gen_range(0..=cfg.file_size))
            .collect();
        cuts.sort_unstable();
        let ranges: Vec<ByteRange> = cuts
            .chunks(2)
            .filter(|c| c[0] < c[1])
            .map(|c| ByteRange::new(c[0], c[1]).unwrap())
            .collect();
        let regions = RangeList::from_ranges(ranges);
        if regions.is_empty() {
            return None;
        }
        let data: Vec<u8> = (0..regions.total_bytes())
            .map(|_| rng.gen_range(1..=255))
            .collect();
        let mut pieces = WritePieces::default();
        let mut at = 0usize;
        for r in regions.as_slice() {
            // Chunk placement: each block's bytes go to server `block % servers`.
            let mut s = r.start;
            while s < r.end {
                let e = r.end.min((g.block(s) + 1) * g.chunk);
                let server = (g.block(s) % cfg.servers as u64) as u32;
                let obj = self.chunks.entry((server, wr.object)).or_default();
                let off = wr.cursor[server as usize];
                obj.extend_from_slice(&data[at..at + (e - s) as usize]);
                wr.cursor[server as usize] += e - s;
                let at_chunk = ChunkRef {
                    server,
                    object: wr.object,
                    offset: off,
                };
                pieces.add(&g, ByteRange::new(s, e).unwrap(), at_chunk);
                at += (e - s) as usize;
                s = e;
            }
        }
        Some((regions, data, pieces))
    }

    /// The tree build of `version` gets the nodes it asked for and goes on: it asks for
    /// more, or its new nodes are ready to put.
    fn build(
        &mut self,
        version: Version,
        mut builder: TreeBuilder,
        want: Vec<NodeKey>,
    ) -> Result<Phase, String> {
        let mut supply = Vec::new();
        let aborted = self
            .manager
            .state(version)
            .is_some_and(VersionState::aborted);
        for k in want {
            match self.fetch(&k) {
                Ok(n) => supply.push((k, n)),
                // Its base may be collected once its version is aborted: write again.
                Err(_) if aborted => return Ok(Phase::Idle),
                Err(e) => return Err(e),
            }
        }
        Ok(match builder.advance(supply)? {
            BuildStep::Fetch(keys) => Phase::Assigned {
                version,
                builder,
                want: keys,
            },
            BuildStep::Done(nodes) => Phase::Putting { version, nodes },
        })
    }

    /// A few of `version`'s new nodes are put, in any order.
    fn put_some(
        &mut self,
        version: Version,
        mut nodes: Vec<(NodeKey, Node)>,
        rng: &mut Rng8,
    ) -> Result<Phase, String> {
        let k = rng.gen_range(1..=nodes.len().max(1)).min(nodes.len());
        for _ in 0..k {
            let j = rng.gen_range(0..nodes.len());
            let (key, node) = nodes.swap_remove(j);
            if self.nodes.insert(key, node).is_some() {
                return Err(format!("node {key:?} put twice"));
            }
            self.report.nodes_put += 1;
        }
        Ok(if nodes.is_empty() {
            Phase::Completing(version)
        } else {
            Phase::Putting { version, nodes }
        })
    }

    /// The writer completes `version`; what that publishes is checked.
    fn complete(&mut self, wr: &mut Writer, version: Version) -> Result<Phase, String> {
        let (regions, data, _) = wr.write.clone().expect("a write in flight");
        match self.manager.complete(version) {
            Ok(published) => {
                self.writes.insert(version, (regions, data));
                if self.cfg.control == Control::PublishOutOfOrder {
                    self.check(version)?;
                }
                self.publish(published)?;
                Ok(Phase::Awaiting(version))
            }
            // Aborted under it (a lower writer stalled): write again.
            Err(crate::ManagerError::Aborted(_)) => Ok(Phase::Idle),
            Err(e) => Err(e.to_string()),
        }
    }
}
