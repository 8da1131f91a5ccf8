//! `atomio-lab sim --versioning`: the versioning simulation runs clean and each of its
//! negative controls (a fault injected on purpose) is caught, naming the seed.

use std::process::Command;

fn lab(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_atomio-lab"))
        .args(args)
        .output()
        .expect("run atomio-lab");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_versioning_simulation_runs_clean_and_catches_its_controls() {
    let (ok, text) = lab(&[
        "sim",
        "--versioning",
        "--seeds",
        "100",
        "--clients",
        "4",
        "--ops",
        "6",
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("versions published"), "{text}");
    for fault in ["publish-out-of-order", "gc-frees-shared"] {
        let (ok, text) = lab(&[
            "sim",
            "--versioning",
            "--seeds",
            "100",
            "--version-fault",
            fault,
        ]);
        assert!(!ok, "{fault} was not caught: {text}");
        assert!(text.contains("seed"), "{text}");
    }
}
