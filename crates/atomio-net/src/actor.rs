//! The server actor: one task owns the service state machine and is the only thing that
//! touches it, so the state machine needs no locks. Connections (TCP or in-process) feed it
//! events through one bounded inbox (back-pressure reaches TCP readers, hence the clients)
//! and it hands replies to per-client sinks.
//!
//! **Invariants:** every event for a client is processed in arrival order; a client that is
//! disconnected (or cut off for not reading its replies) is told to the service exactly once;
//! replies to unknown clients are dropped.

use crate::service::Service;
use atomio_layout::ServerId;
use atomio_lock::Outgoing;
use atomio_proto::limits::MAX_CLIENTS_PER_SERVER;
use atomio_proto::{ClientId, ErrorCode, Reply, Request, ServerFrame, WireError};
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

/// A handle for feeding a running server actor.
#[derive(Clone, Debug)]
pub struct ServerHandle {
    inbox: mpsc::Sender<Event>,
    next_client: Arc<AtomicUsize>,
}

impl ServerHandle {
    pub fn new_client_id(&self) -> ClientId {
        ClientId(self.next_client.fetch_add(1, Ordering::Relaxed) as u64)
    }

    pub async fn send(&self, event: Event) -> Result<(), WireError> {
        self.inbox
            .send(event)
            .await
            .map_err(|_| WireError::new(ErrorCode::Disconnected, "the server has stopped"))
    }

    pub fn sender(&self) -> mpsc::Sender<Event> {
        self.inbox.clone()
    }
}

/// Starts the actor on the current tokio runtime.
pub fn spawn<S: Service>(service: S) -> ServerHandle {
    let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
    tokio::spawn(run(service, rx));
    ServerHandle {
        inbox: tx,
        next_client: Arc::new(AtomicUsize::new(1)),
    }
}

async fn run<S: Service>(mut service: S, mut inbox: mpsc::Receiver<Event>) {
    let mut peers: HashMap<ClientId, Peer> = HashMap::new();
    let mut out: Vec<Outgoing> = Vec::new();
    let mut dead: Vec<ClientId> = Vec::new();
    while let Some(event) = inbox.recv().await {
        let mut next = Some(event);
        // Drain what is already queued before yielding: fewer wake-ups under load.
        let mut budget = 256;
        while let Some(event) = next.take() {
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
                        deliver(&Peer { sink, queued }, 0, Reply::Error(err));
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
                        service.handle(client, tag, request, &mut out);
                    }
                }
                Event::Disconnected { client } => {
                    if peers.remove(&client).is_some() {
                        service.disconnect(client, &mut out);
                    }
                }
            }
            for o in out.drain(..) {
                if let Some(peer) = peers.get(&o.to) {
                    if !deliver(peer, o.tag, o.reply) {
                        dead.push(o.to);
                    }
                }
            }
            // Clients that stopped reading (or vanished) are cut off; their locks go.
            while let Some(client) = dead.pop() {
                if peers.remove(&client).is_some() {
                    tracing::warn!(
                        ?client,
                        "cutting off a client that does not read its replies"
                    );
                    service.disconnect(client, &mut out);
                    for o in out.drain(..) {
                        if let Some(peer) = peers.get(&o.to) {
                            if !deliver(peer, o.tag, o.reply) {
                                dead.push(o.to);
                            }
                        }
                    }
                }
            }
            budget -= 1;
            if budget > 0 {
                next = inbox.try_recv().ok();
            }
        }
    }
}

/// Queues one reply; false when the client is gone or too far behind.
fn deliver(peer: &Peer, tag: u64, reply: Reply) -> bool {
    if peer.queued.fetch_add(1, Ordering::Relaxed) >= MAX_QUEUED_REPLIES {
        return false;
    }
    let frame = ServerFrame { tag, reply };
    match &peer.sink {
        ReplySink::Connection(tx) => tx.send(frame).is_ok(),
        ReplySink::InProcess(tx, server) => {
            // In-process clients drain their inbox directly; count it as read at once.
            peer.queued.fetch_sub(1, Ordering::Relaxed);
            tx.send(ClientEvent::Frame(*server, frame)).is_ok()
        }
    }
}
