use crate::common::*;
use atomio_workloads::*;

#[test]
fn row_subdomains_share_one_eighth_with_each_neighbour() {
    let p = RowParams {
        width: 16,
        height: 5,
        element_bytes: 4,
        overlap: None,
    };
    for n in 1..=8u64 {
        let plan = plan(&Workload::Row(p.clone()), n as u32).unwrap();
        assert_eq!(plan.params["overlap"], 2, "default overlap = width / 8");
        let sets = check(&plan);
        assert_eq!(plan.overlapping, n > 1);
        let cols = n * 16 - (n - 1) * 2;
        assert_eq!(union(&sets), list(&[(0, 5 * cols * 4)]));
        for c in 0..n as usize {
            let a = writes(&plan, c);
            assert_eq!(a.len(), 1, "one call per client");
            assert_eq!(a[0].pattern().run_count_upper(), 5, "one region per row");
            // Rows of one subdomain are separate regions unless it spans the whole row.
            assert_eq!(sets[c].len(), if n == 1 { 1 } else { 5 });
            assert_eq!(sets[c].total_bytes(), 16 * 5 * 4);
            // The regions are a whole array row apart: the hull spans almost the file.
            let hull = a[0].hull().unwrap();
            assert_eq!(hull.len(), (4 * cols + 16) * 4);
            if c + 1 < n as usize {
                assert_eq!(common_bytes(&sets[c], &sets[c + 1]), 2 * 5 * 4);
            }
            if c + 2 < n as usize {
                assert_eq!(common_bytes(&sets[c], &sets[c + 2]), 0);
            }
        }
    }
}

#[test]
fn explicit_overlap_and_bad_overlap() {
    let p = RowParams {
        width: 8,
        height: 2,
        element_bytes: 1,
        overlap: Some(0),
    };
    let plan = plan(&Workload::Row(p.clone()), 3).unwrap();
    check(&plan);
    assert!(!plan.overlapping);
    let bad = RowParams {
        overlap: Some(8),
        ..p
    };
    let err = atomio_workloads::plan(&Workload::Row(bad), 3).unwrap_err();
    assert!(err.to_string().contains("overlap = 8"), "{err}");
}
