//! `atomio-lab bench locks` end to end at a tiny scale: embedded and real TCP server processes,
//! table on stdout, JSON with the documented fields, an SVG chart.

mod common;

use std::path::Path;

/// `atomio-lab bench locks ARGS` (see `common::bench_ok`).
fn bench_locks(args: &[&str], json: &Path, chart: &Path) -> String {
    let all: Vec<&str> = ["bench", "locks"].iter().chain(args).copied().collect();
    common::bench_ok(&all, json, chart)
}

#[test]
fn bench_locks_runs_both_transports_and_writes_json_and_chart() {
    let dir = std::env::temp_dir().join(format!("atomio-bench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("locks.json");
    let chart = dir.join("locks.svg");
    let stdout = bench_locks(
        &[
            "--transport",
            "both",
            "--clients",
            "1,2",
            "--spacing",
            "64",
            "--locks",
            "600",
            "--runs",
            "1",
            "--rounds",
            "3",
            "--overlap",
            "0,100",
            "--contention-clients",
            "2",
        ],
        &json,
        &chart,
    );
    assert!(
        stdout.contains("datatype-alt-try") && stdout.contains("key figures"),
        "{stdout}"
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // 2 transports × (2 scaling sizes + 2 overlaps + interleaved) × 9 method-protocols.
    assert_eq!(rows.len(), 2 * 5 * 9);
    assert_eq!(
        rows.iter().filter(|r| r["variant"] == "interleave").count(),
        2 * 9
    );
    assert!(
        stdout.contains("the fastest protocol at each overlap vs the fastest at 0%")
            && stdout.contains("interleaved (no lock shared"),
        "{stdout}"
    );
    for r in &rows {
        for field in [
            "transport",
            "method",
            "protocol",
            "clients",
            "servers",
            "spacing_bytes",
            "overlap_pct",
            "acquire_locks_per_s",
            "release_locks_per_s",
            "runs",
            "rounds",
        ] {
            assert!(r.get(field).is_some(), "missing {field} in {r}");
        }
        // Repeated cycles in the contention and interleave variants; the paper's one in
        // scaling.
        let rounds = if r["variant"] == "scaling" { 1 } else { 3 };
        assert_eq!(r["rounds"], rounds, "{r}");
        assert!(r["acquire_locks_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["release_locks_per_s"].as_f64().unwrap() > 0.0);
    }
    assert!(rows.iter().any(|r| r["transport"] == "tcp"));
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("datatype-one-try"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--transport host`: no server; one row per variant (`host-table`), the clients sharing
/// one host lock table, overlapping clients (100 %) served one after another.
#[test]
fn bench_locks_on_the_host_table_runs_every_variant_without_servers() {
    let dir = std::env::temp_dir().join(format!("atomio-bench-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("locks.json");
    let stdout = bench_locks(
        &[
            "--transport",
            "host",
            "--clients",
            "1,2,4",
            "--spacing",
            "64",
            "--locks",
            "4096",
            "--runs",
            "2",
            "--rounds",
            "5",
            "--overlap",
            "0,100",
            "--contention-clients",
            "4",
        ],
        &json,
        &dir.join("locks.svg"),
    );
    assert!(stdout.contains("one host's lock table acquire"), "{stdout}");
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // 3 scaling sizes + 2 overlaps + interleaved, one row each: no method × protocol.
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in &rows {
        assert_eq!(r["transport"], "host");
        assert_eq!(
            (&r["method"], &r["protocol"]),
            (&"host".into(), &"table".into())
        );
        assert_eq!(r["messages_per_client"], 0.0);
        let rate = r["acquire_locks_per_s"].as_f64().unwrap();
        assert!(rate > 0.0 && rate.is_finite(), "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
