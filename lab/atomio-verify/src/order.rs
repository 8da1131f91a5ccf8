//! Deciding whether some serial order of whole operations explains everything observed.
//!
//! Nodes are the writes (`0..nw`) and reads (`nw..nw+nr`); `INIT` stands for the file's
//! initial zeros. The sweep hands over, per elementary interval with covering writes `C`:
//! * a **file constraint** `(C, M)`: `M ⊆ C` are the writes whose tags match every byte, and
//!   the last of `C` in the order must be in `M`;
//! * per read `R` touching it, a **read constraint** `(R, C, M')` with `M' ⊆ C ∪ {INIT}`: the
//!   last write of `C` before `R` (or `INIT` if none) must be in `M'`.
//!
//! **Invariants and why:**
//! * Unambiguous evidence (`|M| = 1`) becomes plain edges `c → W`; ambiguous evidence stays a
//!   disjunctive constraint and never becomes an edge, so a chance match can not produce a
//!   violation.
//! * Writes alone are decided *exactly* by peeling from the end: a write may go last iff it
//!   is in `M` of every live constraint containing it; placing it last satisfies those
//!   constraints, which are then dropped. If some order exists, one ending with any peelable
//!   write exists (move it to the end: constraints containing it are satisfied by it, the
//!   others are unchanged), so greedy peeling never needs to backtrack. Getting stuck is a
//!   proof of violation, and every stuck node has a blocker that is stuck, so a cycle can be
//!   shown.
//! * Reads make the problem view serializability, NP-complete in general. Sound steps only:
//!   definite edges (`W → R` when `R` saw `W`; `R → c` when it saw the initial zeros where `c`
//!   wrote), then propagation of "`c → W` or `R → c`" (R saw W where c also wrote) against
//!   the transitive closure — an alternative is dropped only when it would close a cycle,
//!   and both being dropped is a proof. A witness order is then searched greedily and
//!   checked against every constraint; if none is found the answer is `Inconclusive`, never
//!   a guess.
//! * Constraints are de-duplicated by a Zobrist hash of the covering set (XOR of per-write
//!   random keys), so memory is O(writes + reads + distinct constraints), not O(intervals).
//!   A 64-bit collision could only drop a constraint (a missed violation), never invent one.

use crate::op::{OpId, ReadId};
use crate::report::{Edge, EdgeReason, Violation, ViolationKind};
use crate::tag::mix64;
use atomio_layout::ByteRange;
use std::collections::{HashMap, HashSet, VecDeque};

/// The initial zeros, as a member of a read's match set.
pub(crate) const INIT: u32 = u32::MAX;

/// Above this many nodes the n² closure for read inference is skipped.
const MAX_CLOSURE_NODES: usize = 16_384;
/// Word operations the closure may spend on inference (about a second).
const CLOSURE_BUDGET: u64 = 1 << 30;
/// Most "c → v or R → c" alternatives kept for inference.
const MAX_DISJUNCTIONS: usize = 1 << 22;
/// Propagation rounds before giving the rest to the witness search.
const MAX_ROUNDS: usize = 64;
/// Witness searches: as many as fit in about this much work (node and constraint visits per
/// attempt), between 2 and `MAX_ATTEMPTS`.
const WITNESS_WORK: usize = 4_000_000;
const MAX_ATTEMPTS: usize = 64;

#[derive(Clone, Copy, Debug)]
enum Why {
    Overwrote,
    Saw,
    Missed { saw: u32 },
    Inferred { read: u32 },
}

#[derive(Clone, Copy, Debug)]
struct EdgeInfo {
    range: ByteRange,
    why: Why,
}

/// An ambiguous file constraint: the last of `covering` must be one of `matching`.
#[derive(Clone, Debug)]
struct Amb {
    covering: Vec<u32>,
    matching: Vec<u32>,
    range: ByteRange,
}

/// A read constraint: the last of `covering` before `read` must be in `matching` (`INIT`: none).
#[derive(Clone, Debug)]
struct ReadCon {
    read: u32,
    covering: Vec<u32>,
    matching: Vec<u32>,
}

/// Everything the sweep learned about the order.
pub(crate) struct Constraints {
    nw: usize,
    nr: usize,
    zob: Vec<u64>,
    seen_file: HashSet<(u64, u64)>,
    seen_read: HashSet<(u32, u64, u64)>,
    edges: HashMap<(u32, u32), EdgeInfo>,
    amb: Vec<Amb>,
    reads: Vec<ReadCon>,
    disj: HashMap<(u32, u32, u32), ByteRange>,
    disj_capped: bool,
    pub(crate) ambiguous_intervals: u64,
}

/// What the order check concluded.
pub(crate) enum Outcome {
    Order(Vec<u32>),
    Violation(Violation),
    Inconclusive(String),
}

