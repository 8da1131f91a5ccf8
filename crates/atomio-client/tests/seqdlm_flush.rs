//! SeqDLM end to end on one stripe, every piece real but the transport: a lock `Resource`
//! (early grant, early revocation, conversion — or a traditional DLM), clients that cache
//! locks and write back through a `WriteCache` (flush on revocation, release after the
//! flush is acknowledged), and a data server applying flushes through an `ExtentCache` in
//! random arrival order, cleaned with the resource's mSN. Whatever the interleaving, the
//! stripe must equal the writes applied in SN order (the lock server's serialization).
//! Negative control: a data server that ignores SNs is caught.

use atomio_client::write_cache::{Dirty, WriteCache};
use atomio_data::extent_cache::ExtentCache;
use atomio_layout::ByteRange;
use atomio_lock::seqdlm::{Config, Expand, GrantId, Mode, Out, ReqId, Resource, State};
use atomio_proto::ClientId;
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};

const STRIPE: usize = 96;

#[derive(Default)]
struct Client {
    /// Writes still to do: (start, len).
    todo: VecDeque<(u64, u64)>,
    /// Locks held (client's view): id → (mode, range, sn, canceling).
    locks: BTreeMap<GrantId, (Mode, ByteRange, u64, bool)>,
    /// A request sent for the next write, not yet granted.
    waiting: Option<ReqId>,
    /// Server → client messages, in order.
    inbox: VecDeque<Out>,
    cache: WriteCache,
    /// Flushes of a canceling lock not yet acknowledged.
    unacked: BTreeMap<GrantId, usize>,
}

/// A write as performed: (sn, global order, start, payload byte, len).
type Done = (u64, u64, u64, u8, u64);

struct World {
    res: Resource,
    clients: Vec<Client>,
    mode: Mode,
    /// Flush blocks in flight to the data server: (client, lock, block).
    flights: Vec<(usize, GrantId, Dirty)>,
    stripe: Vec<u8>,
    extents: ExtentCache,
    ignore_sn: bool,
    done: Vec<Done>,
    next: u64,
}

impl World {
    fn route(&mut self, out: Vec<Out>) {
        for o in out {
            let to = match &o {
                Out::Grant { to, .. } | Out::Revoke { to, .. } => to.0 as usize,
            };
            self.clients[to].inbox.push_back(o);
        }
    }

    fn write_under(&mut self, ci: usize, id: GrantId, start: u64, len: u64) {
        let sn = self.clients[ci].locks[&id].2;
        self.next += 1;
        let byte = (self.next % 250 + 1) as u8;
        self.clients[ci]
            .cache
            .write(start, &vec![byte; len as usize], sn);
        self.done.push((sn, self.next, start, byte, len));
    }

    /// The client's next step, if it has one: write under a cached lock, or ask for one.
    fn client_step(&mut self, ci: usize) {
        let c = &self.clients[ci];
        if c.waiting.is_some() {
            return;
        }
        let Some(&(start, len)) = c.todo.front() else {
            return;
        };
        let want = ByteRange {
            start,
            end: start + len,
        };
        let usable = c.locks.iter().find(|(_, (m, r, _, canceling))| {
            m.is_write() && !canceling && r.start <= want.start && r.end >= want.end
        });
        if let Some((&id, _)) = usable {
            self.clients[ci].todo.pop_front();
            self.write_under(ci, id, start, len);
            return;
        }
        self.next += 1;
        let req = ReqId(self.next);
        self.clients[ci].waiting = Some(req);
        let mut out = Vec::new();
        self.res
            .request(ClientId(ci as u64), req, self.mode, want, &mut out)
            .unwrap();
        self.route(out);
    }

