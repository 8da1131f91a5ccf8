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
//! **Invariants:** every event for a client is processed in arrival order by each actor;
//! a client that is disconnected (or cut off for not reading its replies) is told to each
//! service exactly once; replies to unknown clients are dropped.

use crate::service::Service;
use atomio_layout::ServerId;
use atomio_lock::Outgoing;
use atomio_proto::limits::MAX_CLIENTS_PER_SERVER;
use atomio_proto::{ClientId, ErrorCode, Reply, Request, RequestClass, ServerFrame, WireError};
use std::collections::HashMap;
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
}

impl ServerHandle {
    pub fn new_client_id(&self) -> ClientId {
        ClientId(self.next_client.fetch_add(1, Ordering::Relaxed) as u64)
    }

    /// Routes `event` to the actor that serves it (connection events to both).
    pub async fn send(&self, event: Event) -> Result<(), WireError> {
        let stopped = |_| WireError::new(ErrorCode::Disconnected, "the server has stopped");
        let Some(data) = &self.data else {
            return self.inbox.send(event).await.map_err(stopped);
        };
        match event {
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
        }
    }
}

/// Starts one actor serving every request on the current tokio runtime.
pub fn spawn<S: Service>(service: S) -> ServerHandle {
    let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
    tokio::spawn(run(service, rx));
    ServerHandle {
        inbox: tx,
        data: None,
        next_client: Arc::new(AtomicUsize::new(1)),
    }
}

/// Starts the lock actor on the current tokio runtime and the data actor on a thread of
/// its own (storage I/O blocks; it must not hold up lock grants).
pub fn spawn_split<L: Service, D: Service>(locks: L, data: D) -> std::io::Result<ServerHandle> {
    let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
    let (dtx, mut drx) = mpsc::channel(INBOX_CAPACITY);
    std::thread::Builder::new()
        .name("atomio-data".into())
        .spawn(move || {
            let mut actor = Actor::new(data);
            while let Some(event) = drx.blocking_recv() {
                actor.step(event);
                // Drain what is queued before blocking again.
                for _ in 0..256 {
                    match drx.try_recv() {
                        Ok(e) => actor.step(e),
                        Err(_) => break,
                    }
                }
            }
        })?;
    tokio::spawn(run(locks, rx));
    Ok(ServerHandle {
        inbox: tx,
        data: Some(dtx),
        next_client: Arc::new(AtomicUsize::new(1)),
    })
}

async fn run<S: Service>(service: S, mut inbox: mpsc::Receiver<Event>) {
    let mut actor = Actor::new(service);
    while let Some(event) = inbox.recv().await {
        actor.step(event);
        // Drain what is already queued before yielding: fewer wake-ups under load.
        for _ in 0..256 {
            match inbox.try_recv() {
                Ok(e) => actor.step(e),
                Err(_) => break,
            }
        }
    }
}

/// One service with its clients' reply sinks.
struct Actor<S> {
    service: S,
    peers: HashMap<ClientId, Peer>,
    out: Vec<Outgoing>,
    dead: Vec<(ClientId, Undelivered)>,
}

impl<S: Service> Actor<S> {
    fn new(service: S) -> Self {
        Self {
            service,
            peers: HashMap::new(),
            out: Vec::new(),
            dead: Vec::new(),
        }
    }

    fn step(&mut self, event: Event) {
        let Actor {
            service,
            peers,
            out,
            dead,
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
                        service.handle(client, tag, request, out);
                    }
                }
                Event::Disconnected { client } => {
                    if peers.remove(&client).is_some() {
                        service.disconnect(client, out);
                    }
                }
            }
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
