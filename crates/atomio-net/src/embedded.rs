//! An embedded cluster: lock servers as actors in this process, reached through in-process
//! links (no sockets, no encoding). The default for the CLI's main job and for tests.

use crate::actor::ServerHandle;
use crate::client::ClusterClient;
use crate::service::spawn_node;
use atomio_data::{FileStore, MemStore};
use atomio_layout::ServerId;
use atomio_lock::LockServer;
use atomio_proto::{ErrorCode, WireError};
use std::path::Path;

pub struct EmbeddedCluster {
    servers: Vec<ServerHandle>,
}

impl EmbeddedCluster {
    /// Starts `n` servers (locks + in-memory data) on the current tokio runtime.
    pub fn start(n: u32) -> Self {
        let servers = (0..n)
            .map(|i| {
                spawn_node(LockServer::with_id(ServerId(i)), MemStore::new())
                    .expect("starting a data thread")
            })
            .collect();
        Self { servers }
    }

    /// Starts `n` servers keeping data in local files under `dir/server-<i>`.
    pub fn start_on_disk(n: u32, dir: &Path) -> Result<Self, WireError> {
        let mut servers = Vec::new();
        for i in 0..n {
            let store = FileStore::open(&dir.join(format!("server-{i}"))).map_err(|e| {
                WireError::new(
                    ErrorCode::Io,
                    format!("opening the data directory under {}: {e}", dir.display()),
                )
            })?;
            servers.push(
                spawn_node(LockServer::with_id(ServerId(i)), store)
                    .map_err(|e| WireError::new(ErrorCode::Io, format!("data thread: {e}")))?,
            );
        }
        Ok(Self { servers })
    }

    /// Also serves every server over TCP on loopback (ephemeral ports), so other processes
    /// on this machine can use the embedded cluster. Returns the addresses in server order.
    pub async fn serve_tcp(&self) -> Result<Vec<String>, WireError> {
        let mut addrs = Vec::new();
        for s in &self.servers {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| WireError::new(ErrorCode::Io, format!("binding loopback: {e}")))?;
            let addr = listener
                .local_addr()
                .map_err(|e| WireError::new(ErrorCode::Io, e.to_string()))?;
            addrs.push(addr.to_string());
            // Loopback only: no token.
            tokio::spawn(crate::tcp::serve(listener, s.clone(), None, None, None));
        }
        Ok(addrs)
    }

    pub fn servers(&self) -> usize {
        self.servers.len()
    }

    /// A new client session with every server.
    pub async fn connect(&self) -> Result<ClusterClient, WireError> {
        ClusterClient::connect_in_process(&self.servers).await
    }
}
