use crate::common::*;
use atomio_layout::{Node, RangeList};
use atomio_workloads::*;

fn small(seed: u64, all_workers: bool) -> S3asimParams {
    S3asimParams {
        seed,
        queries: 4,
        fragments: 8,
        min_results: 5,
        max_results: 20,
        all_workers,
    }
}

#[test]
fn results_are_written_by_their_fragment_owner_and_cover_the_file() {
    let results = s3asim_results(&small(3, false)).unwrap();
    let total: u64 = results.iter().map(|r| r.len).sum();
    // Prefix sums in query order: no gaps, queries contiguous and in order.
    let mut next = 0;
    for w in &results {
        assert_eq!(w.offset, next);
        assert!((6..=65536).contains(&w.len));
        next += w.len;
    }
    assert!(results.windows(2).all(|w| w[0].query <= w[1].query));
    for (all_workers, range) in [(false, 2..=10u32), (true, 1..=9u32)] {
        for clients in range {
            let p = small(3, all_workers);
            let plan = plan(&Workload::S3asim(p), clients).unwrap();
            let sets = check(&plan);
            assert!(!plan.overlapping);
            assert_eq!(plan.file_bytes, total);
            assert_eq!(union(&sets), list(&[(0, total)]));
            let master = u64::from(!all_workers);
            let workers = u64::from(clients) - master;
            for res in &results {
                let owner = (res.fragment % workers + master) as usize;
                let want = RangeList::from_ranges(vec![r(res.offset, res.offset + res.len)]);
                assert_eq!(common_bytes(&sets[owner], &want), res.len);
            }
        }
    }
}

#[test]
fn one_write_per_worker_per_query_then_sync_on_every_rank() {
    let p = small(5, false);
    let results = s3asim_results(&p).unwrap();
    let query_end = |q: u64| {
        results
            .iter()
            .filter(|r| r.query == q)
            .map(|r| r.offset + r.len)
            .max()
            .unwrap()
    };
    let plan = plan(&Workload::S3asim(p), 4).unwrap();
    check_cheap(&plan);
    // The master only syncs.
    assert!(plan.clients[0]
        .calls
        .iter()
        .all(|c| c.kind == CallKind::Sync));
    for c in &plan.clients {
        assert_eq!(
            c.calls.iter().filter(|c| c.kind == CallKind::Sync).count(),
            4
        );
        let mut query = 0;
        let mut wrote = false;
        for call in &c.calls {
            match call.kind {
                CallKind::Write => {
                    assert!(!wrote, "at most one write per query");
                    wrote = true;
                    let a = call.access.as_ref().unwrap();
                    assert!(a.hull().unwrap().end <= query_end(query));
                    let nodes = a.pattern().nodes();
                    assert_eq!(nodes.len(), 2);
                    let Node::Indexed { blocks, .. } = &nodes[1] else {
                        panic!("an hindexed write")
                    };
                    // Adjacent results of one worker are merged: one block per run.
                    assert!(blocks
                        .windows(2)
                        .all(|b| b[0].disp + b[0].blocklen < b[1].disp));
                    assert_eq!(ranges(a).len(), blocks.len());
                }
                CallKind::Sync => {
                    query += 1;
                    wrote = false;
                }
                CallKind::Read => panic!("s3asim does not read"),
            }
        }
    }
}

#[test]
fn the_same_bytes_whatever_the_client_count() {
    let p = small(11, false);
    let reference = union(&check(&plan(&Workload::S3asim(p.clone()), 2).unwrap()));
    for clients in [3u32, 5, 8, 16] {
        let plan = plan(&Workload::S3asim(p.clone()), clients).unwrap();
        assert_eq!(union(&check(&plan)), reference);
    }
    // A single worker writes each query as one contiguous range.
    let plan = plan(&Workload::S3asim(p), 2).unwrap();
    for a in writes(&plan, 1) {
        assert_eq!(ranges(a).len(), 1);
    }
}

#[test]
fn seeded_and_deterministic() {
    let a = plan(&Workload::S3asim(small(1, false)), 6).unwrap();
    let b = plan(&Workload::S3asim(small(1, false)), 6).unwrap();
    let c = plan(&Workload::S3asim(small(2, false)), 6).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn defaults_match_the_paper_counts() {
    let p = S3asimParams::default();
    let results = s3asim_results(&p).unwrap();
    let total: u64 = results.iter().map(|r| r.len).sum();
    let n = results.len() as u64;
    assert!((20 * 1000..=20 * 2000).contains(&n));
    let mean = total / n;
    assert!((4000..4900).contains(&mean), "mean result {mean} B");
    assert!((100 << 20..160 << 20).contains(&total), "total {total}");
    let plan = plan(&Workload::S3asim(p), 8).unwrap();
    check_cheap(&plan);
    assert_eq!(plan.write_bytes(), total);
}

#[test]
fn a_master_needs_a_worker() {
    let err = plan(&Workload::S3asim(S3asimParams::default()), 1).unwrap_err();
    assert!(err.to_string().contains("all_workers"), "{err}");
    let p = S3asimParams {
        all_workers: true,
        ..small(1, true)
    };
    assert!(plan(&Workload::S3asim(p), 1).is_ok());
}
