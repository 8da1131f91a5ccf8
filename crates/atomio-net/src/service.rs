//! What a server runs: sans-IO state machines fed one client message at a time.
//!
//! **Invariant:** a `Service` never blocks on the network and never waits inside `handle`;
//! everything it wants to say goes into `out`, addressed by client. The data service does
//! local storage I/O inline, on its own thread (see `actor::spawn_split`), never on the
//! lock actor's.

use atomio_data::{DataService, ObjectStore};
use atomio_lock::{LockServer, Outgoing};
use atomio_proto::{ClientId, Request, WireError};
use std::time::Duration;

/// Lease fencing across a server's two actors: the lock actor finds a lapsed client
/// (`expire`), the data actor refuses everything it sends from then on (`fence`), and only
/// then does the lock actor release its locks (`fenced`). The data actor handles its inbox
/// in order, so a write of the client that it accepted was applied before the release.
pub trait Service: Send + 'static {
    /// One message from `client` with its reply tag.
    fn handle(&mut self, client: ClientId, tag: u64, request: Request, out: &mut Vec<Outgoing>);
    /// `client` is gone: release whatever it held.
    fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>);
    /// How often the driver must pass time in and call `expire` (`None`: no leases).
    fn tick_every(&self) -> Option<Duration> {
        None
    }
    /// The driver's monotonic clock in ms; called before each `handle` and `expire`.
    fn set_now(&mut self, _now_ms: u64) {}
    /// Clients whose lease lapsed since the last call: to be fenced, then `fenced`.
    fn expire(&mut self) -> Vec<ClientId> {
        Vec::new()
    }
    /// Refuse every later request of `client`.
    fn fence(&mut self, _client: ClientId) {}
    /// `client` is fenced on every actor of this server: release what it holds.
    fn fenced(&mut self, _client: ClientId, _out: &mut Vec<Outgoing>) {}
    /// Whether work is left over from earlier steps (long requests run in slices).
    fn has_work(&self) -> bool {
        false
    }
    /// One slice of that work; the driver interleaves it with new messages.
    fn work(&mut self, _out: &mut Vec<Outgoing>) {}
    /// Mandatory locks: whether `request` (one that `needs_admission`) may go on to the
    /// data service. The lock actor of a split server asks before forwarding it.
    fn admit(&mut self, _client: ClientId, _request: &Request) -> Result<(), WireError> {
        Ok(())
    }
    /// Completes an admitted request with what only the lock service knows (a flush's
    /// mSN) before it goes to the data service.
    fn stamp(&mut self, _request: &mut Request) {}
    /// Data service: objects whose writers the lock service must synchronize (SeqDLM's
    /// extent cache could not be cleaned), since the last call.
    fn take_synchronize(&mut self) -> Vec<(atomio_proto::FileId, u32)> {
        Vec::new()
    }
    /// Lock service: synchronize the writers of one object (see `take_synchronize`).
    fn synchronize(&mut self, _file: atomio_proto::FileId, _object: u32, _out: &mut Vec<Outgoing>) {
    }
}

impl Service for LockServer {
    fn handle(&mut self, client: ClientId, tag: u64, request: Request, out: &mut Vec<Outgoing>) {
        LockServer::handle(self, client, tag, request, out)
    }
    fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        LockServer::disconnect(self, client, out)
    }
    fn tick_every(&self) -> Option<Duration> {
        // A lapsed lease is acted on within a tenth of the lease (10–250 ms).
        self.lease_ms()
            .map(|ms| Duration::from_millis((ms / 10).clamp(10, 250)))
    }
    fn set_now(&mut self, now_ms: u64) {
        LockServer::set_now(self, now_ms)
    }
    fn expire(&mut self) -> Vec<ClientId> {
        LockServer::expire(self)
    }
    fn fenced(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        LockServer::release_lapsed(self, client, out)
    }
    fn has_work(&self) -> bool {
        LockServer::has_work(self)
    }
    fn work(&mut self, out: &mut Vec<Outgoing>) {
        LockServer::work(self, out)
    }
    fn admit(&mut self, client: ClientId, request: &Request) -> Result<(), WireError> {
        LockServer::admit(self, client, request)
    }
    fn stamp(&mut self, request: &mut Request) {
        LockServer::stamp(self, request)
    }
    fn synchronize(&mut self, file: atomio_proto::FileId, object: u32, out: &mut Vec<Outgoing>) {
        LockServer::synchronize_object(self, file, object, out)
    }
}

/// A storage server's data and metadata: what `actor::spawn_split` runs on its data
/// thread, beside a `LockServer` (integrated, as in Ching et al.: one failure domain, lock
/// capacity grows with I/O capacity).
impl<S: ObjectStore + Send + 'static> Service for DataService<S> {
    fn handle(&mut self, client: ClientId, tag: u64, request: Request, out: &mut Vec<Outgoing>) {
        let mut replies = Vec::new();
        DataService::handle_all(self, client, tag, request, &mut replies);
        for (to, tag, reply) in replies {
            if let atomio_proto::Reply::Error(e) = &reply {
                if e.code == atomio_proto::ErrorCode::Io {
                    // A storage failure is the operator's business, not only the client's.
                    tracing::warn!(?to, "data I/O failed: {e}");
                }
            }
            out.push(Outgoing { to, tag, reply });
        }
    }
    fn disconnect(&mut self, client: ClientId, out: &mut Vec<Outgoing>) {
        DataService::forget(self, client);
        for (to, tag, reply) in DataService::take_pending(self) {
            out.push(Outgoing { to, tag, reply });
        }
    }
    /// The data service's clock is the wall clock (Unix ms), not the driver's monotonic
    /// one: a version's time is shown to people (`atomio versions`), compared with Unix
    /// times (`atomio gc --newer-than-secs`) and kept across restarts in its board, where
    /// ms since this process started read as 1970 and went back to 0 at every restart.
    /// Versioning's patience only subtracts two of these.
    fn set_now(&mut self, _monotonic_ms: u64) {
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        DataService::set_now(self, unix_ms)
    }
    fn fence(&mut self, client: ClientId) {
        DataService::fence(self, client)
    }
    fn take_synchronize(&mut self) -> Vec<(atomio_proto::FileId, u32)> {
        DataService::take_synchronize(self)
    }
}

/// Starts a storage server (locks on this runtime, data on a thread of its own).
pub fn spawn_node<S: ObjectStore + Send + 'static>(
    mut locks: LockServer,
    store: S,
) -> std::io::Result<crate::actor::ServerHandle> {
    let data = DataService::new(store);
    // SeqDLM: SNs given after a restart start above every SN the data store applied.
    if let Some(sn) = data.seq_writes().max_sn() {
        locks.raise_dlm_floor(sn + 1);
    }
    crate::actor::spawn_split(locks, data)
}
