//! The server actors: one task owns the lock state machine and is the only thing that
//! touches it, so the state machine needs no locks; data and metadata requests go to a
//! second actor on a thread of its own (`spawn_split`), so a `pwrite` or an `fsync` never
//! delays a lock grant. Connections (TCP or in-process) feed the `ServerHandle`, which
//! routes each frame by its class (`Request::class`) into that actor's bounded inbox
//! (back-pressure reaches TCP readers, hence the clients); each actor hands replies to the
//! per-client sinks.
//!
//! Why two actors need no coordination: a client waits for every data reply of a call
//! before it releases the call's locks (and for a create/open reply before any I/O), so no
//! ordering between the two inboxes is ever relied upon.
//!
//! Leases (when the lock service keeps them): the lock actor ticks, passes its monotonic
//! clock in, and for each lapsed client sends `Fence` to the data actor, which refuses the
//! client's later requests and answers `Fenced` on the lock actor's control channel; only
//! then are the client's locks released. So a paused client that wakes up finds its writes
//! refused at every byte it held here.
//!
//! The data actor serves its inbox in arrival order except that a request that moves no
//! bytes (`Request::is_bulk` false: versions, tree nodes, create and open) may go ahead of
//! *other* clients' events (`next_to_serve`), so that a reader's snapshot lookup does not
//! wait behind every writer's queued chunks. Nothing relies on order between clients'
//! requests that are not causally related, and a causally later request is sent only after
//! the earlier one's reply.
//!
//! **Invariants:** every event for a client is processed in arrival order by each actor;
//! bulk requests and connection events of all clients keep their arrival order;
//! a lapsed client's locks are released only after the data actor has fenced it;
//! a client that is disconnected (or cut off for not reading its replies) is told to each
//! service exactly once; replies to unknown clients are dropped.

use crate::service::Service;
use atomio_layout::ServerId;
use atomio_lock::Outgoing;
use atomio_proto::limits::MAX_CLIENTS_PER_SERVER;
use atomio_proto::{ClientId, ErrorCode, Reply, Request, RequestClass, ServerFrame, WireError};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Most replies queued to one client before it is considered stuck and cut off.
pub const MAX_QUEUED_REPLIES: usize = 4 << 20;
/// Capacity of a server's inbox.
pub const INBOX_CAPACITY: usize = 1 << 16;

/// Where the actor sends a client's replies.
#[derive(Clone, Debug)]
pub enum ReplySink {
    /// A TCP connection's writer task.
    Connection(mpsc::UnboundedSender<ServerFrame>),
    /// An in-process client's inbox, tagged with this server's index.
    InProcess(mpsc::UnboundedSender<ClientEvent>, ServerId),
}

/// What a cluster client receives from its servers.
#[derive(Debug)]
pub enum ClientEvent {
    Frame(ServerId, ServerFrame),
    /// The connection to this server is gone.
    Lost(ServerId, WireError),
}

pub enum Event {
    Connected {
        client: ClientId,
        sink: ReplySink,
        queued: Arc<AtomicUsize>,
    },
    Frame {
        client: ClientId,
        tag: u64,
        request: Request,
    },
    Disconnected {
        client: ClientId,
    },
    /// A request that changes bytes, to the lock actor for admission (mandatory locks),
    /// with its place in the data actor's inbox already taken: its sender waited for that
    /// place, so a full data inbox pushes back on the senders of data, and the lock actor
    /// hands the admitted request on without ever waiting for the data actor.
    Admit {
        client: ClientId,
        tag: u64,
        request: Request,
        place: mpsc::OwnedPermit<Event>,
    },
    /// Lock actor → data actor: refuse everything `client` sends from now on.
    Fence {
        client: ClientId,
    },
    /// Data actor → lock actor: `client` is fenced; release its locks.
    Fenced {
        client: ClientId,
    },
    /// Data actor → lock actor: synchronize the writers of an object (SeqDLM's extent
    /// cache there could not be cleaned).
    Synchronize {
        file: atomio_proto::FileId,
        object: u32,
    },
}

