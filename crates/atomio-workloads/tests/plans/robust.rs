//! Arbitrary parameters, including zeros and huge values: planning returns a plan that
//! keeps the invariants, or an error — never a panic, never an unbounded allocation.

use crate::common::{check, check_cheap, list, union};
use atomio_workloads::*;
use proptest::prelude::*;

fn num() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 1u64..6,
        1 => Just(0u64),
        1 => Just(7u64),
        1 => Just(1u64 << 32),
        1 => Just(1u64 << 62),
        1 => Just(u64::MAX),
    ]
}

fn opt32() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![Just(None), (0u32..6).prop_map(Some), Just(Some(u32::MAX))]
}

fn workload() -> impl Strategy<Value = Workload> {
    prop_oneof![
        (num(), num(), proptest::option::of(num()), any::<bool>()).prop_map(
            |(x, t, s, strided)| {
                let p = IorParams {
                    xfer_bytes: x,
                    transfers_per_block: t,
                    segments: s,
                };
                if strided {
                    Workload::IorStrided(p)
                } else {
                    Workload::IorSegmented(p)
                }
            }
        ),
        (
            opt32(),
            opt32(),
            num(),
            num(),
            num(),
            num(),
            num(),
            any::<bool>(),
            num()
        )
            .prop_map(
                |(
                    tiles_x,
                    tiles_y,
                    tile_x,
                    tile_y,
                    element_bytes,
                    overlap_x,
                    overlap_y,
                    halo,
                    header_bytes,
                )| {
                    Workload::Tile(TileParams {
                        tiles_x,
                        tiles_y,
                        tile_x,
                        tile_y,
                        element_bytes,
                        overlap_x,
                        overlap_y,
                        overlap_mode: if halo {
                            OverlapMode::Halo
                        } else {
                            OverlapMode::Shared
                        },
                        header_bytes,
                    })
                }
            ),
        (num(), num(), num(), proptest::option::of(num())).prop_map(
            |(width, height, element_bytes, overlap)| {
                Workload::Row(RowParams {
                    width,
                    height,
                    element_bytes,
                    overlap,
                })
            }
        ),
        (
            num(),
            num(),
            num(),
            proptest::collection::vec(num(), 0..4),
            opt32(),
            opt32(),
            opt32(),
            any::<bool>()
        )
            .prop_map(
                |(grid_x, grid_y, grid_z, components, proc_x, proc_y, proc_z, single_call)| {
                    Workload::S3d(S3dParams {
                        grid_x,
                        grid_y,
                        grid_z,
                        components,
                        proc_x,
                        proc_y,
                        proc_z,
                        single_call,
                    })
                }
            ),
        (any::<u64>(), num(), num(), num(), num(), any::<bool>()).prop_map(
            |(seed, queries, fragments, min_results, max_results, all_workers)| {
                Workload::S3asim(S3asimParams {
                    seed,
                    queries,
                    fragments,
                    min_results,
                    max_results,
                    all_workers,
                })
            }
        ),
        (num(), num(), num(), any::<bool>()).prop_map(
            |(blocks_per_client, block_edge, variables, per_variable)| {
                Workload::Flash(FlashParams {
                    blocks_per_client,
                    block_edge,
                    variables,
                    per_variable,
                })
            }
        ),
        (num(), num(), proptest::option::of(num()), any::<bool>()).prop_map(
            |(regions, bytes_per_client, gap_bytes, read_back)| {
                Workload::Regions(RegionsParams {
                    regions,
                    bytes_per_client,
                    gap_bytes,
                    read_back,
                })
            }
        ),
        (num(), proptest::option::of(num()), any::<bool>()).prop_map(
            |(particles, iterations, sync)| {
                Workload::Vpic(VpicParams {
                    particles,
                    iterations,
                    sync,
                })
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn any_parameters_plan_or_fail_cleanly(w in workload(), clients in 0u32..18) {
        if let Ok(plan) = plan(&w, clients) {
            prop_assert_eq!(plan.clients.len() as u32, clients);
            check_cheap(&plan);
            prop_assert!(plan.call_count() <= MAX_CALLS);
        }
    }
}

/// Small valid-looking parameters for the workloads whose writes tile the file.
fn tiling_workload() -> impl Strategy<Value = Workload> {
    prop_oneof![
        (
            1u64..40,
            1u64..4,
            proptest::option::of(1u64..4),
            any::<bool>()
        )
            .prop_map(|(x, t, s, strided)| {
                let p = IorParams {
                    xfer_bytes: x,
                    transfers_per_block: t,
                    segments: s.or(Some(2)),
                };
                if strided {
                    Workload::IorStrided(p)
                } else {
                    Workload::IorSegmented(p)
                }
            }),
        (1u64..7, 1u64..7, 1u64..4, 0u64..7, 0u64..7, any::<bool>()).prop_map(
            |(tile_x, tile_y, element_bytes, ox, oy, halo)| {
                let (ox, oy) = if halo {
                    (ox % (tile_x + 1), oy % (tile_y + 1))
                } else {
                    (ox % tile_x, oy % tile_y)
                };
                Workload::Tile(TileParams {
                    tile_x,
                    tile_y,
                    element_bytes,
                    overlap_x: ox,
                    overlap_y: oy,
                    overlap_mode: if halo {
                        OverlapMode::Halo
                    } else {
                        OverlapMode::Shared
                    },
                    ..TileParams::default()
                })
            }
        ),
        (1u64..20, 1u64..5, 1u64..4, proptest::option::of(0u64..3)).prop_map(
            |(width, height, element_bytes, o)| {
                Workload::Row(RowParams {
                    width,
                    height,
                    element_bytes,
                    overlap: o.map(|o| o.min(width - 1)),
                })
            }
        ),
        (
            1u64..7,
            1u64..7,
            1u64..7,
            proptest::collection::vec(1u64..4, 1..4),
            any::<bool>()
        )
            .prop_map(|(grid_x, grid_y, grid_z, components, single_call)| {
                Workload::S3d(S3dParams {
                    grid_x,
                    grid_y,
                    grid_z,
                    components,
                    single_call,
                    ..S3dParams::default()
                })
            }),
        (
            any::<u64>(),
            1u64..4,
            1u64..10,
            0u64..5,
            5u64..15,
            any::<bool>()
        )
            .prop_map(
                |(seed, queries, fragments, min_results, max_results, all_workers)| {
                    Workload::S3asim(S3asimParams {
                        seed,
                        queries,
                        fragments,
                        min_results,
                        max_results,
                        all_workers,
                    })
                }
            ),
        (1u64..4, 1u64..3, 1u64..5, any::<bool>()).prop_map(
            |(blocks_per_client, block_edge, variables, per_variable)| {
                Workload::Flash(FlashParams {
                    blocks_per_client,
                    block_edge,
                    variables,
                    per_variable,
                })
            }
        ),
        (1u64..20, 1u64..4, any::<bool>()).prop_map(|(particles, iterations, sync)| {
            Workload::Vpic(VpicParams {
                particles,
                iterations: Some(iterations),
                sync,
            })
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Writes cover `[0, file_bytes)` exactly, `overlapping` is right (checked from the
    /// expanded ranges), and the only possible refusal is an infeasible client count.
    #[test]
    fn small_plans_cover_the_file_exactly(w in tiling_workload(), clients in 1u32..13) {
        match plan(&w, clients) {
            Ok(plan) => {
                let sets = check(&plan);
                if plan.file_bytes > 0 {
                    prop_assert_eq!(union(&sets), list(&[(0, plan.file_bytes)]));
                }
            }
            Err(e) => prop_assert!(matches!(e, WorkloadError::Clients { .. }), "{}", e),
        }
    }
}
