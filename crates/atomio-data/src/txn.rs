//! All-or-nothing writes at one data server: a sans-IO participant/decider of the atomic
//! commit protocol (storage effects go through the `ObjectStore`).
//!
//! ```text
//!  writer:  Stage ──► every participant      (bytes kept aside, invisible, space reserved)
//!           Decide ──► the decider           (commit record logged = the commit point;
//!                                             the decider applies its own bytes)
//!           Finish(Commit) ──► the others    (each applies its bytes)
//!           Finish(Abort)  ──► every participant, if a Stage failed
//! ```
//!
//! A participant left with staged bytes of a writer that is gone (disconnected, fenced, or
//! lost in a restart) keeps them **in doubt**: any access that touches those bytes is
//! answered `InDoubt { txn, decider }`, and the accessing client asks the decider
//! (`Resolve`: a write not yet committed is recorded aborted there, so its writer's late
//! `Decide` fails) and hands the answer down (`Finish`). Until then nobody reads or
//! overwrites those bytes, so a write resolved late cannot land on newer data. A write
//! this server decides needs no question: it is resolved here on the spot.
//!
//! **Invariants:** staged bytes reach an object only through a commit decision (logged at
//! the decider before any participant applies); a decision never changes once logged; the
//! decider applies its own bytes after logging, so a restart redoes (never half-does) a
//! committed write; an access never touches bytes of an in-doubt write; a client's staged
//! records are bounded (`MAX_STAGED_PER_CLIENT`), and so are the aborts `Resolve` records
//! for writes never decided (`MAX_DECISIONS_PER_SERVER`).

use crate::store::{DecisionRecord, ObjectStore, StagedWrite};
use atomio_layout::ServerId;
use atomio_proto::data::Bytes;
use atomio_proto::limits::{MAX_DECISIONS_PER_SERVER, MAX_STAGED_PER_CLIENT};
use atomio_proto::{ClientId, ErrorCode, FileId, ObjPiece, TxnId, TxnOutcome, WireError};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One write's staged records at this server.
#[derive(Debug)]
struct Staged {
    /// The writer, while it is connected; `None` once it is gone (then the write is in doubt
    /// unless this server decides it).
    owner: Option<ClientId>,
    decider: Option<ServerId>,
    writes: Vec<(u64, StagedWrite)>,
}

/// The transaction state of one data server.
#[derive(Debug, Default)]
pub struct Txns {
    staged: HashMap<TxnId, Staged>,
    per_client: HashMap<ClientId, usize>,
    /// Decisions of the writes this server decides, by origin then seq (`true`: committed).
    decisions: HashMap<u64, BTreeMap<u64, bool>>,
    live_decisions: usize,
    /// Records appended to the decision log since it was last rewritten.
    logged: usize,
    in_doubt: BTreeSet<TxnId>,
    /// Which client stages under each origin (for good: a client's `settled_below` speaks
    /// for its own origin only, so no peer may take over another's).
    origins: HashMap<u64, ClientId>,
}

/// Most write origins (client processes) a server remembers.
const MAX_ORIGINS: usize = 1 << 20;

fn io_err(what: &str, e: std::io::Error) -> WireError {
    WireError::new(ErrorCode::Io, format!("{what}: {e}"))
}

fn aborted(txn: TxnId) -> WireError {
    WireError::new(
        ErrorCode::Aborted,
        format!("{txn} was aborted: none of its bytes were applied"),
    )
}

/// Takes `n` staged records off `client`'s count.
fn uncharge(per_client: &mut HashMap<ClientId, usize>, client: ClientId, n: usize) {
    if let Some(k) = per_client.get_mut(&client) {
        *k = k.saturating_sub(n);
        if *k == 0 {
            per_client.remove(&client);
        }
    }
}

