//! Drivers that move atomio's messages: the server actor that owns a sans-IO service, the
//! TCP and in-process transports, and the cluster client that runs lock operations.

pub mod actor;
pub mod auth;
pub mod client;
pub mod cluster;
pub mod data_op;
pub mod embedded;
pub mod files;
mod frame_reader;
pub mod grace;
pub mod lease_keeper;
pub mod machine;
pub mod patience;
pub mod relay;
mod reply_budget;
pub mod service;
pub mod tcp;
pub mod tls;

pub use actor::ClientEvent;
pub use client::{ClusterClient, HeldLock, Servers, DEFAULT_TIMEOUT};
pub use cluster::{ClusterConfig, LocalServers, ServerEntry, LISTENING_PREFIX};
pub use data_op::DataOp;
pub use embedded::EmbeddedCluster;
pub use files::FileInfo;
pub use machine::{Machine, Progress};
pub use service::{spawn_node, Service};

use atomio_data::FileStore;
use atomio_layout::ServerId;
use atomio_lock::{LeaseConfig, LockServer};

/// A key no other process can guess (std's per-process random SipHash keys).
fn random_key() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

/// The lease a TCP server keeps by default: `ATOMIO_LEASE_MS` if set (0: no leases),
/// else `LeaseConfig::DEFAULT_MS`.
pub fn lease_ms_from_env() -> Result<Option<u64>, String> {
    match std::env::var("ATOMIO_LEASE_MS") {
        Err(_) => Ok(Some(LeaseConfig::DEFAULT_MS)),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(ms) => Ok(Some(ms)),
            Err(_) => Err(format!(
                "ATOMIO_LEASE_MS={v:?}: expected milliseconds (0 turns leases off)"
            )),
        },
    }
}

/// Runs a TCP server (locks + data in `data_dir`) on `listener` until it fails; locks are
/// held under leases of `lease_ms` (`None`: until the client disconnects).
pub async fn run_tcp_server(
    listener: tokio::net::TcpListener,
    id: Option<ServerId>,
    data_dir: &std::path::Path,
    lease_ms: Option<u64>,
    token: Option<auth::Token>,
    tls: Option<tls::TlsAcceptor>,
) -> std::io::Result<()> {
    let mut locks = match id {
        Some(id) => LockServer::with_id(id),
        None => LockServer::new(),
    };
    if let Some(ms) = lease_ms {
        locks = locks.with_leases(LeaseConfig {
            duration_ms: ms,
            key: random_key(),
        });
    }
    let node = spawn_node(locks, FileStore::open(data_dir)?)?;
    let grace = grace::grace_period(data_dir, lease_ms);
    if let Some(g) = grace {
        tracing::info!(
            "the previous server on {} was alive less than a lease ago: its clients may still \
             act on its locks, so this one serves nothing for {g:?} (grace period)",
            data_dir.display()
        );
    }
    let _alive = grace::keep_alive(data_dir, lease_ms).map(AbortOnDrop);
    let serve_from = grace.map(|g| tokio::time::Instant::now() + g);
    tcp::serve(listener, node, token, serve_from, tls).await
}

/// Stops a background task when dropped (the server's liveness mark ends with it).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
