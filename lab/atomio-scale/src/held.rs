//! The safety check at scale: nobody acts on bytes another client acts on conflictingly.
//!
//! A client *takes* its call's bytes when its own lock operation says `Held` (what atomic
//! I/O relies on: it starts writing then). Each byte stays taken until the release at the
//! server that locks that byte takes effect: before that no correct server can have
//! granted it to anyone else; after it a correct one may. In between the client must be
//! alone on every byte it writes, and no writer may be on a byte it reads. Judged from the
//! clients' view, like the lock simulator's check, so a server that grants what it should
//! not, or a client protocol that believes too early, is caught — also in the lock
//! benchmark, where a client releases the instant it holds.
//!
//! Two ways to hold, for cost: a writer of at most `INDEXED_RUNS` runs puts its pieces
//! (cut by the server that locks them) into an ordered index of held write bytes, where
//! any overlap is one predecessor lookup per piece — thousands of S3D writers whose hulls
//! all interleave cost what their pieces cost. Larger holders (128 Ki strided locks) and
//! readers stay whole, as patterns: they are compared hull first, and their ranges walked
//! only when hulls overlap, so a pattern is never expanded unless someone comes near it.
//!
//! **Invariants:** the index holds pairwise disjoint pieces (a conflict stops the run at
//! the take that would break it); every piece and holding is dropped once the release at
//! its server took effect; `take` fails on the first conflict and names both clients.

use atomio_layout::{Access, ByteRange, Layout, ServerId};
use std::collections::{BTreeMap, HashMap};

/// Writers with at most this many runs go into the index.
pub const INDEXED_RUNS: u64 = 4096;

/// Which server locks a byte for an operation.
#[derive(Clone, Debug)]
pub enum Owner {
    /// Striped: the layout says (Ching methods, block locks).
    Striped(Layout),
    /// One server locks everything (bounding extent, whole file).
    Central(ServerId),
}

impl Owner {
    /// Calls `f` with each piece of `r` and the server that locks it; stops at `true`.
    fn any_piece(&self, r: ByteRange, mut f: impl FnMut(ByteRange, ServerId) -> bool) -> bool {
        match self {
            Owner::Central(s) => f(r, *s),
            Owner::Striped(l) => l.pieces(r).any(|p| f(p.range, p.server)),
        }
    }
}

/// A holder kept whole (a pattern, or a reader).
#[derive(Debug)]
struct Holding {
    id: u64,
    client: u32,
    hull: ByteRange,
    access: Access,
    write: bool,
    owner: Owner,
    /// Servers that locked some of its bytes and whose release has not taken effect.
    holding_at: Vec<ServerId>,
}

/// An indexed writer: its pieces' keys, per server.
#[derive(Debug)]
struct Indexed {
    client: u32,
    keys: Vec<(ServerId, u64)>,
}

/// Who holds what right now.
#[derive(Debug, Default)]
pub struct Holders {
    whole: Vec<Holding>,
    /// Held write pieces: start → (end, holder id).
    index: BTreeMap<u64, (u64, u64)>,
    indexed: HashMap<u64, Indexed>,
    /// Takes checked (for reports and tests).
    pub checks: u64,
}

impl Holders {
    /// `client`'s lock operation `id` starts acting on `access` (writing if `write`);
    /// `owner` says which server locks which byte, `servers` lists every server the
    /// operation holds locks at. `Err` if that conflicts with a current holder.
    pub fn take(
        &mut self,
        id: u64,
        client: u32,
        access: &Access,
        write: bool,
        owner: Owner,
        servers: Vec<ServerId>,
    ) -> Result<(), String> {
        self.checks += 1;
        let Some(hull) = access.hull() else {
            return Ok(());
        };
        if self.indexed.contains_key(&id) || self.whole.iter().any(|h| h.id == id) {
            return Err(format!(
                "operation {id:#x} of client {client} took bytes twice"
            ));
        }
        let conflict = |other: u32| {
            format!("clients {other} and {client} hold conflicting locks at once (near {hull:?})")
        };
        // Against holders kept whole.
        for h in &self.whole {
            if (write || h.write)
                && h.hull.overlaps(&hull)
                && crate::held::overlapping(&h.access, access, |r| {
                    h.owner.any_piece(r, |_, s| h.holding_at.contains(&s))
                })
            {
                return Err(conflict(h.client));
            }
        }
        // Against indexed writers (their pieces are disjoint: one predecessor each).
        if !self.index.is_empty() {
            for r in access.ranges() {
                if let Some((_, &(end, other))) = self.index.range(..r.end).next_back() {
                    if end > r.start {
                        let c = self.indexed.get(&other).map_or(u32::MAX, |x| x.client);
                        return Err(conflict(c));
                    }
                }
            }
        }
        if servers.is_empty() {
            return Ok(());
        }
        if write && access.pattern().run_count_upper() <= INDEXED_RUNS {
            let mut keys = Vec::new();
            for r in access.ranges() {
                owner.any_piece(r, |p, s| {
                    self.index.insert(p.start, (p.end, id));
                    keys.push((s, p.start));
                    false
                });
            }
            self.indexed.insert(id, Indexed { client, keys });
        } else {
            self.whole.push(Holding {
                id,
                client,
                hull,
                access: access.clone(),
                write,
                owner,
                holding_at: servers,
            });
        }
        Ok(())
    }

