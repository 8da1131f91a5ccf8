//! What a server runs: sans-IO state machines fed one client message at a time.
//!
//! **Invariant:** a `Service` never blocks on the network and never waits inside `handle`;
//! everything it wants to say goes into `out`, addressed by client. (The data service does
//! local storage I/O inline: a server is one thread, and its disk is its own.)

use atomio_data::{DataService, ObjectStore};
use atomio_lock::{LockServer, Outgoing};
use atomio_proto::{ClientId, Request};

pub trait Service: Send + 'static {
    /// One message from `client` with its reply tag.
    fn handle(&mut self, client: ClientId, tag: u64, request: Request, out: &mut Vec<Outgoing>);
    /// `client` is gone: release whatever it held.
    fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>);
}

impl Service for LockServer {
    fn handle(&mut self, client: ClientId, tag: u64, request: Request, out: &mut Vec<Outgoing>) {
        LockServer::handle(self, client, tag, request, out)
    }
    fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        LockServer::disconnect(self, client, out)
    }
}

/// A storage server: locks and data for the objects it holds (integrated, as in Ching et
/// al.: one failure domain, lock capacity grows with I/O capacity).
pub struct Node<S: ObjectStore> {
    pub locks: LockServer,
    pub data: DataService<S>,
}

impl<S: ObjectStore> Node<S> {
    pub fn new(locks: LockServer, store: S) -> Self {
        Self {
            locks,
            data: DataService::new(store),
        }
    }
}

impl<S: ObjectStore> Service for Node<S> {
    fn handle(&mut self, client: ClientId, tag: u64, request: Request, out: &mut Vec<Outgoing>) {
        if DataService::<S>::handles(&request) {
            out.push(Outgoing {
                to: client,
                tag,
                reply: self.data.handle(request),
            });
        } else {
            self.locks.handle(client, tag, request, out);
        }
    }
    fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        self.locks.disconnect(client, out)
    }
}