pub(crate) struct Solved {
    pub outcome: Outcome,
    pub edges: u64,
    pub inferred: u64,
}

impl Constraints {
    pub(crate) fn new(nw: usize, nr: usize) -> Self {
        Self {
            nw,
            nr,
            zob: (0..nw as u64)
                .map(|i| mix64(i ^ 0x7a6f_6272_6973_7421))
                .collect(),
            seen_file: HashSet::new(),
            seen_read: HashSet::new(),
            edges: HashMap::new(),
            amb: Vec::new(),
            reads: Vec::new(),
            disj: HashMap::new(),
            disj_capped: false,
            ambiguous_intervals: 0,
        }
    }

    /// The Zobrist key of one write (XOR these to hash a set).
    pub(crate) fn zob(&self, w: u32) -> u64 {
        match self.zob.get(w as usize) {
            Some(&z) => z,
            None => 0x1b4e_5a7c_9d3f_2e61, // INIT
        }
    }

    fn zob_set(&self, set: &[u32]) -> u64 {
        set.iter().fold(0, |acc, &w| acc ^ self.zob(w))
    }

    /// An elementary interval of the file: `covering` writes, of which `matching` (non-empty)
    /// match every byte.
    pub(crate) fn file_interval(
        &mut self,
        covering: &[u32],
        zob_c: u64,
        matching: &[u32],
        range: ByteRange,
    ) {
        if covering.len() < 2 {
            return;
        }
        if matching.len() > 1 {
            self.ambiguous_intervals += 1;
        }
        if !self.seen_file.insert((zob_c, self.zob_set(matching))) {
            return;
        }
        if let [w] = *matching {
            for &c in covering.iter().filter(|&&c| c != w) {
                self.edges.entry((c, w)).or_insert(EdgeInfo {
                    range,
                    why: Why::Overwrote,
                });
            }
        } else {
            self.amb.push(Amb {
                covering: covering.to_vec(),
                matching: matching.to_vec(),
                range,
            });
        }
    }

    /// Read `read` (node index) saw, over its bytes inside one elementary interval with
    /// `covering` writes, data matching every member of `matching` (may hold `INIT`).
    pub(crate) fn read_interval(
        &mut self,
        read: u32,
        covering: &[u32],
        zob_c: u64,
        matching: &[u32],
        range: ByteRange,
    ) {
        if !self.seen_read.insert((read, zob_c, self.zob_set(matching))) {
            return;
        }
        match *matching {
            [INIT] => {
                for &c in covering {
                    self.edges.entry((read, c)).or_insert(EdgeInfo {
                        range,
                        why: Why::Missed { saw: INIT },
                    });
                }
            }
            [v] => {
                self.edges.entry((v, read)).or_insert(EdgeInfo {
                    range,
                    why: Why::Saw,
                });
                for &c in covering.iter().filter(|&&c| c != v) {
                    if self.disj.len() < MAX_DISJUNCTIONS {
                        self.disj.entry((read, v, c)).or_insert(range);
                    } else {
                        self.disj_capped = true;
                    }
                }
            }
            _ => {}
        }
        self.reads.push(ReadCon {
            read,
            covering: covering.to_vec(),
            matching: matching.to_vec(),
        });
    }

