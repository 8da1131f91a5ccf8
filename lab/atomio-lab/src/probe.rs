//! `atomio-lab probe-hold` (hidden): a client that takes a write lock, writes under it, and
//! holds it until told to go on — the subject of the fault probes (`tests/faults.rs`): the
//! probe pauses it (`SIGSTOP`) or kills it while it holds, and checks that waiters get the
//! lock within the lease and that its later writes are refused.
//!
//! Protocol on stdio: prints `HOLDING` once the lock is held and its bytes (`A`) are
//! written; then waits for a line on stdin; then tries to write `C` over the same bytes
//! and prints `WRITE ok` or `WRITE <error>`, and `LEASE ok` or `LEASE <error>` (the
//! client's own view of its lease).
//!
//! `atomio-lab probe-write` (hidden): overwrites `[offset, offset + len)` of a cluster file
//! `rounds` times with the strategy given, write `k` filling it with byte `k`; prints
//! `WROTE k` after each write returns, or `FAILED k <error>` (and goes on). The
//! all-or-nothing probes kill it — or a server — in the middle of a write and check that
//! the range then holds one write's bytes, never a mix.

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

#[derive(Args)]
pub struct ProbeWriteArgs {
    /// Server addresses, comma-separated (server i of the cluster first).
    #[arg(long, value_delimiter = ',', required = true)]
    servers: Vec<String>,
    /// The cluster file to create (or open).
    #[arg(long)]
    path: String,
    /// Bytes to write each time, from offset 0.
    #[arg(long)]
    len: u64,
    /// Writes to make.
    #[arg(long, default_value_t = 1000)]
    rounds: u32,
    /// The atomicity strategy (`none`: plain writes, the negative control).
    #[arg(long, default_value = "ching:datatype:one-try")]
    strategy: String,
    /// Strip size of a new file.
    #[arg(long, default_value_t = 64 << 10)]
    stripe: u64,
}

pub fn run_writes(a: ProbeWriteArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut c = ClusterClient::connect_tcp(&a.servers).await?;
        let n = c.servers() as u32;
        let info = c.create(&a.path, a.stripe, n, false).await?;
        let mut f = atomio_client::File::from_info(info);
        let strategy: atomio_client::Strategy =
            a.strategy.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        f.set_atomic(Some(strategy))?;
        let access = Access::contiguous(ByteRange::new(0, a.len).context("the range")?)?;
        let mut data = vec![0u8; a.len as usize];
        for k in 1..=a.rounds {
            data.fill(k as u8);
            match f.write(&mut c, &access, &data).await {
                Ok(()) => println!("WROTE {k}"),
                Err(e) => println!("FAILED {k} {e}"),
            }
            std::io::stdout().flush()?;
        }
        anyhow::Ok(())
    })
}
