//! `atomio stats`: what running servers hold — lock table, waiters, leases, queues — as a
//! table (one column per server), optionally JSON, optionally repeated.

use crate::output::write_json;
use atomio_layout::ServerId;
use atomio_net::ClusterClient;
use atomio_proto::{Reply, Request, ServerReport};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args)]
pub struct StatsArgs {
    /// Server addresses, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    servers: Vec<String>,
    /// Ask again every this many seconds (until interrupted).
    #[arg(long)]
    watch: Option<f64>,
    /// Also write the reports as JSON (the last one, with `--watch`).
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A row of the table: its label and the field it shows.
type Row = (&'static str, fn(&ServerReport) -> u64);

const ROWS: &[Row] = &[
    ("connections", |r| r.connections),
    ("clients with locks", |r| r.lock_clients),
    ("files locked", |r| r.files),
    ("open lock requests", |r| r.open_requests),
    ("  waiting", |r| r.waiting),
    ("lock index entries", |r| r.index_entries),
    ("lease ms (0 = none)", |r| r.lease_ms),
    ("leases lapsed", |r| r.leases_lapsed),
    ("fencing pending", |r| r.fencing_pending),
    ("lock actor queue", |r| r.lock_queue),
    ("data actor queue", |r| r.data_queue),
    ("replies queued", |r| r.replies_queued),
    ("requests opened", |r| r.requests_opened),
    ("ranges granted", |r| r.ranges_granted),
    ("releases", |r| r.releases),
    ("acquires that waited", |r| r.waits),
    ("changes admitted", |r| r.changes_admitted),
    ("changes refused (locked)", |r| r.changes_refused),
];

pub fn run(a: StatsArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut c = ClusterClient::connect_tcp(&a.servers).await?;
        loop {
            let calls = (0..c.servers() as u32)
                .map(|s| (ServerId(s), Request::Stats))
                .collect();
            let reports: Vec<ServerReport> = c
                .rpc_all(calls)
                .await?
                .into_iter()
                .map(|r| match r {
                    Reply::Stats(s) => Ok(s),
                    other => Err(anyhow::anyhow!("unexpected answer to Stats: {other:?}")),
                })
                .collect::<anyhow::Result<_>>()?;
            print_table(&a.servers, &reports);
            if let Some(path) = &a.json {
                let named: Vec<_> = a.servers.iter().zip(&reports).collect();
                write_json(path, &named)?;
            }
            match a.watch {
                Some(secs) => tokio::time::sleep(Duration::from_secs_f64(secs.max(0.1))).await,
                None => return Ok(()),
            }
        }
    })
}

fn print_table(servers: &[String], reports: &[ServerReport]) {
    let width = servers.iter().map(String::len).max().unwrap_or(0).max(10);
    print!("{:<22}", "");
    for s in servers {
        print!(" {s:>width$}");
    }
    println!();
    for (label, field) in ROWS {
        print!("{label:<22}");
        for r in reports {
            print!(" {:>width$}", field(r));
        }
        println!();
    }
}