struct Peer {
    sink: ReplySink,
    queued: Arc<AtomicUsize>,
}

/// A handle for feeding a running server: its lock actor, and its data actor if split.
#[derive(Clone, Debug)]
pub struct ServerHandle {
    inbox: mpsc::Sender<Event>,
    data: Option<mpsc::Sender<Event>>,
    next_client: Arc<AtomicUsize>,
    /// Connections admitted (`admit_client`) and not yet gone.
    clients: Arc<AtomicUsize>,
    /// Most of them at once (`MAX_CLIENTS_PER_SERVER`, or lower: `ATOMIO_MAX_CLIENTS`).
    max_clients: usize,
}

/// A connection's place among the server's `MAX_CLIENTS_PER_SERVER`, given back on drop
/// (after the connection's `Disconnected` was sent, so the actors never count more
/// clients than there are slots).
#[derive(Debug)]
pub struct ClientSlot(Arc<AtomicUsize>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ServerHandle {
    fn with_inboxes(inbox: mpsc::Sender<Event>, data: Option<mpsc::Sender<Event>>) -> Self {
        Self {
            inbox,
            data,
            next_client: Arc::new(AtomicUsize::new(1)),
            clients: Arc::new(AtomicUsize::new(0)),
            max_clients: std::env::var("ATOMIO_MAX_CLIENTS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map_or(MAX_CLIENTS_PER_SERVER, |n: usize| {
                    n.clamp(1, MAX_CLIENTS_PER_SERVER)
                }),
        }
    }

    /// Most connections this server serves at once.
    pub fn max_clients(&self) -> usize {
        self.max_clients
    }

    pub fn new_client_id(&self) -> ClientId {
        ClientId(self.next_client.fetch_add(1, Ordering::Relaxed) as u64)
    }

    /// A place for one more connection, or `None` when the server already serves
    /// `max_clients`: the caller refuses the connection *and closes it*, so a
    /// refused peer holds no descriptor, per-host slot or reader. (The actors' own check
    /// stays as a backstop for in-process clients.)
    pub fn admit_client(&self) -> Option<ClientSlot> {
        self.clients
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_clients).then_some(n + 1)
            })
            .ok()
            .map(|_| ClientSlot(self.clients.clone()))
    }

    /// Routes `event` to the actor that serves it (connection events to both).
    pub async fn send(&self, event: Event) -> Result<(), WireError> {
        let stopped = |_| WireError::new(ErrorCode::Disconnected, "the server has stopped");
        let Some(data) = &self.data else {
            return self.inbox.send(event).await.map_err(stopped);
        };
        match event {
            // Mandatory locks: changes of bytes are admitted by the lock actor, which then
            // hands them to the data actor, into a place in its inbox taken here (the sender
            // waits for it, never the lock actor).
            Event::Frame {
                client,
                tag,
                request,
            } if request.needs_admission() => {
                let place = data.clone().reserve_owned().await.map_err(|_| {
                    WireError::new(ErrorCode::Disconnected, "the server has stopped")
                })?;
                let admit = Event::Admit {
                    client,
                    tag,
                    request,
                    place,
                };
                self.inbox.send(admit).await.map_err(stopped)
            }
            Event::Frame { ref request, .. } if request.class() != RequestClass::Lock => {
                data.send(event).await.map_err(stopped)
            }
            Event::Frame { .. } => self.inbox.send(event).await.map_err(stopped),
            Event::Connected {
                client,
                sink,
                queued,
            } => {
                let copy = Event::Connected {
                    client,
                    sink: sink.clone(),
                    queued: queued.clone(),
                };
                data.send(copy).await.map_err(stopped)?;
                self.inbox
                    .send(Event::Connected {
                        client,
                        sink,
                        queued,
                    })
                    .await
                    .map_err(stopped)
            }
            Event::Disconnected { client } => {
                let _ = data.send(Event::Disconnected { client }).await;
                self.inbox.send(event).await.map_err(stopped)
            }
            Event::Fence { .. } => data.send(event).await.map_err(stopped),
            Event::Admit { .. } => self.inbox.send(event).await.map_err(stopped),
            Event::Fenced { .. } | Event::Synchronize { .. } => {
                self.inbox.send(event).await.map_err(stopped)
            }
        }
    }
}

