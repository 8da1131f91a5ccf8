//! `atomio export`, `versions`, `gc` and `materialize`: a cluster file's bytes and its
//! snapshots.

use anyhow::{bail, Context};
use atomio_net::{ClusterClient, ClusterConfig};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct ExportArgs {
    /// The cluster holding the file.
    #[arg(long)]
    cluster: PathBuf,
    /// The file's path on the cluster.
    path: String,
    /// Where to write its logical bytes as one ordinary file.
    out: PathBuf,
    /// A snapshot of a file written with strategy `versioning` (see `atomio versions`).
    #[arg(long)]
    version: Option<u64>,
}

pub fn export(a: ExportArgs) -> anyhow::Result<()> {
    if let Some(v) = a.version {
        return export_version(&a, v);
    }
    let addrs = ClusterConfig::load(&a.cluster)?.addresses();
    let read = runtime()?.block_on(async {
        let mut c = ClusterClient::connect_tcp(&addrs).await?;
        let f = c.open(&a.path).await?;
        // A versioned file's bytes are its snapshots (its base alone is empty or old).
        if let Some(v) = newest_snapshot(&mut c, &f).await? {
            return Ok::<_, anyhow::Error>(Err(v));
        }
        Ok(Ok(c.read_all(&f).await?))
    })?;
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(newest) => return export_version(&a, newest),
    };
    std::fs::write(&a.out, &bytes).with_context(|| format!("writing {}", a.out.display()))?;
    println!("{}: {} bytes from {}", a.out.display(), bytes.len(), a.path);
    Ok(())
}

/// The newest published snapshot of a file written with strategy `versioning` (`None`: the
/// file has no versions, so its objects hold its bytes). Asks without making versions for
/// a file that has none; a versioned file with nothing published is refused with the reason.
async fn newest_snapshot(
    c: &mut ClusterClient,
    f: &atomio_net::FileInfo,
) -> anyhow::Result<Option<u64>> {
    use atomio_client::versioned::VersionedFile;
    let mut vf = match VersionedFile::open(c, f.id(), &f.meta.path, None).await {
        Err(e) if e.code == atomio_proto::ErrorCode::NotFound => return Ok(None),
        r => r?,
    };
    let list = vf.list(c).await?;
    let published = list
        .iter()
        .filter(|r| r.state == atomio_version::VersionState::Published)
        .map(|r| r.version)
        .max();
    match published {
        Some(v) => Ok(Some(v)),
        None => bail!(
            "{} is written with strategy versioning but has no published snapshot yet \
             ({} versions: {:?}); nothing to export",
            f.meta.path,
            list.len(),
            list.iter()
                .map(|r| (r.version, r.state))
                .collect::<Vec<_>>()
        ),
    }
}

/// Which versioned file: a file on the cluster, or the user's own file (direct placement,
/// named on the servers by its canonical path).
#[derive(Args)]
pub struct VersionedTarget {
    /// The cluster holding the file's versions.
    #[arg(long)]
    cluster: PathBuf,
    /// The file: its path on the cluster, or (with `--direct`) the ordinary file.
    path: String,
    /// `path` is an ordinary file written in direct placement (its snapshots' base).
    #[arg(long)]
    direct: bool,
}

