use crate::common::*;
use atomio_workloads::*;

#[test]
fn same_bytes_split_into_r_regions() {
    let total = 1u64 << 20;
    let mut r_count = 1;
    while r_count <= 1024 {
        let p = RegionsParams {
            regions: r_count,
            bytes_per_client: total,
            gap_bytes: None,
            read_back: false,
        };
        let plan = plan(&Workload::Regions(p), 1).unwrap();
        let sets = check(&plan);
        let len = total / r_count;
        let a = writes(&plan, 0)[0];
        assert_eq!(plan.clients[0].calls.len(), 1);
        assert_eq!(a.pattern().nodes().len(), 2, "a vector whatever R is");
        assert_eq!(a.size(), total);
        let expect: Vec<_> = (0..r_count)
            .map(|i| (2 * i * len, 2 * i * len + len))
            .collect();
        assert_eq!(sets[0], list(&expect));
        assert_eq!(plan.file_bytes, (2 * r_count - 1) * len);
        r_count *= 2;
    }
}

#[test]
fn gap_read_back_and_several_clients() {
    let p = RegionsParams {
        regions: 4,
        bytes_per_client: 40,
        gap_bytes: Some(5),
        read_back: true,
    };
    let plan = plan(&Workload::Regions(p.clone()), 3).unwrap();
    let sets = check(&plan);
    assert!(!plan.overlapping);
    for (c, client) in plan.clients.iter().enumerate() {
        assert_eq!(client.calls.len(), 2);
        assert_eq!(client.calls[0].kind, CallKind::Write);
        assert_eq!(client.calls[1].kind, CallKind::Read);
        assert_eq!(client.calls[0].access, client.calls[1].access);
        let base = c as u64 * 4 * 15;
        let expect: Vec<_> = (0..4)
            .map(|i| (base + i * 15, base + i * 15 + 10))
            .collect();
        assert_eq!(sets[c], list(&expect));
    }
    assert_eq!(plan.read_bytes(), 3 * 40);
    let touching = RegionsParams {
        gap_bytes: Some(0),
        read_back: false,
        ..p
    };
    let plan = atomio_workloads::plan(&Workload::Regions(touching), 1).unwrap();
    assert_eq!(ranges(writes(&plan, 0)[0]), vec![r(0, 40)]);
}

#[test]
fn unequal_regions_are_rejected() {
    let p = RegionsParams {
        regions: 3,
        bytes_per_client: 10,
        gap_bytes: None,
        read_back: false,
    };
    let err = plan(&Workload::Regions(p), 1).unwrap_err();
    assert!(err.to_string().contains("not a multiple"), "{err}");
}
