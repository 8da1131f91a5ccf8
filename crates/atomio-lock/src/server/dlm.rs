//! The cached-lock DLMs at a server (SeqDLM and the traditional `dlm-basic` / `dlm-lustre`,
//! Chen et al. SC'22): one `seqdlm::Resource` per object (stripe) of a file that this server
//! holds, made at the first request and dropped when idle. Requests are answered when
//! granted (`DlmGrant` on the request's tag); revocations go out on `DLM_CALLBACK_TAG`;
//! cancels and releases are answered only when refused. This lock space is separate from
//! the byte-range table: a file is locked with one kind of technique at a time.
//!
//! Sequence numbers must only grow per object, even when an idle resource is dropped and
//! made again, or after a restart (the data server's extent cache keeps the SNs it applied
//! and would discard a flush carrying a smaller one): a resource is made starting at
//! `floor`, which is above every SN this server ever gave — raised when a resource is
//! dropped, and set at start above every SN the data store logged.
//!
//! Admission of flushes (`SeqWrite`, mandatory locking in SeqDLM's terms): every block must
//! lie inside an unreleased write lock of the flushing client carrying the block's SN; the
//! admitted request is stamped with the resource's mSN (the smallest SN of an unreleased
//! write lock, or the next SN if there is none) — every flush with a smaller SN was
//! admitted, and so handed to the data service, before it — which lets the data server clean
//! its extent cache. Plain writes, resizes and drops are refused where another client holds
//! a DLM lock.
//!
//! **Invariants:** per client, `held` counts its granted locks and `queued` its waiting
//! requests over every resource; a resource with neither is dropped; no SN is ever reused
//! at this server for an object; a client's locks and requests go when it disconnects or its
//! lease lapses (its waiting requests are answered `LeaseExpired` in the latter case).

use crate::seqdlm::{Config, Expand, GrantId, Mode, Out, ReqId, Resource, ResourceError};
use crate::server::Outgoing;
use atomio_layout::{ByteRange, MAX_OFFSET};
use atomio_proto::dlm::{validate_dlm_range, validate_sn_blocks, DlmExpand, DlmPolicy, SnBlock};
use atomio_proto::limits::{MAX_DLM_GRANTS_PER_CLIENT, MAX_DLM_RESOURCES, MAX_WAITING_PER_CLIENT};
use atomio_proto::{ClientId, DlmMode, ErrorCode, FileId, Reply, WireError, DLM_CALLBACK_TAG};
use std::collections::HashMap;

/// The server itself, as the holder of the synchronizing read lock it takes when an extent
/// cache cannot be cleaned (no connection is ever given this id).
pub const SERVER_SELF: ClientId = ClientId(u64::MAX);

type Key = (FileId, u32);

#[derive(Debug)]
struct Res {
    r: Resource,
    policy: DlmPolicy,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    held: usize,
    queued: usize,
}

/// Counters for `Stats` and the benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DlmStats {
    pub grants: u64,
    /// Grants sent already CANCELING (early revocation).
    pub early_revocations: u64,
    pub revocations: u64,
    pub releases: u64,
    pub flushes_admitted: u64,
    /// Synchronizing read locks taken because an extent cache could not be cleaned.
    pub syncs: u64,
}

#[derive(Debug, Default)]
pub struct DlmTable {
    resources: HashMap<Key, Res>,
    floor: u64,
    of_client: HashMap<ClientId, Counts>,
    stats: DlmStats,
}

pub fn config_of(p: DlmPolicy) -> Config {
    Config {
        expand: match p.expand {
            DlmExpand::None => Expand::None,
            DlmExpand::Greedy => Expand::Greedy,
            DlmExpand::Lustre { crowded, max_past } => Expand::Lustre {
                crowded: crowded as usize,
                max_past,
            },
        },
        early_grant: p.early_grant,
        early_revocation: p.early_revocation,
        conversion: p.conversion,
        contention_revocation: p.contention_revocation,
    }
}

fn refused(e: ResourceError) -> WireError {
    let code = match e {
        ResourceError::Unknown(_) => ErrorCode::NotFound,
        ResourceError::Mode(_) | ResourceError::Empty => ErrorCode::InvalidArgument,
        ResourceError::Downgrade { .. } => ErrorCode::InvalidState,
    };
    WireError::new(code, e.to_string())
}

