//! The workload catalogue: the `Workload` enum (also a clap subcommand), named presets for
//! the CLI, and the `plan` entry point.
//!
//! **Invariants:** every parameter has a default, and `Default` of each params struct is
//! exactly what the CLI gives with no flags (both come from the clap definitions); every
//! name in [`WORKLOADS`] parses with [`Workload::from_name`] and no extra arguments.

use crate::error::WorkloadError;
use crate::flash::FlashParams;
use crate::ior::{IorMode, IorParams};
use crate::plan::WorkloadPlan;
use crate::regions::RegionsParams;
use crate::row::RowParams;
use crate::s3asim::S3asimParams;
use crate::s3d::S3dParams;
use crate::tile::TileParams;
use crate::vpic::VpicParams;
use serde::{Deserialize, Serialize};

/// A workload with its parameters. As a clap subcommand its names are those of
/// [`Workload::name`]; serialized it is `{"workload": name, "params": {…}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, clap::Subcommand)]
#[serde(tag = "workload", content = "params", rename_all = "kebab-case")]
pub enum Workload {
    /// IOR N-1 segmented: each client's transfers contiguous per segment (seqdlm §V-C).
    IorSegmented(IorParams),
    /// IOR N-1 strided: clients' transfers interleaved one by one (seqdlm §V-C; IO500 ior-hard).
    IorStrided(IorParams),
    /// mpi-tile-io: overlapping 2-D tiles, one subarray write per client (Tran §6.5, seqdlm §V-D).
    Tile(TileParams),
    /// A row of subdomains, each overlapping its neighbours by 1/8 (Tran §6.4).
    Row(RowParams),
    /// S3D checkpoint: four arrays of doubles, block-block-block partition (Ching §6.2).
    S3d(S3dParams),
    /// S3aSim: seeded unstructured result writes, one per worker per query, then sync (Ching §6.3).
    S3asim(S3asimParams),
    /// FLASH-IO checkpoint: 80 blocks × 8³ cells × 24 variables per client, file by variable (Logan §5.1).
    Flash(FlashParams),
    /// One client, the same bytes in 1..1024 regions (Tran §6.3).
    Regions(RegionsParams),
    /// VPIC-IO: 8 particle variables, one N-1 segmented write per variable per iteration (seqdlm §V-E).
    Vpic(VpicParams),
}

/// A name the CLI accepts: a workload or a preset of one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadInfo {
    pub name: &'static str,
    /// The workload (subcommand) this name plans.
    pub workload: &'static str,
    /// Arguments the preset applies before the user's (which override them).
    pub preset_args: &'static [&'static str],
    /// Paper and section.
    pub source: &'static str,
    pub summary: &'static str,
}

