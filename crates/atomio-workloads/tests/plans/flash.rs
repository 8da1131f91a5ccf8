use crate::common::*;
use atomio_workloads::*;

fn small(per_variable: bool) -> FlashParams {
    FlashParams {
        blocks_per_client: 2,
        block_edge: 2,
        variables: 3,
        per_variable,
    }
}

#[test]
fn file_is_ordered_by_variable_then_rank() {
    let b = 2 * 8 * 8; // blocks × edge³ × 8 bytes
    for n in 1..=5u64 {
        let one = plan(&Workload::Flash(small(false)), n as u32).unwrap();
        let many = plan(&Workload::Flash(small(true)), n as u32).unwrap();
        let sets = check(&one);
        assert_eq!(check(&many), sets, "same bytes either way");
        assert!(!one.overlapping);
        assert_eq!(one.file_bytes, 3 * n * b);
        assert_eq!(union(&sets), list(&[(0, 3 * n * b)]));
        for c in 0..n {
            let own: Vec<_> = (0..3)
                .map(|v| ((v * n + c) * b, (v * n + c + 1) * b))
                .collect();
            assert_eq!(sets[c as usize], list(&own));
            let w = writes(&one, c as usize);
            assert_eq!(w.len(), 1);
            assert_eq!(w[0].pattern().nodes().len(), 2, "one vector of 3 blocks");
            assert_eq!(w[0].pattern().run_count_upper(), 3);
            let w = writes(&many, c as usize);
            assert_eq!(w.len(), 3);
            for (v, a) in w.iter().enumerate() {
                let s = (v as u64 * n + c) * b;
                assert_eq!(ranges(a), vec![r(s, s + b)]);
            }
        }
    }
}

#[test]
fn defaults_are_flash_io_sizes() {
    let plan = plan(&Workload::Flash(FlashParams::default()), 16).unwrap();
    check_cheap(&plan);
    for c in &plan.clients {
        // 80 blocks × 512 cells × 24 doubles ≈ 7.5 MiB (Logan §5.1).
        assert_eq!(c.write_bytes(), 80 * 512 * 24 * 8);
        assert_eq!(c.calls.len(), 1);
    }
    assert_eq!(plan.file_bytes, 16 * 80 * 512 * 24 * 8);
}
