//! A seeded simulation of cached-lock DLMs — SeqDLM (Chen et al., SC'22) and the
//! traditional `dlm-basic` / `dlm-lustre` — over a file striped across several lock
//! resources, checked by the verifier. Every piece is the real one but the transport:
//! `seqdlm::Resource` per stripe, clients with a `WriteCache` per stripe, data servers
//! applying flushes through an `ExtentCache`. Every message waits in a FIFO queue per
//! (client, stripe) and direction; each step the seeded RNG picks which queue moves, which
//! client acts, which flush the data server applies and when it cleans, so lock messages,
//! revocations and data arrive in arbitrary interleavings.
//!
//! The client rules under test (what makes MPI atomic mode hold across stripes): modes by
//! Fig. 10 (NBW within one stripe, BW across stripes; PW for a traditional DLM); locks
//! acquired in stripe order, cached GRANTED locks reused; a lock in use by a write answers
//! its revocation only once the whole write is done (a grant sent CANCELING likewise is
//! given back after it); giving back = answer (CANCELING), downgrade to NBW (SeqDLM), flush
//! the bytes still tagged with its SN, release once the data server acknowledged them.
//!
//! Checked: the resources' invariants after every step, no deadlock (every write done within
//! the step budget), and at the end every stripe holds its writes applied in SN order and
//! the file is a serial order of whole writes (`atomio_verify::verify`). Negative controls: `Modes::AllNbw` (NBW across
//! stripes) is caught as the paper's Fig. 8 torn write; `sn_blind_servers` (flushes
//! written as they arrive) as an older flush landing over a newer write.

use atomio_client::write_cache::{Dirty, WriteCache};
use atomio_data::extent_cache::ExtentCache;
use atomio_layout::{ByteRange, RangeList};
use atomio_lock::seqdlm::{Config, GrantId, Mode, Out, ReqId, Resource, State};
use atomio_proto::ClientId;
use atomio_verify::{verify, TagKey, Write};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// Which lock modes writes ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modes {
    /// Fig. 10: NBW within one stripe, BW across stripes.
    Fig10,
    /// Negative control: NBW even across stripes (the verifier must catch it).
    AllNbw,
    /// A traditional DLM's write lock, PW.
    AllPw,
}

#[derive(Clone, Debug)]
pub struct SeqSimConfig {
    pub seed: u64,
    pub clients: usize,
    pub stripes: usize,
    pub stripe_size: u64,
    pub writes_per_client: usize,
    /// Most ranges in one (noncontiguous) write.
    pub max_ranges: usize,
    pub dlm: Config,
    pub modes: Modes,
    /// Negative control: data servers write flushes whole as they arrive, ignoring SNs.
    pub sn_blind_servers: bool,
}

impl SeqSimConfig {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            clients: 4,
            stripes: 3,
            stripe_size: 32,
            writes_per_client: 4,
            max_ranges: 3,
            dlm: Config::SEQDLM,
            modes: Modes::Fig10,
            sn_blind_servers: false,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqSimReport {
    pub steps: u64,
    pub writes: u64,
    pub grants: u64,
    pub revocations: u64,
    /// Grants made while a conflicting lock was still held (CANCELING): early grants.
    pub early_grants: u64,
    /// Flush blocks, and bytes the data servers discarded because a newer SN held them.
    pub flushes: u64,
    pub bytes_discarded: u64,
}

#[derive(Clone, Debug)]
pub struct SeqSimFailure {
    pub seed: u64,
    pub step: u64,
    pub what: String,
}

impl fmt::Display for SeqSimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SeqDLM simulation failed at step {} with seed {}: {} (replay: the same \
             `atomio-lab sim --seqdlm` flags with --seed {} --seeds 1)",
            self.step, self.seed, self.what, self.seed
        )
    }
}

/// A client → resource message.
#[derive(Clone, Copy, Debug)]
enum Up {
    Request {
        req: ReqId,
        mode: Mode,
        range: ByteRange,
    },
    Revoked(GrantId),
    Downgrade(GrantId, Mode),
    Release(GrantId),
}