/// Starts one actor serving every request on the current tokio runtime.
pub fn spawn<S: Service>(service: S) -> ServerHandle {
    let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
    let mut actor = Actor::new(service);
    actor.inbox = Some(tx.downgrade());
    tokio::spawn(run(actor, rx, None));
    ServerHandle::with_inboxes(tx, None)
}

/// Starts the lock actor on the current tokio runtime and the data actor on a thread of
/// its own (storage I/O blocks; it must not hold up lock grants).
pub fn spawn_split<L: Service, D: Service>(locks: L, data: D) -> std::io::Result<ServerHandle> {
    let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
    let (dtx, mut drx) = mpsc::channel(INBOX_CAPACITY);
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("atomio-data".into())
        .spawn(move || {
            let mut actor = Actor::new(data);
            actor.fenced_to = Some(control_tx);
            let mut pending: VecDeque<Event> = VecDeque::new();
            let mut served_ahead = 0;
            loop {
                if pending.is_empty() {
                    match drx.blocking_recv() {
                        Some(e) => pending.push_back(e),
                        None => return,
                    }
                }
                while pending.len() < MAX_PENDING {
                    match drx.try_recv() {
                        Ok(e) => pending.push_back(e),
                        Err(_) => break,
                    }
                }
                // Quick requests go first, but not forever: after a run of them the oldest
                // event is served, so a stream of small requests cannot starve a write.
                let i = match served_ahead < MAX_SERVED_AHEAD {
                    true => next_to_serve(&pending),
                    false => 0,
                };
                served_ahead = if i > 0 { served_ahead + 1 } else { 0 };
                let event = pending.remove(i).expect("an index into pending");
                actor.step(event);
            }
        })?;
    let mut lock_actor = Actor::new(locks);
    lock_actor.fence_via = Some(dtx.clone());
    lock_actor.inbox = Some(tx.downgrade());
    tokio::spawn(run(lock_actor, rx, Some(control_rx)));
    Ok(ServerHandle::with_inboxes(tx, Some(dtx)))
}

/// Events the data actor takes off its inbox to choose from.
const MAX_PENDING: usize = 256;
/// Quick requests the data actor serves ahead of an older event in a row, at most.
const MAX_SERVED_AHEAD: u32 = 64;

/// Which of the data actor's pending events to serve next: the first request that is not
/// bulk (`Request::is_bulk`: versions, tree nodes, create and open — microseconds) whose
/// client has nothing earlier pending, else the oldest event. So a reader's snapshot
/// lookup waits for the bulk request being served at most, not for every writer's chunks
/// queued before it (a 4 MiB tile's chunks are milliseconds of `pwrite`), while each
/// client's own events keep their order (the actor's invariant).
fn next_to_serve(pending: &VecDeque<Event>) -> usize {
    let mut behind: Vec<ClientId> = Vec::new();
    for (i, e) in pending.iter().enumerate() {
        let client = match e {
            Event::Frame {
                client, request, ..
            } => {
                if !request.is_bulk() && !behind.contains(client) {
                    return i;
                }
                *client
            }
            Event::Connected { client, .. }
            | Event::Admit { client, .. }
            | Event::Disconnected { client }
            | Event::Fence { client }
            | Event::Fenced { client } => *client,
            // Not a client's: keeps its place before everything after it.
            Event::Synchronize { .. } => return 0,
        };
        if !behind.contains(&client) {
            behind.push(client);
        }
    }
    0
}