    /// Decides the order. `ids` names every node (writes then reads).
    pub(crate) fn solve(self, ids: &[OpId]) -> Solved {
        let n = self.nw + self.nr;
        let mut g = Graph::new(n, &self.edges);
        let direct = self.edges.len() as u64;
        let mut edges = self.edges;
        let solved = |outcome, edges: &HashMap<(u32, u32), EdgeInfo>| Solved {
            outcome,
            edges: direct,
            inferred: edges.len() as u64 - direct,
        };

        // Phase A: the facts alone.
        let topo = match peel(n, &g, &self.amb) {
            Ok(order) => order,
            Err(stuck) => {
                let v = stuck_violation(&g, &self.amb, &stuck, &edges, ids);
                return solved(Outcome::Violation(v), &edges);
            }
        };
        if self.reads.is_empty() {
            return solved(Outcome::Order(topo), &edges);
        }

        // Phase B: propagate "c → v or R → c" against the closure.
        let mut notes: Vec<String> = Vec::new();
        if self.disj_capped {
            notes.push(format!(
                "only the first {MAX_DISJUNCTIONS} read alternatives were used for inference"
            ));
        }
        let words = n.div_ceil(64) as u64;
        let setup = g.out.iter().map(|o| o.len() as u64).sum::<u64>() * words;
        if n > MAX_CLOSURE_NODES || setup > CLOSURE_BUDGET {
            notes.push(format!(
                "{n} operations are too many for read inference, which was skipped"
            ));
        } else {
            let mut budget = CLOSURE_BUDGET - setup;
            let add_cost = n as u64 * (words + 1);
            let mut dis: Vec<((u32, u32, u32), ByteRange)> = self.disj.into_iter().collect();
            dis.sort_unstable_by_key(|&(k, r)| (r.start, k));
            let mut cl = Closure::new(n, &g, &topo);
            let mut open: Vec<bool> = vec![true; dis.len()];
            let mut rounds = 0;
            'rounds: loop {
                let mut changed = false;
                for (i, &((r, v, c), range)) in dis.iter().enumerate() {
                    if !open[i] {
                        continue;
                    }
                    let add = if cl.reach(c, v) || cl.reach(r, c) {
                        None
                    } else if cl.reach(v, c) {
                        if cl.reach(c, r) {
                            let v = contradiction(&g, &edges, ids, (r, v, c), range);
                            return solved(Outcome::Violation(v), &edges);
                        }
                        Some((r, c, Why::Missed { saw: v }))
                    } else if cl.reach(c, r) {
                        Some((c, v, Why::Inferred { read: r }))
                    } else {
                        continue;
                    };
                    open[i] = false;
                    if let Some((a, b, why)) = add {
                        if budget < add_cost {
                            notes.push("read inference stopped at its work budget".into());
                            break 'rounds;
                        }
                        budget -= add_cost;
                        edges.insert((a, b), EdgeInfo { range, why });
                        g.add(a, b);
                        cl.add(a, b);
                        changed = true;
                    }
                }
                rounds += 1;
                if !changed || rounds >= MAX_ROUNDS {
                    break;
                }
            }
        }

        // The inferred edges are facts too: peel again, a failure is a proof.
        if let Err(stuck) = peel(n, &g, &self.amb) {
            let v = stuck_violation(&g, &self.amb, &stuck, &edges, ids);
            return solved(Outcome::Violation(v), &edges);
        }

        // Phase C: look for a witness order that satisfies every read constraint.
        // Each attempt scans the ready list once per placed node: up to n² steps.
        let work = n
            + n * n / 16
            + self.amb.iter().map(|a| a.covering.len()).sum::<usize>()
            + self.reads.iter().map(|r| r.covering.len()).sum::<usize>();
        let attempts = (WITNESS_WORK / work.max(1)).clamp(2, MAX_ATTEMPTS);
        let mut failed_check = false;
        if let Some(order) = witness_forward(self.nw, n, &g, &self.amb, &self.reads) {
            if check(&order, n, &edges, &self.amb, &self.reads) {
                return solved(Outcome::Order(order), &edges);
            }
            failed_check = true;
        }
        for attempt in 0..attempts as u64 {
            if let Some(order) = witness(self.nw, n, &g, &self.amb, &self.reads, attempt) {
                if check(&order, n, &edges, &self.amb, &self.reads) {
                    return solved(Outcome::Order(order), &edges);
                }
                failed_check = true;
            }
        }
        let mut why = if failed_check {
            "a witness order failed a read constraint (a verifier bug: please report)".into()
        } else {
            format!(
                "no violation could be proven, and {attempts} searches found no serial order \
                 placing every read"
            )
        };
        for n in notes {
            why.push_str("; ");
            why.push_str(&n);
        }
        solved(Outcome::Inconclusive(why), &edges)
    }
}

/// Adjacency of the definite edges (`u → v`: u before v).
struct Graph {
    out: Vec<Vec<u32>>,
    inn: Vec<Vec<u32>>,
}

impl Graph {
    fn new(n: usize, edges: &HashMap<(u32, u32), EdgeInfo>) -> Self {
        let mut g = Graph {
            out: vec![Vec::new(); n],
            inn: vec![Vec::new(); n],
        };
        let mut keys: Vec<(u32, u32)> = edges.keys().copied().collect();
        keys.sort_unstable();
        for (u, v) in keys {
            g.add(u, v);
        }
        g
    }

    fn add(&mut self, u: u32, v: u32) {
        self.out[u as usize].push(v);
        self.inn[v as usize].push(u);
    }

    /// The edges of a shortest path `from →* to`, if any.
    fn path(&self, from: u32, to: u32) -> Option<Vec<(u32, u32)>> {
        let mut prev: HashMap<u32, u32> = HashMap::new();
        let mut q = VecDeque::from([from]);
        while let Some(u) = q.pop_front() {
            if u == to {
                let mut p = Vec::new();
                let mut x = to;
                while x != from {
                    let px = prev[&x];
                    p.push((px, x));
                    x = px;
                }
                p.reverse();
                return Some(p);
            }
            for &v in &self.out[u as usize] {
                if v != from && !prev.contains_key(&v) {
                    prev.insert(v, u);
                    q.push_back(v);
                }
            }
        }
        None
    }
}

