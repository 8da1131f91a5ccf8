//! `atomio … | head`: a command whose reader has gone ends with the shell's broken-pipe
//! status (141) and no panic report.

use std::process::{Command, Stdio};

#[test]
fn a_command_whose_reader_is_gone_ends_quietly() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    // The reader leaves before the first line, so the first write fails for certain (a
    // reader that left after a line could be outrun by a listing that fits the pipe).
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_atomio"))
        .args(["explain", "tile", "--clients", "4"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run atomio");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
}