async fn run<S: Service>(
    mut actor: Actor<S>,
    mut inbox: mpsc::Receiver<Event>,
    mut control: Option<mpsc::UnboundedReceiver<Event>>,
) {
    let mut ticker = actor.service.tick_every().map(|every| {
        let mut t = tokio::time::interval(every);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    loop {
        // A long request runs one slice per turn; whatever arrived meanwhile (and a due
        // tick) is served between slices, so nobody waits behind it for long. Branches are
        // polled in random order, so neither a busy inbox nor long work starves the ticks.
        // Admitted requests the data inbox had no room for go first, in order: the lock
        // actor waits for the data actor here (back-pressure), never reorders.
        while let Some(event) = actor.held_back.pop_front() {
            let Some(data) = actor.fence_via.clone() else {
                break;
            };
            if data.send(event).await.is_err() {
                actor.held_back.clear();
            }
        }
        let busy = actor.service.has_work();
        if busy {
            actor.work();
        }
        tokio::select! {
            event = inbox.recv() => {
                let Some(event) = event else { return };
                actor.step(event);
                drain(&mut actor, &mut inbox);
            }
            Some(event) = recv_or_never(&mut control) => actor.step(event),
            () = tick_or_never(&mut ticker) => actor.tick(),
            () = std::future::ready(()), if busy => tokio::task::yield_now().await,
        }
    }
}

/// Handles what is already queued before yielding: fewer wake-ups under load.
fn drain<S: Service>(actor: &mut Actor<S>, inbox: &mut mpsc::Receiver<Event>) {
    for _ in 0..256 {
        match inbox.try_recv() {
            Ok(e) => actor.step(e),
            Err(_) => break,
        }
    }
}

async fn recv_or_never(rx: &mut Option<mpsc::UnboundedReceiver<Event>>) -> Option<Event> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn tick_or_never(ticker: &mut Option<tokio::time::Interval>) {
    match ticker {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// One service with its clients' reply sinks.
struct Actor<S> {
    service: S,
    peers: HashMap<ClientId, Peer>,
    out: Vec<Outgoing>,
    dead: Vec<(ClientId, Undelivered)>,
    /// The clock passed to the service (ms since the actor started).
    epoch: std::time::Instant,
    /// Lock actor of a split server: where lapsed clients are fenced first.
    fence_via: Option<mpsc::Sender<Event>>,
    /// Lapsed clients whose `Fence` did not fit in the data inbox yet.
    unfenced: Vec<ClientId>,
    /// Admitted requests for the data actor that did not fit in its inbox yet (sent, in
    /// order, before anything else; see `run`).
    held_back: std::collections::VecDeque<Event>,
    /// Data actor of a split server: where `Fenced` is reported.
    fenced_to: Option<mpsc::UnboundedSender<Event>>,
    /// This actor's own inbox (weak: the actor must not keep itself alive), for `Stats`.
    inbox: Option<mpsc::WeakSender<Event>>,
}

impl<S: Service> Actor<S> {
    fn new(service: S) -> Self {
        Self {
            service,
            peers: HashMap::new(),
            out: Vec::new(),
            dead: Vec::new(),
            epoch: std::time::Instant::now(),
            fence_via: None,
            unfenced: Vec::new(),
            held_back: Default::default(),
            fenced_to: None,
            inbox: None,
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Time passed: fence the clients whose lease lapsed (then release them, see `Fenced`).
    fn tick(&mut self) {
        let now = self.now_ms();
        self.service.set_now(now);
        for client in self.service.expire() {
            tracing::info!(
                ?client,
                "lease expired: fencing the client, then releasing its locks"
            );
            self.unfenced.push(client);
        }
        let mut i = 0;
        while i < self.unfenced.len() {
            let client = self.unfenced[i];
            let fenced_here = match &self.fence_via {
                None => true,
                // Never ahead of admitted writes still held back (they came first).
                Some(_) if !self.held_back.is_empty() => {
                    i += 1;
                    continue;
                }
                Some(data) => match data.try_send(Event::Fence { client }) {
                    Ok(()) => {
                        self.unfenced.swap_remove(i);
                        continue;
                    }
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        i += 1; // the data actor is busy: next tick
                        continue;
                    }
                    // No data actor any more: nothing can write for the client.
                    Err(mpsc::error::TrySendError::Closed(_)) => true,
                },
            };
            if fenced_here {
                self.unfenced.swap_remove(i);
                self.service.fence(client);
                self.step(Event::Fenced { client });
            }
        }
    }

    /// One slice of the service's left-over work.
    fn work(&mut self) {
        self.service.work(&mut self.out);
        self.step_deliver();
    }

    /// Completes a `Stats` answer with what only the actor knows.
    fn complete_report(&self, r: &mut atomio_proto::ServerReport) {
        let depth = |tx: &mpsc::Sender<Event>| (tx.max_capacity() - tx.capacity()) as u64;
        r.connections = self.peers.len() as u64;
        r.lock_queue = self
            .inbox
            .as_ref()
            .and_then(mpsc::WeakSender::upgrade)
            .map_or(0, |tx| depth(&tx));
        r.data_queue = self.fence_via.as_ref().map_or(0, depth);
        r.fencing_pending = self.unfenced.len() as u64;
        r.replies_queued = self
            .peers
            .values()
            .map(|p| p.queued.load(Ordering::Relaxed) as u64)
            .sum();
    }

    /// Mandatory locks, at the lock actor of a split server: admits a request that changes
    /// bytes (then hands it to the data actor, before the next lock message can grant
    /// anyone those bytes) or answers the refusal.
    /// `place`: the request's place in the data actor's inbox, taken by its sender
    /// (`Event::Admit`); without one (an event stepped directly) a full inbox holds the
    /// request back.
    fn admit(
        &mut self,
        client: ClientId,
        tag: u64,
        request: Request,
        place: Option<mpsc::OwnedPermit<Event>>,
    ) {
        let Some(data) = &self.fence_via else {
            return;
        };
        if !self.peers.contains_key(&client) {
            return;
        }
        self.service.set_now(self.now_ms());
        let mut request = request;
        match self.service.admit(client, &request) {
            Ok(()) => {
                self.service.stamp(&mut request);
                let event = Event::Frame {
                    client,
                    tag,
                    request,
                };
                if !self.held_back.is_empty() {
                    self.held_back.push_back(event);
                } else if let Some(place) = place {
                    place.send(event);
                } else if let Err(mpsc::error::TrySendError::Full(event)) = data.try_send(event) {
                    self.held_back.push_back(event);
                }
                // Closed: the server is stopping; nothing will answer anyone.
            }
            Err(e) => {
                tracing::debug!(?client, "refused by mandatory locks: {e}");
                self.out.push(Outgoing {
                    to: client,
                    tag,
                    reply: Reply::Error(e),
                });
                self.step_deliver();
            }
        }
    }

    fn step(&mut self, event: Event) {
        let event = match event {
            Event::Frame {
                client,
                tag,
                request,
            } if request.needs_admission() && self.fence_via.is_some() => {
                return self.admit(client, tag, request, None)
            }
            Event::Admit {
                client,
                tag,
                request,
                place,
            } => return self.admit(client, tag, request, Some(place)),
            other => other,
        };
        if let Event::Frame {
            client,
            tag,
            request: Request::Stats,
        } = event
        {
            self.stats(client, tag);
            return self.step_deliver();
        }
        let Actor {
            service,
            peers,
            out,
            epoch,
            fenced_to,
            ..
        } = self;
        {
            match event {
                Event::Connected {
                    client,
                    sink,
                    queued,
                } => {
                    if peers.len() >= MAX_CLIENTS_PER_SERVER {
                        let err = WireError::new(
                            ErrorCode::LimitExceeded,
                            format!(
                                "the server serves {MAX_CLIENTS_PER_SERVER} clients, its limit"
                            ),
                        );
                        let _ = deliver(&Peer { sink, queued }, 0, Reply::Error(err));
                    // best effort
                    } else {
                        peers.insert(client, Peer { sink, queued });
                    }
                }
                Event::Frame {
                    client,
                    tag,
                    request,
                } => {
                    if peers.contains_key(&client) {
                        service.set_now(epoch.elapsed().as_millis() as u64);
                        service.handle(client, tag, request, out);
                        if let Some(lock_actor) = fenced_to {
                            for (file, object) in service.take_synchronize() {
                                let _ = lock_actor.send(Event::Synchronize { file, object });
                            }
                        }
                    }
                }
                Event::Synchronize { file, object } => service.synchronize(file, object, out),
                Event::Disconnected { client } => {
                    if peers.remove(&client).is_some() {
                        service.disconnect(client, out);
                    }
                }
                Event::Fence { client } => {
                    service.fence(client);
                    if let Some(lock_actor) = fenced_to {
                        let _ = lock_actor.send(Event::Fenced { client });
                    }
                }
                // Handled above (`admit`); here only if this actor has no data actor, which
                // never takes places: nothing to admit into.
                Event::Admit { .. } => {}
                Event::Fenced { client } => {
                    if peers.contains_key(&client) {
                        tracing::info!(?client, "client fenced: its locks are released");
                        service.fenced(client, out);
                    }
                }
            }
        }
        self.step_deliver();
    }

    /// Answers a connected client's `Stats` with the service's report, completed with what
    /// only the actor knows.
    fn stats(&mut self, client: ClientId, tag: u64) {
        if self.peers.contains_key(&client) {
            self.service
                .handle(client, tag, Request::Stats, &mut self.out);
            let mut out = std::mem::take(&mut self.out);
            for o in &mut out {
                if let Reply::Stats(r) = &mut o.reply {
                    self.complete_report(r);
                }
            }
            self.out = out;
        }
    }

    /// Hands the replies in `out` to their clients; cuts off clients that cannot take them.
    fn step_deliver(&mut self) {
        let Actor {
            service,
            peers,
            out,
            dead,
            ..
        } = self;
        {
            for o in out.drain(..) {
                if let Some(peer) = peers.get(&o.to) {
                    if let Err(why) = deliver(peer, o.tag, o.reply) {
                        dead.push((o.to, why));
                    }
                }
            }
            // Clients that stopped reading (or vanished) are cut off; their locks go.
            while let Some((client, why)) = dead.pop() {
                if peers.remove(&client).is_some() {
                    match why {
                        // A client that exits with replies in flight (e.g. the
                        // acknowledgements of its detached releases): nothing to report.
                        Undelivered::Gone => tracing::debug!(?client, "client gone"),
                        Undelivered::Behind => tracing::warn!(
                            ?client,
                            "cutting off a client that does not read its replies"
                        ),
                    }
                    service.disconnect(client, out);
                    for o in out.drain(..) {
                        if let Some(peer) = peers.get(&o.to) {
                            if let Err(why) = deliver(peer, o.tag, o.reply) {
                                dead.push((o.to, why));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Why a reply could not be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Undelivered {
    /// The client's connection is already closed (its `Disconnected` event is on its way).
    Gone,
    /// The client has `MAX_QUEUED_REPLIES` replies it has not read.
    Behind,
}

/// Queues one reply.
fn deliver(peer: &Peer, tag: u64, reply: Reply) -> Result<(), Undelivered> {
    if peer.queued.fetch_add(1, Ordering::Relaxed) >= MAX_QUEUED_REPLIES {
        return Err(Undelivered::Behind);
    }
    let frame = ServerFrame { tag, reply };
    let sent = match &peer.sink {
        ReplySink::Connection(tx) => tx.send(frame).is_ok(),
        ReplySink::InProcess(tx, server) => {
            // In-process clients drain their inbox directly; count it as read at once.
            peer.queued.fetch_sub(1, Ordering::Relaxed);
            tx.send(ClientEvent::Frame(*server, frame)).is_ok()
        }
    };
    sent.then_some(()).ok_or(Undelivered::Gone)
}

#[cfg(test)]
mod data_order_tests;

#[cfg(test)]
mod push_back_tests;