impl VersionedTarget {
    async fn open(&self) -> anyhow::Result<(ClusterClient, atomio_client::File)> {
        let addrs = ClusterConfig::load(&self.cluster)?.addresses();
        let mut c = ClusterClient::connect_tcp(&addrs).await?;
        let mut f = match self.direct {
            true => atomio_client::File::direct(atomio_client::DirectData::open_mode(
                std::path::Path::new(&self.path),
                false,
                true,
            )?),
            false => atomio_client::File::open(&mut c, &self.path).await?,
        };
        f.set_atomic(Some(atomio_client::Strategy::versioning()))?;
        Ok((c, f))
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

#[derive(Args)]
pub struct VersionsArgs {
    #[command(flatten)]
    target: VersionedTarget,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `atomio versions`: every snapshot of a versioned file.
pub fn versions(a: VersionsArgs) -> anyhow::Result<()> {
    let list = runtime()?.block_on(async {
        let (mut c, mut f) = a.target.open().await?;
        Ok::<_, anyhow::Error>(f.list_versions(&mut c).await?)
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    println!(
        "{:>8}  {:<24}  {:>6}  {:>14}  {:>14}  state",
        "version", "time (UTC)", "writer", "bytes", "size"
    );
    for r in &list {
        println!(
            "{:>8}  {:<24}  {:>6}  {:>14}  {:>14}  {:?}",
            r.version,
            utc(r.time_ms),
            r.writer,
            r.bytes,
            r.size,
            r.state
        );
    }
    Ok(())
}

/// Unix milliseconds as `YYYY-MM-DD hh:mm:ss.mmm`.
fn utc(ms: u64) -> String {
    let (s, ms) = (ms / 1000, ms % 1000);
    let (days, rem) = (s / 86_400, s % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{ms:03}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn export_version(a: &ExportArgs, version: u64) -> anyhow::Result<()> {
    let target = VersionedTarget {
        cluster: a.cluster.clone(),
        path: a.path.clone(),
        direct: false,
    };
    let out_path = a.out.clone();
    let bytes = runtime()?.block_on(async {
        let (mut c, mut f) = target.open().await?;
        let list = f.list_versions(&mut c).await?;
        let rec = list
            .iter()
            .find(|r| r.version == version)
            .with_context(|| format!("{} has no version {version}", target.path))?;
        let mut out = vec![0u8; rec.size as usize];
        if rec.size > 0 {
            let all =
                atomio_layout::Access::contiguous(atomio_layout::ByteRange::new(0, rec.size)?)?;
            f.read_snapshot(&mut c, Some(version), &all, &mut out, true)
                .await?;
        }
        Ok::<_, anyhow::Error>(out)
    })?;
    std::fs::write(&out_path, &bytes).with_context(|| format!("writing {}", out_path.display()))?;
    println!(
        "{}: {} bytes of {} as of version {version}",
        out_path.display(),
        bytes.len(),
        a.path
    );
    Ok(())
}

#[derive(Args)]
pub struct GcArgs {
    #[command(flatten)]
    target: VersionedTarget,
    /// Keep the newest this many snapshots (at least 1).
    #[arg(long, default_value_t = 4)]
    keep: u64,
    /// Also keep every snapshot made less than this many seconds ago.
    #[arg(long)]
    newer_than_secs: Option<u64>,
}

/// `atomio gc`: frees the snapshots a versioned file no longer keeps.
pub fn gc(a: GcArgs) -> anyhow::Result<()> {
    let newer_than_ms = a.newer_than_secs.map(|s| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        now.saturating_sub(s * 1000)
    });
    let r = runtime()?.block_on(async {
        let (mut c, mut f) = a.target.open().await?;
        Ok::<_, anyhow::Error>(f.collect_versions(&mut c, a.keep, newer_than_ms).await?)
    })?;
    println!(
        "kept versions from {}; collected {} snapshots ({:?}); freed {} tree nodes and {} chunk bytes",
        r.kept_from,
        r.collected.len(),
        r.collected,
        r.nodes_freed,
        r.bytes_punched
    );
    Ok(())
}

#[derive(Args)]
pub struct MaterializeArgs {
    #[command(flatten)]
    target: VersionedTarget,
}

/// `atomio materialize`: writes the newest snapshot into the file's base (the user's file
/// with `--direct`): what the MPI library's rank 0 does at close, again by hand (after a
/// crash mid-way, or to read the file without atomio before the job closes it).
pub fn materialize(a: MaterializeArgs) -> anyhow::Result<()> {
    let path = a.target.path.clone();
    let size = runtime()?.block_on(async {
        let (mut c, mut f) = a.target.open().await?;
        f.materialize(&mut c).await?;
        Ok::<_, anyhow::Error>(f.size(Some(&mut c)).await?)
    })?;
    println!("{path}: the newest snapshot is in the file ({size} bytes)");
    Ok(())
}
