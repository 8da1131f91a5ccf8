//! The scale model end to end at a tiny scale: `atomio-lab sim calibrate --quick` measures a
//! cost file through real server processes (twice, and keeps the median), `sim validate --predict-only` and `sim --scale
//! --quick` read it, print their tables and write JSON and a chart; bad cost files are
//! refused with a message, never a panic.

use std::path::Path;
use std::process::{Command, Output};

fn atomio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_atomio-lab"))
        .args(args)
        .output()
        .expect("run atomio")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn calibrate_then_validate_and_project() {
    let dir = std::env::temp_dir().join(format!("atomio-scale-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |name: &str| dir.join(name).display().to_string();
    let costs = p("calib.json");
    let out = atomio(&[
        "sim",
        "calibrate",
        "--quick",
        "--rounds",
        "2",
        "--patience",
        "0",
        "--json",
        &costs,
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("net.server_batch_ns"), "{stdout}");
    assert!(stdout.contains("the median of 2 calibrations"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&costs).unwrap()).unwrap();
    for field in ["client_msg_ns", "server_batch_ns"] {
        assert!(v["net"][field].as_f64().unwrap() > 0.0, "{field}: {v}");
    }
    assert!(v["lock"]["server_pattern_range_ns"].as_f64().unwrap() > 0.0);
    assert!(v["net"]["wake_ns"].as_f64().unwrap() >= 0.0);
    assert!(v["io"]["pwrite_curve"].as_array().unwrap().len() >= 2);

    let out = atomio(&[
        "sim",
        "validate",
        "--costs",
        &costs,
        "--predict-only",
        "--clients",
        "2",
        "--groups",
        "locks,tile",
        "--json",
        &p("validate.json"),
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("datatype-one-try") && stdout.contains("tile"),
        "{stdout}"
    );

    let (json, svg) = (p("scale.json"), p("scale.svg"));
    let out = atomio(&[
        "sim",
        "--scale",
        "--costs",
        &costs,
        "--quick",
        "--max-clients",
        "4",
        "--max-servers",
        "2",
        "--scale-json",
        &json,
        "--scale-chart",
        &svg,
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("safety:") && stdout.contains("ching-locks"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    for study in ["ching-locks", "s3d", "ior-hard", "tile"] {
        assert!(rows.iter().any(|r| r["study"] == study), "{study}");
    }
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_cost_files_are_refused_with_a_message() {
    let dir = std::env::temp_dir().join(format!("atomio-scale-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("none.json");
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{\"schema\": 1, \"net\": 5}").unwrap();
    for (path, want) in [(&missing, "calibrate"), (&garbage, "not a cost file")] {
        let out = atomio(&[
            "sim",
            "--scale",
            "--costs",
            path.to_str().unwrap(),
            "--quick",
        ]);
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{stdout}");
        assert!(
            stderr.contains(want),
            "{}: {stderr}",
            Path::new(path).display()
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = atomio(&[
        "sim",
        "--scale",
        "--costs",
        garbage.to_str().unwrap(),
        "--studies",
        "nope",
    ]);
    assert!(!out.status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}
