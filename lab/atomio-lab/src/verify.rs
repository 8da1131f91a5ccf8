//! `atomio-lab verify FILE`: decides from a file's bytes and its manifest (written by a
//! benchmark run with `--keep`) whether its writes were atomic, with the lab's verifier.

use anyhow::{bail, Context};
use clap::Args;
use std::path::PathBuf;

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
