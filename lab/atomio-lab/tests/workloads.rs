//! Workloads end to end with real client processes (`atomio worker`) and servers: every
//! atomic strategy yields a verified-atomic file on the overlapping workloads; `none` is
//! caught violating atomicity (the verifier can fail); bytes written by non-overlapping
//! workloads come back exactly; a server that dies mid-call gives a clear error quickly.

use atomio_bench::workload::{run, Deploy, RowSpec, WorkloadBenchConfig, WorkloadRow};
use atomio_client::{BlockSize, PlacementKind, Strategy};
use atomio_net::{ClusterClient, LocalServers};
use atomio_proto::ErrorCode;
use atomio_workloads::{CallKind, Workload};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("atomio-wl-{name}-{}", std::process::id()))
}

fn config(workload: Workload, strategies: Vec<Strategy>, name: &str) -> WorkloadBenchConfig {
    WorkloadBenchConfig {
        workload,
        clients: 4,
        strategies: strategies.into_iter().map(RowSpec::Strategy).collect(),
        data: PlacementKind::Servers,
        bypass: false,
        servers: 3,
        deploy: Deploy::Embedded { memory: false },
        stripe_size: 4096,
        stripe_count: None,
        runs: 1,
        exe: PathBuf::from(env!("CARGO_BIN_EXE_atomio-lab")),
        scratch: scratch(name),
        verify: true,
        keep: None,
        progress: false,
        delay: Default::default(),
    }
}

fn every_atomic_strategy() -> Vec<Strategy> {
    let mut v = vec![
        Strategy::posix_fcntl(),
        Strategy::romio(),
        Strategy::whole_file(),
        Strategy::bounding_extent(),
        Strategy::block(BlockSize::Bytes(4096)),
        Strategy::block(BlockSize::Stripe),
    ];
    v.extend(Strategy::ching_all());
    v
}