#[derive(Clone, Copy, Debug)]
struct Held {
    mode: Mode,
    range: ByteRange,
    sn: u64,
    /// Given back (answered, flushing): no new I/O under it.
    canceling: bool,
    in_use: bool,
    /// A revocation (or a CANCELING grant) waits for the write using the lock.
    give_back_after_use: bool,
}

struct Op {
    id: u64,
    ranges: Vec<ByteRange>,
    /// (stripe, the write's hull in it), in stripe order.
    needs: Vec<(usize, ByteRange)>,
    next: usize,
    mode: Mode,
    waiting: Option<ReqId>,
    using: Vec<(usize, GrantId)>,
}

#[derive(Default)]
struct Client {
    todo: VecDeque<Vec<ByteRange>>,
    op: Option<Op>,
    locks: BTreeMap<(usize, GrantId), Held>,
    caches: Vec<WriteCache>,
    unacked: BTreeMap<(usize, GrantId), usize>,
    ops_started: u64,
}

struct World {
    cfg: SeqSimConfig,
    resources: Vec<Resource>,
    extents: Vec<ExtentCache>,
    file: Vec<u8>,
    clients: Vec<Client>,
    /// Per (client, stripe): messages to the resource, and from it.
    up: Vec<VecDeque<Up>>,
    down: Vec<VecDeque<Out>>,
    flights: Vec<(usize, usize, GrantId, Dirty)>,
    writes: Vec<Write>,
    /// Each write's bytes per stripe with the SN they were written under, in the order
    /// the writes were made: (stripe, SN, order, range, writer, op).
    by_sn: Vec<(usize, u64, u64, ByteRange, u32, u64)>,
    next_req: u64,
    report: SeqSimReport,
}

fn fail(what: impl fmt::Display) -> String {
    what.to_string()
}

impl World {
    fn queue(&self, client: usize, stripe: usize) -> usize {
        client * self.cfg.stripes + stripe
    }

    fn stripe_of(&self, offset: u64) -> usize {
        (offset / self.cfg.stripe_size) as usize
    }

    fn start_op(&mut self, ci: usize) {
        let Some(ranges) = self.clients[ci].todo.pop_front() else {
            return;
        };
        let ss = self.cfg.stripe_size;
        let mut needs: Vec<(usize, ByteRange)> = Vec::new();
        for r in &ranges {
            let mut at = r.start;
            while at < r.end {
                let s = self.stripe_of(at);
                let end = r.end.min((s as u64 + 1) * ss);
                match needs.iter_mut().find(|(x, _)| *x == s) {
                    Some((_, h)) => h.end = end,
                    None => needs.push((s, ByteRange { start: at, end })),
                }
                at = end;
            }
        }
        needs.sort_by_key(|n| n.0);
        let mode = match self.cfg.modes {
            Modes::Fig10 if needs.len() > 1 => Mode::Bw,
            Modes::Fig10 | Modes::AllNbw => Mode::Nbw,
            Modes::AllPw => Mode::Pw,
        };
        let c = &mut self.clients[ci];
        c.ops_started += 1;
        c.op = Some(Op {
            id: c.ops_started,
            ranges,
            needs,
            next: 0,
            mode,
            waiting: None,
            using: Vec::new(),
        });
    }

