//! Releasing a request, whole or down to an offset, sliced like grants, and re-examining the
//! waiters whose byte lies in what a release freed.
//!
//! Invariant: what a request still holds after any step of a release is a prefix of its
//! bytes in offset order (releases cut back from the top), so a release cut short by the
//! work slice leaves a state like any other grant.

use super::*;

impl LockServer {
    /// Starts releasing `lock` down to `from` (`None`: all of it, closing the request),
    /// cancelling a pending acquire; what does not fit in this step continues in `work`.
    /// An `orphan`'s client is gone: it is not answered.
    pub(super) fn release(
        &mut self,
        lock: LockId,
        tag: u64,
        from: Option<u64>,
        orphan: bool,
        out: &mut Vec<Outgoing>,
    ) {
        self.stats.releases += 1;
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let owner = req.owner;
        let queued = match req.pending.take() {
            None => false,
            Some(Pending::Waiting(acq)) => {
                let at = req.next.expect("waiting requests have a next byte");
                self.files
                    .get_mut(&req.file)
                    .expect("open request has a table")
                    .waiters
                    .remove(&(at, acq.seq));
                self.waiting -= 1;
                waited(&mut self.waiting_of, owner);
                out.push(error(
                    owner,
                    acq.tag,
                    ErrorCode::InvalidState,
                    format!("{lock} was released while its acquire waited"),
                ));
                false
            }
            Some(Pending::Granting(acq)) => {
                out.push(error(
                    owner,
                    acq.tag,
                    ErrorCode::InvalidState,
                    format!("{lock} was released while its acquire waited"),
                ));
                true
            }
            // Only a departing client's cleanup meets a release in progress: it goes on,
            // unanswered, and down to nothing (a partial one would leave an orphan
            // holding bytes for ever).
            Some(Pending::Releasing { tag, .. }) => {
                debug_assert!(orphan && from.is_none());
                req.pending = Some(Pending::Releasing {
                    tag,
                    to: None,
                    orphan: true,
                });
                return;
            }
        };
        req.pending = Some(Pending::Releasing {
            tag,
            to: from,
            orphan,
        });
        if !queued && !self.continue_release(lock, out) {
            self.runnable.push_back(lock);
            self.stats.sliced += 1;
        }
    }

    /// A full release (tag `tag`) arrives while a partial one down to `x` (tag `partial`)
    /// is still being carried out — a client abandoning an operation frees everything it
    /// knows of. The partial release is answered now as if done (the client then believes
    /// it holds less than it does until the slices finish, which is never unsafe) and the
    /// release goes on down to nothing.
    pub(super) fn supersede_release(
        &mut self,
        lock: LockId,
        partial: u64,
        x: u64,
        tag: u64,
        out: &mut Vec<Outgoing>,
    ) {
        self.stats.releases += 1;
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let progress = if req.cursor > x {
            LockProgress {
                lock,
                last_abs_offset: req.desc.last_before(x, 0).map_or(0, |b| b + 1),
                next_abs_offset: req.desc.first_at_or_after(x),
            }
        } else {
            req.progress(lock)
        };
        out.push(Outgoing {
            to: req.owner,
            tag: partial,
            reply: Reply::Released(progress),
        });
        req.pending = Some(Pending::Releasing {
            tag,
            to: None,
            orphan: false,
        });
    }

    /// Releases as much of a `Pending::Releasing` request as the step's budget allows, from
    /// the top; returns whether the release is complete (and answered).
    pub(super) fn continue_release(&mut self, lock: LockId, out: &mut Vec<Outgoing>) -> bool {
        let req = &self.requests[&lock];
        let Some(Pending::Releasing { tag, to, orphan }) = req.pending else {
            unreachable!("continue_release on a request that is not releasing")
        };
        let left = req.held.above(to.unwrap_or(0));
        if left as u64 <= self.budget {
            self.budget -= left as u64;
            self.requests.get_mut(&lock).expect("just seen").pending = None;
            self.release_now(lock, tag, to, orphan, out);
            return true;
        }
        let k = self.budget as usize;
        if k > 0 {
            self.budget = 0;
            let cut = req.held.cut_below_top(k);
            // One slice of a longer release: nobody is answered yet.
            self.release_now(lock, tag, Some(cut), true, out);
        }
        false
    }

