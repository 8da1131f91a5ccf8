//! Clients' sessions at a lock server: the `Hello` that opens one, lease renewals, the clock,
//! lapsed leases, and a vanished client's release.
//!
//! Invariant: a client whose lease lapsed holds nothing and waits for nothing here once
//! `release_lapsed` ran; its requests are refused until it reconnects.

use super::*;

impl LockServer {
    /// The lease length, if this server keeps leases.
    pub fn lease_ms(&self) -> Option<u64> {
        self.leases.as_ref().map(Leases::duration_ms)
    }

    /// The driver's clock (ms, monotonic); messages handled after this call happen at `now`.
    pub fn set_now(&mut self, now: u64) {
        self.now = self.now.max(now);
    }

    pub(super) fn holds_anything(&self, client: ClientId) -> bool {
        self.per_client.get(&client).is_some_and(|&n| n > 0) || self.dlm.holds_anything(client)
    }

    /// Clients whose lease lapsed (silent past the lease while holding or waiting for
    /// locks) as of `set_now`. They keep their locks until `release_lapsed`: the driver
    /// must first make sure their later writes are refused (fencing).
    pub fn expire(&mut self) -> Vec<ClientId> {
        let Some(leases) = &mut self.leases else {
            return Vec::new();
        };
        let mut holders: Vec<ClientId> = self
            .per_client
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&c, _)| c)
            .collect();
        holders.extend(self.dlm.clients().filter(|&c| c != dlm::SERVER_SELF));
        holders.sort_unstable();
        holders.dedup();
        leases.expire(self.now, holders.into_iter())
    }

    /// Releases everything a lapsed (and fenced) client holds; its waiting acquires are
    /// answered `LeaseExpired`, so it learns why when it wakes up. It stays lapsed: its
    /// later lock requests are refused until it disconnects.
    pub fn release_lapsed(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        self.new_step();
        let waiting: Vec<u64> = self
            .requests
            .values()
            .filter(|r| r.owner == client)
            .filter_map(|r| match r.pending {
                Some(Pending::Waiting(a) | Pending::Granting(a)) => Some(a.tag),
                _ => None,
            })
            .collect();
        self.release_all(client, out);
        let mut waiting = waiting;
        waiting.extend(self.dlm.forget(client, out));
        self.stats.lapses += 1;
        let ms = self.lease_ms().unwrap_or(0);
        for tag in waiting {
            out.push(error(
                client,
                tag,
                ErrorCode::LeaseExpired,
                format!(
                    "silent for more than the {ms} ms lease: this client's locks were released"
                ),
            ));
        }
    }

    /// The session a `Hello` opens: the client's id, and its lease's proof and length.
    pub(super) fn session(&self, client: ClientId) -> Reply {
        match &self.leases {
            Some(l) => Reply::Session {
                client,
                proof: l.proof(client),
                lease_ms: l.duration_ms(),
            },
            None => Reply::Session {
                client,
                proof: 0,
                lease_ms: 0,
            },
        }
    }

    /// Answers a lease renewal for `session` (which may be another connection's: a client
    /// renews over any of its connections).
    pub(super) fn renew(&mut self, session: ClientId, proof: u64) -> Reply {
        let holds = self.holds_anything(session);
        match &mut self.leases {
            None => Reply::Renewed,
            Some(l) if l.proof(session) != proof => Reply::Error(WireError::new(
                ErrorCode::NotOwner,
                format!("wrong proof for the lease of {session}"),
            )),
            Some(l) if l.renewable(session, self.now, holds) => {
                l.heard(session, self.now, holds);
                Reply::Renewed
            }
            Some(l) if l.is_lapsed(session) || holds => Reply::Error(WireError::new(
                ErrorCode::LeaseExpired,
                format!(
                    "the lease of {session} lapsed (more than {} ms without a \
                         renewal); its locks were released",
                    l.duration_ms()
                ),
            )),
            Some(_) => Reply::Error(WireError::new(
                ErrorCode::NotFound,
                format!("{session} has no session here (disconnected?)"),
            )),
        }
    }

    /// Releases everything a vanished client held or waited for.
    pub fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        self.new_step();
        self.release_all(client, out);
        self.dlm.forget(client, out);
        if let Some(l) = &mut self.leases {
            l.forget(client);
        }
    }

    /// Releases every request of `client`; replies to it are dropped, notifications to
    /// others kept.
    pub(super) fn release_all(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        let mut mine: Vec<LockId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.owner == client)
            .map(|(&id, _)| id)
            .collect();
        mine.sort_unstable();
        // Its requests stop counting as its own now (a later session under the same id
        // starts empty), even those whose release continues in later steps.
        self.per_client.remove(&client);
        let mut scratch = Vec::new();
        for lock in mine {
            self.release(lock, 0, None, true, &mut scratch);
        }
        // Replies to the departed client are dropped; notifications to others are kept.
        out.extend(scratch.into_iter().filter(|o| o.to != client));
    }
}
