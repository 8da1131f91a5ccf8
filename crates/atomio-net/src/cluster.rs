//! Cluster files and local server processes.
//!
//! A cluster file names the servers in order (server `i` is the `i`-th entry):
//!
//! ```toml
//! [[server]]
//! address = "10.0.0.1:7070"
//! [[server]]
//! address = "10.0.0.2:7070"
//! ```

use atomio_proto::{ErrorCode, WireError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The line a server prints once it is accepting connections.
pub const LISTENING_PREFIX: &str = "atomio server listening on ";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerEntry {
    pub address: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    #[serde(rename = "server", default)]
    pub servers: Vec<ServerEntry>,
}

impl ClusterConfig {
    pub fn load(path: &Path) -> Result<Self, WireError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            WireError::new(
                ErrorCode::NotFound,
                format!("cannot read cluster file {}: {e}", path.display()),
            )
        })?;
        let cfg: ClusterConfig = toml::from_str(&text).map_err(|e| {
            WireError::new(
                ErrorCode::InvalidArgument,
                format!("cluster file {}: {e}", path.display()),
            )
        })?;
        if cfg.servers.is_empty() {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("cluster file {} names no server", path.display()),
            ));
        }
        Ok(cfg)
    }

    pub fn addresses(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.address.clone()).collect()
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a cluster config always serializes")
    }
}

/// Server processes started on this machine (killed when dropped).
pub struct LocalServers {
    children: Vec<Child>,
    pub addresses: Vec<String>,
    /// How they were started (for `restart`).
    exe: std::path::PathBuf,
    dirs: Vec<std::path::PathBuf>,
    extra: Vec<String>,
}

impl LocalServers {
    /// Starts `n` `atomio server` processes from `exe` on loopback ephemeral ports, each
    /// with its own data directory under `data_root`, and waits until all listen.
    pub async fn start(exe: &Path, n: u32, data_root: &Path) -> Result<Self, WireError> {
        Self::start_with(exe, n, data_root, &[]).await
    }

    /// `start`, with `extra` arguments for every `atomio server` (e.g. `--lease-ms`).
    pub async fn start_with(
        exe: &Path,
        n: u32,
        data_root: &Path,
        extra: &[&str],
    ) -> Result<Self, WireError> {
        let mut servers = Self {
            children: Vec::new(),
            addresses: Vec::new(),
            exe: exe.to_path_buf(),
            dirs: Vec::new(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        for i in 0..n {
            let dir = data_root.join(format!("server-{i}"));
            std::fs::create_dir_all(&dir).map_err(|e| {
                WireError::new(
                    ErrorCode::Io,
                    format!("cannot create {}: {e}", dir.display()),
                )
            })?;
            // A fresh cluster for a test or benchmark run: whatever ran on this directory
            // before was ours and its clients are gone, so no restart grace is owed (a
            // benchmark starts a cluster per run on the same scratch directory).
            let _ = std::fs::remove_file(dir.join(crate::grace::ALIVE_FILE));
            let (child, addr) = servers.spawn(i, &dir, "127.0.0.1:0").await?;
            servers.children.push(child);
            servers.addresses.push(addr);
            servers.dirs.push(dir);
        }
        Ok(servers)
    }

    /// Starts server `i` on `dir`, listening on `listen`; returns it and its address.
    async fn spawn(&self, i: u32, dir: &Path, listen: &str) -> Result<(Child, String), WireError> {
        let mut child = Command::new(&self.exe)
            .args([
                "server",
                "--listen",
                listen,
                "--id",
                &i.to_string(),
                "--data",
            ])
            .arg(dir)
            .args(&self.extra)
            // Servers started for a benchmark or a test log at the caller's level (warn by
            // default), not at a standalone server's info, beside the caller's output.
            .env(
                "ATOMIO_LOG",
                std::env::var("ATOMIO_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                WireError::new(
                    ErrorCode::Io,
                    format!("cannot start {}: {e}", self.exe.display()),
                )
            })?;
        let stdout = child.stdout.take().expect("piped");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .map_err(|_| {
                WireError::new(
                    ErrorCode::Timeout,
                    format!("server {i} did not start in 20 s"),
                )
            })?
            .map_err(|e| WireError::new(ErrorCode::Io, format!("server {i}: {e}")))?
            .ok_or_else(|| {
                WireError::new(
                    ErrorCode::Disconnected,
                    format!("server {i} exited at start"),
                )
            })?;
        let addr = line
            .strip_prefix(LISTENING_PREFIX)
            .ok_or_else(|| WireError::new(ErrorCode::Internal, format!("server {i} said: {line}")))?
            .trim()
            .to_string();
        // Keep draining its stdout so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok((child, addr))
    }

    /// Starts server `i` again on its address and data directory (killed first if it
    /// runs): what a restarted server does, e.g. its grace period, faces its old clients.
    pub async fn restart(&mut self, i: usize) -> Result<(), WireError> {
        self.kill(i).await;
        let (dir, addr) = (self.dirs[i].clone(), self.addresses[i].clone());
        let (child, _) = self.spawn(i as u32, &dir, &addr).await?;
        self.children[i] = child;
        Ok(())
    }

    /// The servers' process ids, in order (e.g. to read their CPU time); `None` for one
    /// that already exited.
    pub fn pids(&self) -> Vec<Option<u32>> {
        self.children.iter().map(|c| c.id()).collect()
    }

    /// Kills server `i` (to test clients facing a vanished server).
    pub async fn kill(&mut self, i: usize) {
        if let Some(c) = self.children.get_mut(i) {
            let _ = c.kill().await;
        }
    }

    pub async fn stop(mut self) {
        for c in &mut self.children {
            let _ = c.kill().await;
        }
    }
}
