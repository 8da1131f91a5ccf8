use crate::common::*;
use atomio_layout::Node;
use atomio_workloads::*;

fn params(tile: (u64, u64), elem: u64, overlap: (u64, u64), mode: OverlapMode) -> TileParams {
    TileParams {
        tiles_x: None,
        tiles_y: None,
        tile_x: tile.0,
        tile_y: tile.1,
        element_bytes: elem,
        overlap_x: overlap.0,
        overlap_y: overlap.1,
        overlap_mode: mode,
        header_bytes: 0,
    }
}

fn grid(plan: &WorkloadPlan) -> (u64, u64) {
    (
        plan.params["tiles_x"].as_u64().unwrap(),
        plan.params["tiles_y"].as_u64().unwrap(),
    )
}

#[test]
fn shared_tiles_follow_mpi_tile_io() {
    // mpi-tile-io: array = n·tile − (n−1)·overlap per axis; neighbours share `overlap`.
    for clients in [1u32, 2, 3, 4, 6, 8, 9, 12, 16] {
        for (tile, overlap) in [((6, 4), (2, 1)), ((5, 5), (0, 0)), ((4, 3), (3, 2))] {
            let e = 3;
            let p = params(tile, e, overlap, OverlapMode::Shared);
            let plan = plan(&Workload::Tile(p), clients).unwrap();
            let (tx, ty) = grid(&plan);
            assert_eq!(tx * ty, u64::from(clients));
            assert!(tx >= ty);
            let sets = check(&plan);
            let cols = tx * tile.0 - (tx - 1) * overlap.0;
            let rows = ty * tile.1 - (ty - 1) * overlap.1;
            assert_eq!(
                union(&sets),
                list(&[(0, rows * cols * e)]),
                "the whole array"
            );
            assert_eq!(plan.file_bytes, rows * cols * e);
            let expect_overlap = (overlap.0 > 0 && tx > 1) || (overlap.1 > 0 && ty > 1);
            assert_eq!(plan.overlapping, expect_overlap);
            for (rank, set) in sets.iter().enumerate() {
                assert_eq!(
                    set.total_bytes(),
                    tile.0 * tile.1 * e,
                    "whole tile incl. ghosts"
                );
                assert_eq!(plan.clients[rank].calls.len(), 1, "one call per client");
                let a = writes(&plan, rank)[0];
                assert!(a.pattern().nodes().len() <= 4, "a subarray, not a list");
                assert_eq!(
                    a.pattern().run_count_upper(),
                    tile.1,
                    "one run per tile row"
                );
                // Rank → tile: x fastest (MPI_Cart_create over [tiles_y, tiles_x]).
                let (x, y) = (rank as u64 % tx, rank as u64 / tx);
                let x0 = x * (tile.0 - overlap.0);
                let y0 = y * (tile.1 - overlap.1);
                assert_eq!(a.hull().unwrap().start, (y0 * cols + x0) * e);
            }
            // Neighbours share exactly overlap columns × tile rows (and rows × columns).
            for rank in 0..clients as u64 {
                let (x, y) = (rank % tx, rank / tx);
                let s = &sets[rank as usize];
                if x + 1 < tx {
                    let right = &sets[(rank + 1) as usize];
                    assert_eq!(common_bytes(s, right), overlap.0 * tile.1 * e);
                }
                if y + 1 < ty {
                    let below = &sets[(rank + tx) as usize];
                    assert_eq!(common_bytes(s, below), overlap.1 * tile.0 * e);
                    if x + 1 < tx {
                        let diag = &sets[(rank + tx + 1) as usize];
                        assert_eq!(common_bytes(s, diag), overlap.0 * overlap.1 * e);
                    }
                }
            }
        }
    }
}