/// Reachability bit matrix over an acyclic graph: row `u` holds every node after `u`.
struct Closure {
    words: usize,
    bits: Vec<u64>,
    n: usize,
}

impl Closure {
    fn new(n: usize, g: &Graph, topo: &[u32]) -> Self {
        let words = n.div_ceil(64);
        let mut c = Closure {
            words,
            bits: vec![0; n * words],
            n,
        };
        for &u in topo.iter().rev() {
            for &v in &g.out[u as usize] {
                c.or_row_into(v as usize, u as usize);
            }
        }
        c
    }

    fn reach(&self, u: u32, v: u32) -> bool {
        let (u, v) = (u as usize, v as usize);
        self.bits[u * self.words + v / 64] >> (v % 64) & 1 == 1
    }

    /// Row `dst` gains `src` and everything after it.
    fn or_row_into(&mut self, src: usize, dst: usize) {
        let w = self.words;
        for i in 0..w {
            let b = self.bits[src * w + i];
            self.bits[dst * w + i] |= b;
        }
        self.bits[dst * w + src / 64] |= 1 << (src % 64);
    }

    /// Adds `u → v`; the caller has checked that `v` does not reach `u`.
    fn add(&mut self, u: u32, v: u32) {
        for x in 0..self.n {
            if x == u as usize || self.reach(x as u32, u) {
                self.or_row_into(v as usize, x);
            }
        }
    }
}

struct Stuck {
    removed: Vec<bool>,
    alive: Vec<bool>,
}

/// Peels the nodes from the end of the order (module docs). Returns a serial order.
fn peel(n: usize, g: &Graph, amb: &[Amb]) -> Result<Vec<u32>, Stuck> {
    let mut blocked: Vec<u32> = g.out.iter().map(|o| o.len() as u32).collect();
    let mut by_member: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (k, a) in amb.iter().enumerate() {
        for &c in &a.covering {
            if a.matching.contains(&c) {
                by_member[c as usize].push(k as u32);
            } else {
                blocked[c as usize] += 1;
            }
        }
    }
    let mut alive = vec![true; amb.len()];
    let mut removed = vec![false; n];
    let mut stack: Vec<u32> = (0..n as u32)
        .rev()
        .filter(|&u| blocked[u as usize] == 0)
        .collect();
    let mut peeled = Vec::with_capacity(n);
    while let Some(x) = stack.pop() {
        removed[x as usize] = true;
        peeled.push(x);
        let mut release = |u: u32, stack: &mut Vec<u32>| {
            blocked[u as usize] -= 1;
            if blocked[u as usize] == 0 {
                stack.push(u);
            }
        };
        for &u in &g.inn[x as usize] {
            release(u, &mut stack);
        }
        for &k in &by_member[x as usize] {
            if std::mem::replace(&mut alive[k as usize], false) {
                let a = &amb[k as usize];
                for &c in a.covering.iter().filter(|c| !a.matching.contains(c)) {
                    release(c, &mut stack);
                }
            }
        }
    }
    if peeled.len() == n {
        peeled.reverse();
        Ok(peeled)
    } else {
        Err(Stuck { removed, alive })
    }
}

/// A blocking step of a stuck node: a definite edge, or an ambiguous constraint `k`.
#[derive(Clone, Copy)]
enum Step {
    Def,
    Amb(u32),
}

fn to_edge(
    (u, v): (u32, u32),
    step: Step,
    edges: &HashMap<(u32, u32), EdgeInfo>,
    amb: &[Amb],
    ids: &[OpId],
) -> Edge {
    let id = |x: u32| ids.get(x as usize).copied().unwrap_or(OpId::Initial);
    let read_id = |x: u32| match id(x) {
        OpId::Read(r) => r,
        _ => ReadId::new(u32::MAX, u64::MAX),
    };
    match step {
        Step::Amb(k) => {
            let a = &amb[k as usize];
            Edge {
                before: id(u),
                after: id(v),
                range: a.range,
                reason: EdgeReason::Overwrote,
                alternatives: a
                    .matching
                    .iter()
                    .filter(|&&m| m != v)
                    .map(|&m| id(m))
                    .collect(),
            }
        }
        Step::Def => {
            let info = edges.get(&(u, v)).copied().unwrap_or(EdgeInfo {
                range: ByteRange { start: 0, end: 0 },
                why: Why::Overwrote,
            });
            let reason = match info.why {
                Why::Overwrote => EdgeReason::Overwrote,
                Why::Saw => EdgeReason::ReadSaw,
                Why::Missed { saw } => EdgeReason::ReadMissed { saw: id(saw) },
                Why::Inferred { read } => EdgeReason::Inferred {
                    read: read_id(read),
                },
            };
            Edge {
                before: id(u),
                after: id(v),
                range: info.range,
                reason,
                alternatives: Vec::new(),
            }
        }
    }
}