    /// Advances the client's write: lock its next stripe (a cached lock, or a request), or
    /// — all locked — write into the caches and free the locks.
    fn client_step(&mut self, ci: usize) -> Result<(), String> {
        if self.clients[ci].op.is_none() {
            self.start_op(ci);
            return Ok(());
        }
        let c = &mut self.clients[ci];
        let op = c.op.as_mut().expect("checked");
        if op.waiting.is_some() {
            return Ok(());
        }
        if let Some(&(stripe, want)) = op.needs.get(op.next) {
            let cached = c.locks.iter_mut().find(|((s, _), h)| {
                *s == stripe
                    && !h.canceling
                    && !h.give_back_after_use
                    && h.mode.is_write()
                    && (h.mode == op.mode || op.mode == Mode::Nbw)
                    && h.range.start <= want.start
                    && h.range.end >= want.end
            });
            if let Some((&(_, id), h)) = cached {
                h.in_use = true;
                op.using.push((stripe, id));
                op.next += 1;
                return Ok(());
            }
            self.next_req += 1;
            let req = ReqId(self.next_req);
            op.waiting = Some(req);
            let mode = op.mode;
            let q = self.queue(ci, stripe);
            self.up[q].push_back(Up::Request {
                req,
                mode,
                range: want,
            });
            return Ok(());
        }
        let op = c.op.take().expect("checked");
        let ss = self.cfg.stripe_size;
        let tag = TagKey::DEFAULT.op(ci as u32, op.id);
        for r in &op.ranges {
            let mut data = vec![0u8; (r.end - r.start) as usize];
            tag.fill_at(r.start, &mut data);
            let mut at = r.start;
            while at < r.end {
                let s = (at / ss) as usize;
                let end = r.end.min((s as u64 + 1) * ss);
                let id = op
                    .using
                    .iter()
                    .find(|u| u.0 == s)
                    .ok_or_else(|| fail("a write without its stripe's lock"))?
                    .1;
                let sn = c.locks[&(s, id)].sn;
                let order = self.by_sn.len() as u64;
                self.by_sn
                    .push((s, sn, order, ByteRange { start: at, end }, ci as u32, op.id));
                c.caches[s].write(
                    at,
                    bytes::Bytes::copy_from_slice(
                        &data[(at - r.start) as usize..(end - r.start) as usize],
                    ),
                    sn,
                );
                at = end;
            }
        }
        self.writes.push(Write::new(
            ci as u32,
            op.id,
            RangeList::from_ranges(op.ranges.clone()),
        ));
        self.report.writes += 1;
        for (s, id) in op.using {
            let h = self.clients[ci]
                .locks
                .get_mut(&(s, id))
                .ok_or_else(|| fail("a lock in use vanished"))?;
            h.in_use = false;
            if h.give_back_after_use {
                self.give_back(ci, s, id);
            }
        }
        Ok(())
    }

    /// The client reads its next message from `stripe`'s resource.
    fn client_receive(&mut self, ci: usize, stripe: usize) -> Result<(), String> {
        let q = self.queue(ci, stripe);
        let Some(msg) = self.down[q].pop_front() else {
            return Ok(());
        };
        match msg {
            Out::Grant {
                req,
                id,
                grant,
                absorbed,
                ..
            } => {
                for old in absorbed {
                    let h = self.clients[ci]
                        .locks
                        .remove(&(stripe, old))
                        .ok_or_else(|| fail("an absorbed lock the client does not hold"))?;
                    for b in self.clients[ci].caches[stripe].take(h.sn) {
                        self.clients[ci].caches[stripe].write(b.start, b.data, grant.sn);
                    }
                }
                let c = &mut self.clients[ci];
                let mine = c.op.as_mut().filter(|op| op.waiting == Some(req));
                let in_use = mine.is_some();
                if let Some(op) = mine {
                    op.waiting = None;
                    op.using.push((stripe, id));
                    op.next += 1;
                }
                let canceling = grant.state == State::Canceling;
                c.locks.insert(
                    (stripe, id),
                    Held {
                        mode: grant.mode,
                        range: grant.range,
                        sn: grant.sn,
                        canceling: false,
                        in_use,
                        give_back_after_use: canceling,
                    },
                );
                if canceling && !in_use {
                    self.give_back(ci, stripe, id);
                }
            }
            Out::Revoke { id, .. } => {
                // Released meanwhile (or absorbed): nothing to give back.
                let Some(h) = self.clients[ci].locks.get_mut(&(stripe, id)) else {
                    return Ok(());
                };
                if h.canceling {
                    return Ok(());
                }
                if h.in_use {
                    h.give_back_after_use = true;
                } else {
                    self.give_back(ci, stripe, id);
                }
            }
        }
        Ok(())
    }

    /// Answer (CANCELING), downgrade (SeqDLM), flush; release once acknowledged.
    fn give_back(&mut self, ci: usize, stripe: usize, id: GrantId) {
        let conversion = self.cfg.dlm.conversion;
        let h = self.clients[ci]
            .locks
            .get_mut(&(stripe, id))
            .expect("caller checked");
        h.canceling = true;
        let (mode, sn) = (h.mode, h.sn);
        let q = self.queue(ci, stripe);
        self.up[q].push_back(Up::Revoked(id));
        if conversion && mode.is_write() && mode != Mode::Nbw {
            self.up[q].push_back(Up::Downgrade(id, Mode::Nbw));
        }
        let blocks = self.clients[ci].caches[stripe].take(sn);
        self.report.flushes += blocks.len() as u64;
        self.clients[ci].unacked.insert((stripe, id), blocks.len());
        for b in blocks {
            self.flights.push((ci, stripe, id, b));
        }
        self.maybe_release(ci, stripe, id);
    }

