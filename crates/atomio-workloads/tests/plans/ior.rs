use crate::common::*;
use atomio_workloads::*;

fn small(xfer: u64, tpb: u64, segments: u64) -> IorParams {
    IorParams {
        xfer_bytes: xfer,
        transfers_per_block: tpb,
        segments: Some(segments),
    }
}

#[test]
fn segmented_transfers_land_at_s_n_plus_c_blocks() {
    let p = small(10, 3, 2);
    for n in 1..=5u64 {
        let plan = plan(&Workload::IorSegmented(p.clone()), n as u32).unwrap();
        let sets = check(&plan);
        assert!(!plan.overlapping);
        let block = 30;
        assert_eq!(plan.file_bytes, n * 2 * block);
        assert_eq!(union(&sets), list(&[(0, n * 2 * block)]));
        for c in 0..n {
            let w = writes(&plan, c as usize);
            assert_eq!(w.len(), 6, "segments × transfers_per_block calls");
            // IOR order: segment outer, transfer inner; each call one 10-byte range.
            let mut k = 0;
            for s in 0..2 {
                for t in 0..3 {
                    let start = (s * n + c) * block + t * 10;
                    assert_eq!(ranges(w[k]), vec![r(start, start + 10)]);
                    assert_eq!(w[k].pattern().nodes().len(), 1);
                    k += 1;
                }
            }
            // Within a segment a client's data is one contiguous block.
            let own: Vec<_> = (0..2)
                .map(|s| ((s * n + c) * block, (s * n + c + 1) * block))
                .collect();
            assert_eq!(sets[c as usize], list(&own));
        }
    }
}

#[test]
fn strided_transfers_interleave_clients_one_by_one() {
    let p = small(7, 2, 3);
    for n in 1..=5u64 {
        let plan = plan(&Workload::IorStrided(p.clone()), n as u32).unwrap();
        let sets = check(&plan);
        assert!(!plan.overlapping);
        assert_eq!(plan.file_bytes, n * 6 * 7);
        assert_eq!(union(&sets), list(&[(0, n * 42)]));
        for c in 0..n {
            let w = writes(&plan, c as usize);
            assert_eq!(w.len(), 6);
            for (t, a) in w.iter().enumerate() {
                let start = (t as u64 * n + c) * 7;
                assert_eq!(ranges(a), vec![r(start, start + 7)]);
            }
        }
    }
}

#[test]
fn both_modes_move_the_same_bytes_per_client() {
    let p = small(47_008, 4, 3);
    let seg = plan(&Workload::IorSegmented(p.clone()), 4).unwrap();
    let str = plan(&Workload::IorStrided(p), 4).unwrap();
    assert_eq!(seg.write_bytes(), str.write_bytes());
    assert_eq!(seg.file_bytes, str.file_bytes);
    for c in 0..4 {
        assert_eq!(seg.clients[c].write_bytes(), 3 * 4 * 47_008);
    }
}

#[test]
fn default_segments_aim_at_16_mib_per_client() {
    let per_client = |p: IorParams| {
        let plan = plan(&Workload::IorStrided(p.clone()), 2).unwrap();
        (
            plan.params["segments"].as_u64().unwrap(),
            plan.clients[0].write_bytes(),
        )
    };
    assert_eq!(per_client(IorParams::default()), (16, 16 << 20));
    let one_mib = IorParams {
        xfer_bytes: 1 << 20,
        ..IorParams::default()
    };
    assert_eq!(per_client(one_mib), (1, 16 << 20));
    assert_eq!(
        per_client(IorParams::ior_hard()),
        (22, 22 * 16 * IOR_HARD_XFER_BYTES)
    );
}
