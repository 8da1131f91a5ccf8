//! `atomio server`: one server process (locks + data under `--data`), single-threaded (the
//! state machines are serial anyway; one thread avoids cross-core hand-offs per message).

use anyhow::{bail, Context};
use atomio_layout::ServerId;
use atomio_net::{ClusterConfig, LISTENING_PREFIX};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ServerArgs {
    /// Address to listen on. Loopback unless you say otherwise; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: String,
    /// Directory for this server's data (created if missing).
    #[arg(long)]
    data: PathBuf,
    /// This server's index in the cluster (then it rejects requests addressed to others).
    #[arg(long)]
    id: Option<u32>,
    /// A cluster file; with --id, the listen address is taken from it.
    #[arg(long, requires = "id")]
    cluster: Option<PathBuf>,
    /// A client silent this long (no heartbeat) while holding locks loses them and is
    /// fenced: its later writes are refused. 0 turns leases off (locks then end only when
    /// the connection closes). Default: `ATOMIO_LEASE_MS`, else 5000.
    #[arg(long)]
    lease_ms: Option<u64>,
    /// A file whose first line is the shared secret clients must prove (challenge-response,
    /// the secret never crosses the network). Required to listen beyond loopback. Default:
    /// `ATOMIO_TOKEN`, else `ATOMIO_TOKEN_FILE`. Clients read the same variables.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Speak TLS with this certificate chain (PEM; with --tls-key), for networks with
    /// eavesdroppers: plain clients are refused; clients trust it through `ATOMIO_TLS_CA`.
    /// Default: `ATOMIO_TLS_CERT` and `ATOMIO_TLS_KEY`.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

pub fn run(a: ServerArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&a.data).with_context(|| format!("creating {}", a.data.display()))?;
    let listen = match (&a.cluster, a.id) {
        (Some(path), Some(id)) => {
            let cfg = ClusterConfig::load(path)?;
            match cfg.servers.get(id as usize) {
                Some(s) => s.address.clone(),
                None => bail!(
                    "{} names {} servers; there is no server {id}",
                    path.display(),
                    cfg.servers.len()
                ),
            }
        }
        _ => a.listen.clone(),
    };
    let lease_ms = match a.lease_ms {
        Some(0) => None,
        Some(ms) => Some(ms),
        None => atomio_net::lease_ms_from_env().map_err(anyhow::Error::msg)?,
    };
    let token = match &a.token_file {
        Some(p) => Some(atomio_net::auth::Token::from_file(p)?),
        None => atomio_net::auth::Token::from_env()?,
    };
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => Some(atomio_net::tls::server(c, k)?),
        _ => atomio_net::tls::server_from_env()?,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("binding {listen}"))?;
        let addr = listener.local_addr()?;
        atomio_net::auth::check_listen(addr, token.as_ref())?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{LISTENING_PREFIX}{addr}")?;
            out.flush()?;
        }
        tokio::select! {
            r = atomio_net::run_tcp_server(listener, a.id.map(ServerId), &a.data, lease_ms, token, tls) => r.context("server failed"),
            _ = shutdown_signal() => Ok(()),
        }
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
