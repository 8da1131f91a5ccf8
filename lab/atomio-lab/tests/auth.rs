//! Shared-secret tokens against real server and client processes: a server refuses to
//! listen beyond loopback without one; with one, clients without it or with another are
//! refused with a clear error, and clients with it work — their lease keepers too (a
//! holder's lease survives several lease lengths only if its renewals authenticate).

mod common;

use atomio_net::LocalServers;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

const TOKEN: &str = "0123456789abcdef-test-token";

fn exe() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_atomio-lab").into()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("atomio-auth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `atomio` with no token in its environment, then `extra` variables.
fn atomio(extra: &[(&str, &str)]) -> Command {
    let mut c = Command::new(exe());
    c.env_remove("ATOMIO_TOKEN").env_remove("ATOMIO_TOKEN_FILE");
    for (k, v) in extra {
        c.env(k, v);
    }
    c
}

#[test]
fn a_server_refuses_to_listen_beyond_loopback_without_a_token() {
    let out = atomio(&[])
        .args(["server", "--listen", "0.0.0.0:0", "--data"])
        .arg(scratch("open"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "it started: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "{err}");

    // With a token it starts (and says where it listens).
    let token_file = scratch("open-token").join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let (mut child, addr) = common::start_server(
        atomio(&[])
            .args(["server", "--listen", "0.0.0.0:0", "--token-file"])
            .arg(&token_file)
            .arg("--data")
            .arg(scratch("open-ok")),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(addr.starts_with("0.0.0.0:"), "{addr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_clients_with_the_token_are_served() {
    let root = scratch("served");
    let token_file = root.join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let tf = token_file.to_str().unwrap().to_string();
    let cluster = LocalServers::start_with(
        &exe(),
        2,
        &root,
        &["--token-file", &tf, "--lease-ms", "1000"],
    )
    .await
    .unwrap();
    let servers = cluster.addresses.join(",");
    let stats = |env: &[(&str, &str)]| {
        let out = atomio(env)
            .args(["stats", "--servers", &servers])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, err) = stats(&[]);
    assert!(!ok && err.contains("requires a token"), "no token: {err}");
    let (ok, err) = stats(&[("ATOMIO_TOKEN", "another-token-of-enough-length")]);
    assert!(!ok && err.contains("wrong token"), "wrong token: {err}");
    let (ok, err) = stats(&[("ATOMIO_TOKEN", TOKEN)]);
    assert!(ok, "right token: {err}");
    let (ok, err) = stats(&[("ATOMIO_TOKEN_FILE", &tf)]);
    assert!(ok, "right token file: {err}");

    // A holder keeps its lease for 2.5 leases: its keeper's renewals authenticate.
    let mut holder = atomio(&[("ATOMIO_TOKEN", TOKEN)])
        .args([
            "probe-hold",
            "--servers",
            &servers,
            "--path",
            "f",
            "--len",
            "4096",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut said = String::new();
    out.read_line(&mut said).unwrap();
    assert_eq!(said.trim(), "HOLDING");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    holder.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    said.clear();
    out.read_line(&mut said).unwrap();
    out.read_line(&mut said).unwrap();
    let _ = holder.wait();
    assert!(
        said.contains("WRITE ok") && said.contains("LEASE ok"),
        "{said}"
    );
}