/// Turns a stuck peel into a violation showing a short cycle of blocking steps.
fn stuck_violation(
    g: &Graph,
    amb: &[Amb],
    stuck: &Stuck,
    edges: &HashMap<(u32, u32), EdgeInfo>,
    ids: &[OpId],
) -> Violation {
    let n = stuck.removed.len();
    let mut adj: Vec<Vec<(u32, Step)>> = vec![Vec::new(); n];
    for u in (0..n).filter(|&u| !stuck.removed[u]) {
        for &v in &g.out[u] {
            if !stuck.removed[v as usize] {
                adj[u].push((v, Step::Def));
            }
        }
    }
    for (k, a) in amb.iter().enumerate() {
        if !stuck.alive[k] {
            continue;
        }
        for &c in a.covering.iter().filter(|c| !a.matching.contains(c)) {
            for &m in &a.matching {
                adj[c as usize].push((m, Step::Amb(k as u32)));
            }
        }
    }
    // Definite steps first, so cycles prefer unambiguous evidence.
    for a in &mut adj {
        a.sort_by_key(|&(v, s)| (matches!(s, Step::Amb(_)), v));
    }
    // Walk blocking steps until a node repeats: every stuck node has a stuck blocker.
    let Some(start) = (0..n).find(|&u| !stuck.removed[u]) else {
        return Violation::new(ViolationKind::OrderCycle);
    };
    let mut seen_at: HashMap<u32, usize> = HashMap::new();
    let mut walk = vec![start as u32];
    let mut u = start as u32;
    let first_cycle: Vec<u32> = loop {
        seen_at.insert(u, walk.len() - 1);
        let Some(&(v, _)) = adj[u as usize].first() else {
            break vec![u];
        };
        if let Some(&i) = seen_at.get(&v) {
            break walk[i..].to_vec();
        }
        walk.push(v);
        u = v;
    };
    // Shorten: the shortest cycle through a few of its nodes (BFS on blocking steps).
    let mut best: Option<Vec<(u32, u32, Step)>> = None;
    for &s in first_cycle.iter().take(32) {
        if let Some(c) = shortest_cycle(s, &adj) {
            if best.as_ref().map_or(true, |b| c.len() < b.len()) {
                best = Some(c);
            }
        }
    }
    let cycle: Vec<Edge> = best
        .unwrap_or_default()
        .into_iter()
        .map(|(u, v, s)| to_edge((u, v), s, edges, amb, ids))
        .collect();
    classify(cycle)
}

fn shortest_cycle(s: u32, adj: &[Vec<(u32, Step)>]) -> Option<Vec<(u32, u32, Step)>> {
    let mut prev: HashMap<u32, (u32, Step)> = HashMap::new();
    let mut q = VecDeque::from([s]);
    while let Some(u) = q.pop_front() {
        for &(v, step) in &adj[u as usize] {
            if v == s {
                let mut path = vec![(u, v, step)];
                let mut x = u;
                while x != s {
                    let (px, ps) = prev[&x];
                    path.push((px, x, ps));
                    x = px;
                }
                path.reverse();
                return Some(path);
            }
            if let std::collections::hash_map::Entry::Vacant(e) = prev.entry(v) {
                e.insert((u, step));
                q.push_back(v);
            }
        }
    }
    None
}