    fn maybe_release(&mut self, ci: usize, stripe: usize, id: GrantId) {
        if self.clients[ci].unacked.get(&(stripe, id)) == Some(&0) {
            self.clients[ci].unacked.remove(&(stripe, id));
            self.clients[ci].locks.remove(&(stripe, id));
            let q = self.queue(ci, stripe);
            self.up[q].push_back(Up::Release(id));
        }
    }

    /// The resource handles the next message of queue `q`.
    fn server_receive(&mut self, q: usize) -> Result<(), String> {
        let Some(msg) = self.up[q].pop_front() else {
            return Ok(());
        };
        let (ci, stripe) = (q / self.cfg.stripes, q % self.cfg.stripes);
        let client = ClientId(ci as u64);
        let r = &mut self.resources[stripe];
        let mut out = Vec::new();
        let done = match msg {
            Up::Request { req, mode, range } => r.request(client, req, mode, range, &mut out),
            Up::Revoked(id) => r.revoked(client, id, &mut out),
            Up::Downgrade(id, m) => r.downgrade(client, id, m, &mut out),
            Up::Release(id) => r.release(client, id, &mut out),
        };
        done.map_err(|e| format!("client {ci} at stripe {stripe}: {e}"))?;
        for o in out {
            let to = match &o {
                Out::Grant { to, grant, .. } => {
                    self.report.grants += 1;
                    let r = &self.resources[stripe];
                    if r.granted().any(|(_, g)| {
                        g.state == State::Canceling
                            && g.client != *to
                            && g.range.overlaps(&grant.range)
                    }) {
                        self.report.early_grants += 1;
                    }
                    to.0 as usize
                }
                Out::Revoke { to, .. } => {
                    self.report.revocations += 1;
                    to.0 as usize
                }
            };
            let q = self.queue(to, stripe);
            self.down[q].push_back(o);
        }
        Ok(())
    }

    fn apply(&mut self, k: usize) {
        let (ci, stripe, id, b) = self.flights.swap_remove(k);
        let range = ByteRange {
            start: b.start,
            end: b.start + b.data.len() as u64,
        };
        let update = if self.cfg.sn_blind_servers {
            vec![range]
        } else {
            self.extents[stripe].merge(range, b.sn)
        };
        let applied: u64 = update.iter().map(|u| u.end - u.start).sum();
        self.report.bytes_discarded += range.end - range.start - applied;
        for u in update {
            for x in u.start..u.end {
                self.file[x as usize] = b.data[(x - b.start) as usize];
            }
        }
        if let Some(n) = self.clients[ci].unacked.get_mut(&(stripe, id)) {
            *n -= 1;
        }
        self.maybe_release(ci, stripe, id);
    }

    fn clean(&mut self, stripe: usize) {
        let ss = self.cfg.stripe_size;
        let all = ByteRange {
            start: stripe as u64 * ss,
            end: (stripe as u64 + 1) * ss,
        };
        let msn = self.resources[stripe].min_unreleased_write_sn(all);
        self.extents[stripe].clean(all, msn, 1024);
    }

    /// Close: every cached lock is given back (its bytes flushed).
    fn close_all(&mut self) {
        for ci in 0..self.clients.len() {
            let ids: Vec<(usize, GrantId)> = self.clients[ci]
                .locks
                .iter()
                .filter(|(_, h)| !h.canceling)
                .map(|(&k, _)| k)
                .collect();
            for (s, id) in ids {
                self.give_back(ci, s, id);
            }
        }
    }

    fn busy(&self) -> bool {
        self.clients
            .iter()
            .any(|c| !c.todo.is_empty() || c.op.is_some())
            || self.up.iter().any(|q| !q.is_empty())
            || self.down.iter().any(|q| !q.is_empty())
            || !self.flights.is_empty()
    }
}

