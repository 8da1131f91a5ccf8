//! `atomio-lab bench rma`, `atomio-lab bench mpi-tile`, `atomio-lab bench mpi-strided` and `atomio-lab bench mpi-noncontig` end to end at a tiny scale: they build the
//! C programs under `mpi/`, run them under `mpiexec`, print tables and write JSON with the
//! documented fields and SVG charts. Both need MPICH (`mpicc`, `mpiexec`; `scripts/setup`
//! installs it); without it they fail unless `ATOMIO_SKIP_MPI=1` is set.

mod common;

use std::path::{Path, PathBuf};

fn have(p: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
}

fn mpi_available() -> bool {
    let ok = have("mpiexec") && have("mpicc") && have("make");
    if !ok {
        assert!(
            std::env::var_os("ATOMIO_SKIP_MPI").is_some(),
            "mpiexec/mpicc/make not on PATH: run scripts/setup (installs mpich libmpich-dev) \
             or set ATOMIO_SKIP_MPI=1"
        );
        eprintln!("skipping: ATOMIO_SKIP_MPI is set and there is no MPI");
    }
    ok
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atomio-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn bench_rma_tiny_runs_all_impls_and_writes_json_and_chart() {
    if !mpi_available() {
        return;
    }
    let dir = scratch("bench-rma");
    let (json, chart) = (dir.join("rma.json"), dir.join("rma.svg"));
    let d = dir.display().to_string();
    // `--dir`: the fcntl lock file lives in the scratch folder.
    let stdout = common::bench_ok(
        &[
            "bench",
            "rma",
            "--ranks",
            "2",
            "--reps",
            "2",
            "--target-sec",
            "0.1",
            "--total",
            "24",
            "--dir",
            &d,
        ],
        &json,
        &chart,
    );
    assert!(
        stdout.contains("key figure") && stdout.contains("direct-grant / paper"),
        "{stdout}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["bench"], "rma");
    assert_eq!(v["world"], 2);
    assert_eq!(v["reps"], 2);
    let rows = v["rows"].as_array().unwrap();
    // 3 impls × 2 cases × 1 rank count.
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in rows {
        for f in [
            "impl",
            "case",
            "ranks",
            "pairs",
            "us_per_pair_median",
            "us_per_pair_runs",
        ] {
            assert!(r.get(f).is_some(), "missing {f} in {r}");
        }
        assert_eq!(r["ranks"], 2);
        assert_eq!(r["us_per_pair_runs"].as_array().unwrap().len(), 2);
        assert!(r["us_per_pair_median"].as_f64().unwrap() > 0.0);
        if r["impl"] == "fcntl" {
            assert!(r["fs"].is_string());
        } else {
            assert!(r["epochs_per_pair"].as_f64().unwrap() >= 2.0, "{r}");
        }
    }
    for i in ["paper", "direct-grant", "fcntl"] {
        for c in ["conflicting", "nonconflicting"] {
            assert!(
                rows.iter().any(|r| r["impl"] == i && r["case"] == c),
                "no {i} {c}"
            );
        }
    }
    let key = &v["key"];
    assert_eq!(key["case"], "conflicting");
    assert_eq!(
        (key["ranks"].as_u64(), key["target_ranks"].as_u64()),
        (Some(2), Some(8))
    );
    let ratio = key["ratio"].as_f64().unwrap();
    let want = key["direct_grant_us"].as_f64().unwrap() / key["paper_us"].as_f64().unwrap();
    assert!((ratio - want).abs() < 1e-9);
    assert_eq!(key["met"].as_bool().unwrap(), ratio <= 0.5);
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("direct-grant"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_mpi_tile_tiny_verifies_baselines_and_isolates_atomio_rows() {
    if !mpi_available() {
        return;
    }
    let dir = scratch("bench-mpi-tile");
    let (json, chart) = (dir.join("tile.json"), dir.join("tile.svg"));
    let d = dir.display().to_string();
    let small = [
        "bench",
        "mpi-tile",
        "--tile-x",
        "24",
        "--tile-y",
        "20",
        "--element-bytes",
        "32",
        "--overlap-x",
        "3",
        "--overlap-y",
        "2",
        "--iterations",
        "2",
        "--reps",
        "2",
        "--dir",
        &d,
    ];

    // No library: the strategy is listed as skipped, the baselines run and verify.
    let mut args = small.to_vec();
    args.extend(["--strategies", "rma", "--mpiio-lib", "none"]);
    let stdout = common::bench_ok(&args, &json, &chart);
    assert!(stdout.contains("--mpiio-lib none"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["bench"], "mpi-tile");
    assert_eq!(v["ranks"], 4);
    // 2×2 tiles: 2·24 − 3 by 2·20 − 2 elements.
    assert_eq!(v["dataset"], serde_json::json!([45, 38]));
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["config"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "mpich",
            "mpich-nods",
            "mpich-atomic",
            "mpich-atomic-nods",
            "atomio:rma"
        ]
    );
    for r in &rows[..4] {
        assert!(r["mib_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["runs"].as_array().unwrap().len(), 2);
        assert!(r["skipped"].is_null() && r["error"].is_null());
        for run in r["runs"].as_array().unwrap() {
            assert_eq!(run["iter_seconds"].as_array().unwrap().len(), 2);
        }
    }
    // MPICH's atomic mode must verify; non-atomic may or may not interleave.
    for r in &rows[2..4] {
        assert_eq!(r["verified"], "atomic", "{r}");
        assert_eq!(r["runs"][0]["atomicity_get"], 1);
    }
    assert!((rows[2]["ratio_to_mpi_atomic"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(rows[4]["verified"], "skipped");
    assert!(rows[4]["mib_per_s"].is_null());
    assert!(rows[4]["skipped"].as_str().unwrap().contains("--mpiio-lib"));
    assert!(v["key"].is_null());
    assert!(std::fs::read_to_string(&chart).unwrap().starts_with("<svg"));

    // A library that does not intercept MPI-IO: MPICH refuses the `atomio:` prefix, so the
    // atomio row fails (never silently measures plain MPICH) and the baseline still runs.
    let lib = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
    ]
    .into_iter()
    .find(|p| Path::new(p).is_file());
    if let Some(lib) = lib {
        let mut args = small.to_vec();
        args.extend([
            "--baselines",
            "mpich-atomic",
            "--strategies",
            "rma",
            "--mpiio-lib",
            lib,
        ]);
        let stdout = common::bench_ok(&args, &json, &chart);
        assert!(stdout.contains("FAILED"), "{stdout}");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows[0]["mib_per_s"].as_f64().unwrap() > 0.0);
        assert!(
            rows[1]["error"].as_str().unwrap().contains("atomio:"),
            "{}",
            rows[1]
        );
        assert!(rows[1]["mib_per_s"].is_null());
        assert!(v["key"].is_null());
    }

    // The real library, built on demand next to the test's atomio (`--mpiio-lib auto`): the
    // atomio rows run under the preloaded library, verify atomic, and the key figure exists.
    let mut args = small.to_vec();
    args.extend([
        "--baselines",
        "mpich-atomic",
        "--strategies",
        "ching:datatype:one-try,rma",
    ]);
    let stdout = common::bench_ok(&args, &json, &chart);
    assert!(stdout.contains("libatomio_mpiio.so"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for r in &rows[1..] {
        assert!(r["error"].is_null() && r["skipped"].is_null(), "{r}");
        assert_eq!(r["verified"], "atomic", "{r}");
        assert!(r["mib_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(v["key"]["ratio"].as_f64().unwrap() > 0.0, "{}", v["key"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_mpi_strided_tiny_has_reference_rows_per_block_size_and_verifies_the_bytes() {
    if !mpi_available() {
        return;
    }
    let dir = scratch("bench-mpi-strided");
    let (json, chart) = (dir.join("strided.json"), dir.join("strided.svg"));
    let d = dir.display().to_string();
    let stdout = common::bench_ok(
        &[
            "bench",
            "mpi-strided",
            "--block",
            "64,4096",
            "--per-rank",
            "65536",
            "--reps",
            "2",
            "--baselines",
            "mpich,mpich-atomic",
            "--strategies",
            "rma",
            "--mpiio-lib",
            "none",
            "--dir",
            &d,
        ],
        &json,
        &chart,
    );
    assert!(
        stdout.contains("B = 64 bytes") && stdout.contains("B = 4096 bytes"),
        "{stdout}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let reports = v.as_array().expect("one report per block size");
    assert_eq!(reports.len(), 2);
    for (rep, block) in reports.iter().zip([64, 4096]) {
        assert_eq!(rep["bench"], "mpi-strided");
        assert_eq!(rep["program"]["strided"]["block"], block);
        let rows = rep["rows"].as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r["config"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "contiguous",
                "plain",
                "plain-mapped",
                "mpich",
                "mpich-atomic",
                "atomio:rma"
            ]
        );
        // Disjoint writes: every row that ran must leave exactly the expected bytes.
        for r in &rows[..5] {
            assert_eq!(r["verified"], "atomic", "{r}");
            assert!(r["mib_per_s"].as_f64().unwrap() > 0.0, "{r}");
            assert_eq!(r["runs"].as_array().unwrap().len(), 2);
        }
        assert_eq!(rows[0]["kind"], "reference");
        assert_eq!(rows[1]["kind"], "reference");
        assert_eq!(rows[2]["kind"], "reference");
        assert_eq!(rows[5]["verified"], "skipped");
    }
    assert!(std::fs::read_to_string(&chart).unwrap().starts_with("<svg"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_mpi_noncontig_tiny_reads_and_writes_verify_under_the_library() {
    if !mpi_available() {
        return;
    }
    let dir = scratch("bench-mpi-noncontig");
    let (json, chart) = (dir.join("noncontig.json"), dir.join("noncontig.svg"));
    let d = dir.display().to_string();
    let stdout = common::bench_ok(
        &[
            "bench",
            "mpi-noncontig",
            "--elements",
            "200",
            "--calls",
            "8",
            "--reps",
            "1",
            "--strategies",
            "auto,ching:posix:two-phase",
            "--dir",
            &d,
        ],
        &json,
        &chart,
    );
    assert!(stdout.contains("every strategy (auto >= 1.0x"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let reports = v.as_array().expect("one report per mode and memory side");
    assert_eq!(reports.len(), 4);
    for (rep, (read, ncmem)) in
        reports
            .iter()
            .zip([(true, false), (true, true), (false, false), (false, true)])
    {
        assert_eq!(rep["bench"], "mpi-noncontig");
        assert_eq!(rep["program"]["noncontig"]["read"], read);
        assert_eq!(rep["program"]["noncontig"]["ncmem"], ncmem);
        let rows = rep["rows"].as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r["config"].as_str().unwrap()).collect();
        let mut want = vec![
            "mpich",
            "mpich-atomic",
            "atomio:auto",
            "atomio:ching:posix:two-phase",
        ];
        if read {
            want.insert(0, "plain");
        }
        assert_eq!(names, want, "{rep}");
        // Disjoint elements: every run reads, or leaves, exactly the expected bytes.
        for r in rows {
            assert!(r["error"].is_null() && r["skipped"].is_null(), "{r}");
            assert_eq!(r["verified"], "atomic", "{r}");
            assert!(r["mib_per_s"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
