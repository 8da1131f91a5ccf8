//! Client leases: a lock is held only while its client is heard from.
//!
//! A client that holds or waits for locks must be heard (any lock-class frame, or a
//! `Renew` from its lease keeper) at least once per lease; one that is silent for longer
//! *lapses*. A lapsed client is **fenced**: the server's data side first stops accepting
//! its writes, and only then are its locks released (see `LockServer::expire` and
//! `LockServer::release_lapsed`), so a client that was paused, not dead, cannot write into
//! bytes somebody else holds by the time it wakes up. A lapsed lease is never renewed:
//! the client must reconnect (a new session, with an empty lock table).
//!
//! A client that holds nothing is not fenced when it is silent: nothing was released on
//! its behalf, so nothing it does later can race a new holder. (Clients that never
//! heartbeat — raw tools, idle connections — are thus harmless.)
//!
//! Sans-IO: time is a number of milliseconds the driver passes in (`now`), so the same
//! code runs under the actor's monotonic clock and the simulator's virtual one.
//!
//! **Invariants:** a client is lapsed only if it was silent for longer than the lease
//! while holding something; once lapsed it stays lapsed until forgotten (disconnect);
//! `proof(c)` is a keyed hash only this server (its key) can produce.

use atomio_proto::ClientId;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

/// How long a silent client keeps its locks, and the server's secret for renewal proofs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    pub duration_ms: u64,
    pub key: u64,
}

impl LeaseConfig {
    /// The default lease of `atomio server`: long enough that a loaded 2-core machine never
    /// starves a renewal thread that long, short enough that waiters behind a frozen client
    /// go on within seconds.
    pub const DEFAULT_MS: u64 = 5_000;
}

#[derive(Debug)]
pub struct Leases {
    cfg: LeaseConfig,
    /// When each client was last heard from (ms).
    last_heard: HashMap<ClientId, u64>,
    lapsed: HashSet<ClientId>,
}

impl Leases {
    pub fn new(cfg: LeaseConfig) -> Self {
        Self {
            cfg,
            last_heard: HashMap::new(),
            lapsed: HashSet::new(),
        }
    }

    pub fn duration_ms(&self) -> u64 {
        self.cfg.duration_ms
    }

    /// The renewal proof for `client`: SipHash of (key, client). Another peer cannot renew
    /// a lease it was not given (nor can a client of an earlier server process: new key).
    pub fn proof(&self, client: ClientId) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.cfg.key, client.0, 0x006c_6561_7365_u64).hash(&mut h);
        h.finish()
    }

    fn expired(&self, client: ClientId, now: u64) -> bool {
        self.last_heard
            .get(&client)
            .is_some_and(|&t| now.saturating_sub(t) > self.cfg.duration_ms)
    }

    /// `client` was heard from at `now`: its lease runs from here, unless it already ran
    /// out while `client` held something (then only `expire` may act on it).
    pub fn heard(&mut self, client: ClientId, now: u64, holds: bool) {
        if self.lapsed.contains(&client) || (holds && self.expired(client, now)) {
            return;
        }
        let t = self.last_heard.entry(client).or_insert(now);
        *t = (*t).max(now);
    }

    pub fn is_lapsed(&self, client: ClientId) -> bool {
        self.lapsed.contains(&client)
    }

    /// Whether a renewal of `client` at `now` would be accepted (it is known, not lapsed,
    /// and not silent past its lease while holding something).
    pub fn renewable(&self, client: ClientId, now: u64, holds: bool) -> bool {
        self.last_heard.contains_key(&client)
            && !self.lapsed.contains(&client)
            && !(holds && self.expired(client, now))
    }

    /// Marks lapsed every client in `holders` silent for longer than the lease at `now`;
    /// returns them (the driver fences each, then calls `LockServer::release_lapsed`).
    pub fn expire(&mut self, now: u64, holders: impl Iterator<Item = ClientId>) -> Vec<ClientId> {
        let mut due: Vec<ClientId> = holders
            .filter(|&c| !self.lapsed.contains(&c) && self.expired(c, now))
            .collect();
        due.sort_unstable();
        due.dedup();
        self.lapsed.extend(due.iter().copied());
        due
    }

    /// `client` is gone (disconnected): forget it.
    pub fn forget(&mut self, client: ClientId) {
        self.last_heard.remove(&client);
        self.lapsed.remove(&client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leases() -> Leases {
        Leases::new(LeaseConfig {
            duration_ms: 100,
            key: 7,
        })
    }

    #[test]
    fn only_silent_holders_lapse_and_stay_lapsed() {
        let mut l = leases();
        let (a, b, idle) = (ClientId(1), ClientId(2), ClientId(3));
        for c in [a, b, idle] {
            l.heard(c, 0, false);
        }
        l.heard(b, 90, true);
        assert!(
            l.expire(100, [a, b].into_iter()).is_empty(),
            "not past the lease"
        );
        assert_eq!(l.expire(101, [a, b].into_iter()), vec![a]);
        // The idle client is past its lease too but holds nothing: never fenced.
        assert!(!l.is_lapsed(idle));
        // Once lapsed, hearing from it does not bring it back.
        l.heard(a, 102, true);
        assert!(l.is_lapsed(a) && !l.renewable(a, 102, true));
        assert!(l.expire(500, [a].into_iter()).is_empty(), "reported once");
        // A holder heard after its lease ran out (before the tick saw it) is not renewed.
        l.heard(b, 300, true);
        assert!(!l.renewable(b, 300, true));
        assert_eq!(l.expire(300, [b].into_iter()), vec![b]);
        // An idle client that wakes up simply renews.
        l.heard(idle, 1000, false);
        assert!(l.renewable(idle, 1000, false));
        l.forget(a);
        assert!(!l.is_lapsed(a));
    }

    #[test]
    fn proofs_depend_on_the_key_and_the_client() {
        let l = leases();
        let other = Leases::new(LeaseConfig {
            duration_ms: 100,
            key: 8,
        });
        assert_ne!(l.proof(ClientId(1)), l.proof(ClientId(2)));
        assert_ne!(l.proof(ClientId(1)), other.proof(ClientId(1)));
        assert_eq!(l.proof(ClientId(1)), l.proof(ClientId(1)));
    }
}
