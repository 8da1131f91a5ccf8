//! `atomio export` and `atomio verify`.

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
}

pub fn export(a: ExportArgs) -> anyhow::Result<()> {
    let addrs = ClusterConfig::load(&a.cluster)?.addresses();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bytes = rt.block_on(async {
        let mut c = ClusterClient::connect_tcp(&addrs).await?;
        let f = c.open(&a.path).await?;
        let out = c.read_all(&f).await?;
        Ok::<_, atomio_proto::WireError>(out)
    })?;
    std::fs::write(&a.out, &bytes).with_context(|| format!("writing {}", a.out.display()))?;
    println!("{}: {} bytes from {}", a.out.display(), bytes.len(), a.path);
    Ok(())
}

#[derive(Args)]
pub struct VerifyArgs {
    /// The file to check (a flat file, e.g. from `atomio export` or `bench --keep`).
    file: PathBuf,
    /// Its manifest (default FILE.atomio.json).
    #[arg(long)]
    manifest: Option<PathBuf>,
}

pub fn verify(a: VerifyArgs) -> anyhow::Result<()> {
    let manifest = a
        .manifest
        .unwrap_or_else(|| atomio_verify::manifest_path_for(&a.file));
    let report = atomio_verify::verify_manifest(&manifest)
        .with_context(|| format!("checking {} with {}", a.file.display(), manifest.display()))?;
    println!("{report}");
    if !report.ok() {
        bail!("{} is not atomic", a.file.display());
    }
    Ok(())
}
