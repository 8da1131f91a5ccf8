//! Drivers that move atomio's messages: the server actor that owns a sans-IO service, the
//! TCP and in-process transports, and the cluster client that runs lock operations.

pub mod actor;
pub mod client;
pub mod cluster;
pub mod data_op;
pub mod embedded;
pub mod files;
mod frame_reader;
pub mod machine;
mod reply_budget;
pub mod service;
pub mod tcp;

pub use client::{ClusterClient, HeldLock, DEFAULT_TIMEOUT};
pub use cluster::{ClusterConfig, LocalServers, ServerEntry, LISTENING_PREFIX};
pub use data_op::DataOp;
pub use embedded::EmbeddedCluster;
pub use files::FileInfo;
pub use machine::{Machine, Progress};
pub use service::{spawn_node, Service};

use atomio_data::FileStore;
use atomio_layout::ServerId;
use atomio_lock::LockServer;

/// Runs a TCP server (locks + data in `data_dir`) on `listener` until it fails.
pub async fn run_tcp_server(
    listener: tokio::net::TcpListener,
    id: Option<ServerId>,
    data_dir: &std::path::Path,
) -> std::io::Result<()> {
    let locks = match id {
        Some(id) => LockServer::with_id(id),
        None => LockServer::new(),
    };
    tcp::serve(listener, spawn_node(locks, FileStore::open(data_dir)?)?).await
}
