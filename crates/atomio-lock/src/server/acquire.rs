//! Opening a lock request and extending its granted prefix: the first acquire, later ones
//! (`LockMore`), and what becomes of each attempt — an answer, a waiter keyed by its next
//! byte, or work continued in a later step.
//!
//! Invariant: a request is queued as a waiter iff it has a pending blocking acquire whose
//! next byte conflicts with a granted lock; otherwise its client has been answered or it is
//! in the run queue.

use super::*;

impl LockServer {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lock_new(
        &mut self,
        client: ClientId,
        tag: u64,
        file: FileId,
        mode: LockMode,
        desc: LockDesc,
        wait: Wait,
        out: &mut Vec<Outgoing>,
    ) {
        let open = self.per_client.get(&client).copied().unwrap_or(0);
        if open >= MAX_REQUESTS_PER_CLIENT {
            return out.push(error(
                client,
                tag,
                ErrorCode::LimitExceeded,
                format!(
                    "client has {open} open lock requests; the limit is {MAX_REQUESTS_PER_CLIENT}"
                ),
            ));
        }
        let desc = match desc.validate(self.me) {
            Ok(d) => d,
            Err(e) => return out.push(error(client, tag, e.code, e.message)),
        };
        let Some(first) = desc.first_at_or_after(0) else {
            return out.push(error(
                client,
                tag,
                ErrorCode::InvalidArgument,
                "the request covers no byte held by this server",
            ));
        };
        let lock = LockId(self.next_lock);
        self.next_lock += 1;
        self.requests.insert(
            lock,
            LockRequest {
                owner: client,
                file,
                mode,
                desc,
                cursor: 0,
                next: Some(first),
                last: 0,
                held: match mode {
                    LockMode::Write => Held::Write(BTreeSet::new()),
                    LockMode::Read => Held::Read(Chain::new()),
                },
                pending: None,
            },
        );
        *self.per_client.entry(client).or_default() += 1;
        self.files.entry(file).or_default().requests += 1;
        self.stats.requests_opened += 1;
        self.acquire(lock, tag, wait, out);
    }

    /// Extends `lock`'s granted prefix as `wait` allows and replies now, or parks it.
    pub(super) fn acquire(&mut self, lock: LockId, tag: u64, wait: Wait, out: &mut Vec<Outgoing>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let acq = Acquire { tag, wait, seq };
        let outcome = self.grant(lock, acq.until());
        self.settle(lock, acq, outcome, out);
    }

    /// After a grant attempt for `acq` (which is not pending any more): answers it, queues
    /// it as a waiter, or queues it to continue in a later step.
    pub(super) fn settle(
        &mut self,
        lock: LockId,
        acq: Acquire,
        outcome: Grant,
        out: &mut Vec<Outgoing>,
    ) {
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let owner = req.owner;
        match outcome {
            Grant::Paused => {
                req.pending = Some(Pending::Granting(acq));
                self.runnable.push_back(lock);
                self.stats.sliced += 1;
            }
            Grant::Blocked(at) if acq.wait != Wait::NonBlocking => {
                if self.waiting >= MAX_WAITING_REQUESTS {
                    return out.push(error(
                        owner,
                        acq.tag,
                        ErrorCode::LimitExceeded,
                        format!(
                            "{MAX_WAITING_REQUESTS} requests are already waiting at this server"
                        ),
                    ));
                }
                let mine = self.waiting_of.entry(owner).or_default();
                if *mine >= MAX_WAITING_PER_CLIENT {
                    return out.push(error(
                        owner,
                        acq.tag,
                        ErrorCode::LimitExceeded,
                        format!(
                            "this client already has {MAX_WAITING_PER_CLIENT} requests waiting \
                             at this server, its limit"
                        ),
                    ));
                }
                *mine += 1;
                req.pending = Some(Pending::Waiting(acq));
                let file = req.file;
                self.files
                    .get_mut(&file)
                    .expect("open request has a table")
                    .waiters
                    .insert((at, acq.seq), lock);
                self.waiting += 1;
                self.stats.waits += 1;
            }
            Grant::Full => out.push(error(
                owner,
                acq.tag,
                ErrorCode::LimitExceeded,
                format!("the server holds {MAX_LOCKS_PER_SERVER} lock entries, its limit"),
            )),
            Grant::ClientFull => out.push(error(
                owner,
                acq.tag,
                ErrorCode::LimitExceeded,
                format!(
                    "this client holds {} lock entries (byte ranges) at this server, its \
                     limit; what is granted stays granted (release it, or lock fewer \
                     separate ranges: a coarser or bounding-extent lock)",
                    self.entries.client_limit
                ),
            )),
            Grant::Reached | Grant::Complete | Grant::Blocked(_) => out.push(Outgoing {
                to: owner,
                tag: acq.tag,
                reply: Reply::Lock(req.progress(lock)),
            }),
        }
    }

    /// Grants `lock`'s bytes in offset order from its cursor until a conflict, the bound
    /// `until` (exclusive) or the end of the request.
    pub(super) fn grant(&mut self, lock: LockId, until: Option<u64>) -> Grant {
        // The request is taken out of the map so the others can be read (and, for hull
        // carves, updated) while it is being extended.
        let mut req = self.requests.remove(&lock).expect("caller checked");
        let table = self
            .files
            .get_mut(&req.file)
            .expect("open request has a table");
        let mut ranges = 0u64;
        let mut checked = 0u64;
        let mut owners = 0u64;
        let before = req.held.entries();
        let outcome = if req.next.is_none() {
            Grant::Complete
        } else {
            grant_into(
                &mut req,
                lock,
                until.unwrap_or(MAX_OFFSET),
                table,
                &mut self.requests,
                &mut self.entries,
                (&mut ranges, &mut checked, &mut owners),
                &mut self.budget,
                self.ignore_conflicts,
                match self.hull_owners {
                    0 => MAX_HULL_OWNERS,
                    n => n,
                },
                match self.leap_after {
                    0 => LEAP_AFTER,
                    n => n,
                },
            )
        };
        self.entries.moved(req.owner, before, req.held.entries());
        self.requests.insert(lock, req);
        self.stats.ranges_granted += ranges;
        self.stats.ranges_checked += checked;
        self.stats.owners_checked += owners;
        outcome
    }
}