fn workload(name: &str, args: &[&str]) -> Workload {
    Workload::from_name(name, args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// 24×24 tiles of 48-byte elements overlapping by 5 (every client's tile overlaps its
/// neighbours').
fn small_tiles() -> Workload {
    workload(
        "tile",
        &[
            "--tile-x",
            "24",
            "--tile-y",
            "24",
            "--element-bytes",
            "48",
            "--overlap-x",
            "5",
            "--overlap-y",
            "5",
        ],
    )
}

async fn rows(cfg: WorkloadBenchConfig) -> Vec<WorkloadRow> {
    let dir = cfg.scratch.clone();
    let r = run(&cfg)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", cfg.workload.name()));
    let _ = std::fs::remove_dir_all(dir);
    r
}

/// Every atomic strategy, on both placements (the user's file; atomio's servers).
#[tokio::test(flavor = "multi_thread")]
async fn every_atomic_strategy_verifies_on_tile_row_and_ior_hard() {
    let cases = [
        small_tiles(),
        workload(
            "row",
            &["--width", "40", "--height", "16", "--element-bytes", "24"],
        ),
        workload(
            "ior-hard",
            &["--transfers-per-block", "4", "--segments", "2"],
        ),
    ];
    for w in cases {
        let name = w.name();
        let plan = w.plan(4).unwrap();
        if name != "ior-strided" {
            assert!(plan.overlapping, "{name} should overlap");
        }
        // The user's file; the servers through messages; the servers' object files.
        for (data, bypass) in [
            (PlacementKind::Direct, false),
            (PlacementKind::Servers, false),
            (PlacementKind::Servers, true),
        ] {
            let mut cfg = config(w.clone(), every_atomic_strategy(), name);
            cfg.data = data;
            cfg.bypass = bypass;
            for r in rows(cfg).await {
                let expected = if plan.overlapping { Some(true) } else { None };
                assert_eq!(
                    r.verified, expected,
                    "{name} under {} on {data} (bypass {bypass}): {:?}",
                    r.strategy, r.violation
                );
                let fcntl = r.strategy == "posix-fcntl" || r.strategy == "romio";
                let want = match (fcntl, data, bypass) {
                    (true, _, _) | (_, PlacementKind::Direct, _) => "direct",
                    (_, PlacementKind::Servers, false) => "servers",
                    (_, PlacementKind::Servers, true) => "servers (files)",
                };
                assert_eq!(r.data, want, "{}", r.strategy);
            }
        }
    }
}

/// Host locks (`<strategy>+host`: the locks in a same-host table in shared memory, no lock
/// server): every strategy that locks a direct file on the lock service verifies atomic on
/// overlapping workloads, including large tiles whose row writes overlap in time (where
/// `none` is caught torn, below).
#[tokio::test(flavor = "multi_thread")]
async fn host_locks_verify_on_overlapping_workloads() {
    let big_tiles = workload(
        "tile",
        &[
            "--tile-x",
            "256",
            "--tile-y",
            "256",
            "--element-bytes",
            "64",
            "--overlap-x",
            "64",
            "--overlap-y",
            "64",
        ],
    );
    let rows_w = workload(
        "row",
        &["--width", "40", "--height", "16", "--element-bytes", "24"],
    );
    for w in [small_tiles(), rows_w, big_tiles] {
        let name = w.name();
        let mut cfg = config(w, Vec::new(), "host");
        cfg.data = PlacementKind::Direct;
        cfg.strategies = every_atomic_strategy()
            .into_iter()
            .filter(|s| s.uses_lock_service() && s.supports(PlacementKind::Direct))
            .map(RowSpec::HostLocks)
            .collect();
        assert!(cfg.strategies.len() >= 8, "{:?}", cfg.strategies);
        let n = cfg.strategies.len();
        let got = rows(cfg).await;
        assert_eq!(got.len(), n, "{name}: a row per strategy");
        for r in got {
            assert!(r.strategy.ends_with("+host"), "{}", r.strategy);
            eprintln!("{name}: {} {:.3} s", r.strategy, r.seconds);
            assert_eq!(
                r.verified,
                Some(true),
                "{name} under {}: {:?}",
                r.strategy,
                r.violation
            );
        }
    }
    assert!(
        "posix-fcntl+host".parse::<RowSpec>().is_err(),
        "host locks replace lock servers only"
    );
}

/// Through delaying relays (an injected round trip): lock and cached-lock strategies
/// still verify, and the round trip a ping measures is at least the one asked for.
#[tokio::test(flavor = "multi_thread")]
async fn runs_through_delaying_relays_verify_and_measure_their_round_trip() {
    // Overlapping tiles: every strategy must order the writers.
    let w = small_tiles();
    let strategies = vec![
        "ching:datatype:one-try".parse().unwrap(),
        "seqdlm".parse().unwrap(),
        "dlm-lustre".parse().unwrap(),
    ];
    let mut cfg = config(w, strategies, "relayed");
    cfg.delay = atomio_net::relay::Delay::rtt_us(2_000, 500);
    for r in rows(cfg).await {
        assert_eq!(r.verified, Some(true), "{}: {:?}", r.strategy, r.violation);
        let rtt = r.rtt.expect("a relayed run reports its round trip");
        assert_eq!(rtt.asked_us, 2_000.0);
        assert!(
            rtt.relayed_us >= 2_000.0 && rtt.relayed_us > rtt.direct_us,
            "{rtt:?}"
        );
    }
}

/// The negative control: without atomicity, overlapping tiles end up torn, and the
/// verifier says so. On servers, small strips spread every tile over all servers so the
/// servers apply the clients' pieces in different orders; on the user's file, tiles of 256
/// rows make the processes' row writes overlap in time.
#[tokio::test(flavor = "multi_thread")]
async fn none_is_reported_violated_on_overlapping_tiles() {
    let tile = |edge: &str, overlap: &str| {
        workload(
            "tile",
            &[
                "--tile-x",
                edge,
                "--tile-y",
                edge,
                "--element-bytes",
                "64",
                "--overlap-x",
                overlap,
                "--overlap-y",
                overlap,
            ],
        )
    };
    'placements: for data in PlacementKind::ALL {
        let w = match data {
            PlacementKind::Servers => tile("64", "16"),
            PlacementKind::Direct => tile("256", "64"),
        };
        let mut cfg = config(w, vec![Strategy::none()], "none");
        cfg.data = data;
        cfg.stripe_size = 512;
        cfg.servers = 4;
        cfg.runs = 1;
        for attempt in 1..=30 {
            let r = rows(cfg.clone()).await;
            if r[0].verified == Some(false) {
                let v = r[0].violation.clone().unwrap_or_default();
                assert!(
                    v.contains("appear") || v.contains("cycle") || v.contains("torn"),
                    "{v}"
                );
                eprintln!("{data}: caught after {attempt} attempt(s): {v}");
                continue 'placements;
            }
        }
        panic!("{data}: 30 runs of overlapping tiles without atomicity were all reported atomic");
    }
}

/// Expected file of a non-overlapping workload: every write's tags at its bytes.
fn expected_bytes(w: &Workload, clients: u32) -> Vec<u8> {
    let plan = w.plan(clients).unwrap();
    let mut out = vec![0u8; plan.file_bytes as usize];
    for c in &plan.clients {
        for call in c.calls.iter().filter(|c| c.kind == CallKind::Write) {
            let a = call.access.as_ref().unwrap();
            let mut buf = vec![0u8; a.size() as usize];
            atomio_verify::fill(c.rank, u64::from(call.op), a.ranges(), &mut buf).unwrap();
            let mut at = 0;
            for r in a.ranges() {
                let n = r.len() as usize;
                out[r.start as usize..r.end as usize].copy_from_slice(&buf[at..at + n]);
                at += n;
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn non_overlapping_workloads_round_trip_exactly() {
    let cases = [
        workload(
            "s3d",
            &["--grid-x", "12", "--grid-y", "10", "--grid-z", "8"],
        ),
        workload("flash", &["--blocks-per-client", "3"]),
        workload(
            "ior-segmented",
            &[
                "--xfer-bytes",
                "1000",
                "--transfers-per-block",
                "3",
                "--segments",
                "2",
            ],
        ),
        workload("s3asim", &["--queries", "3"]),
    ];
    for w in cases {
        let name = w.name();
        let keep = scratch(&format!("keep-{name}"));
        let want = expected_bytes(&w, 4);
        for data in PlacementKind::ALL {
            let mut cfg = config(
                w.clone(),
                vec![Strategy::none(), "ching:datatype:one-try".parse().unwrap()],
                name,
            );
            cfg.keep = Some(keep.clone());
            cfg.data = data;
            // The `plain` and `plain-mapped` rows write the same bytes in the same places.
            cfg.strategies.push(RowSpec::Plain);
            cfg.strategies.push(RowSpec::PlainMapped);
            for r in rows(cfg).await {
                let file = keep.join(format!("{name}-{}.dat", r.strategy.replace(':', "-")));
                let got = std::fs::read(&file).unwrap();
                assert_eq!(got.len(), want.len(), "{name} {}: size", r.strategy);
                assert!(
                    got == want,
                    "{name} {}: exported bytes differ from what was written",
                    r.strategy
                );
                // The kept manifest verifies with the stand-alone verifier too.
                let report =
                    atomio_verify::verify_manifest(atomio_verify::manifest_path_for(&file))
                        .unwrap();
                assert!(report.ok(), "{report}");
            }
        }
        let _ = std::fs::remove_dir_all(keep);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_dying_mid_call_is_a_clear_error_within_bounded_time() {
    let dir = scratch("death");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_atomio-lab"));
    let mut servers = LocalServers::start(&exe, 2, &dir).await.unwrap();
    let mut c = ClusterClient::connect_tcp(&servers.addresses)
        .await
        .unwrap();
    c.set_timeout(Duration::from_secs(20));
    let f = c.create("/death", 65536, 2, true).await.unwrap();
    // A large write in flight when server 1 dies.
    let access =
        atomio_layout::Access::contiguous(atomio_layout::ByteRange::new(0, 256 << 20).unwrap())
            .unwrap();
    let data = vec![7u8; 256 << 20];
    let t0 = Instant::now();
    let write = c.write(&f, &access, &data);
    let kill = async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        servers.kill(1).await;
    };
    let (result, ()) = tokio::join!(write, kill);
    let err = result.expect_err("the write cannot succeed without server 1");
    assert_eq!(err.code, ErrorCode::Disconnected, "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    // Later calls to the dead server fail at once, clearly.
    let t1 = Instant::now();
    let e = c.size(&f).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Disconnected, "{e}");
    assert!(t1.elapsed() < Duration::from_secs(1));
    servers.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Interval I/O end to end: `interval` and `auto` verify atomic on overlapping tiles on
/// both placements and lock only there; on private tiles they take no lock at all (every
/// call lock-free), and the interval file (`interval+ifile`) reads back, translated, as
/// the same bytes.
#[tokio::test(flavor = "multi_thread")]
async fn interval_locks_only_shared_bytes_and_writes_interval_files() {
    let strategies = vec![Strategy::interval(), Strategy::auto()];
    for data in [PlacementKind::Direct, PlacementKind::Servers] {
        let mut cfg = config(small_tiles(), strategies.clone(), "interval-shared");
        cfg.data = data;
        for r in rows(cfg).await {
            assert_eq!(
                r.verified,
                Some(true),
                "{} on {data}: {:?}",
                r.strategy,
                r.violation
            );
            assert!(
                r.lock_requests > 0,
                "{}: shared ghost cells need locks",
                r.strategy
            );
            assert_eq!(
                r.interval_fallbacks, 0,
                "{}: everything was declared",
                r.strategy
            );
        }
    }
    let private = workload(
        "tile",
        &[
            "--tile-x",
            "24",
            "--tile-y",
            "24",
            "--element-bytes",
            "48",
            "--overlap-x",
            "0",
            "--overlap-y",
            "0",
        ],
    );
    let mut cfg = config(private, strategies, "interval-private");
    cfg.data = PlacementKind::Direct;
    cfg.strategies.push("interval+ifile".parse().unwrap());
    let got = rows(cfg).await;
    assert_eq!(got.len(), 3);
    for r in got {
        // No overlap: the verifier checks every byte came back (None = nothing to order).
        assert_eq!(r.verified, None, "{}: {:?}", r.strategy, r.violation);
        assert_eq!(
            r.lock_requests, 0,
            "{}: private tiles take no lock",
            r.strategy
        );
        assert_eq!(r.lock_free_calls, 4, "{}", r.strategy);
    }
    assert!("ching:list:one-try+ifile".parse::<RowSpec>().is_err());
}
