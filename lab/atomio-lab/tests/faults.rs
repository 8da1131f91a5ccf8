//! Fault probes against real `atomio server` processes and a real client process
//! (`atomio probe-hold`): a client paused (`SIGSTOP`) or killed while it holds locks, a
//! server killed while a client waits there. Each checks what a user relies on: waiters get
//! the lock within the lease plus a second, a paused client's later writes are refused
//! (fencing), and a failed operation leaves no lock behind at the servers that survive.

mod common;

use atomio_layout::{Access, ByteRange};
use atomio_lock::{Method, Protocol};
use atomio_net::{ClusterClient, LocalServers};
use atomio_proto::{ErrorCode, LockMode};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const LEASE_MS: u64 = 1000;
/// Spans both servers' 64 KiB strips twice.
const LEN: u64 = 256 << 10;

fn exe() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_atomio-lab").into()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = scratch_path(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn servers(name: &str, n: u32, lease_ms: u64) -> LocalServers {
    let lease = lease_ms.to_string();
    LocalServers::start_with(&exe(), n, &scratch(name), &["--lease-ms", &lease])
        .await
        .expect("start servers")
}

/// A `probe-hold` process holding a write lock on `[0, LEN)` of `path`.
struct Holder {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Holder {
    fn start(addrs: &[String], path: &str) -> Self {
        Self::start_with(Command::new(exe()), addrs, path)
    }

