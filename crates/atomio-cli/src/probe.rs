//! `atomio probe-hold` (hidden): a client that takes a write lock, writes under it, and
//! holds it until told to go on — the subject of the fault probes (`tests/faults.rs`): the
//! probe pauses it (`SIGSTOP`) or kills it while it holds, and checks that waiters get the
//! lock within the lease and that its later writes are refused.
//!
//! Protocol on stdio: prints `HOLDING` once the lock is held and its bytes (`A`) are
//! written; then waits for a line on stdin; then tries to write `C` over the same bytes
//! and prints `WRITE ok` or `WRITE <error>`, and `LEASE ok` or `LEASE <error>` (the
//! client's own view of its lease).

use anyhow::Context;
use atomio_layout::{Access, ByteRange};
use atomio_lock::{Method, Protocol};
use atomio_net::ClusterClient;
use atomio_proto::LockMode;
use clap::Args;
use std::io::{BufRead, Write};

#[derive(Args)]
pub struct ProbeHoldArgs {
    /// Server addresses, comma-separated (server i of the cluster first).
    #[arg(long, value_delimiter = ',', required = true)]
    servers: Vec<String>,
    /// The cluster file to create (or open) and lock.
    #[arg(long)]
    path: String,
    /// First byte to lock.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Bytes to lock.
    #[arg(long)]
    len: u64,
}

pub fn run(a: ProbeHoldArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut c = ClusterClient::connect_tcp(&a.servers).await?;
        let n = c.servers() as u32;
        let f = c.create(&a.path, 64 << 10, n, false).await?;
        let range = ByteRange::new(a.offset, a.offset.saturating_add(a.len))
            .context("the range to lock")?;
        let access = Access::contiguous(range)?;
        let held = c
            .lock(
                f.id(),
                LockMode::Write,
                &access,
                &f.layout,
                Method::List {
                    max_ranges: atomio_lock::DEFAULT_LIST_RANGES,
                },
                Protocol::TwoPhase,
            )
            .await?;
        c.write(&f, &access, &vec![b'A'; a.len as usize]).await?;
        println!("HOLDING");
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        let wrote = c.write(&f, &access, &vec![b'C'; a.len as usize]).await;
        println!(
            "WRITE {}",
            wrote.map_or_else(|e| e.to_string(), |()| "ok".into())
        );
        let lease = c.check_lease();
        println!(
            "LEASE {}",
            lease.map_or_else(|e| e.to_string(), |()| "ok".into())
        );
        let _ = c.unlock(held).await;
        anyhow::Ok(())
    })
}