/// Every workload and preset, for listings and `from_name`.
pub const WORKLOADS: &[WorkloadInfo] = &[
    WorkloadInfo {
        name: "ior-segmented",
        workload: "ior-segmented",
        preset_args: &[],
        source: "Chen et al. 2022 (SeqDLM) §V-C",
        summary: "IOR N-1 segmented, 64 KiB transfers, 16 MiB per client",
    },
    WorkloadInfo {
        name: "ior-strided",
        workload: "ior-strided",
        preset_args: &[],
        source: "Chen et al. 2022 (SeqDLM) §V-C",
        summary: "IOR N-1 strided, 64 KiB transfers, 16 MiB per client",
    },
    WorkloadInfo {
        name: "ior-hard",
        workload: "ior-strided",
        preset_args: &["--xfer-bytes", "47008"],
        source: "Chen et al. 2022 (SeqDLM) §V-C2; IO500 ior-hard",
        summary: "IOR N-1 strided with 47,008-byte transfers, ~16 MiB per client",
    },
    WorkloadInfo {
        name: "tile",
        workload: "tile",
        preset_args: &[],
        source: "Tran et al. 2010 §6.5 (mpi-tile-io)",
        summary: "128×128 tiles of 1 KiB elements, overlap 16, 16 MiB per client",
    },
    WorkloadInfo {
        name: "tile-large",
        workload: "tile",
        preset_args: &[
            "--tile-x",
            "4",
            "--tile-y",
            "4",
            "--element-bytes",
            "1048576",
            "--overlap-x",
            "1",
            "--overlap-y",
            "1",
        ],
        source: "Tran et al. 2010 §6.5 (large elements)",
        summary: "4×4 tiles of 1 MiB elements, overlap 1, 16 MiB per client",
    },
    WorkloadInfo {
        name: "tile-pixels",
        workload: "tile",
        preset_args: &[
            "--tile-x",
            "2048",
            "--tile-y",
            "2048",
            "--element-bytes",
            "4",
            "--overlap-x",
            "10",
            "--overlap-y",
            "10",
        ],
        source: "Chen et al. 2022 (SeqDLM) §V-D",
        summary: "2048×2048 tiles of 4-byte pixels, overlap 10, 16 MiB per client in 2048 rows",
    },
    WorkloadInfo {
        name: "row",
        workload: "row",
        preset_args: &[],
        source: "Tran et al. 2010 §6.4",
        summary: "row of 128×128 × 1 KiB subdomains overlapping by 1/8, 16 MiB per client",
    },
    WorkloadInfo {
        name: "s3d",
        workload: "s3d",
        preset_args: &[],
        source: "Ching et al. 2007 §6.2",
        summary: "S3D checkpoint, 96³ grid × 16 doubles, 108 MiB total",
    },
    WorkloadInfo {
        name: "s3asim",
        workload: "s3asim",
        preset_args: &[],
        source: "Ching et al. 2007 §6.3",
        summary: "20 queries × 1000–2000 results (mean ~4.4 KB), ~130 MiB total",
    },
    WorkloadInfo {
        name: "flash",
        workload: "flash",
        preset_args: &[],
        source: "Logan et al. (Interval I/O) §5.1",
        summary: "FLASH-IO checkpoint, 7.5 MiB per client, file ordered by variable",
    },
    WorkloadInfo {
        name: "regions",
        workload: "regions",
        preset_args: &[],
        source: "Tran et al. 2010 §6.3",
        summary: "one client, 64 MiB in 1024 regions of 64 KiB",
    },
    WorkloadInfo {
        name: "vpic",
        workload: "vpic",
        preset_args: &[],
        source: "Chen et al. 2022 (SeqDLM) §V-E; h5bench VPIC-IO",
        summary: "VPIC-IO, 8 variables × 65,536 particles (256 KiB writes) × 8 iterations, 16 MiB per client",
    },
];

/// Parses arguments into a workload (presets expand first; later flags win).
#[derive(clap::Parser)]
#[command(name = "workload", args_override_self = true)]
struct WorkloadCli {
    #[command(subcommand)]
    workload: Workload,
}

/// The parameters clap gives when no flag is passed.
pub(crate) fn defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    let cmd = T::augment_args(clap::Command::new("defaults").no_binary_name(true));
    let matches = cmd
        .try_get_matches_from(std::iter::empty::<String>())
        .expect("every workload parameter has a default");
    T::from_arg_matches(&matches).expect("defaults parse into their own struct")
}