    /// `start` through `cmd` (the `atomio` binary, or a wrapper that runs it, with its
    /// environment).
    fn start_with(mut cmd: Command, addrs: &[String], path: &str) -> Self {
        let mut child = cmd
            .args(["probe-hold", "--servers", &addrs.join(","), "--path", path])
            .args(["--len", &LEN.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start probe-hold");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "HOLDING", "the holder did not get its lock");
        Holder { child, out }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// Lets it go on; returns what it printed (its write's and its lease's outcome).
    fn go_on(mut self) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        let mut rest = String::new();
        for _ in 0..2 {
            self.out.read_line(&mut rest).unwrap();
        }
        let _ = self.child.wait();
        rest
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn whole() -> Access {
    Access::contiguous(ByteRange::new(0, LEN).unwrap()).unwrap()
}

/// Locks `access` of `path` for writing, two-phase, list method.
async fn lock(
    c: &mut ClusterClient,
    path: &str,
    access: &Access,
) -> Result<atomio_net::HeldLock, atomio_proto::WireError> {
    let f = c.open(path).await?;
    let list = Method::List {
        max_ranges: atomio_lock::DEFAULT_LIST_RANGES,
    };
    c.lock(
        f.id(),
        LockMode::Write,
        access,
        &f.layout,
        list,
        Protocol::TwoPhase,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_loses_its_locks_within_the_lease_and_its_later_writes_are_refused() {
    let cluster = servers("sigstop", 2, LEASE_MS).await;
    let holder = Holder::start(&cluster.addresses, "stopped");
    holder.signal("-STOP");
    let stopped = Instant::now();
    let mut waiter = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    let held = lock(&mut waiter, "stopped", &whole()).await.unwrap();
    let waited = stopped.elapsed();
    assert!(
        waited <= Duration::from_millis(LEASE_MS + 1000),
        "the waiter got the lock {waited:?} after the holder stopped (lease {LEASE_MS} ms)"
    );
    let f = waiter.open("stopped").await.unwrap();
    waiter
        .write(&f, &whole(), &vec![b'B'; LEN as usize])
        .await
        .unwrap();
    // The paused holder wakes up while the waiter still holds the bytes.
    holder.signal("-CONT");
    let said = holder.go_on();
    assert!(
        said.contains("WRITE LeaseExpired"),
        "the fenced holder's write was not refused: {said}"
    );
    assert!(
        said.contains("LEASE LeaseExpired"),
        "the holder does not know it lost its lease: {said}"
    );
    waiter.unlock(held).await.unwrap();
    let mut bytes = vec![0u8; LEN as usize];
    waiter.read(&f, &whole(), &mut bytes).await.unwrap();
    assert!(
        bytes.iter().all(|&b| b == b'B'),
        "the fenced client's bytes reached the file"
    );
    eprintln!("SIGSTOP probe: waiter got the lock after {waited:?} (lease {LEASE_MS} ms)");
}

/// Negative control (without leases a paused holder blocks everyone: the probe above can
/// fail), and the kill -9 probe (a killed holder's locks go at once, lease or not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_leases_a_paused_holder_blocks_waiters_and_a_killed_one_frees_them() {
    let cluster = servers("nolease", 2, 0).await;
    let mut holder = Holder::start(&cluster.addresses, "paused");
    holder.signal("-STOP");
    let mut waiter = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    let task = tokio::spawn(async move {
        let r = lock(&mut waiter, "paused", &whole()).await;
        (waiter, r.map(|_| Instant::now()))
    });
    tokio::time::sleep(Duration::from_millis(LEASE_MS + 1500)).await;
    assert!(
        !task.is_finished(),
        "without leases the waiter must still wait behind the paused holder"
    );
    holder.child.kill().unwrap();
    let killed = Instant::now();
    let (_waiter, got) = task.await.unwrap();
    let waited = got.unwrap() - killed;
    assert!(
        waited <= Duration::from_secs(1),
        "the waiter got the lock {waited:?} after the holder was killed"
    );
    eprintln!("kill -9 probe: waiter got the lock {waited:?} after the kill");
}

/// A client waiting at a server that dies must release what it already holds at the
/// others while it lives on (its leases stay valid, so nothing else would free them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_operation_releases_its_locks_at_the_surviving_servers() {
    let mut cluster = servers("partial", 2, LEASE_MS).await;
    // The holder takes the second strip (server 1 only).
    let strip1 = Access::contiguous(ByteRange::new(64 << 10, 128 << 10).unwrap()).unwrap();
    let first_two = Access::contiguous(ByteRange::new(0, 128 << 10).unwrap()).unwrap();
    let strip0 = Access::contiguous(ByteRange::new(0, 64 << 10).unwrap()).unwrap();
    let mut holder = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    holder.create("partial", 64 << 10, 2, false).await.unwrap();
    let _held = lock(&mut holder, "partial", &strip1).await.unwrap();
    // A locks strips 0 and 1 in order: gets strip 0 at server 0, then waits at server 1.
    let mut a = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    let mut b = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    let f = b.open("partial").await.unwrap();
    let task = tokio::spawn(async move {
        let r = lock(&mut a, "partial", &first_two).await;
        (a, r.map(|_| ()))
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!task.is_finished(), "A should wait behind the holder");
    cluster.kill(1).await;
    let (a, failed) = task.await.unwrap();
    let e = failed.expect_err("A's lock cannot succeed without server 1");
    assert_eq!(e.code, ErrorCode::Disconnected, "{e}");
    // A lives on; B must get strip 0 (server 0 only) at once.
    let start = Instant::now();
    let list = Method::List {
        max_ranges: atomio_lock::DEFAULT_LIST_RANGES,
    };
    let got = tokio::time::timeout(
        Duration::from_secs(3),
        b.lock(
            f.id(),
            LockMode::Write,
            &strip0,
            &f.layout,
            list,
            Protocol::TwoPhase,
        ),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "A's lock at the surviving server was never released: {got:?}"
    );
    eprintln!(
        "partial failure: B got the strip {:?} after A failed",
        start.elapsed()
    );
    drop(a);
}

/// `atomio stats` on live servers: while a paused holder blocks a waiter it shows the
/// held and the waiting request and the lease; after the lease lapses, the lapse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_show_holders_waiters_and_lapsed_leases() {
    let cluster = servers("stats", 2, LEASE_MS).await;
    let holder = Holder::start(&cluster.addresses, "watched");
    holder.signal("-STOP");
    let mut waiter = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    let task = tokio::spawn(async move {
        let r = lock(&mut waiter, "watched", &whole()).await.map(|_| ());
        (waiter, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = |name: &str| {
        let json = scratch(name).join("stats.json");
        let out = Command::new(exe())
            .args(["stats", "--servers", &cluster.addresses.join(",")])
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let table = String::from_utf8_lossy(&out.stdout).to_string();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        let total = move |field: &str| -> u64 {
            v.as_array()
                .unwrap()
                .iter()
                .map(|pair| pair[1][field].as_u64().unwrap())
                .sum()
        };
        (table, total)
    };
    let (table, total) = stats("stats-before");
    eprintln!("{table}");
    assert!(table.contains("open lock requests"), "{table}");
    assert!(
        !task.is_finished(),
        "the waiter must wait behind the paused holder"
    );
    assert_eq!(total("lease_ms"), 2 * LEASE_MS);
    assert!(total("open_requests") >= 2, "holder and waiter: {table}");
    assert_eq!(total("waiting"), 1, "{table}");
    assert!(total("lock_clients") >= 2, "{table}");
    assert!(total("connections") >= 4, "{table}");
    assert_eq!(total("leases_lapsed"), 0, "{table}");
    let (_waiter, got) = task.await.unwrap();
    got.unwrap();
    let (table, total) = stats("stats-after");
    assert!(
        total("leases_lapsed") >= 1,
        "the holder's lease lapsed: {table}"
    );
    assert_eq!(total("waiting"), 0, "{table}");
    drop(holder);
}

/// A server killed (`kill -9`) while a client holds locks there, restarted at once on the
/// same data directory: it serves nothing for its grace period, so the old holder — which
/// may still be in its I/O and does not know — has stopped acting on its locks (its lease
/// view lapsed: renewals at the new instance cannot succeed) before anyone else gets them,
/// and a waiter still proceeds within the lease + 1 s. Control: restarted on a directory
/// without the previous instance's mark, the server grants at once — while the old holder
/// may still act (what the grace period prevents).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_waits_out_its_grace_period_before_granting() {
    for grace in [true, false] {
        let name = if grace { "restart" } else { "restart-nograce" };
        let mut cluster = servers(name, 1, LEASE_MS).await;
        let mut holder = ClusterClient::connect_tcp(&cluster.addresses)
            .await
            .unwrap();
        holder.create(name, 64 << 10, 1, false).await.unwrap();
        let _held = lock(&mut holder, name, &whole()).await.unwrap();
        assert!(holder.check_lease().is_ok());
        let killed = Instant::now();
        cluster.kill(0).await;
        if !grace {
            let mark = scratch_path(name)
                .join("server-0")
                .join(atomio_net::grace::ALIVE_FILE);
            std::fs::remove_file(&mark).expect("a running server marks its directory");
        }
        cluster.restart(0).await.unwrap();
        let mut waiter = ClusterClient::connect_tcp(&cluster.addresses)
            .await
            .unwrap();
        let held = lock(&mut waiter, name, &whole()).await.unwrap();
        let waited = killed.elapsed();
        let old_holder = holder.check_lease();
        eprintln!(
            "restart (grace {grace}): waiter got the lock {waited:?} after the kill; the old \
             holder's lease view then: {old_holder:?}"
        );
        if grace {
            assert!(
                waited >= Duration::from_millis(LEASE_MS * 3 / 4),
                "granted {waited:?} after the kill: the old holder may still act"
            );
            assert!(
                waited <= Duration::from_millis(LEASE_MS + 1000),
                "the waiter got the lock only {waited:?} after the kill (lease {LEASE_MS} ms)"
            );
            let e = old_holder.expect_err("the old holder must know its locks are gone");
            assert_eq!(e.code, ErrorCode::LeaseExpired, "{e}");
        } else {
            assert!(
                waited < Duration::from_millis(LEASE_MS * 3 / 4),
                "without the mark the restarted server should serve at once: {waited:?}"
            );
        }
        waiter.unlock(held).await.unwrap();
    }
}

fn scratch_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("atomio-faults-{name}-{}", std::process::id()))
}

/// A network namespace joined to this one by a veth pair: another "host" on this machine,
/// whose link can be cut without a FIN or RST reaching either side (a partition).
struct Netns {
    name: String,
    /// This side's and the namespace's addresses, and the namespace side's interface.
    host_addr: String,
    ns_addr: String,
    ns_if: String,
}

impl Netns {
    /// `None` (with the reason printed) where namespaces cannot be made (not root).
    fn create() -> Option<Self> {
        let pid = std::process::id();
        let name = format!("atomio-part-{pid}");
        let (host_if, ns_if) = (format!("ap{pid}h"), format!("ap{pid}n"));
        let net = format!("10.77.{}", pid % 250);
        let ns = Self {
            name: name.clone(),
            host_addr: format!("{net}.1"),
            ns_addr: format!("{net}.2"),
            ns_if: ns_if.clone(),
        };
        let _ = ip(&["netns", "del", &name]);
        if let Err(e) = ip(&["netns", "add", &name]) {
            common::missing(&format!("cannot make a network namespace here ({e})"));
            return None;
        }
        for args in [
            vec![
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ],
            vec!["link", "set", &ns_if, "netns", &name],
            vec![
                "addr",
                "add",
                &format!("{}/30", ns.host_addr),
                "dev",
                &host_if,
            ],
            vec!["link", "set", &host_if, "up"],
            vec![
                "netns",
                "exec",
                &name,
                "ip",
                "addr",
                "add",
                &format!("{}/30", ns.ns_addr),
                "dev",
                &ns_if,
            ],
            vec!["netns", "exec", &name, "ip", "link", "set", &ns_if, "up"],
            vec!["netns", "exec", &name, "ip", "link", "set", "lo", "up"],
        ] {
            ip(&args).unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
        }
        Some(ns)
    }

    /// The link goes down (packets are dropped, nobody is told) or up again.
    fn cut(&self, cut: bool) {
        let state = if cut { "down" } else { "up" };
        ip(&[
            "netns",
            "exec",
            &self.name,
            "ip",
            "link",
            "set",
            &self.ns_if,
            state,
        ])
        .unwrap();
    }

    /// A command that runs `atomio` inside the namespace.
    fn atomio(&self) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(exe());
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes the veth pair too.
        let _ = ip(&["netns", "del", &self.name]);
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// A partition of one client: the holder runs in its own network namespace (another host)
/// and its link is cut — no FIN, no RST, the process keeps running. Its lease lapses at the
/// server, so a waiter on this host gets the lock within the lease + 1 s; when the link
/// comes back, the cut-off holder's write is refused (fenced) and it knows its lease is
/// gone. The server listens beyond loopback, so everyone proves the job's token.
#[test]
fn a_partitioned_holder_loses_its_locks_within_the_lease_and_its_later_writes_are_refused() {
    let Some(ns) = Netns::create() else { return };
    const TOKEN: &str = "partition-probe-token-0123456789";
    let dir = scratch("partition");
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let lease = LEASE_MS.to_string();
    let (mut server, addr) = common::start_server(
        Command::new(exe())
            .args(["server", "--listen", "0.0.0.0:0", "--lease-ms", &lease])
            .arg("--token-file")
            .arg(&token_file)
            .arg("--data")
            .arg(dir.join("data"))
            .env("ATOMIO_LOG", "warn"),
    );
    let port = addr.rsplit(':').next().unwrap().to_string();
    let mut in_ns = ns.atomio();
    in_ns.env("ATOMIO_TOKEN", TOKEN);
    let holder = Holder::start_with(in_ns, &[format!("{}:{port}", ns.host_addr)], "cut");

    ns.cut(true);
    let cut = Instant::now();
    let mut here = Command::new(exe());
    here.env("ATOMIO_TOKEN", TOKEN);
    let waiter = Holder::start_with(here, &[format!("127.0.0.1:{port}")], "cut");
    let waited = cut.elapsed();
    ns.cut(false);
    let said = holder.go_on();
    let waiter_said = waiter.go_on();
    let _ = server.kill();
    let _ = server.wait();
    eprintln!(
        "partition probe: the waiter got the lock {waited:?} after the cut (lease {LEASE_MS} \
         ms); the cut-off holder then said: {said:?}"
    );
    assert!(
        waited <= Duration::from_millis(LEASE_MS + 1000),
        "the waiter got the lock {waited:?} after the cut (lease {LEASE_MS} ms)"
    );
    assert!(
        said.contains("WRITE LeaseExpired"),
        "the cut-off holder's write was not refused: {said}"
    );
    assert!(
        said.contains("LEASE LeaseExpired"),
        "the holder does not know it lost its lease: {said}"
    );
    assert!(waiter_said.contains("WRITE ok"), "{waiter_said}");
}

/// Synced data survive `kill -9` of a server: a client writes across both servers and
/// syncs, one server is killed and restarted on its directory, and after its grace period
/// a new client reads every byte back. (A write *in progress* when a server dies can still
/// be torn across servers: all-or-nothing writes are not done yet.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_data_survive_kill_9_of_a_server() {
    let mut cluster = servers("synced", 2, LEASE_MS).await;
    let mut writer = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    let f = writer.create("synced", 64 << 10, 2, false).await.unwrap();
    let bytes: Vec<u8> = (0..LEN).map(|i| (i * 7 % 251) as u8).collect();
    writer.write(&f, &whole(), &bytes).await.unwrap();
    writer.sync(&f).await.unwrap();
    drop(writer);
    let killed = Instant::now();
    cluster.kill(1).await;
    cluster.restart(1).await.unwrap();
    let mut reader = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    let f = reader.open("synced").await.unwrap();
    let mut back = vec![0u8; LEN as usize];
    reader.read(&f, &whole(), &mut back).await.unwrap();
    eprintln!(
        "kill -9 + restart: all {LEN} synced bytes read back {:?} after the kill",
        killed.elapsed()
    );
    assert!(
        back == bytes,
        "synced bytes changed across a kill -9 and restart"
    );
}