/// Names a cycle: two writes → torn write; a write and a read → torn read; else a cycle.
fn classify(cycle: Vec<Edge>) -> Violation {
    let is_read = |o: &OpId| matches!(o, OpId::Read(_));
    if let [e1, e2] = &cycle[..] {
        let plain = |e: &Edge| e.reason == EdgeReason::Overwrote && e.alternatives.is_empty();
        if plain(e1) && plain(e2) {
            // e1: B's data over A's at r1; e2: A's data over B's at r2.
            let mut ev = [
                crate::report::Evidence {
                    range: e2.range,
                    data_of: Some(e2.after),
                },
                crate::report::Evidence {
                    range: e1.range,
                    data_of: Some(e1.after),
                },
            ];
            ev.sort_by_key(|e| (e.range.start, e.range.end));
            let mut v = Violation::new(ViolationKind::TornWrite);
            v.ops = ev.iter().filter_map(|e| e.data_of).collect();
            v.evidence = ev.to_vec();
            v.cycle = cycle;
            return v;
        }
        let (saw, missed) = if e1.reason == EdgeReason::ReadSaw {
            (e1, e2)
        } else {
            (e2, e1)
        };
        if let (EdgeReason::ReadSaw, EdgeReason::ReadMissed { saw: other }) =
            (saw.reason, missed.reason)
        {
            if saw.alternatives.is_empty() && missed.alternatives.is_empty() {
                let mut v = Violation::new(ViolationKind::TornRead);
                v.ops = vec![saw.after, saw.before];
                v.evidence = vec![
                    crate::report::Evidence {
                        range: saw.range,
                        data_of: Some(saw.before),
                    },
                    crate::report::Evidence {
                        range: missed.range,
                        data_of: Some(other),
                    },
                ];
                v.cycle = cycle;
                return v;
            }
        }
    }
    let read = cycle
        .iter()
        .flat_map(|e| [e.before, e.after])
        .find(is_read)
        .or_else(|| {
            cycle.iter().find_map(|e| match e.reason {
                EdgeReason::Inferred { read } => Some(OpId::Read(read)),
                _ => None,
            })
        });
    let mut v = Violation::new(if read.is_some() {
        ViolationKind::ReadNotSerializable
    } else {
        ViolationKind::OrderCycle
    });
    if let Some(r) = read {
        v.ops.push(r);
        // Start the cycle at the read, so it reads from the read's point of view.
        if let Some(i) = cycle.iter().position(|e| e.before == r) {
            let mut c = cycle.clone();
            c.rotate_left(i);
            v.cycle = c;
        }
    }
    if v.cycle.is_empty() {
        v.cycle = cycle;
    }
    for e in &v.cycle {
        if !v.ops.contains(&e.before) {
            v.ops.push(e.before);
        }
    }
    v
}

/// R saw v where c also wrote, yet v →* c →* R: R must precede c (it missed c's data, which
/// is newer than what it saw) and follow it.
fn contradiction(
    g: &Graph,
    edges: &HashMap<(u32, u32), EdgeInfo>,
    ids: &[OpId],
    (r, v, c): (u32, u32, u32),
    range: ByteRange,
) -> Violation {
    let amb: &[Amb] = &[];
    let to = |p: Vec<(u32, u32)>| -> Vec<Edge> {
        p.into_iter()
            .map(|e| to_edge(e, Step::Def, edges, amb, ids))
            .collect()
    };
    let mut cycle = to(g.path(c, r).unwrap_or_default());
    let id = |x: u32| ids.get(x as usize).copied().unwrap_or(OpId::Initial);
    cycle.push(Edge {
        before: id(r),
        after: id(c),
        range,
        reason: EdgeReason::ReadMissed { saw: id(v) },
        alternatives: Vec::new(),
    });
    let why = to(g.path(v, c).unwrap_or_default());
    let mut out = classify(cycle);
    let steps: Vec<String> = why.iter().map(|e| e.to_string()).collect();
    let name = |o: OpId| match o {
        OpId::Write(w) => w.to_string(),
        other => other.to_string(),
    };
    out.note = Some(format!(
        "{} comes after {}: {}",
        name(id(c)),
        name(id(v)),
        steps.join("; ")
    ));
    out
}

