use crate::common::*;
use atomio_layout::ByteRange;
use atomio_workloads::*;

fn grid(x: u64, y: u64, z: u64, components: &[u64]) -> S3dParams {
    S3dParams {
        grid_x: x,
        grid_y: y,
        grid_z: z,
        components: components.to_vec(),
        ..S3dParams::default()
    }
}

fn call_ranges(plan: &WorkloadPlan, rank: usize, call: usize) -> Vec<ByteRange> {
    ranges(plan.clients[rank].calls[call].access.as_ref().unwrap())
}

/// 4×4×4 grid, arrays of 11, 3, 1, 1 doubles, 8 clients in a 2×2×2 grid of 2×2×2 blocks.
/// Array offsets: mass 0, velocity 11·64·8 = 5632, pressure 5632 + 3·512 = 7168,
/// temperature 7680; file 8192 bytes. Element (x,y,z,k) of array a is at
/// A_a + 8·(((k·4 + z)·4 + y)·4 + x).
#[test]
fn hand_computed_offsets_for_a_2x2x2_process_grid() {
    let plan = plan(&Workload::S3d(grid(4, 4, 4, &[11, 3, 1, 1])), 8).unwrap();
    assert_eq!(
        (
            plan.params["proc_x"].as_u64(),
            plan.params["proc_y"].as_u64(),
            plan.params["proc_z"].as_u64()
        ),
        (Some(2), Some(2), Some(2))
    );
    assert_eq!(plan.file_bytes, 8192);
    // Rank 7 = (1,1,1): x, y, z in 2..4. Mass: runs of 2 cells (16 B) per (k, z, y).
    let mass = call_ranges(&plan, 7, 0);
    assert_eq!(mass.len(), 11 * 2 * 2);
    // (2,2,2,k=0): ((0·4+2)·4+2)·4+2 = 42 → byte 336.
    assert_eq!(mass[0], r(336, 352));
    // (2,3,2,0): 46 → 368.  (2,2,3,0): 58 → 464.
    assert_eq!(mass[1], r(368, 384));
    assert_eq!(mass[2], r(464, 480));
    // (2,3,3,k=10): ((10·4+3)·4+3)·4+2 = 702 → 5616; ends where velocity begins.
    assert_eq!(mass[43], r(5616, 5632));
    // Velocity component 2 of cell (3,2,3): 5632 + 8·187 = 7128, in the run from x = 2.
    let vel = call_ranges(&plan, 7, 1);
    assert!(vel.contains(&r(7120, 7136)));
    assert_eq!(vel.len(), 3 * 2 * 2);
    // Pressure, first run of ranks 0 (0,0,0), 1 (1,0,0), 2 (0,1,0), 4 (0,0,1).
    assert_eq!(call_ranges(&plan, 0, 2)[0], r(7168, 7184));
    assert_eq!(call_ranges(&plan, 1, 2)[0], r(7184, 7200));
    assert_eq!(call_ranges(&plan, 2, 2)[0], r(7232, 7248));
    assert_eq!(call_ranges(&plan, 4, 2)[0], r(7424, 7440));
    // Temperature, last run of rank 0: (0,1,1) → 20 cells → 7680 + 160.
    assert_eq!(*call_ranges(&plan, 0, 3).last().unwrap(), r(7840, 7856));
    let sets = check(&plan);
    assert_eq!(union(&sets), list(&[(0, 8192)]));
    for s in &sets {
        assert_eq!(s.total_bytes(), 8192 / 8);
    }
}

#[test]
fn blocks_cover_the_canonical_file_for_any_client_count() {
    let comps = [2u64, 1, 3];
    for clients in 1..=12u32 {
        for single_call in [false, true] {
            let mut p = grid(12, 7, 3, &comps);
            p.single_call = single_call;
            let plan = plan(&Workload::S3d(p), clients).unwrap();
            let sets = check(&plan);
            assert!(!plan.overlapping);
            let total = 12 * 7 * 3 * 6 * 8;
            assert_eq!(plan.file_bytes, total);
            assert_eq!(union(&sets), list(&[(0, total)]));
            assert_eq!(sets.iter().map(|s| s.total_bytes()).sum::<u64>(), total);
            for c in &plan.clients {
                assert_eq!(c.calls.len(), if single_call { 1 } else { 3 });
                for a in c.accesses(CallKind::Write) {
                    let nodes = a.pattern().nodes().len();
                    assert!(nodes <= if single_call { 3 * 6 + 1 } else { 6 }, "{nodes}");
                }
            }
            if clients == 1 {
                // One process: every array is written contiguously.
                for a in writes(&plan, 0) {
                    assert_eq!(ranges(a).len(), 1);
                }
            }
        }
    }
}

#[test]
fn one_call_and_four_calls_write_the_same_bytes() {
    let four = plan(&Workload::S3d(grid(6, 4, 4, &[11, 3, 1, 1])), 6).unwrap();
    let mut p = grid(6, 4, 4, &[11, 3, 1, 1]);
    p.single_call = true;
    let one = plan(&Workload::S3d(p), 6).unwrap();
    for rank in 0..6 {
        let a: Vec<ByteRange> = writes(&four, rank).into_iter().flat_map(ranges).collect();
        let b = ranges(writes(&one, rank)[0]);
        assert_eq!(a, b);
    }
}

#[test]
fn process_grid_errors_are_clear() {
    let mut p = grid(8, 8, 8, &[1]);
    p.proc_x = Some(2);
    let err = plan(&Workload::S3d(p.clone()), 8).unwrap_err();
    assert!(err.to_string().contains("all three"), "{err}");
    p.proc_y = Some(2);
    p.proc_z = Some(3);
    assert!(matches!(
        plan(&Workload::S3d(p.clone()), 8),
        Err(WorkloadError::Clients { .. })
    ));
    p.proc_z = Some(2);
    assert!(plan(&Workload::S3d(p), 8).is_ok());
    // 16 clients → 4×2×2, but only 2 cells along X.
    let err = plan(&Workload::S3d(grid(2, 8, 8, &[1])), 16).unwrap_err();
    assert!(err.to_string().contains("along x"), "{err}");
}