#[test]
fn halo_tiles_add_ghosts_on_interior_sides_only() {
    for clients in [1u32, 2, 3, 4, 6, 9] {
        let (tile, o, e) = ((5u64, 4u64), (2u64, 1u64), 2u64);
        let p = params(tile, e, o, OverlapMode::Halo);
        let plan = plan(&Workload::Tile(p), clients).unwrap();
        let (tx, ty) = grid(&plan);
        let sets = check(&plan);
        let (cols, rows) = (tx * tile.0, ty * tile.1);
        assert_eq!(union(&sets), list(&[(0, rows * cols * e)]));
        for (rank, set) in sets.iter().enumerate() {
            let (x, y) = (rank as u64 % tx, rank as u64 / tx);
            let interior = |i: u64, n: u64| u64::from(i > 0) + u64::from(i + 1 < n);
            let w = tile.0 + interior(x, tx) * o.0;
            let h = tile.1 + interior(y, ty) * o.1;
            assert_eq!(set.total_bytes(), w * h * e);
            if x + 1 < tx {
                // Horizontal neighbours share 2·overlap_x columns over their common rows.
                let right = &sets[rank + 1];
                assert_eq!(common_bytes(set, right), 2 * o.0 * h * e);
            }
        }
    }
}

#[test]
fn header_bytes_shift_the_array() {
    let mut p = params((4, 4), 8, (1, 1), OverlapMode::Shared);
    p.header_bytes = 100;
    let plan = plan(&Workload::Tile(p), 4).unwrap();
    let sets = check(&plan);
    assert_eq!(union(&sets), list(&[(100, 100 + 7 * 7 * 8)]));
    assert_eq!(plan.file_bytes, 100 + 7 * 7 * 8);
}

#[test]
fn tile_grid_follows_the_given_factors_or_fails_clearly() {
    let mut p = TileParams {
        tiles_x: Some(3),
        ..TileParams::default()
    };
    let g = plan(&Workload::Tile(p.clone()), 12).unwrap();
    assert_eq!(grid(&g), (3, 4));
    let err = plan(&Workload::Tile(p.clone()), 8).unwrap_err();
    assert!(
        matches!(err, WorkloadError::Clients { clients: 8, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("tiles_x = 3"), "{err}");
    p.tiles_y = Some(3);
    assert!(matches!(
        plan(&Workload::Tile(p.clone()), 8),
        Err(WorkloadError::Clients { .. })
    ));
    assert_eq!(grid(&plan(&Workload::Tile(p), 9).unwrap()), (3, 3));
    let q = TileParams {
        tiles_y: Some(2),
        ..TileParams::default()
    };
    assert_eq!(grid(&plan(&Workload::Tile(q), 6).unwrap()), (3, 2));
    // A prime client count is a row of tiles.
    assert_eq!(
        grid(&plan(&Workload::Tile(TileParams::default()), 7).unwrap()),
        (7, 1)
    );
}

#[test]
fn large_element_tiles_keep_the_bytes_and_few_runs() {
    let plan = plan(&Workload::Tile(TileParams::large_elements()), 4).unwrap();
    assert!(plan.overlapping);
    for c in &plan.clients {
        assert_eq!(c.write_bytes(), 16 << 20);
        let a = c.calls[0].access.as_ref().unwrap();
        assert_eq!(a.pattern().run_count_upper(), 4, "4 rows of 4 MiB");
    }
    // Neighbours share a 1-element-wide strip of 4 rows of 1 MiB.
    let sets = check(&plan);
    assert_eq!(common_bytes(&sets[0], &sets[1]), 4 << 20);
}

#[test]
fn default_tile_is_structured_not_listed() {
    let plan = plan(&Workload::Tile(TileParams::default()), 16).unwrap();
    assert_eq!(grid(&plan), (4, 4));
    check_cheap(&plan);
    assert!(plan.overlapping);
    for c in &plan.clients {
        let a = c.calls[0].access.as_ref().unwrap();
        let nodes = a.pattern().nodes();
        assert!(nodes.len() <= 4);
        assert!(nodes.iter().all(|n| match n {
            Node::Indexed { blocks, .. } => blocks.len() == 1,
            _ => true,
        }));
        assert_eq!(a.pattern().run_count_upper(), 128);
        assert_eq!(a.size(), 16 << 20);
    }
}
