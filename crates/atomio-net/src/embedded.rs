//! An embedded cluster: lock servers as actors in this process, reached through in-process
//! links (no sockets, no encoding). The default for the CLI's main job and for tests.

use crate::actor::{self, ClientEvent, Event, ReplySink, ServerHandle};
use crate::client::{ClusterClient, Link};
use atomio_layout::ServerId;
use atomio_lock::LockServer;
use atomio_proto::WireError;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use tokio::sync::mpsc;

pub struct EmbeddedCluster {
    servers: Vec<ServerHandle>,
}

impl EmbeddedCluster {
    /// Starts `n` lock servers on the current tokio runtime.
    pub fn start(n: u32) -> Self {
        let servers = (0..n)
            .map(|i| actor::spawn(LockServer::with_id(ServerId(i))))
            .collect();
        Self { servers }
    }

    pub fn servers(&self) -> usize {
        self.servers.len()
    }

    /// A new client session with every server.
    pub async fn connect(&self) -> Result<ClusterClient, WireError> {
        let (tx, rx) = mpsc::unbounded_channel::<ClientEvent>();
        let mut links = Vec::with_capacity(self.servers.len());
        for (i, s) in self.servers.iter().enumerate() {
            let client = s.new_client_id();
            s.send(Event::Connected {
                client,
                sink: ReplySink::InProcess(tx.clone(), ServerId(i as u32)),
                queued: Arc::new(AtomicUsize::new(0)),
            })
            .await?;
            links.push(Link::InProcess {
                client,
                inbox: s.sender(),
            });
        }
        Ok(ClusterClient::new(links, rx))
    }
}