impl Workload {
    /// The workload's name (its subcommand): "ior-segmented", "tile", ….
    pub fn name(&self) -> &'static str {
        match self {
            Workload::IorSegmented(_) => "ior-segmented",
            Workload::IorStrided(_) => "ior-strided",
            Workload::Tile(_) => "tile",
            Workload::Row(_) => "row",
            Workload::S3d(_) => "s3d",
            Workload::S3asim(_) => "s3asim",
            Workload::Flash(_) => "flash",
            Workload::Regions(_) => "regions",
            Workload::Vpic(_) => "vpic",
        }
    }

    /// Every accepted name with its source and summary.
    pub fn list() -> &'static [WorkloadInfo] {
        WORKLOADS
    }

    /// The workload or preset `name` with CLI-style `args` (e.g. `["--xfer-bytes",
    /// "1048576"]`) applied over its defaults.
    pub fn from_name<S: AsRef<str>>(name: &str, args: &[S]) -> Result<Self, WorkloadError> {
        let info = WORKLOADS.iter().find(|w| w.name == name).ok_or_else(|| {
            WorkloadError::UnknownName {
                name: name.to_string(),
                known: WORKLOADS
                    .iter()
                    .map(|w| w.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        })?;
        let argv = ["workload", info.workload]
            .into_iter()
            .chain(info.preset_args.iter().copied())
            .chain(args.iter().map(AsRef::as_ref));
        <WorkloadCli as clap::Parser>::try_parse_from(argv)
            .map(|cli| cli.workload)
            .map_err(|e| WorkloadError::Args {
                name: name.to_string(),
                message: e.render().to_string().trim().to_string(),
            })
    }

    /// Every client's calls for `clients` clients.
    pub fn plan(&self, clients: u32) -> Result<WorkloadPlan, WorkloadError> {
        plan(self, clients)
    }
}

/// Every client's calls of `workload` run by `clients` clients (ranks `0..clients`).
pub fn plan(workload: &Workload, clients: u32) -> Result<WorkloadPlan, WorkloadError> {
    match workload {
        Workload::IorSegmented(p) => crate::ior::plan(IorMode::Segmented, p, clients),
        Workload::IorStrided(p) => crate::ior::plan(IorMode::Strided, p, clients),
        Workload::Tile(p) => crate::tile::plan(p, clients),
        Workload::Row(p) => crate::row::plan(p, clients),
        Workload::S3d(p) => crate::s3d::plan(p, clients),
        Workload::S3asim(p) => crate::s3asim::plan(p, clients),
        Workload::Flash(p) => crate::flash::plan(p, clients),
        Workload::Regions(p) => crate::regions::plan(p, clients),
        Workload::Vpic(p) => crate::vpic::plan(p, clients),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_and_presets_match_their_constructors() {
        for info in WORKLOADS {
            let w = Workload::from_name::<&str>(info.name, &[]).unwrap();
            assert_eq!(w.name(), info.workload);
        }
        assert_eq!(
            Workload::from_name::<&str>("tile-large", &[]).unwrap(),
            Workload::Tile(TileParams::large_elements())
        );
        assert_eq!(
            Workload::from_name::<&str>("tile-pixels", &[]).unwrap(),
            Workload::Tile(TileParams::seqdlm_pixels())
        );
        assert_eq!(
            Workload::from_name::<&str>("ior-hard", &[]).unwrap(),
            Workload::IorStrided(IorParams::ior_hard())
        );
        assert_eq!(
            Workload::from_name::<&str>("tile", &[]).unwrap(),
            Workload::Tile(TileParams::default())
        );
        assert_eq!(
            Workload::from_name::<&str>("vpic", &[]).unwrap(),
            Workload::Vpic(VpicParams::default())
        );
    }

    #[test]
    fn user_arguments_override_presets() {
        let w = Workload::from_name("tile-large", &["--overlap-x", "2", "--tiles-x", "3"]).unwrap();
        let Workload::Tile(p) = w else { panic!() };
        assert_eq!((p.overlap_x, p.overlap_y, p.tiles_x), (2, 1, Some(3)));
        assert_eq!(p.element_bytes, 1 << 20);
        let w = Workload::from_name("s3d", &["--components", "2,5", "--single-call"]).unwrap();
        let Workload::S3d(p) = w else { panic!() };
        assert_eq!(p.components, vec![2, 5]);
        assert!(p.single_call);
        let w = Workload::from_name("vpic", &["--particles", "262144", "--sync"]).unwrap();
        let Workload::Vpic(p) = w else { panic!() };
        assert_eq!((p.particles, p.iterations, p.sync), (262_144, None, true));
    }

    #[test]
    fn bad_names_and_arguments_are_errors() {
        assert!(matches!(
            Workload::from_name::<&str>("nope", &[]),
            Err(WorkloadError::UnknownName { .. })
        ));
        assert!(matches!(
            Workload::from_name("tile", &["--tile-x", "many"]),
            Err(WorkloadError::Args { .. })
        ));
        assert!(matches!(
            Workload::from_name("flash", &["--bogus"]),
            Err(WorkloadError::Args { .. })
        ));
    }

    #[test]
    fn workloads_round_trip_through_json() {
        for info in WORKLOADS {
            let w = Workload::from_name::<&str>(info.name, &[]).unwrap();
            let json = serde_json::to_string(&w).unwrap();
            assert!(
                json.contains(&format!("\"workload\":\"{}\"", w.name())),
                "{json}"
            );
            assert_eq!(serde_json::from_str::<Workload>(&json).unwrap(), w);
        }
    }
}
