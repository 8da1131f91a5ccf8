//! `atomio-lab demo --sharedfs`: the demo's story on a file system with several clients (the
//! GlusterFS bed of `scripts/sharedfs`, which it brings up and tears down; root). Four ranks
//! of an unmodified MPI program (`mpi/bench/strided_io`) write interleaved 384-byte blocks,
//! ranks 0 and 2 through one client, 1 and 3 through another, timed until the bytes are in
//! the file for every client (`MPI_File_sync`), and every file is read back through a third
//! client that no rank wrote through: MPICH's atomic mode (its verdict printed: corrupt is a
//! result), MPICH with data sieving off (its correct mode there), atomio's default (`auto`),
//! and the `contiguous` row (each rank's bytes written contiguously through its own client).

use crate::bench_mpi::{chart, measure, report, resolve_lib, sharedfs_bed};
use anyhow::{anyhow, Context};
use atomio_bench::mpi_bench::{Baseline, Flavor, MpiBenchConfig, Program, StridedGeometry};
use std::path::Path;
use std::process::Command;

/// The bed, up for as long as this lives.
struct Bed {
    script: std::path::PathBuf,
}

impl Bed {
    fn up() -> anyhow::Result<Self> {
        let bench = atomio_bench::mpi_run::find_dir("bench", None).map_err(|e| anyhow!("{e}"))?;
        let script = std::fs::canonicalize(bench.join("../../scripts/sharedfs"))
            .context("scripts/sharedfs not found beside mpi/bench")?;
        println!("bringing up the shared file system bed (scripts/sharedfs up 2: GlusterFS, two clients and a check client)");
        let out = Command::new(&script).args(["up", "2"]).output()?;
        anyhow::ensure!(
            out.status.success(),
            "scripts/sharedfs up 2 failed (needs root, glusterfs-server and fuse3: scripts/setup):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(Self { script })
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = Command::new(&self.script).arg("down").output();
    }
}

pub fn run(runs: usize, chart_path: &Path, progress: bool) -> anyhow::Result<()> {
    let bed = Bed::up()?;
    let (launcher, shared, check) = sharedfs_bed(None)?;
    let lib = resolve_lib("auto", Flavor::Mpich)?;
    let mut reports = Vec::new();
    for collective in [false, true] {
        let cfg = MpiBenchConfig {
            mpiexec: Some(launcher.clone()),
            program: Program::Strided(StridedGeometry {
                block: 384,
                per_rank: 8 << 20,
                calls: 16,
                read: false,
            }),
            collective,
            reps: runs.max(1) as u32,
            dir: shared.clone(),
            reference_rows: !collective,
            baselines: vec![
                Baseline {
                    atomic: true,
                    no_sieving: false,
                },
                Baseline {
                    atomic: true,
                    no_sieving: true,
                },
            ],
            strategies: vec!["auto".into()],
            mpiio_lib: lib.clone(),
            extra: vec!["--sync".into()],
            verify_dir: Some(check.clone()),
            ..MpiBenchConfig::default()
        };
        let rep = measure(&cfg, progress)?;
        println!();
        print!("{}", report(&rep));
        reports.push(rep);
    }
    println!();
    println!(
        "why: on a file system whose clients cache privately, ROMIO's atomic mode locks each \
         call's extent and rewrites the holes between its pieces from this client's cached \
         pages, which another client has since overwritten (its verdict above); without data \
         sieving it is correct but sends every 384-byte piece as its own request. atomio's \
         auto sees private caches and ranks on two clients, forwards the pieces through its \
         servers under byte-range locks, and at sync each rank writes its own 1 MiB-aligned \
         domain of the file: large requests, and no page written by two clients."
    );
    chart(chart_path, &reports.iter().collect::<Vec<_>>())?;
    println!("chart: {}", chart_path.display());
    drop(bed);
    let wrong: Vec<String> = reports
        .iter()
        .flat_map(|r| r.rows.iter())
        .filter(|r| r.kind == "atomio" && r.verified != "atomic")
        .map(|r| r.config.clone())
        .collect();
    if !wrong.is_empty() {
        return Err(anyhow!(
            "not atomic through another client: {}",
            wrong.join(", ")
        ));
    }
    Ok(())
}
