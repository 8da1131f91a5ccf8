//! Helpers shared by the tests that run real `atomio server` processes.

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