    /// The client handles its next message.
    fn deliver(&mut self, ci: usize) {
        let Some(msg) = self.clients[ci].inbox.pop_front() else {
            return;
        };
        let mut out = Vec::new();
        match msg {
            Out::Grant {
                req,
                id,
                grant,
                absorbed,
                ..
            } => {
                // Absorbed locks' cached data now belong to the new grant (its SN).
                for old in absorbed {
                    let (_, _, old_sn, _) = self.clients[ci].locks.remove(&old).unwrap();
                    for b in self.clients[ci].cache.take(old_sn) {
                        self.clients[ci].cache.write(b.start, &b.data, grant.sn);
                    }
                    for d in self.done.iter_mut().filter(|d| d.0 == old_sn) {
                        d.0 = grant.sn;
                    }
                }
                let canceling = grant.state == State::Canceling;
                self.clients[ci]
                    .locks
                    .insert(id, (grant.mode, grant.range, grant.sn, canceling));
                if self.clients[ci].waiting == Some(req) {
                    self.clients[ci].waiting = None;
                    let (start, len) = self.clients[ci].todo.pop_front().unwrap();
                    self.write_under(ci, id, start, len);
                }
                if canceling {
                    self.cancel(ci, id, &mut out);
                }
            }
            Out::Revoke { id, .. } => {
                let held = self.clients[ci].locks.get(&id).is_some_and(|l| !l.3);
                if held {
                    self.res.revoked(ClientId(ci as u64), id, &mut out).unwrap();
                    self.cancel(ci, id, &mut out);
                }
            }
        }
        self.route(out);
    }

    /// Starts giving `id` back: downgrade (conversion), flush its bytes, release once
    /// every flush is acknowledged.
    fn cancel(&mut self, ci: usize, id: GrantId, out: &mut Vec<Out>) {
        let lock = self.clients[ci].locks.get_mut(&id).unwrap();
        lock.3 = true;
        let (mode, _, sn, _) = *lock;
        if self.res.config().conversion && mode != Mode::Nbw && mode.is_write() {
            self.res
                .downgrade(ClientId(ci as u64), id, Mode::Nbw, out)
                .unwrap();
        }
        let blocks = self.clients[ci].cache.take(sn);
        self.clients[ci].unacked.insert(id, blocks.len());
        for b in blocks {
            self.flights.push((ci, id, b));
        }
        self.maybe_release(ci, id, out);
    }

    fn maybe_release(&mut self, ci: usize, id: GrantId, out: &mut Vec<Out>) {
        if self.clients[ci].unacked.get(&id) == Some(&0) {
            self.clients[ci].unacked.remove(&id);
            self.clients[ci].locks.remove(&id);
            self.res.release(ClientId(ci as u64), id, out).unwrap();
        }
    }

    /// The data server applies flight `k` and acknowledges it.
    fn apply(&mut self, k: usize) {
        let (ci, id, b) = self.flights.swap_remove(k);

        let range = ByteRange {
            start: b.start,
            end: b.start + b.data.len() as u64,
        };
        let update = if self.ignore_sn {
            vec![range]
        } else {
            self.extents.merge(range, b.sn)
        };
        for u in update {
            for x in u.start..u.end {
                self.stripe[x as usize] = b.data[(x - b.start) as usize];
            }
        }
        *self.clients[ci].unacked.get_mut(&id).unwrap() -= 1;
        let mut out = Vec::new();
        self.maybe_release(ci, id, &mut out);
        self.route(out);
    }

    fn clean(&mut self) {
        let all = ByteRange {
            start: 0,
            end: STRIPE as u64,
        };
        let msn = self.res.min_unreleased_write_sn(all);
        self.extents.clean(all, msn, 1024);
    }

    /// Every client gives every lock back (close): what is left is flushed.
    fn close_all(&mut self) {
        for ci in 0..self.clients.len() {
            let ids: Vec<GrantId> = self.clients[ci]
                .locks
                .iter()
                .filter(|(_, l)| !l.3)
                .map(|(&id, _)| id)
                .collect();
            for id in ids {
                let mut out = Vec::new();
                if self.res.revoked(ClientId(ci as u64), id, &mut out).is_ok() {
                    self.cancel(ci, id, &mut out);
                }
                self.route(out);
            }
        }
    }

    fn expected(&self) -> Vec<u8> {
        let mut d = self.done.clone();
        d.sort_by_key(|x| (x.0, x.1));
        let mut stripe = vec![0u8; STRIPE];
        for (_, _, start, byte, len) in d {
            for x in start..start + len {
                stripe[x as usize] = byte;
            }
        }
        stripe
    }
}