    /// Operation `id`'s release took effect at `server` (a no-op if it holds nothing there).
    pub fn release(&mut self, id: u64, server: ServerId) {
        if let Some(x) = self.indexed.get_mut(&id) {
            let index = &mut self.index;
            x.keys.retain(|&(s, start)| {
                if s == server {
                    index.remove(&start);
                    false
                } else {
                    true
                }
            });
            if x.keys.is_empty() {
                self.indexed.remove(&id);
            }
            return;
        }
        if let Some(i) = self.whole.iter().position(|h| h.id == id) {
            let h = &mut self.whole[i];
            h.holding_at.retain(|&s| s != server);
            if h.holding_at.is_empty() {
                self.whole.swap_remove(i);
            }
        }
    }

    pub fn holding(&self) -> usize {
        self.whole.len() + self.indexed.len()
    }
}

/// Whether two monotone accesses share a byte range for which `f` says yes (a merge of
/// their lazy ranges; `f` sees each maximal shared range).
pub fn overlapping(a: &Access, b: &Access, mut f: impl FnMut(ByteRange) -> bool) -> bool {
    let (mut x, mut y) = (a.ranges(), b.ranges());
    let (mut p, mut q) = (x.next(), y.next());
    while let (Some(r), Some(s)) = (p, q) {
        let (start, end) = (r.start.max(s.start), r.end.min(s.end));
        if start < end && f(ByteRange { start, end }) {
            return true;
        }
        if r.end <= s.end {
            p = x.next();
        } else {
            q = y.next();
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_layout::Pattern;

    fn strided(base: u64, count: u64) -> Access {
        let one = Pattern::bytes(1).unwrap();
        Access::new(base, Pattern::hvector(count, 1, 64, &one).unwrap()).unwrap()
    }

    const C: Owner = Owner::Central(ServerId(0));

    /// Both ways to hold: indexed (few runs) and whole (many runs).
    #[test]
    fn interleaved_strides_do_not_conflict_but_shared_bytes_do() {
        for count in [100, INDEXED_RUNS + 1] {
            let s0 = || vec![ServerId(0)];
            let mut h = Holders::default();
            h.take(10, 0, &strided(0, count), true, C, s0()).unwrap();
            // Same hull, other bytes: fine.
            h.take(11, 1, &strided(1, count), true, C, s0()).unwrap();
            // A byte of client 0.
            let e = h
                .take(12, 2, &strided(64 * (count - 1), 2), true, C, s0())
                .unwrap_err();
            assert!(e.contains("clients 0 and 2"), "{count}: {e}");
            assert!(
                h.take(10, 0, &strided(5, 1), true, C, s0()).is_err(),
                "taken twice"
            );
            // Readers share.
            h.release(10, ServerId(0));
            h.release(11, ServerId(0));
            h.release(11, ServerId(0));
            assert_eq!(h.holding(), 0, "{count}");
            h.take(13, 3, &strided(0, 10), false, C, s0()).unwrap();
            h.take(14, 4, &strided(0, 10), false, C, s0()).unwrap();
            assert!(h.take(15, 5, &strided(64, 1), true, C, s0()).is_err());
            assert_eq!(h.holding(), 2);
        }
    }

    #[test]
    fn bytes_are_free_once_their_own_server_released_them() {
        // Strips of 64 bytes on two servers: bytes [0, 64) at 0, [64, 128) at 1.
        let layout = Layout::round_robin(64, 2, 2, 0).unwrap();
        let all = |base, n| Access::new(base, Pattern::bytes(n).unwrap()).unwrap();
        let both = || vec![ServerId(0), ServerId(1)];
        let many = Access::new(
            0,
            Pattern::hvector(INDEXED_RUNS + 1, 1, 2, &Pattern::bytes(1).unwrap()).unwrap(),
        )
        .unwrap();
        // Indexed and whole holders alike.
        for first in [all(0, 128), many] {
            let mut h = Holders::default();
            let st = || Owner::Striped(layout.clone());
            h.take(1, 0, &first, true, st(), both()).unwrap();
            h.release(1, ServerId(1));
            // Server 1's bytes are free now, server 0's are not.
            h.take(2, 1, &all(64, 64), true, st(), both()).unwrap();
            assert!(h.take(3, 2, &all(60, 4), true, st(), both()).is_err());
        }
    }
}