/// Greedy search for a serial order satisfying the definite edges, the ambiguous file
/// constraints and every read constraint (module docs). `None` when it gets stuck. Placing
/// a read last commits the remaining writes to come before it, and the right choice among
/// several placeable reads is not locally knowable (the problem is NP-complete), so
/// `attempt` selects the tie-breaking: 0 and 1 are deterministic, higher values random.
fn witness(
    nw: usize,
    n: usize,
    g: &Graph,
    amb: &[Amb],
    reads: &[ReadCon],
    attempt: u64,
) -> Option<Vec<u32>> {
    let mut rng = mix64(attempt);
    let mut amb: Vec<Amb> = amb.to_vec();
    let mut blocked: Vec<u32> = g.out.iter().map(|o| o.len() as u32).collect();
    let mut by_member: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (k, a) in amb.iter().enumerate() {
        for &c in &a.covering {
            if a.matching.contains(&c) {
                by_member[c as usize].push(k as u32);
            } else {
                blocked[c as usize] += 1;
            }
        }
    }
    let mut alive = vec![true; amb.len()];
    // Per read constraint: remaining covering writes, remaining matching writes.
    let mut rem_s: Vec<u32> = reads.iter().map(|r| r.covering.len() as u32).collect();
    let mut rem_m: Vec<u32> = reads
        .iter()
        .map(|r| r.matching.iter().filter(|&&m| m != INIT).count() as u32)
        .collect();
    let has_init: Vec<bool> = reads.iter().map(|r| r.matching.contains(&INIT)).collect();
    let mut by_write: Vec<Vec<(u32, bool)>> = vec![Vec::new(); nw];
    let mut by_read: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (k, rc) in reads.iter().enumerate() {
        by_read[rc.read as usize].push(k as u32);
        for &c in &rc.covering {
            by_write[c as usize].push((k as u32, rc.matching.contains(&c)));
        }
    }
    let mut removed = vec![false; n];
    let mut ready: Vec<u32> = (0..n as u32)
        .filter(|&u| blocked[u as usize] == 0)
        .collect();
    let mut peeled = Vec::with_capacity(n);
    while peeled.len() < n {
        ready.retain(|&u| !removed[u as usize] && blocked[u as usize] == 0);
        ready.dedup();
        let ok_write = |u: u32| {
            by_write[u as usize].iter().all(|&(k, in_m)| {
                let k = k as usize;
                !in_m || removed[reads[k].read as usize] || rem_m[k] > 1 || has_init[k]
            })
        };
        let ok_read = |u: u32| {
            by_read[u as usize].iter().all(|&k| {
                let k = k as usize;
                if rem_s[k] == 0 {
                    has_init[k]
                } else {
                    rem_m[k] > 0
                }
            })
        };
        let ok = |u: u32| {
            if (u as usize) < nw {
                ok_write(u)
            } else {
                ok_read(u)
            }
        };
        let is_write = |u: u32| (u as usize) < nw;
        let pick = match attempt {
            // Writes first: a write placed after the reads that did not see it is what
            // their data says; reads go last only when no write can.
            0 => ready
                .iter()
                .copied()
                .find(|&u| is_write(u) && ok(u))
                .or_else(|| ready.iter().copied().find(|&u| !is_write(u) && ok(u))),
            // Reads first: each read as late as it can be.
            1 => ready
                .iter()
                .copied()
                .find(|&u| !is_write(u) && ok(u))
                .or_else(|| ready.iter().copied().find(|&u| is_write(u) && ok(u))),
            // Random tie-breaking, half the time still preferring writes.
            _ => {
                rng = mix64(rng.wrapping_add(0x9e37_79b9_7f4a_7c15));
                let writes_only = rng & 1 == 0;
                let cands: Vec<u32> = ready
                    .iter()
                    .copied()
                    .filter(|&u| ok(u) && (!writes_only || is_write(u)))
                    .collect();
                let cands = if cands.is_empty() {
                    ready.iter().copied().filter(|&u| ok(u)).collect()
                } else {
                    cands
                };
                (!cands.is_empty()).then(|| cands[(rng >> 1) as usize % cands.len()])
            }
        }?;
        removed[pick as usize] = true;
        peeled.push(pick);
        for &u in &g.inn[pick as usize] {
            blocked[u as usize] -= 1;
            if blocked[u as usize] == 0 {
                ready.push(u);
            }
        }
        let mut kill = |k: usize, blocked: &mut Vec<u32>, ready: &mut Vec<u32>, amb: &[Amb]| {
            if std::mem::replace(&mut alive[k], false) {
                let a = &amb[k];
                for &c in a.covering.iter().filter(|c| !a.matching.contains(c)) {
                    blocked[c as usize] -= 1;
                    if blocked[c as usize] == 0 {
                        ready.push(c);
                    }
                }
            }
        };
        for &k in &by_member[pick as usize] {
            kill(k as usize, &mut blocked, &mut ready, &amb);
        }
        if (pick as usize) < nw {
            for &(k, in_m) in &by_write[pick as usize] {
                rem_s[k as usize] -= 1;
                if in_m {
                    rem_m[k as usize] -= 1;
                }
            }
        } else {
            // The read goes after every remaining node: its view is now the last of the
            // remaining covering writes, which must be one it saw.
            for &k in &by_read[pick as usize] {
                let rc = &reads[k as usize];
                let covering: Vec<u32> = rc
                    .covering
                    .iter()
                    .copied()
                    .filter(|&c| !removed[c as usize])
                    .collect();
                if covering.len() < 2 {
                    continue;
                }
                let matching: Vec<u32> = rc
                    .matching
                    .iter()
                    .copied()
                    .filter(|&m| m != INIT && !removed[m as usize])
                    .collect();
                let k2 = amb.len() as u32;
                for &c in &covering {
                    if matching.contains(&c) {
                        by_member[c as usize].push(k2);
                    } else {
                        blocked[c as usize] += 1;
                    }
                }
                alive.push(true);
                amb.push(Amb {
                    covering,
                    matching,
                    range: ByteRange { start: 0, end: 0 },
                });
            }
        }
    }
    peeled.reverse();
    Some(peeled)
}

