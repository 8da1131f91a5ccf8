use crate::common::*;
use atomio_workloads::*;

fn small(particles: u64, iterations: u64, sync: bool) -> VpicParams {
    VpicParams {
        particles,
        iterations: Some(iterations),
        sync,
    }
}

#[test]
fn writes_land_at_exact_offsets() {
    // N = 3, P = 5, I = 2: W = 20 bytes per write, each dataset 3·2·20 = 120 bytes.
    let plan = plan(&Workload::Vpic(small(5, 2, false)), 3).unwrap();
    check(&plan);
    assert_eq!(plan.file_bytes, 960);
    let at = |c: usize, i: usize, v: usize| ranges(writes(&plan, c)[i * 8 + v]);
    assert_eq!(at(0, 0, 0), vec![r(0, 20)]);
    assert_eq!(at(1, 0, 0), vec![r(20, 40)]);
    assert_eq!(at(2, 0, 0), vec![r(40, 60)]);
    assert_eq!(at(0, 1, 0), vec![r(60, 80)]);
    assert_eq!(at(2, 1, 0), vec![r(100, 120)]);
    assert_eq!(at(0, 0, 1), vec![r(120, 140)]);
    assert_eq!(at(1, 1, 3), vec![r(440, 460)]);
    assert_eq!(at(2, 1, 7), vec![r(940, 960)]);
    // Client 1 in call order: iteration 0's eight variables, then iteration 1's.
    let starts: Vec<u64> = writes(&plan, 1)
        .iter()
        .map(|a| a.hull().unwrap().start)
        .collect();
    assert_eq!(
        starts,
        vec![20, 140, 260, 380, 500, 620, 740, 860, 80, 200, 320, 440, 560, 680, 800, 920]
    );
}

#[test]
fn clients_tile_the_file_without_overlap() {
    for n in 1..=5u64 {
        for particles in [1u64, 3, 16] {
            for iterations in 1..=3u64 {
                let p = small(particles, iterations, false);
                let plan = plan(&Workload::Vpic(p), n as u32).unwrap();
                let sets = check(&plan);
                assert!(!plan.overlapping);
                let w = 4 * particles;
                let dataset = n * iterations * w;
                let file = 8 * dataset;
                assert_eq!(plan.file_bytes, file);
                assert_eq!(union(&sets), list(&[(0, file)]));
                assert_eq!(plan.write_bytes(), file, "no byte written twice");
                for c in 0..n {
                    let own: Vec<_> = (0..8)
                        .flat_map(|v| {
                            (0..iterations).map(move |i| {
                                let s = v * dataset + (i * n + c) * w;
                                (s, s + w)
                            })
                        })
                        .collect();
                    assert_eq!(sets[c as usize], list(&own));
                    assert_eq!(plan.clients[c as usize].write_bytes(), 8 * iterations * w);
                }
                for (i, a) in sets.iter().enumerate() {
                    for b in &sets[i + 1..] {
                        assert_eq!(common_bytes(a, b), 0);
                    }
                }
            }
        }
    }
}

#[test]
fn iteration_outer_variable_inner_then_optional_sync() {
    let (n, particles, iterations) = (4u64, 6u64, 3u64);
    let w = 4 * particles;
    let dataset = n * iterations * w;
    for sync in [false, true] {
        let plan = plan(
            &Workload::Vpic(small(particles, iterations, sync)),
            n as u32,
        )
        .unwrap();
        check(&plan);
        for (c, client) in plan.clients.iter().enumerate() {
            let c = c as u64;
            assert_eq!(client.calls.len() as u64, 8 * iterations + u64::from(sync));
            for (k, call) in client.calls.iter().enumerate() {
                let k = k as u64;
                if k == 8 * iterations {
                    assert_eq!(call.kind, CallKind::Sync, "the sync comes last");
                    continue;
                }
                assert_eq!(call.kind, CallKind::Write);
                let a = call.access.as_ref().unwrap();
                assert_eq!(a.pattern().nodes().len(), 1, "one contiguous write");
                let (i, v) = (k / 8, k % 8);
                let s = v * dataset + (i * n + c) * w;
                assert_eq!(ranges(a), vec![r(s, s + w)]);
            }
        }
        let syncs = plan
            .clients
            .iter()
            .flat_map(|c| &c.calls)
            .filter(|c| c.kind == CallKind::Sync)
            .count() as u64;
        assert_eq!(syncs, if sync { n } else { 0 });
    }
}

#[test]
fn defaults_are_256_kib_writes_and_16_mib_per_client() {
    let plan = plan(&Workload::Vpic(VpicParams::default()), 16).unwrap();
    check_cheap(&plan);
    assert_eq!(plan.params["particles"].as_u64(), Some(65_536));
    assert_eq!(plan.params["iterations"].as_u64(), Some(8));
    assert_eq!(plan.params["sync"].as_bool(), Some(false));
    for c in &plan.clients {
        assert_eq!(c.write_bytes(), 16 << 20);
        assert_eq!(c.calls.len(), 64);
        assert!(c
            .calls
            .iter()
            .all(|k| k.kind == CallKind::Write && k.bytes() == 256 << 10));
    }
    assert_eq!(plan.file_bytes, 16 * (16 << 20));
    // The paper's 1 MiB configuration keeps 16 MiB per client in 2 iterations.
    let big = plan_for(&["--particles", "262144"]);
    assert_eq!(big.params["iterations"].as_u64(), Some(2));
    assert_eq!(big.clients[0].write_bytes(), 16 << 20);
    assert!(big.clients[0].calls.iter().all(|k| k.bytes() == 1 << 20));
    // Huge writes still give one iteration.
    let huge = plan_for(&["--particles", "8388608"]);
    assert_eq!(huge.params["iterations"].as_u64(), Some(1));
}

fn plan_for(args: &[&str]) -> WorkloadPlan {
    let w = Workload::from_name("vpic", args).unwrap();
    plan(&w, 4).unwrap()
}

#[test]
fn bad_parameters_are_errors() {
    let e = plan(&Workload::Vpic(small(0, 2, false)), 4).unwrap_err();
    assert!(
        matches!(
            e,
            WorkloadError::Zero {
                param: "particles",
                ..
            }
        ),
        "{e}"
    );
    let e = plan(&Workload::Vpic(small(3, 0, false)), 4).unwrap_err();
    assert!(
        matches!(
            e,
            WorkloadError::Zero {
                param: "iterations",
                ..
            }
        ),
        "{e}"
    );
    for (particles, iterations, clients) in [
        (u64::MAX, 1, 2),
        (1 << 61, 1, 1),       // 4·P past the largest offset
        (1 << 58, 1, 1),       // one iteration's 8 writes past it
        (1 << 57, 1, 2),       // the whole file (8·N·I·W = 2^63) past it
        (1 << 50, 1 << 10, 4), // N·I·W wraps
    ] {
        let e = plan(
            &Workload::Vpic(small(particles, iterations, false)),
            clients,
        )
        .unwrap_err();
        assert!(matches!(e, WorkloadError::Overflow { .. }), "{e}");
    }
    let e = plan(&Workload::Vpic(small(1, 1 << 20, true)), 4).unwrap_err();
    assert!(matches!(e, WorkloadError::TooLarge { .. }), "{e}");
    let e = plan(&Workload::Vpic(VpicParams::default()), 0).unwrap_err();
    assert!(
        matches!(e, WorkloadError::Clients { clients: 0, .. }),
        "{e}"
    );
}
