//! Helpers shared by the integration tests of `atomio` and of `atomio-lab` (which includes
//! this file by path; each test crate uses some of them).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Spawns `cmd` (an `atomio server …` command) with its stdout piped and waits for the
/// line where it says where it listens; returns the process and that address.
pub fn start_server(cmd: &mut Command) -> (Child, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("start atomio server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("the server's first line");
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        !addr.is_empty(),
        "the server said nothing about where it listens"
    );
    (child, addr)
}

/// A prerequisite a test needs is missing: a failure, unless `ATOMIO_SKIP_PRIVILEGED=1` says
/// this machine cannot have it (not root, no namespaces, no mounts); then the test is
/// skipped, saying so. CI runs as root, where every prerequisite exists.
pub fn missing(why: &str) {
    assert!(
        std::env::var_os("ATOMIO_SKIP_PRIVILEGED").is_some(),
        "{why} (needs root; ATOMIO_SKIP_PRIVILEGED=1 skips this test on a machine that cannot)"
    );
    eprintln!("skipping: ATOMIO_SKIP_PRIVILEGED is set and {why}");
}