/// A witness built forwards: a read is placed as soon as each of its constraints is met by
/// the writes placed so far (placing a read changes nothing, so doing it early never
/// hurts); a write only when no read can go, and only one that strands no pending read
/// (one whose seen writes would all be behind it) and no file constraint. Writes that some
/// waiting read saw go first. This finds the obvious order when reads saw whole versions,
/// e.g. one writer and many readers, where peeling from the end can interleave the reads of
/// two versions into a dead end. Like `witness`, its answer is only a candidate: `check`
/// decides.
fn witness_forward(
    nw: usize,
    n: usize,
    g: &Graph,
    amb: &[Amb],
    reads: &[ReadCon],
) -> Option<Vec<u32>> {
    let mut indeg: Vec<u32> = g.inn.iter().map(|v| v.len() as u32).collect();
    let mut placed = vec![false; n];
    let mut view: Vec<u32> = vec![INIT; reads.len()];
    let mut by_read: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut by_write: Vec<Vec<u32>> = vec![Vec::new(); nw];
    for (k, rc) in reads.iter().enumerate() {
        by_read[rc.read as usize].push(k as u32);
        for &c in &rc.covering {
            by_write[c as usize].push(k as u32);
        }
    }
    let mut amb_left: Vec<u32> = amb.iter().map(|a| a.matching.len() as u32).collect();
    let mut amb_cover_left: Vec<u32> = amb.iter().map(|a| a.covering.len() as u32).collect();
    let mut amb_of: Vec<Vec<u32>> = vec![Vec::new(); nw];
    for (a, am) in amb.iter().enumerate() {
        for &c in &am.covering {
            amb_of[c as usize].push(a as u32);
        }
    }
    let mut ready: Vec<u32> = (0..n as u32).filter(|&u| indeg[u as usize] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        ready.retain(|&u| !placed[u as usize]);
        let read_ok = |u: u32, view: &[u32]| {
            by_read[u as usize]
                .iter()
                .all(|&k| reads[k as usize].matching.contains(&view[k as usize]))
        };
        let pick = ready
            .iter()
            .copied()
            .find(|&u| u as usize >= nw && read_ok(u, &view))
            .or_else(|| {
                let write_ok = |w: u32| {
                    by_write[w as usize].iter().all(|&k| {
                        let rc = &reads[k as usize];
                        placed[rc.read as usize]
                            || rc.matching.contains(&w)
                            || rc
                                .matching
                                .iter()
                                .any(|&m| m != INIT && m != w && !placed[m as usize])
                    }) && amb_of[w as usize].iter().all(|&a| {
                        let am = &amb[a as usize];
                        if am.matching.contains(&w) {
                            amb_left[a as usize] > 1 || amb_cover_left[a as usize] == 1
                        } else {
                            amb_left[a as usize] > 0
                        }
                    })
                };
                let wanted = |w: u32| {
                    by_write[w as usize].iter().any(|&k| {
                        let rc = &reads[k as usize];
                        !placed[rc.read as usize] && rc.matching.contains(&w)
                    })
                };
                let writes: Vec<u32> = ready
                    .iter()
                    .copied()
                    .filter(|&u| (u as usize) < nw && write_ok(u))
                    .collect();
                writes
                    .iter()
                    .copied()
                    .find(|&w| wanted(w))
                    .or_else(|| writes.first().copied())
            })?;
        placed[pick as usize] = true;
        order.push(pick);
        if (pick as usize) < nw {
            for &k in &by_write[pick as usize] {
                view[k as usize] = pick;
            }
            for &a in &amb_of[pick as usize] {
                amb_cover_left[a as usize] -= 1;
                if amb[a as usize].matching.contains(&pick) {
                    amb_left[a as usize] -= 1;
                }
            }
        }
        for &v in &g.out[pick as usize] {
            indeg[v as usize] -= 1;
            if indeg[v as usize] == 0 {
                ready.push(v);
            }
        }
    }
    Some(order)
}

/// Checks an order against every constraint: the safety net that makes `Atomic` a proof.
fn check(
    order: &[u32],
    n: usize,
    edges: &HashMap<(u32, u32), EdgeInfo>,
    amb: &[Amb],
    reads: &[ReadCon],
) -> bool {
    if order.len() != n {
        return false;
    }
    let mut pos = vec![usize::MAX; n];
    for (i, &u) in order.iter().enumerate() {
        pos[u as usize] = i;
    }
    if pos.contains(&usize::MAX) {
        return false;
    }
    let p = |u: u32| pos[u as usize];
    edges.keys().all(|&(u, v)| p(u) < p(v))
        && amb.iter().all(|a| {
            a.covering
                .iter()
                .copied()
                .max_by_key(|&c| p(c))
                .is_some_and(|last| a.matching.contains(&last))
        })
        && reads.iter().all(|rc| {
            let at = p(rc.read);
            let view = rc
                .covering
                .iter()
                .copied()
                .filter(|&c| p(c) < at)
                .max_by_key(|&c| p(c))
                .unwrap_or(INIT);
            rc.matching.contains(&view)
        })
}