/// One seeded run.
pub fn run(cfg: &SeqSimConfig) -> Result<SeqSimReport, SeqSimFailure> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let size = cfg.stripes as u64 * cfg.stripe_size;
    let clients = (0..cfg.clients)
        .map(|_| Client {
            todo: (0..cfg.writes_per_client)
                .map(|_| {
                    let n = rng.gen_range(1..=cfg.max_ranges);
                    let mut at = 0;
                    let mut v = Vec::new();
                    for _ in 0..n {
                        let s = at + rng.gen_range(0..size / 2);
                        let e = (s + rng.gen_range(1..=size / 2)).min(size);
                        if s >= e {
                            break;
                        }
                        v.push(ByteRange { start: s, end: e });
                        at = e;
                    }
                    if v.is_empty() {
                        v.push(ByteRange { start: 0, end: 1 });
                    }
                    v
                })
                .collect(),
            caches: vec![WriteCache::new(); cfg.stripes],
            ..Client::default()
        })
        .collect();
    let queues = cfg.clients * cfg.stripes;
    let mut w = World {
        cfg: cfg.clone(),
        resources: (0..cfg.stripes).map(|_| Resource::new(cfg.dlm)).collect(),
        extents: (0..cfg.stripes).map(|_| ExtentCache::new()).collect(),
        file: vec![0; size as usize],
        clients,
        up: vec![VecDeque::new(); queues],
        down: vec![VecDeque::new(); queues],
        flights: Vec::new(),
        writes: Vec::new(),
        by_sn: Vec::new(),
        next_req: 0,
        report: SeqSimReport::default(),
    };
    let failure = |step: u64, what: String| SeqSimFailure {
        seed: cfg.seed,
        step,
        what,
    };
    let budget = 200_000 + 20_000 * (cfg.clients * cfg.writes_per_client) as u64;
    let mut closed = false;
    let mut step = 0;
    while step < budget {
        step += 1;
        if !w.busy() {
            if closed {
                break;
            }
            w.close_all();
            closed = true;
            continue;
        }
        let r = match rng.gen_range(0..10) {
            0 | 1 => w.client_step(rng.gen_range(0..cfg.clients)),
            2 | 3 => {
                let q = rng.gen_range(0..queues);
                w.client_receive(q / cfg.stripes, q % cfg.stripes)
            }
            4..=6 => w.server_receive(rng.gen_range(0..queues)),
            7 => {
                w.clean(rng.gen_range(0..cfg.stripes));
                Ok(())
            }
            _ if !w.flights.is_empty() => {
                let k = rng.gen_range(0..w.flights.len());
                w.apply(k);
                Ok(())
            }
            _ => Ok(()),
        };
        r.map_err(|e| failure(step, e))?;
        for (s, res) in w.resources.iter().enumerate() {
            res.check()
                .map_err(|e| failure(step, format!("stripe {s}: {e}")))?;
        }
    }
    w.report.steps = step;
    if w.busy() {
        return Err(failure(
            step,
            "no progress within the step budget: a deadlock".into(),
        ));
    }
    for (i, c) in w.clients.iter().enumerate() {
        if !c.locks.is_empty() || c.caches.iter().any(|x| !x.is_empty()) {
            return Err(failure(
                step,
                format!("client {i} kept locks or dirty bytes after close"),
            ));
        }
    }
    // Stronger than atomicity: every stripe holds its writes applied in SN order (the lock
    // servers' serialization), whatever order the flushes arrived in.
    let mut by_sn = w.by_sn.clone();
    by_sn.sort_by_key(|x| (x.0, x.1, x.2));
    let mut expected = vec![0u8; size as usize];
    for (_, _, _, r, writer, op) in by_sn {
        TagKey::DEFAULT
            .op(writer, op)
            .fill_at(r.start, &mut expected[r.start as usize..r.end as usize]);
    }
    if let Some(x) = (0..expected.len()).find(|&x| expected[x] != w.file[x]) {
        return Err(failure(
            step,
            format!("the file is not the writes in SN order (first difference at byte {x})"),
        ));
    }
    let report = verify(&w.file[..], &w.writes, &[]).map_err(|e| failure(step, e.to_string()))?;
    if !report.ok() {
        return Err(failure(step, format!("not atomic: {report}")));
    }
    Ok(w.report)
}
