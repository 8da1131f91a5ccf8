//! What a server runs: a sans-IO state machine fed one client message at a time.
//!
//! **Invariant:** a `Service` never blocks and never does I/O inside `handle`; everything it
//! wants to say goes into `out`, addressed by client.

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
