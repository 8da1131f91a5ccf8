//! `atomio-lab bench regions-sweep | version-readers | version-gc` end to end at a tiny scale:
//! every row runs, every read checks out, the table and the target line are printed, JSON
//! and an SVG chart are written.

mod common;

use std::path::PathBuf;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "atomio-bench-versions-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str], dir: &std::path::Path) -> (String, serde_json::Value) {
    let (json, chart) = (dir.join("out.json"), dir.join("out.svg"));
    let scratch = dir.join("scratch");
    let mut all = args.to_vec();
    all.extend(["--scratch", scratch.to_str().expect("a UTF-8 scratch path")]);
    let stdout = common::bench_ok(&all, &json, &chart);
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.contains("<svg"), "{svg}");
    let v = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (stdout, v)
}

#[test]
fn regions_sweep_measures_every_row_and_reads_back_what_was_written() {
    let d = dir("sweep");
    let (stdout, v) = run(
        &[
            "bench",
            "regions-sweep",
            "--mib",
            "1",
            "--regions",
            "1,4,64",
            "--runs",
            "1",
            "--servers",
            "2",
        ],
        &d,
    );
    assert!(stdout.contains("target: versioning at R = 64"), "{stdout}");
    assert!(stdout.contains("every read returned exactly"), "{stdout}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3 * 4);
    for r in rows {
        assert_eq!(r["verified"], true, "{r}");
        assert!(r["write_mib_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["read_mib_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_eq!(v["ratios"].as_array().unwrap().len(), 4);
    let _ = std::fs::remove_dir_all(&d);
}

/// A `version-readers` row the verifier accepted: one serial order explains the final file
/// and the kept reads, or (when the joint search gives up) each read alone.
fn assert_verified(row: &serde_json::Value) {
    let verdict = row["verdict"].as_str().unwrap();
    assert!(
        verdict == "atomic" || verdict == "each read atomic alone",
        "{row}"
    );
}

/// `bench version-readers` at a tiny scale (2 writers of 8 x 8 tiles, one short run).
const TINY_READERS: &[&str] = &[
    "bench",
    "version-readers",
    "--writers",
    "2",
    "--servers",
    "2",
    "--tile-x",
    "8",
    "--tile-y",
    "8",
    "--overlap",
    "2",
    "--warmup-ms",
    "50",
    "--runs",
    "1",
    "--write-interval-ms",
    "5",
];

#[test]
fn version_readers_runs_client_processes_and_verifies_the_reads() {
    let d = dir("readers");
    let (stdout, v) = run(&[TINY_READERS, &["--seconds", "0.3"]].concat(), &d);
    assert!(
        stdout.contains("target: versioning read latency"),
        "{stdout}"
    );
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for r in rows {
        assert!(r["idle_median_us"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["loaded_median_us"].as_f64().unwrap() > 0.0, "{r}");
        if r["strategy"] != "plain" {
            assert_verified(r);
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `--keep-last`: versioning's writers collect older snapshots as they write (the storage a
/// long-running store would keep), and the reads beside them still verify.
#[test]
fn version_readers_with_writer_retention_verifies_the_reads() {
    let d = dir("keep-last");
    let extra = [
        "--seconds",
        "0.3",
        "--strategies",
        "versioning",
        "--keep-last",
        "2",
    ];
    let (stdout, v) = run(&[TINY_READERS, &extra].concat(), &d);
    assert!(
        stdout.contains("versioning writers keep the last 2 snapshots stored"),
        "{stdout}"
    );
    assert_eq!(v["keep_last"], 2, "{v}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_verified(&rows[0]);
    let _ = std::fs::remove_dir_all(&d);
}

/// `--plain-reader`: the reader of every row reads a plain local file beside that row's
/// writers, so no row fetches tree nodes or is verified, and the target is not
/// judged on it.
#[test]
fn version_readers_with_a_plain_reader_measure_the_machine_under_each_rows_writers() {
    let d = dir("plain-reader");
    let extra = [
        "--seconds",
        "0.2",
        "--strategies",
        "plain,versioning",
        "--plain-reader",
    ];
    let (stdout, v) = run(&[TINY_READERS, &extra].concat(), &d);
    assert!(
        stdout.contains("reader: every row's reader read a plain local file"),
        "{stdout}"
    );
    assert!(!stdout.contains("target: versioning"), "{stdout}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert!(r["loaded_median_us"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["nodes_per_read"].is_null(), "{r}");
        assert!(r["verdict"].is_null(), "{r}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn version_gc_keeps_disk_usage_bounded_and_the_kept_snapshots_exact() {
    let d = dir("gc");
    let (stdout, v) = run(
        &[
            "bench",
            "version-gc",
            "--overwrites",
            "24",
            "--mib",
            "2",
            "--servers",
            "2",
        ],
        &d,
    );
    assert!(stdout.contains("target: the file's storage"), "{stdout}");
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        assert_eq!(r["verified"], true, "{r}");
    }
    let ver = rows.iter().find(|r| r["strategy"] == "versioning").unwrap();
    // After the last collection only the kept snapshots (4 × 2 MiB) and metadata remain.
    let last = ver["final_x"].as_f64().unwrap();
    assert!((3.9..4.5).contains(&last), "{ver}");
    assert_eq!(ver["snapshots_checked"], 4);
    // The writer holds the bound itself (retention): never more than the 4 kept snapshots
    // and the one being written, plus the servers' own few KiB, whatever the collector's
    // pace; between them, the writer and the collector collected something.
    let max = ver["max_x"].as_f64().unwrap();
    assert!(max <= 5.05, "{ver}");
    assert!(ver["writer_collections"].as_u64().is_some(), "{ver}");
    assert!(
        ver["collector"]["versions_collected"].as_u64().unwrap()
            + ver["writer_collections"].as_u64().unwrap()
            > 0,
        "{ver}"
    );
    assert!(
        stdout.contains("versioning writer: bounds the storage itself"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