/// Whether two increasing, disjoint piece lists share a byte.
pub fn pieces_overlap(a: &[ObjPiece], b: &[ObjPiece]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        if x.offset < y.offset + y.len && y.offset < x.offset + x.len {
            return true;
        }
        if x.offset + x.len <= y.offset + y.len {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

impl Txns {
    /// The state a server restarts with: committed writes it decides are redone, undecided
    /// ones it decides are aborted, writes others decide are in doubt.
    pub fn recover<S: ObjectStore>(store: &mut S, found: crate::store::Recovered) -> Self {
        let mut t = Txns::default();
        for (txn, committed) in found.decisions {
            t.remember(txn, committed);
        }
        for (slot, w) in found.staged {
            let s = t.staged.entry(w.txn).or_insert_with(|| Staged {
                owner: None,
                decider: w.decider,
                writes: Vec::new(),
            });
            s.writes.push((slot, w));
        }
        let txns: Vec<TxnId> = t.staged.keys().copied().collect();
        for txn in txns {
            if t.staged[&txn].decider.is_none() {
                if let Err(e) = t.settle_locally(store, txn) {
                    tracing::warn!("recovering {txn}: {e}; it stays in doubt");
                    t.in_doubt.insert(txn);
                }
            } else {
                t.in_doubt.insert(txn);
            }
        }
        if !t.in_doubt.is_empty() {
            tracing::info!(
                writes = t.in_doubt.len(),
                "restarted with staged writes in doubt: they are resolved at their deciders on first access"
            );
        }
        t.mark(store);
        t
    }

    fn decision(&self, txn: TxnId) -> Option<bool> {
        self.decisions.get(&txn.origin)?.get(&txn.seq).copied()
    }

    fn remember(&mut self, txn: TxnId, committed: bool) {
        if self
            .decisions
            .entry(txn.origin)
            .or_default()
            .insert(txn.seq, committed)
            .is_none()
        {
            self.live_decisions += 1;
        }
    }

    fn decide_as<S: ObjectStore>(
        &mut self,
        store: &mut S,
        txn: TxnId,
        committed: bool,
    ) -> Result<(), WireError> {
        store
            .log_decision(DecisionRecord::of(txn, committed))
            .map_err(|e| io_err("logging a decision", e))?;
        self.logged += 1;
        self.remember(txn, committed);
        Ok(())
    }

    /// Forgets the decisions of `origin` below `seq` (its writer says they are settled).
    fn forget_below<S: ObjectStore>(&mut self, store: &mut S, origin: u64, seq: u64) {
        let Some(m) = self.decisions.get_mut(&origin) else {
            return;
        };
        let keep = m.split_off(&seq);
        let gone = m.len();
        *m = keep;
        if m.is_empty() {
            self.decisions.remove(&origin);
        }
        if gone == 0 {
            return;
        }
        self.live_decisions -= gone;
        // The log is compacted once it holds far more than the live decisions, so its
        // records are written about twice each on average.
        if self.logged > 4 * self.live_decisions + 4096 {
            let live: Vec<(TxnId, bool)> = self
                .decisions
                .iter()
                .flat_map(|(&origin, m)| m.iter().map(move |(&seq, &c)| (TxnId { origin, seq }, c)))
                .collect();
            match store.rewrite_decisions(&live) {
                Ok(()) => self.logged = live.len(),
                Err(e) => tracing::warn!("compacting the decision log: {e}"),
            }
        } else if let Err(e) = store.log_decision(DecisionRecord::ForgetBelow { origin, seq }) {
            tracing::warn!("logging settled decisions: {e}");
        } else {
            self.logged += 1;
        }
    }

    fn take(&mut self, txn: TxnId) -> Option<Staged> {
        let s = self.staged.remove(&txn)?;
        if let Some(c) = s.owner {
            uncharge(&mut self.per_client, c, s.writes.len());
        }
        self.in_doubt.remove(&txn);
        Some(s)
    }

    /// Applies (or drops) a staged write and forgets it. On an apply error the write is
    /// kept, in doubt, to be tried again.
    fn finish_staged<S: ObjectStore>(
        &mut self,
        store: &mut S,
        txn: TxnId,
        apply: bool,
    ) -> Result<(), WireError> {
        let Some(s) = self.take(txn) else {
            return Ok(());
        };
        if apply {
            for (slot, w) in &s.writes {
                if let Err(e) = store.apply_staged(*slot, w) {
                    self.staged.insert(txn, Staged { owner: None, ..s });
                    self.in_doubt.insert(txn);
                    self.mark(store);
                    return Err(io_err(&format!("applying {txn}"), e));
                }
            }
        }
        for (slot, _) in &s.writes {
            if let Err(e) = store.unstage(*slot) {
                tracing::warn!("removing staged {txn}: {e}");
            }
        }
        self.mark(store);
        Ok(())
    }

    /// A write this server decides, whose writer is gone: apply it if it committed, else
    /// record it aborted and drop it.
    fn settle_locally<S: ObjectStore>(
        &mut self,
        store: &mut S,
        txn: TxnId,
    ) -> Result<(), WireError> {
        let committed = match self.decision(txn) {
            Some(c) => c,
            None => {
                self.decide_as(store, txn, false)?;
                false
            }
        };
        self.finish_staged(store, txn, committed)
    }

    /// Keeps the marker file in step with the in-doubt set.
    fn mark<S: ObjectStore>(&self, store: &mut S) {
        if let Err(e) = store.set_in_doubt(!self.in_doubt.is_empty()) {
            tracing::warn!("updating the in-doubt marker: {e}");
        }
    }

    /// `Stage`: keeps `data` aside under `txn`.
    #[allow(clippy::too_many_arguments)]
    pub fn stage<S: ObjectStore>(
        &mut self,
        store: &mut S,
        client: ClientId,
        txn: TxnId,
        decider: Option<ServerId>,
        file: FileId,
        object: u32,
        pieces: Vec<ObjPiece>,
        data: Bytes,
    ) -> Result<(), WireError> {
        if self.decision(txn).is_some() {
            return Err(WireError::new(
                ErrorCode::InvalidState,
                format!("{txn} is already decided; a decided write takes no more bytes"),
            ));
        }
        match self.staged.get(&txn) {
            Some(s) if s.owner != Some(client) => {
                return Err(WireError::new(
                    ErrorCode::NotOwner,
                    format!("{txn} belongs to another client"),
                ))
            }
            Some(s) if s.decider != decider => {
                return Err(WireError::new(
                    ErrorCode::InvalidArgument,
                    format!("{txn} was staged with another decider"),
                ))
            }
            _ => {}
        }
        match self.origins.get(&txn.origin) {
            Some(&c) if c != client => {
                return Err(WireError::new(
                    ErrorCode::NotOwner,
                    format!("{txn}: its origin belongs to another client"),
                ))
            }
            Some(_) => {}
            None if self.origins.len() >= MAX_ORIGINS => {
                return Err(WireError::new(
                    ErrorCode::LimitExceeded,
                    format!("this server has seen {MAX_ORIGINS} write origins, its limit"),
                ))
            }
            None => {
                self.origins.insert(txn.origin, client);
            }
        }
        let mine = self.per_client.get(&client).copied().unwrap_or(0);
        if mine >= MAX_STAGED_PER_CLIENT {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!("{mine} staged writes of this client here; the limit is {MAX_STAGED_PER_CLIENT}"),
            ));
        }
        let w = StagedWrite {
            txn,
            decider,
            file,
            object,
            pieces,
        };
        let slot = store
            .stage(&w, &data)
            .map_err(|e| io_err(&format!("staging {txn} for {file} object {object}"), e))?;
        *self.per_client.entry(client).or_default() += 1;
        self.staged
            .entry(txn)
            .or_insert_with(|| Staged {
                owner: Some(client),
                decider,
                writes: Vec::new(),
            })
            .writes
            .push((slot, w));
        Ok(())
    }

    /// `Decide`: the commit point. Logs the commit, then applies this server's bytes.
    pub fn decide<S: ObjectStore>(
        &mut self,
        store: &mut S,
        client: ClientId,
        txn: TxnId,
        settled_below: u64,
    ) -> Result<(), WireError> {
        match self.decision(txn) {
            Some(true) => return Ok(()),
            Some(false) => return Err(aborted(txn)),
            None => {}
        }
        match self.staged.get(&txn) {
            None => return Err(aborted(txn)),
            Some(s) if s.owner != Some(client) => {
                return Err(WireError::new(
                    ErrorCode::NotOwner,
                    format!("{txn} belongs to another client"),
                ))
            }
            Some(s) if s.decider.is_some() => {
                return Err(WireError::new(
                    ErrorCode::InvalidArgument,
                    format!("{txn} is decided by another server"),
                ))
            }
            Some(_) => {}
        }
        // Only a writer deciding its own staged write may say which of its origin's writes
        // are settled (and only its own origin: `stage` binds an origin to one client).
        self.forget_below(store, txn.origin, settled_below.min(txn.seq));
        self.decide_as(store, txn, true)?;
        self.finish_staged(store, txn, true)
    }

    /// `Finish`: applies, drops or leaves in doubt what `txn` staged here.
    pub fn finish<S: ObjectStore>(
        &mut self,
        store: &mut S,
        client: ClientId,
        txn: TxnId,
        outcome: TxnOutcome,
    ) -> Result<(), WireError> {
        let Some(s) = self.staged.get(&txn) else {
            return Ok(()); // already finished (e.g. resolved by another client)
        };
        if s.owner.is_some() && s.owner != Some(client) {
            return Err(WireError::new(
                ErrorCode::NotOwner,
                format!("{txn} belongs to a client that is still connected"),
            ));
        }
        if s.decider.is_none() {
            // Only the decision here counts: a writer finishing its own undecided write
            // aborts it; anyone else's word is not needed.
            return match (self.decision(txn), outcome) {
                (Some(_), _) | (None, TxnOutcome::Abort | TxnOutcome::Unknown) => {
                    self.settle_locally(store, txn)
                }
                (None, TxnOutcome::Commit) => Err(WireError::new(
                    ErrorCode::InvalidState,
                    format!("{txn} is decided here, by Decide, not by Finish"),
                )),
            };
        }
        match outcome {
            TxnOutcome::Commit => self.finish_staged(store, txn, true),
            TxnOutcome::Abort => self.finish_staged(store, txn, false),
            TxnOutcome::Unknown => {
                self.orphan(txn);
                self.mark(store);
                Ok(())
            }
        }
    }

    /// `Resolve` (at the decider): whether `txn` committed; a write not committed yet is
    /// recorded aborted first.
    pub fn resolve<S: ObjectStore>(
        &mut self,
        store: &mut S,
        txn: TxnId,
    ) -> Result<bool, WireError> {
        if let Some(c) = self.decision(txn) {
            return Ok(c);
        }
        if self.live_decisions >= MAX_DECISIONS_PER_SERVER {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "this server keeps {MAX_DECISIONS_PER_SERVER} decisions, its limit; \
                     {txn} cannot be resolved now"
                ),
            ));
        }
        self.decide_as(store, txn, false)?;
        if self.staged.get(&txn).is_some_and(|s| s.decider.is_none()) {
            self.finish_staged(store, txn, false)?;
        }
        Ok(false)
    }

    fn orphan(&mut self, txn: TxnId) {
        if let Some(s) = self.staged.get_mut(&txn) {
            if let Some(c) = s.owner.take() {
                uncharge(&mut self.per_client, c, s.writes.len());
            }
            self.in_doubt.insert(txn);
        }
    }

    /// `client` is gone (disconnected or fenced): the writes it decides here and did not
    /// commit are aborted; its writes decided elsewhere are in doubt.
    pub fn client_gone<S: ObjectStore>(&mut self, store: &mut S, client: ClientId) {
        if !self.per_client.contains_key(&client) {
            return;
        }
        let mine: Vec<TxnId> = self
            .staged
            .iter()
            .filter(|(_, s)| s.owner == Some(client))
            .map(|(t, _)| *t)
            .collect();
        for txn in mine {
            self.orphan(txn);
            if self.staged[&txn].decider.is_none() {
                if let Err(e) = self.settle_locally(store, txn) {
                    tracing::warn!("settling {txn} of a vanished writer: {e}");
                }
            }
        }
        self.mark(store);
    }

    /// Before an access to `pieces` of an object: settles in-doubt writes this server
    /// decides that it touches, and names one decided elsewhere (the access must wait for
    /// its resolution).
    pub fn check_access<S: ObjectStore>(
        &mut self,
        store: &mut S,
        file: FileId,
        object: u32,
        pieces: &[ObjPiece],
    ) -> Result<Option<(TxnId, ServerId)>, WireError> {
        self.first_in_doubt(store, |w| {
            w.file == file && w.object == object && pieces_overlap(&w.pieces, pieces)
        })
    }

    /// The same before an access to a whole file or object (truncation, removal).
    pub fn check_file<S: ObjectStore>(
        &mut self,
        store: &mut S,
        file: FileId,
        object: Option<u32>,
    ) -> Result<Option<(TxnId, ServerId)>, WireError> {
        self.first_in_doubt(store, |w| {
            w.file == file && object.is_none_or(|o| o == w.object)
        })
    }

    /// Settles the in-doubt writes decided here that `touches`, and names the first one
    /// decided elsewhere.
    fn first_in_doubt<S: ObjectStore>(
        &mut self,
        store: &mut S,
        touches: impl Fn(&StagedWrite) -> bool,
    ) -> Result<Option<(TxnId, ServerId)>, WireError> {
        if self.in_doubt.is_empty() {
            return Ok(None);
        }
        let touching: Vec<TxnId> = self
            .in_doubt
            .iter()
            .filter(|t| self.staged[t].writes.iter().any(|(_, w)| touches(w)))
            .copied()
            .collect();
        for txn in touching {
            match self.staged[&txn].decider {
                Some(d) => return Ok(Some((txn, d))),
                None => self.settle_locally(store, txn)?,
            }
        }
        Ok(None)
    }

    /// Writes staged here (for tests and reports).
    pub fn staged_count(&self) -> usize {
        self.staged.len()
    }

    /// Writes in doubt here.
    pub fn in_doubt_count(&self) -> usize {
        self.in_doubt.len()
    }

    /// Live decisions kept here.
    pub fn decisions_kept(&self) -> usize {
        self.live_decisions
    }
}
