//! The client side: one connection per server and the loop that drives lock operations.
//!
//! A `ClusterClient` runs one operation at a time (`&mut self`), which is what one MPI rank
//! or one benchmark client does; several clients run concurrently as separate tasks. Every
//! message is tagged `(operation sequence << 32) | sub-request`, so a late reply to an
//! abandoned operation is recognized and dropped.
//!
//! **Invariants:** an operation returns only when its outcome is final (held, released or
//! failed with every server told); the loss of a server it uses fails it at once with
//! `Disconnected`, and silence fails it after `timeout` with `Timeout` — never a hang.

use crate::actor::{ClientEvent, Event, ServerHandle};
use crate::machine::{Machine, Progress};
use atomio_layout::{Access, Layout, ServerId};
use atomio_lock::{plan, Contention, LockOp, Method, OpStats, Protocol, Send, SubRequest};
use atomio_proto::{ClientFrame, ClientId, ErrorCode, FileId, LockMode, Reply, Request, WireError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long an operation may go without hearing from any server before it fails.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// While an operation waits (a blocked lock may wait for minutes behind other clients),
/// servers are pinged this often; their pongs prove they are alive, so a long wait is not
/// mistaken for a dead server, and a dead or hung one is noticed within `timeout`.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);
/// How long a failed operation waits for the answers that name locks it must release
/// before closing those connections instead.
pub const ORPHAN_WAIT: Duration = Duration::from_secs(2);
/// The tag of liveness pings (never a real operation's tag).
const PING_TAG: u64 = u64::MAX;

pub(crate) enum Link {
    /// Frames to the connection's writer task, and how many it has not written yet.
    Tcp(mpsc::UnboundedSender<ClientFrame>, Arc<AtomicUsize>),
    InProcess {
        client: ClientId,
        server: ServerHandle,
    },
}

/// Locks held by a completed acquire; give it back to `ClusterClient::unlock`.
#[derive(Debug)]
pub struct HeldLock {
    op: LockOp,
    seq: u64,
}

impl HeldLock {
    pub fn stats(&self) -> OpStats {
        self.op.stats()
    }
}

/// How to open another session with the same servers (an agent on a thread of its own
/// needs connections its own runtime drives).
#[derive(Clone, Debug)]
pub enum Servers {
    Tcp(Vec<String>),
    InProcess(Vec<ServerHandle>),
}

pub struct ClusterClient {
    links: Vec<Link>,
    /// The TCP addresses, for `servers_spec` (empty for in-process links).
    addrs: Vec<String>,
    events: mpsc::UnboundedReceiver<ClientEvent>,
    lost: Vec<Option<WireError>>,
    seq: u64,
    timeout: Duration,
    /// Renews this client's leases (TCP servers that keep them).
    keeper: Option<crate::lease_keeper::LeaseKeeper>,
    /// All-or-nothing writes: this client's random origin, its last seq, and the seqs of
    /// writes that committed but are not settled at every participant (their decisions
    /// must be kept).
    txn_origin: u64,
    txn_seq: u64,
    unsettled: std::collections::BTreeSet<u64>,
    /// Per file, what this client's lock operations met lately: how the next one opens.
    contention: std::collections::HashMap<FileId, Contention>,
}

/// Files whose contention a client remembers; beyond that it starts over.
const MAX_CONTENTION_FILES: usize = 1024;

/// Most unsettled writes remembered; older ones are let go (their decisions are then
/// kept by their deciders for good, which costs 17 bytes each).
const MAX_UNSETTLED: usize = 1024;

impl ClusterClient {
    pub(crate) fn new(links: Vec<Link>, events: mpsc::UnboundedReceiver<ClientEvent>) -> Self {
        let n = links.len();
        Self {
            links,
            addrs: Vec::new(),
            events,
            lost: vec![None; n],
            seq: 0,
            timeout: DEFAULT_TIMEOUT,
            keeper: None,
            txn_origin: rand::random(),
            txn_seq: 0,
            unsettled: std::collections::BTreeSet::new(),
            contention: std::collections::HashMap::new(),
        }
    }

    /// A new all-or-nothing write's id, and the seq below which every earlier write of
    /// this client is settled (its decider may forget those decisions).
    pub fn next_txn(&mut self) -> (atomio_proto::TxnId, u64) {
        self.txn_seq += 1;
        let seq = self.txn_seq;
        let settled_below = self.unsettled.first().map_or(seq, |&u| u.min(seq));
        let id = atomio_proto::TxnId {
            origin: self.txn_origin,
            seq,
        };
        (id, settled_below)
    }

    /// Reports how an all-or-nothing write ended.
    pub fn txn_done(&mut self, txn: atomio_proto::TxnId, settled: bool) {
        if !settled && txn.origin == self.txn_origin {
            self.unsettled.insert(txn.seq);
            while self.unsettled.len() > MAX_UNSETTLED {
                self.unsettled.pop_first();
            }
        }
    }

    /// Connects to TCP servers; server `i` of the cluster is `addrs[i]`.
    pub async fn connect_tcp(addrs: &[String]) -> Result<Self, WireError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut links = Vec::with_capacity(addrs.len());
        for (i, a) in addrs.iter().enumerate() {
            let (frames, unsent) = crate::tcp::connect(a, ServerId(i as u32), tx.clone()).await?;
            links.push(Link::Tcp(frames, unsent));
        }
        let mut client = Self::new(links, rx);
        client.addrs = addrs.to_vec();
        client.open_sessions(addrs).await?;
        Ok(client)
    }

    /// A new session with in-process servers (an embedded cluster's).
    pub async fn connect_in_process(servers: &[ServerHandle]) -> Result<Self, WireError> {
        use crate::actor::ReplySink;
        let (tx, rx) = mpsc::unbounded_channel::<ClientEvent>();
        let mut links = Vec::with_capacity(servers.len());
        for (i, s) in servers.iter().enumerate() {
            let client = s.new_client_id();
            s.send(Event::Connected {
                client,
                sink: ReplySink::InProcess(tx.clone(), ServerId(i as u32)),
                queued: Arc::new(AtomicUsize::new(0)),
            })
            .await?;
            links.push(Link::InProcess {
                client,
                server: s.clone(),
            });
        }
        Ok(Self::new(links, rx))
    }

    /// How to reach the same servers from another session.
    pub fn servers_spec(&self) -> Servers {
        let handles: Vec<ServerHandle> = self
            .links
            .iter()
            .filter_map(|l| match l {
                Link::InProcess { server, .. } => Some(server.clone()),
                Link::Tcp(..) => None,
            })
            .collect();
        if handles.len() == self.links.len() && !handles.is_empty() {
            Servers::InProcess(handles)
        } else {
            Servers::Tcp(self.addrs.clone())
        }
    }

    /// A new session with the servers `spec` names (TCP: with its own lease keeper).
    pub async fn connect(spec: &Servers) -> Result<Self, WireError> {
        match spec {
            Servers::Tcp(addrs) => Self::connect_tcp(addrs).await,
            Servers::InProcess(handles) => Self::connect_in_process(handles).await,
        }
    }

    /// Sends one frame as it is (for drivers that run a machine of their own, like the DLM
    /// agent); a lost server is an error.
    pub async fn send_frame(
        &mut self,
        server: ServerId,
        tag: u64,
        request: Request,
    ) -> Result<(), WireError> {
        self.send_raw(server, tag, request).await
    }

    /// The next frame or loss from any server, as it comes (`None`: every connection is
    /// gone). No pings, no timeout: the caller keeps time.
    pub async fn recv_event(&mut self) -> Option<ClientEvent> {
        let ev = self.events.recv().await?;
        if let ClientEvent::Lost(server, e) = &ev {
            if let Some(l) = self.lost.get_mut(server.0 as usize) {
                *l = Some(e.clone());
            }
        }
        Some(ev)
    }

    /// Pings every server still connected (the answers come as frames tagged `u64::MAX`).
    pub async fn ping_all(&mut self) {
        for s in 0..self.links.len() {
            if self.lost[s].is_none() {
                let _ = self
                    .send_raw(ServerId(s as u32), PING_TAG, Request::Ping { nonce: 0 })
                    .await;
            }
        }
    }

    /// Opens a lease session at every server and starts renewing those that keep leases.
    async fn open_sessions(&mut self, addrs: &[String]) -> Result<(), WireError> {
        use crate::lease_keeper::{LeaseKeeper, Session};
        let opened = std::time::Instant::now();
        let hellos = (0..addrs.len())
            .map(|i| (ServerId(i as u32), Request::Hello))
            .collect();
        let mut sessions = Vec::new();
        for (addr, reply) in addrs.iter().zip(self.rpc_all(hellos).await?) {
            let Reply::Session {
                client,
                proof,
                lease_ms,
            } = reply
            else {
                return Err(WireError::new(
                    ErrorCode::Malformed,
                    format!("{addr} answered Hello with {reply:?}"),
                ));
            };
            sessions.push((
                addr.clone(),
                Session {
                    client,
                    proof,
                    lease: Duration::from_millis(lease_ms),
                    opened,
                },
            ));
        }
        self.keeper = LeaseKeeper::start(sessions).map_err(|e| {
            WireError::new(ErrorCode::Io, format!("starting the lease keeper: {e}"))
        })?;
        Ok(())
    }

    /// Fails if a lease of this client may have lapsed at some server (its locks there may
    /// be someone else's now): checked before I/O that servers cannot fence (the user's
    /// own file, object files on this host).
    pub fn check_lease(&self) -> Result<(), WireError> {
        self.keeper.as_ref().map_or(Ok(()), |k| k.check())
    }

    /// `check_lease`, but when it fails only because no recent renewal was acknowledged,
    /// waits a little for one (the keeper renews five times a lease): renewals held up by a
    /// restarted server's grace period or a slow server are not a lapsed lease. Safe: a
    /// server never acknowledges the renewal of a lease it let lapse.
    pub async fn ensure_lease(&self) -> Result<(), WireError> {
        let Some(k) = &self.keeper else {
            return Ok(());
        };
        let start = std::time::Instant::now();
        loop {
            let e = match k.check() {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            match k.patience() {
                Some(p) if start.elapsed() < p => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ => return Err(e),
            }
        }
    }

    pub fn servers(&self) -> usize {
        self.links.len()
    }

    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Acquires locks on every byte of `access`, with the given method and protocol.
    #[allow(clippy::too_many_arguments)]
    pub async fn lock(
        &mut self,
        file: FileId,
        mode: LockMode,
        access: &Access,
        layout: &Layout,
        method: Method,
        protocol: Protocol,
    ) -> Result<HeldLock, WireError> {
        self.lock_plan(file, mode, protocol, plan(access, layout, method))
            .await
    }

    /// Acquires locks for an already planned set of sub-requests.
    pub async fn lock_plan(
        &mut self,
        file: FileId,
        mode: LockMode,
        protocol: Protocol,
        subs: Vec<SubRequest>,
    ) -> Result<HeldLock, WireError> {
        if let Some(s) = subs
            .iter()
            .find(|s| s.server.0 as usize >= self.links.len())
        {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "the layout names {} but the cluster has {} servers",
                    s.server,
                    self.links.len()
                ),
            ));
        }
        self.seq += 1;
        let seq = self.seq;
        if self.contention.len() >= MAX_CONTENTION_FILES && !self.contention.contains_key(&file) {
            self.contention.clear();
        }
        let memory = *self
            .contention
            .entry(file)
            .or_insert_with(Contention::from_env);
        let mut op = LockOp::new(file, mode, protocol, subs).with_start(memory.start());
        let mut sends = Vec::new();
        op.start(&mut sends);
        let driven = self.drive(&mut op, seq, sends).await;
        if let Some(m) = self.contention.get_mut(&file) {
            m.observe(&op);
        }
        driven?;
        Ok(HeldLock { op, seq })
    }

    /// Releases everything `held` holds.
    pub async fn unlock(&mut self, mut held: HeldLock) -> Result<OpStats, WireError> {
        let mut sends = Vec::new();
        held.op.release(&mut sends);
        self.drive(&mut held.op, held.seq, sends).await?;
        Ok(held.op.stats())
    }

    /// Sends the releases of everything `held` holds and returns without waiting for the
    /// servers' acknowledgements: a release needs nothing from anyone, so it cannot block,
    /// and each connection is FIFO, so this client's next request to a server is handled
    /// after its release there. Saves a round trip per call; the late acknowledgements are
    /// dropped like any reply to a finished operation. A release that fails to send
    /// (server gone) is an error, as with `unlock`.
    pub async fn unlock_detached(&mut self, mut held: HeldLock) -> Result<OpStats, WireError> {
        let mut sends = Vec::new();
        held.op.release(&mut sends);
        let mut first_err = None;
        for s in sends {
            // Send to every server even if one is gone, so the others free their locks.
            if let Err(e) = self.send(held.seq, s).await {
                first_err.get_or_insert(e);
            }
        }
        // Nobody may depend on this client's runtime running again (a C caller may go on to
        // wait in MPI_Barrier): the releases must be on the wire before we return.
        self.flush().await;
        match first_err {
            Some(e) => Err(e),
            None => Ok(held.op.stats()),
        }
    }

    /// Waits until every frame sent so far has been written to its socket (not answered):
    /// the writer tasks run on this client's runtime, which may not run again for a while.
    pub async fn flush(&mut self) {
        let mut spins = 0u32;
        while self.links.iter().enumerate().any(|(i, l)| {
            matches!(l, Link::Tcp(tx, unsent)
                if unsent.load(Ordering::Relaxed) > 0 && !tx.is_closed())
                && self.lost[i].is_none()
        }) {
            spins += 1;
            if spins < 64 {
                tokio::task::yield_now().await;
            } else {
                // A full socket buffer: the writer waits for the kernel; so do we.
                tokio::time::sleep(Duration::from_micros(200)).await;
                if spins > 64 + 50_000 {
                    return; // ~10 s: the connection is stuck; its loss will be noticed
                }
            }
        }
    }

    async fn send(&mut self, seq: u64, s: Send) -> Result<(), WireError> {
        self.send_raw(s.server, (seq << 32) | u64::from(s.sub), s.request)
            .await
    }

    pub(crate) async fn send_raw(
        &mut self,
        server: ServerId,
        tag: u64,
        request: Request,
    ) -> Result<(), WireError> {
        let Some(link) = self.links.get(server.0 as usize) else {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("{server} is not in this cluster of {}", self.links.len()),
            ));
        };
        if let Some(e) = &self.lost[server.0 as usize] {
            return Err(e.clone());
        }
        let ok = match link {
            Link::Tcp(tx, unsent) => {
                unsent.fetch_add(1, Ordering::Relaxed);
                tx.send(ClientFrame { tag, request }).is_ok()
            }
            Link::InProcess { client, server } => server
                .send(Event::Frame {
                    client: *client,
                    tag,
                    request,
                })
                .await
                .is_ok(),
        };
        if ok {
            Ok(())
        } else {
            let e = WireError::new(ErrorCode::Disconnected, format!("{server} is gone"));
            self.lost[server.0 as usize] = Some(e.clone());
            Err(e)
        }
    }

    /// Sends every call at once and returns the replies in call order. Any error reply fails
    /// the whole batch (after the other replies are in, so nothing is left in flight); a lost
    /// server with a call outstanding fails it at once; silence fails it after `timeout`.
    pub async fn rpc_all(
        &mut self,
        calls: Vec<(ServerId, Request)>,
    ) -> Result<Vec<Reply>, WireError> {
        self.seq += 1;
        let seq = self.seq;
        let n = calls.len();
        let mut targets = Vec::with_capacity(n);
        for (i, (server, request)) in calls.into_iter().enumerate() {
            targets.push(server);
            self.send_raw(server, (seq << 32) | i as u64, request)
                .await?;
        }
        let mut replies: Vec<Option<Reply>> = (0..n).map(|_| None).collect();
        let mut pending = n;
        let mut first_err: Option<WireError> = None;
        let mut last_heard = std::time::Instant::now();
        while pending > 0 {
            let event = match self.next_event(&mut last_heard).await {
                Ok(Some(ev)) => ev,
                Ok(None) => continue,
                Err(e) => {
                    return Err(WireError::new(
                        e.code,
                        format!("{} ({pending} of {n} replies missing)", e.message),
                    ))
                }
            };
            match event {
                ClientEvent::Frame(_, f) if f.tag >> 32 == seq => {
                    let i = (f.tag & 0xffff_ffff) as usize;
                    if let Some(slot) = replies.get_mut(i).filter(|s| s.is_none()) {
                        if let Reply::Error(e) = &f.reply {
                            first_err.get_or_insert_with(|| e.clone());
                        }
                        *slot = Some(f.reply);
                        pending -= 1;
                    }
                }
                ClientEvent::Frame(server, f) => {
                    if let (0, Reply::Error(e)) = (f.tag, &f.reply) {
                        return Err(WireError::new(e.code, format!("{server}: {}", e.message)));
                    }
                }
                ClientEvent::Lost(server, e) => {
                    self.lost[server.0 as usize] = Some(e.clone());
                    let waiting_on_it = targets
                        .iter()
                        .zip(&replies)
                        .any(|(t, r)| *t == server && r.is_none());
                    if waiting_on_it {
                        return Err(e);
                    }
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(replies
            .into_iter()
            .map(|r| r.expect("all replies in"))
            .collect())
    }

    /// Waits for the next event. `Ok(None)` means nothing came for `PING_INTERVAL`; servers
    /// have then been pinged. Fails once no server was heard from for `timeout`.
    async fn next_event(
        &mut self,
        last_heard: &mut std::time::Instant,
    ) -> Result<Option<ClientEvent>, WireError> {
        let wait = PING_INTERVAL.min(self.timeout);
        match tokio::time::timeout(wait, self.events.recv()).await {
            Ok(Some(ev)) => {
                *last_heard = std::time::Instant::now();
                match ev {
                    ClientEvent::Frame(_, f) if f.tag == PING_TAG => Ok(None),
                    ev => Ok(Some(ev)),
                }
            }
            Ok(None) => Err(WireError::new(
                ErrorCode::Disconnected,
                "all server connections are gone",
            )),
            Err(_) => {
                if last_heard.elapsed() >= self.timeout {
                    return Err(WireError::new(
                        ErrorCode::Timeout,
                        format!("no server answered for {:?}", self.timeout),
                    ));
                }
                for s in 0..self.links.len() {
                    if self.lost[s].is_none() {
                        // A failed ping is noticed through the connection's loss event.
                        let _ = self
                            .send_raw(ServerId(s as u32), PING_TAG, Request::Ping { nonce: 0 })
                            .await;
                    }
                }
                Ok(None)
            }
        }
    }

    /// Runs a machine (a `LockOp`, a `DataOp`, a whole call) from its first messages
    /// `sends` until its current step is final.
    /// Returns only when everything the machine sent is on the wire: a machine may end
    /// with messages nobody answers (detached releases), and this client's runtime may
    /// not run again for a while (a C caller waiting in MPI).
    pub async fn run<M: Machine>(&mut self, op: &mut M, sends: Vec<Send>) -> Result<(), WireError> {
        self.seq += 1;
        let seq = self.seq;
        let result = self.drive(op, seq, sends).await;
        self.flush().await;
        result
    }

    /// Runs `op` until its current step is final (done or failed).
    async fn drive<M: Machine>(
        &mut self,
        op: &mut M,
        seq: u64,
        mut sends: Vec<Send>,
    ) -> Result<(), WireError> {
        let mut last_heard = std::time::Instant::now();
        // Servers this operation has talked to: losing another one does not concern it.
        let mut used = vec![false; self.links.len()];
        loop {
            for s in std::mem::take(&mut sends) {
                if let Some(u) = used.get_mut(s.server.0 as usize) {
                    *u = true;
                }
                if let Err(e) = self.send(seq, s).await {
                    return Err(self.abandon(op, seq, e).await);
                }
            }
            match op.progress() {
                Progress::Done => return Ok(()),
                Progress::Failed(e) => return Err(e),
                Progress::Waiting => {}
            }
            let event = match self.next_event(&mut last_heard).await {
                Ok(Some(ev)) => ev,
                Ok(None) => continue,
                Err(e) => return Err(self.abandon(op, seq, e).await),
            };
            match event {
                ClientEvent::Frame(_, f) if f.tag >> 32 == seq => {
                    op.on_reply(f.tag as u32, f.reply, &mut sends);
                }
                ClientEvent::Frame(server, f) => {
                    if let (0, Reply::Error(e)) = (f.tag, &f.reply) {
                        // A connection-level complaint: our stream to this server is suspect.
                        let e = WireError::new(e.code, format!("{server}: {}", e.message));
                        return Err(self.abandon(op, seq, e).await);
                    }
                    tracing::debug!(
                        ?server,
                        tag = f.tag,
                        "dropping a reply to an abandoned operation"
                    );
                }
                ClientEvent::Lost(server, e) => {
                    self.lost[server.0 as usize] = Some(e.clone());
                    if used.get(server.0 as usize) == Some(&true) {
                        return Err(self.abandon(op, seq, e).await);
                    }
                }
            }
        }
    }

    /// Gives up on `op` and frees what it holds at every server still reachable (a failed
    /// operation must not leave locks behind while this client lives on and keeps its
    /// leases): releases for the locks it knows, and for opening requests still
    /// unanswered, their reply is awaited (up to `ORPHAN_WAIT`) and the lock it names
    /// released — or, failing that, the connection is closed, which releases everything
    /// of this client at that server. Returns `error`.
    async fn abandon<M: Machine>(&mut self, op: &mut M, seq: u64, error: WireError) -> WireError {
        op.abandon(error.clone());
        let mut releases = Vec::new();
        let mut pending = op.cleanup(&mut releases);
        for s in releases {
            let _ = self.send(seq, s).await; // a lost server's locks went with it
        }
        pending.retain(|(s, _)| self.lost[s.0 as usize].is_none());
        let deadline = std::time::Instant::now() + ORPHAN_WAIT.min(self.timeout);
        while !pending.is_empty() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let event = match tokio::time::timeout(left, self.events.recv()).await {
                Ok(Some(ev)) => ev,
                _ => break,
            };
            match event {
                ClientEvent::Frame(server, f) if f.tag >> 32 == seq => {
                    let sub = f.tag as u32;
                    if let Some(k) = pending.iter().position(|&p| p == (server, sub)) {
                        pending.swap_remove(k);
                        if let Reply::Lock(p) = f.reply {
                            let release = Request::LockRelease {
                                lock: p.lock,
                                from: None,
                            };
                            let _ = self.send_raw(server, f.tag, release).await;
                        }
                    }
                }
                ClientEvent::Lost(server, e) => {
                    self.lost[server.0 as usize] = Some(e);
                    pending.retain(|(s, _)| *s != server);
                }
                ClientEvent::Frame(..) => {}
            }
        }
        for (server, _) in pending {
            self.close_link(server).await;
        }
        self.flush().await;
        error
    }

    /// Closes the connection to `server` (it then releases everything of this client).
    async fn close_link(&mut self, server: ServerId) {
        let i = server.0 as usize;
        if self.lost[i].is_some() {
            return;
        }
        tracing::warn!(
            ?server,
            "closing the connection: a failed operation left a lock request unanswered there"
        );
        match &mut self.links[i] {
            Link::Tcp(tx, _) => *tx = mpsc::unbounded_channel().0,
            Link::InProcess { client, server } => {
                let _ = server.send(Event::Disconnected { client: *client }).await;
            }
        }
        self.lost[i] = Some(WireError::new(
            ErrorCode::Disconnected,
            format!("{server}: closed after a failed operation left a lock request there"),
        ));
    }
}

impl Drop for ClusterClient {
    fn drop(&mut self) {
        // In-process servers learn of the departure here (TCP servers see the socket close).
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for link in &self.links {
            if let Link::InProcess { client, server } = link {
                let (client, server) = (*client, server.clone());
                rt.spawn(async move {
                    let _ = server.send(Event::Disconnected { client }).await;
                });
            }
        }
    }
}