/// Runs one schedule; `Err` describes a mismatch or a stall.
/// `lazy`: the data server applies a flush in one step out of `lazy` (more flushes in
/// flight at once: more arrival orders).
fn run(
    cfg: Config,
    mode: Mode,
    writes: &[Vec<(u64, u64)>],
    seed: u64,
    lazy: usize,
    ignore_sn: bool,
) -> Result<(), String> {
    let mut w = World {
        res: Resource::new(cfg),
        clients: writes
            .iter()
            .map(|ws| Client {
                todo: ws.iter().copied().collect(),
                ..Client::default()
            })
            .collect(),
        mode,
        flights: Vec::new(),
        stripe: vec![0; STRIPE],
        extents: ExtentCache::new(),
        ignore_sn,
        done: Vec::new(),
        next: 0,
    };
    let mut x = seed | 1;
    let mut rnd = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let n = w.clients.len();
    let mut closed = false;
    for _ in 0..100_000 {
        let busy = w
            .clients
            .iter()
            .any(|c| !c.todo.is_empty() || !c.inbox.is_empty())
            || !w.flights.is_empty();
        if !busy {
            if closed {
                break;
            }
            w.close_all();
            closed = true;
            continue;
        }
        // Steps 3.. are the server's: it applies a flush in one step out of `lazy`.
        match rnd(3 + lazy) {
            0 => w.client_step(rnd(n)),
            1 => w.deliver(rnd(n)),
            2 => w.clean(),
            3 if !w.flights.is_empty() => {
                let k = rnd(w.flights.len());
                w.apply(k)
            }
            _ => {}
        }
        w.res.check()?;
        for c in &w.clients {
            c.cache.check()?;
        }
        w.extents.check()?;
    }
    if w.clients
        .iter()
        .any(|c| !c.todo.is_empty() || c.waiting.is_some())
    {
        return Err("writes left undone: a stall".into());
    }
    if w.stripe != w.expected() {
        return Err(format!(
            "the stripe is not the writes in SN order:\n got  {:?}\n want {:?}",
            w.stripe,
            w.expected()
        ));
    }
    Ok(())
}

fn writes() -> impl Strategy<Value = Vec<Vec<(u64, u64)>>> {
    prop::collection::vec(prop::collection::vec((0u64..72, 1u64..24), 1..6), 2..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn seqdlm_leaves_the_writes_in_sn_order(
        ws in writes(),
        seed in any::<u64>(),
        er in any::<bool>(),
        expand in any::<bool>(),
        lazy in prop::sample::select(vec![1usize, 4, 16]),
    ) {
        let cfg = Config {
            early_revocation: er,
            expand: if expand { Expand::Greedy } else { Expand::None },
            ..Config::SEQDLM
        };
        prop_assert_eq!(run(cfg, Mode::Nbw, &ws, seed, lazy, false), Ok(()));
    }

    #[test]
    fn bw_with_downgrades_and_traditional_dlms_too(
        ws in writes(),
        seed in any::<u64>(),
        which in 0u8..3,
        lazy in prop::sample::select(vec![1usize, 16]),
    ) {
        let (cfg, mode) = match which {
            0 => (Config::SEQDLM, Mode::Bw),
            1 => (Config::DLM_BASIC, Mode::Pw),
            _ => (Config::DLM_LUSTRE, Mode::Pw),
        };
        prop_assert_eq!(run(cfg, mode, &ws, seed, lazy, false), Ok(()));
    }
}

/// Negative control: a data server that writes flushes as they arrive (no extent cache)
/// lets an early-granted writer's older flush land last. (Writes chosen so that no later
/// write covers the overlap and hides it.)
#[test]
fn a_data_server_ignoring_sns_is_caught() {
    let ws = vec![vec![(0, 40)], vec![(20, 40)], vec![(50, 20)]];
    let caught =
        (0..500u64).any(|seed| run(Config::SEQDLM, Mode::Nbw, &ws, seed, 16, true).is_err());
    assert!(caught, "no seed ever caught an SN-blind data server");
    for seed in 0..200 {
        assert_eq!(
            run(Config::SEQDLM, Mode::Nbw, &ws, seed, 16, false),
            Ok(()),
            "seed {seed}"
        );
    }
}
