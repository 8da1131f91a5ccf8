//! What a server runs: sans-IO state machines fed one client message at a time.
//!
//! **Invariant:** a `Service` never blocks on the network and never waits inside `handle`;
//! everything it wants to say goes into `out`, addressed by client. The data service does
//! local storage I/O inline, on its own thread (see `actor::spawn_split`), never on the
//! lock actor's.

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

/// A storage server's data and metadata: what `actor::spawn_split` runs on its data
/// thread, beside a `LockServer` (integrated, as in Ching et al.: one failure domain, lock
/// capacity grows with I/O capacity).
impl<S: ObjectStore + Send + 'static> Service for DataService<S> {
    fn handle(&mut self, client: ClientId, tag: u64, request: Request, out: &mut Vec<Outgoing>) {
        let reply = DataService::handle(self, request);
        if let atomio_proto::Reply::Error(e) = &reply {
            if e.code == atomio_proto::ErrorCode::Io {
                // A storage failure is the operator's business, not only the client's.
                tracing::warn!(?client, "data I/O failed: {e}");
            }
        }
        out.push(Outgoing {
            to: client,
            tag,
            reply,
        });
    }
    fn disconnect(&mut self, _: ClientId, _: &mut Vec<Outgoing>) {}
}

/// Starts a storage server (locks on this runtime, data on a thread of its own).
pub fn spawn_node<S: ObjectStore + Send + 'static>(
    locks: LockServer,
    store: S,
) -> std::io::Result<crate::actor::ServerHandle> {
    crate::actor::spawn_split(locks, DataService::new(store))
}
