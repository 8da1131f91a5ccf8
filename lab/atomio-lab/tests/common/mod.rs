//! The lab's test helpers: those shared with `atomio`'s tests, and `bench_ok`.
#![allow(dead_code)]

#[path = "../../../../crates/atomio-cli/tests/common/mod.rs"]
mod shared;
#[allow(unused_imports)]
pub use shared::*;

use std::path::Path;
use std::process::Command;

/// `atomio-lab ARGS --no-progress --json JSON --chart CHART` (a benchmark), which must
/// succeed; its stdout.
pub fn bench_ok(args: &[&str], json: &Path, chart: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_atomio-lab"))
        .args(args)
        .arg("--no-progress")
        .arg("--json")
        .arg(json)
        .arg("--chart")
        .arg(chart)
        .output()
        .expect("run atomio-lab");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
