//! TLS against real processes: a server with a certificate serves a client that trusts it
//! (locks, data and the lease keeper's renewals all over TLS), and refuses a plain client
//! and a client that trusts another certificate.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn exe() -> PathBuf {
    env!("CARGO_BIN_EXE_atomio-lab").into()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atomio-tls-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A self-signed certificate for 127.0.0.1 and its key, as PEM files in `dir`.
fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&key, c.key_pair.serialize_pem()).unwrap();
    (cert, key)
}

struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server's lease. Long enough that renewals over TLS (a handshake on the keeper's first
/// round, then one round trip every fifth of a lease) keep up on a loaded two-core runner,
/// where a 1 s lease has lapsed before the keeper's first renewal was answered.
const LEASE_MS: u64 = 2500;

fn server(dir: &Path, cert: &Path, key: &Path) -> Server {
    let (child, addr) = common::start_server(
        Command::new(exe())
            .args(["server", "--listen", "127.0.0.1:0", "--lease-ms"])
            .arg(LEASE_MS.to_string())
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .arg("--data")
            .arg(dir.join("data"))
            .env_remove("ATOMIO_TOKEN")
            .env_remove("ATOMIO_TOKEN_FILE")
            .env("ATOMIO_LOG", "warn"),
    );
    Server(child, addr)
}

/// `atomio probe-hold` against `addr` trusting `ca` (or nothing): takes a lock, writes,
/// waits 1.5 leases (renewals must go on), writes again; returns (succeeded, output).
fn hold(addr: &str, ca: Option<&Path>) -> (bool, String) {
    let mut cmd = Command::new(exe());
    cmd.args([
        "probe-hold",
        "--servers",
        addr,
        "--path",
        "tls",
        "--len",
        "4096",
    ])
    .env_remove("ATOMIO_TLS_CA")
    .env_remove("ATOMIO_TOKEN")
    .env_remove("ATOMIO_TOKEN_FILE")
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(ca) = ca {
        cmd.env("ATOMIO_TLS_CA", ca);
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut said = String::new();
    out.read_line(&mut said).unwrap();
    if said.trim() == "HOLDING" {
        std::thread::sleep(Duration::from_millis(LEASE_MS * 3 / 2));
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        for _ in 0..2 {
            out.read_line(&mut said).unwrap();
        }
    }
    let status = child.wait_with_output().unwrap();
    said.push_str(&String::from_utf8_lossy(&status.stderr));
    (status.status.success(), said)
}

#[test]
fn a_tls_server_serves_clients_that_trust_it_and_refuses_the_others() {
    let dir = scratch("serve");
    let (cert, key) = certificate(&dir, "server");
    let (other, _) = certificate(&dir, "other");
    let s = server(&dir, &cert, &key);

    let (ok, said) = hold(&s.1, Some(&cert));
    assert!(ok, "{said}");
    assert!(
        said.contains("HOLDING") && said.contains("WRITE ok") && said.contains("LEASE ok"),
        "locks, data and renewals over TLS: {said}"
    );

    let (ok, said) = hold(&s.1, None);
    assert!(
        !ok && !said.contains("HOLDING"),
        "a plain client was served: {said}"
    );

    let (ok, said) = hold(&s.1, Some(&other));
    assert!(
        !ok && !said.contains("HOLDING"),
        "an untrusted certificate was accepted: {said}"
    );
    assert!(said.contains("TLS"), "the refusal should say why: {said}");
    eprintln!("untrusted certificate refused: {}", said.trim());
}

#[test]
fn a_server_refuses_half_a_tls_configuration() {
    let dir = scratch("half");
    let (cert, _) = certificate(&dir, "server");
    let out = Command::new(exe())
        .args(["server", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .arg("--data")
        .arg(dir.join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tls-key"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