    /// Releases `lock` down to `from`, or all of it and closes the request. `quiet`: nobody
    /// is answered (a slice of a longer release, or an orphan's — whose closing then counts
    /// for no client).
    pub(super) fn release_now(
        &mut self,
        lock: LockId,
        tag: u64,
        from: Option<u64>,
        quiet: bool,
        out: &mut Vec<Outgoing>,
    ) {
        let req = self.requests.get_mut(&lock).expect("caller checked");
        let table = self
            .files
            .get_mut(&req.file)
            .expect("open request has a table");
        let owner = req.owner;
        let file = req.file;
        let before = req.held.entries();
        // What was freed, as ranges in increasing order (hulls may include bytes that were
        // not the request's own; re-examining a waiter there is merely wasted effort).
        let mut freed: Vec<ByteRange> = Vec::new();
        match from {
            None => {
                match &mut req.held {
                    Held::Write(starts) => {
                        for &s in starts.iter() {
                            let h = table.writes.leave(s, lock);
                            freed.push(ByteRange {
                                start: s,
                                end: h.end,
                            });
                        }
                        starts.clear();
                    }
                    Held::Read(chain) => {
                        freed = chain.take_all();
                        for &r in &freed {
                            table.reads.remove(r);
                        }
                    }
                }
                if !quiet {
                    out.push(Outgoing {
                        to: owner,
                        tag,
                        reply: Reply::Released(LockProgress {
                            lock,
                            last_abs_offset: 0,
                            next_abs_offset: None,
                        }),
                    });
                    if let Some(n) = self.per_client.get_mut(&owner) {
                        *n -= 1;
                        if *n == 0 {
                            self.per_client.remove(&owner);
                        }
                    }
                }
                self.requests.remove(&lock);
                table.requests -= 1;
                self.entries.total -= before;
                self.stats.entries_released += before as u64;
                self.entries.moved(owner, before, 0);
            }
            Some(x) => {
                freed = cut_held(req, lock, table, x);
                self.entries.total = self.entries.total + req.held.entries() - before;
                self.stats.entries_released += (before - req.held.entries()) as u64;
                self.entries.moved(owner, before, req.held.entries());
                if !quiet {
                    out.push(Outgoing {
                        to: owner,
                        tag,
                        reply: Reply::Released(req.progress(lock)),
                    });
                }
            }
        }
        if self.files.get(&file).is_some_and(|t| t.requests == 0) {
            let t = self.files.remove(&file).expect("just checked");
            debug_assert!(t.writes.is_empty() && t.reads.is_empty() && t.waiters.is_empty());
        } else if !freed.is_empty() {
            self.reexamine(file, &freed, out);
        }
    }

    /// Retries, in arrival order, the blocked requests waiting on a byte in `freed`.
    pub(super) fn reexamine(&mut self, file: FileId, freed: &[ByteRange], out: &mut Vec<Outgoing>) {
        let table = self.files.get_mut(&file).expect("caller checked");
        if table.waiters.is_empty() {
            return;
        }
        let mut candidates: Vec<(u64, u64, LockId)> = if table.waiters.len() <= freed.len() {
            table
                .waiters
                .iter()
                .filter(|((at, _), _)| {
                    let i = freed.partition_point(|r| r.end <= *at);
                    freed.get(i).is_some_and(|r| r.start <= *at)
                })
                .map(|(&(at, seq), &id)| (seq, at, id))
                .collect()
        } else {
            freed
                .iter()
                .flat_map(|r| table.waiters.range((r.start, 0)..(r.end, 0)))
                .map(|(&(at, seq), &id)| (seq, at, id))
                .collect()
        };
        candidates.sort_unstable();
        candidates.dedup();
        for (seq, at, lock) in candidates {
            self.files
                .get_mut(&file)
                .expect("still open")
                .waiters
                .remove(&(at, seq));
            let req = self.requests.get_mut(&lock).expect("waiters are open");
            let Some(Pending::Waiting(acq)) = req.pending else {
                unreachable!("waiters are waiting")
            };
            let owner = req.owner;
            let outcome = self.grant(lock, acq.until());
            if let Grant::Blocked(at2) = outcome {
                // Still waiting (now perhaps for a later byte), in its old place in line.
                self.files
                    .get_mut(&file)
                    .expect("still open")
                    .waiters
                    .insert((at2, seq), lock);
                continue;
            }
            self.waiting -= 1;
            waited(&mut self.waiting_of, owner);
            self.requests.get_mut(&lock).expect("open").pending = None;
            self.settle(lock, acq, outcome, out);
        }
    }
}