fn err(to: ClientId, tag: u64, e: WireError) -> Outgoing {
    Outgoing {
        to,
        tag,
        reply: Reply::Error(e),
    }
}

impl DlmTable {
    /// Every SN given from now on is at least `sn` (at start: above what the data store
    /// logged).
    pub fn raise_floor(&mut self, sn: u64) {
        self.floor = self.floor.max(sn);
    }

    pub fn stats(&self) -> DlmStats {
        self.stats
    }

    pub fn resources(&self) -> usize {
        self.resources.len()
    }

    /// Locks held and requests waiting, over every client.
    pub fn totals(&self) -> (usize, usize) {
        self.of_client
            .values()
            .fold((0, 0), |(h, q), c| (h + c.held, q + c.queued))
    }

    /// Whether `client` holds or waits for any DLM lock here (its lease matters).
    pub fn holds_anything(&self, client: ClientId) -> bool {
        self.of_client.contains_key(&client)
    }

    pub fn clients(&self) -> impl Iterator<Item = ClientId> + '_ {
        self.of_client.keys().copied()
    }

    fn counts(&mut self, client: ClientId) -> &mut Counts {
        self.of_client.entry(client).or_default()
    }

    fn tidy_client(&mut self, client: ClientId) {
        if self
            .of_client
            .get(&client)
            .is_some_and(|c| c.held == 0 && c.queued == 0)
        {
            self.of_client.remove(&client);
        }
    }

    /// A lock request: granted now or later (`DlmGrant` on `tag`), or refused.
    #[allow(clippy::too_many_arguments)]
    pub fn lock(
        &mut self,
        client: ClientId,
        tag: u64,
        file: FileId,
        object: u32,
        policy: DlmPolicy,
        mode: DlmMode,
        range: ByteRange,
        out: &mut Vec<Outgoing>,
    ) {
        if let Err(e) = self.try_lock(client, tag, file, object, policy, mode, range, out) {
            out.push(err(client, tag, e));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn try_lock(
        &mut self,
        client: ClientId,
        tag: u64,
        file: FileId,
        object: u32,
        policy: DlmPolicy,
        mode: DlmMode,
        range: ByteRange,
        out: &mut Vec<Outgoing>,
    ) -> Result<(), WireError> {
        let range = validate_dlm_range(range)?;
        policy.expand.validate()?;
        if tag == DLM_CALLBACK_TAG {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                "the DLM callback tag cannot name a request",
            ));
        }
        let c = self.of_client.get(&client).copied().unwrap_or_default();
        if c.queued >= MAX_WAITING_PER_CLIENT {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!("this client has {MAX_WAITING_PER_CLIENT} DLM requests waiting, its limit"),
            ));
        }
        if c.held + c.queued >= MAX_DLM_GRANTS_PER_CLIENT {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!("this client holds {MAX_DLM_GRANTS_PER_CLIENT} DLM locks here, its limit"),
            ));
        }
        let key = (file, object);
        if !self.resources.contains_key(&key) && self.resources.len() >= MAX_DLM_RESOURCES {
            return Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!("this server serves {MAX_DLM_RESOURCES} DLM lock resources, its limit"),
            ));
        }
        let floor = self.floor;
        let res = self.resources.entry(key).or_insert_with(|| Res {
            r: Resource::with_first_sn(config_of(policy), floor),
            policy,
        });
        if res.policy != policy {
            let e = WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "object {object} of {file} is locked by another DLM here ({:?}); a file \
                     is served by one DLM at a time",
                    res.policy
                ),
            );
            self.drop_if_idle(key);
            return Err(e);
        }
        let mut outs = Vec::new();
        let done = res
            .r
            .request(client, ReqId(tag), Mode::from(mode), range, &mut outs);
        if let Err(e) = done {
            self.drop_if_idle(key);
            return Err(refused(e));
        }
        self.counts(client).queued += 1;
        self.emit(key, outs, out);
        Ok(())
    }

    /// The holder answers a revocation (or a CANCELING grant): the lock is CANCELING, and
    /// downgraded first if asked. Answered only if refused.
    #[allow(clippy::too_many_arguments)]
    pub fn cancel(
        &mut self,
        client: ClientId,
        tag: u64,
        file: FileId,
        object: u32,
        id: u64,
        downgrade: Option<DlmMode>,
        out: &mut Vec<Outgoing>,
    ) {
        let key = (file, object);
        let Some(res) = self.resources.get_mut(&key) else {
            return out.push(err(client, tag, no_resource(file, object)));
        };
        let mut outs = Vec::new();
        let mut done = res.r.revoked(client, GrantId(id), &mut outs);
        if let (Ok(()), Some(to)) = (&done, downgrade) {
            done = res
                .r
                .downgrade(client, GrantId(id), Mode::from(to), &mut outs);
        }
        if let Err(e) = done {
            out.push(err(client, tag, refused(e)));
        }
        self.emit(key, outs, out);
    }

    /// The holder gives a lock back (its data flushed). Answered only if refused.
    pub fn release(
        &mut self,
        client: ClientId,
        tag: u64,
        file: FileId,
        object: u32,
        id: u64,
        out: &mut Vec<Outgoing>,
    ) {
        let key = (file, object);
        let Some(res) = self.resources.get_mut(&key) else {
            return out.push(err(client, tag, no_resource(file, object)));
        };
        let mut outs = Vec::new();
        match res.r.release(client, GrantId(id), &mut outs) {
            Ok(()) => {
                self.stats.releases += 1;
                self.counts(client).held -= 1;
                self.tidy_client(client);
            }
            Err(e) => out.push(err(client, tag, refused(e))),
        }
        self.emit(key, outs, out);
        self.drop_if_idle(key);
    }

    /// Drops every lock and request of `client` (disconnected, or lapsed and fenced);
    /// returns the tags of its requests that were still waiting.
    pub fn forget(&mut self, client: ClientId, out: &mut Vec<Outgoing>) -> Vec<u64> {
        if !self.of_client.contains_key(&client) {
            return Vec::new();
        }
        let keys: Vec<Key> = self.resources.keys().copied().collect();
        let mut waiting = Vec::new();
        for key in keys {
            let res = self.resources.get_mut(&key).expect("listed");
            let mut outs = Vec::new();
            waiting.extend(res.r.forget(client, &mut outs).into_iter().map(|r| r.0));
            self.emit(key, outs, out);
            self.drop_if_idle(key);
        }
        self.of_client.remove(&client);
        // Nothing more goes to the departed client.
        out.retain(|o| o.to != client);
        waiting
    }

    /// The data server's extent cache of `(file, object)` cannot be cleaned: take a read
    /// lock over the whole object as the server itself, which makes every writer flush and
    /// release (so every SN below the next one is final), and give it back at once.
    pub fn synchronize(&mut self, file: FileId, object: u32, out: &mut Vec<Outgoing>) {
        let key = (file, object);
        let Some(res) = self.resources.get_mut(&key) else {
            return; // no locks at all: the next flush's mSN already cleans everything
        };
        let whole = ByteRange {
            start: 0,
            end: MAX_OFFSET,
        };
        let mut outs = Vec::new();
        if res
            .r
            .request(SERVER_SELF, ReqId(0), Mode::Pr, whole, &mut outs)
            .is_ok()
        {
            self.stats.syncs += 1;
            self.counts(SERVER_SELF).queued += 1;
        }
        self.emit(key, outs, out);
    }

    /// Turns a resource's outputs into replies (and releases the server's own read locks).
    fn emit(&mut self, key: Key, outs: Vec<Out>, out: &mut Vec<Outgoing>) {
        let mut pending = outs;
        while !pending.is_empty() {
            let mut next = Vec::new();
            for o in pending {
                match o {
                    Out::Grant {
                        to,
                        req,
                        id,
                        grant,
                        absorbed,
                    } => {
                        self.stats.grants += 1;
                        let canceling = grant.state == crate::seqdlm::State::Canceling;
                        if canceling {
                            self.stats.early_revocations += 1;
                        }
                        let c = self.counts(to);
                        c.queued -= 1;
                        c.held += 1;
                        c.held -= absorbed.len();
                        if to == SERVER_SELF {
                            let res = self.resources.get_mut(&key).expect("granting");
                            let _ = res.r.release(to, id, &mut next);
                            self.counts(to).held -= 1;
                            self.tidy_client(to);
                            continue;
                        }
                        out.push(Outgoing {
                            to,
                            tag: req.0,
                            reply: Reply::DlmGrant {
                                id: id.0,
                                mode: grant.mode.into(),
                                range: grant.range,
                                canceling,
                                sn: grant.sn,
                                absorbed: absorbed.into_iter().map(|g| g.0).collect(),
                            },
                        });
                    }
                    // The server's own read lock is given back as soon as it is granted.
                    Out::Revoke { to, .. } if to == SERVER_SELF => {}
                    Out::Revoke { to, id } => {
                        self.stats.revocations += 1;
                        out.push(Outgoing {
                            to,
                            tag: DLM_CALLBACK_TAG,
                            reply: Reply::DlmRevoke {
                                file: key.0,
                                object: key.1,
                                id: id.0,
                            },
                        });
                    }
                }
            }
            pending = next;
        }
    }

    fn drop_if_idle(&mut self, key: Key) {
        if let Some(res) = self.resources.get(&key) {
            if res.r.is_idle() {
                self.floor = self.floor.max(res.r.next_sn());
                self.resources.remove(&key);
            }
        }
    }

    /// Mandatory locking of flushes: every block inside an unreleased write lock of
    /// `client` with the block's SN.
    pub fn admit_flush(
        &mut self,
        client: ClientId,
        file: FileId,
        object: u32,
        blocks: &[SnBlock],
        data_len: usize,
    ) -> Result<(), WireError> {
        validate_sn_blocks(blocks, data_len)?;
        let Some(res) = self.resources.get(&(file, object)) else {
            return Err(WireError::new(
                ErrorCode::Locked,
                format!("refused: a flush to object {object} of {file} without its lock"),
            ));
        };
        let mine: HashMap<u64, ByteRange> = res
            .r
            .granted()
            .filter(|(_, g)| g.client == client && g.mode.is_write())
            .map(|(_, g)| (g.sn, g.range))
            .collect();
        for b in blocks {
            let inside = mine
                .get(&b.sn)
                .is_some_and(|r| r.start <= b.offset && b.offset + b.len <= r.end);
            if !inside {
                return Err(WireError::new(
                    ErrorCode::Locked,
                    format!(
                        "refused: a flush of object bytes {}..{} under SN {} that this client \
                         holds no write lock for",
                        b.offset,
                        b.offset + b.len,
                        b.sn
                    ),
                ));
            }
        }
        self.stats.flushes_admitted += 1;
        Ok(())
    }

    /// The mSN to stamp on an admitted flush of `(file, object)`: the smallest SN of an
    /// unreleased write lock there, or the next SN if there is none (0 without a resource,
    /// which cleans nothing wrongly: every SN is at least 0).
    pub fn msn(&self, file: FileId, object: u32) -> u64 {
        let whole = ByteRange {
            start: 0,
            end: MAX_OFFSET,
        };
        self.resources.get(&(file, object)).map_or(0, |res| {
            res.r
                .min_unreleased_write_sn(whole)
                .unwrap_or(res.r.next_sn())
        })
    }

    /// The first object byte at or after `from` of `(file, object)` in a DLM lock of
    /// another client, below `to`.
    pub fn foreign_lock(
        &self,
        client: ClientId,
        file: FileId,
        object: Option<u32>,
        w: ByteRange,
    ) -> Option<u64> {
        self.resources
            .iter()
            .filter(|((f, o), _)| *f == file && object.is_none_or(|x| x == *o))
            .flat_map(|(_, res)| res.r.granted())
            .filter(|(_, g)| g.client != client && g.range.overlaps(&w))
            .map(|(_, g)| g.range.start.max(w.start))
            .min()
    }

    /// Verifies every resource's invariants and the counts.
    pub fn check(&self) -> Result<(), String> {
        let mut counts: HashMap<ClientId, usize> = HashMap::new();
        for ((f, o), res) in &self.resources {
            res.r.check().map_err(|e| format!("{f} object {o}: {e}"))?;
            if res.r.is_idle() {
                return Err(format!("{f} object {o}: an idle resource is kept"));
            }
            for (_, g) in res.r.granted() {
                *counts.entry(g.client).or_default() += 1;
            }
        }
        for (c, n) in &self.of_client {
            if counts.get(c).copied().unwrap_or(0) != n.held {
                return Err(format!(
                    "{c} counted {} DLM locks, holds {:?}",
                    n.held,
                    counts.get(c)
                ));
            }
        }
        Ok(())
    }
}

fn no_resource(file: FileId, object: u32) -> WireError {
    WireError::new(
        ErrorCode::NotFound,
        format!("no DLM lock on object {object} of {file} here"),
    )
}
