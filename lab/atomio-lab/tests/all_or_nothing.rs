//! All-or-nothing atomic writes against real `atomio server` processes: a writer process
//! (`atomio probe-write`, overwriting 16 MiB across two servers again and again, write `k`
//! filling it with byte `k`) is killed with `kill -9` in the middle of a write, or a server
//! is, or a server's disk fills up mid-write. Afterwards a new client reads the range back
//! (resolving whatever the dead writer left in doubt): it must hold one write's bytes,
//! never a mix. Negative controls run the same faults with plain writes (`none`) and must
//! see torn ranges — so the check can fail.

mod common;

use atomio_client::{File, Strategy};
use atomio_layout::{Access, ByteRange};
use atomio_net::{ClusterClient, LocalServers};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const LEASE_MS: u64 = 1000;
const LEN: u64 = 16 << 20;
const ATOMIC: &str = "ching:datatype:one-try";

fn exe() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_atomio-lab").into()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("atomio-aon-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn servers(root: &std::path::Path) -> LocalServers {
    let lease = LEASE_MS.to_string();
    LocalServers::start_with(&exe(), 2, root, &["--lease-ms", &lease])
        .await
        .expect("start servers")
}

struct Writer {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Writer {
    fn start(addrs: &[String], path: &str, strategy: &str) -> Self {
        let mut child = Command::new(exe())
            .args(["probe-write", "--servers", &addrs.join(","), "--path", path])
            .args(["--len", &LEN.to_string(), "--strategy", strategy])
            .env("ATOMIO_LOG", "error")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start probe-write");
        let out = BufReader::new(child.stdout.take().unwrap());
        Writer { child, out }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.out.read_line(&mut l).unwrap();
        l.trim().to_string()
    }

    /// Waits for two writes; returns how long the second took.
    fn two_writes(&mut self) -> Duration {
        assert_eq!(self.line(), "WROTE 1");
        let t = Instant::now();
        assert_eq!(self.line(), "WROTE 2");
        t.elapsed()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the range back with `strategy`; `Ok(byte)` when it holds one write's bytes,
/// `Err(description)` when torn.
async fn read_back(addrs: &[String], path: &str, strategy: &str) -> Result<u8, String> {
    let mut c = ClusterClient::connect_tcp(addrs).await.unwrap();
    let mut f = File::open(&mut c, path).await.unwrap();
    let s: Strategy = strategy.parse().unwrap();
    f.set_atomic(Some(s)).unwrap();
    let access = Access::contiguous(ByteRange::new(0, LEN).unwrap()).unwrap();
    let mut buf = vec![0u8; LEN as usize];
    f.read_allowing_holes(&mut c, &access, &mut buf)
        .await
        .map_err(|e| format!("read failed: {e}"))?;
    let first = buf[0];
    match buf.iter().position(|&b| b != first) {
        None => Ok(first),
        Some(i) => {
            let mut values: Vec<u8> = buf.clone();
            values.sort_unstable();
            values.dedup();
            Err(format!(
                "byte {i} is {} but byte 0 is {first} (values {values:?})",
                buf[i]
            ))
        }
    }
}

/// Kills a writer `tries` times at spread points of a write; returns how many ranges tore.
async fn kill_writer_mid_write(name: &str, strategy: &str, tries: u32) -> u32 {
    let root = scratch(name);
    let cluster = servers(&root).await;
    let mut torn = 0;
    for t in 0..tries {
        let path = format!("/{name}-{t}");
        let mut w = Writer::start(&cluster.addresses, &path, strategy);
        let took = w.two_writes();
        // Into the third write, at 10 %, 30 %, … of a write's time.
        let at = took.mul_f64((2 * (t % 5) + 1) as f64 / 10.0);
        std::thread::sleep(at);
        let _ = w.child.kill(); // SIGKILL
        let _ = w.child.wait();
        let got = read_back(&cluster.addresses, &path, strategy).await;
        eprintln!(
            "{strategy}: writer killed {at:?} into a write (a write takes {took:?}): {got:?}"
        );
        if got.is_err() {
            torn += 1;
        }
    }
    cluster.stop().await;
    let _ = std::fs::remove_dir_all(&root);
    torn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_mid_write_leaves_one_write_whole() {
    let torn = kill_writer_mid_write("client-kill", ATOMIC, 5).await;
    assert_eq!(
        torn, 0,
        "{torn} of 5 atomic writes were torn by a kill -9 of their writer"
    );
}

/// Negative control: the same with plain writes tears (the issue saw 4 of 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_writes_killed_mid_write_tear() {
    let torn = kill_writer_mid_write("client-kill-plain", "none", 5).await;
    assert!(
        torn > 0,
        "no plain write tore: the probe cannot see a torn write"
    );
}

/// A server killed with `kill -9` in the middle of a write and restarted: the range holds
/// one write whole, and a reader gets it within the restarted server's grace period
/// (1¼ lease) plus a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_write_leaves_one_write_whole() {
    let root = scratch("server-kill");
    let mut cluster = servers(&root).await;
    for t in 0..4u32 {
        let path = format!("/server-kill-{t}");
        let mut w = Writer::start(&cluster.addresses, &path, ATOMIC);
        let took = w.two_writes();
        let at = took.mul_f64((2 * t + 1) as f64 / 8.0);
        std::thread::sleep(at);
        let victim = (t % 2) as usize;
        let killed = Instant::now();
        cluster.restart(victim).await.unwrap();
        // The write in flight fails (or completed just before); the writer then stops.
        let said = w.line();
        drop(w);
        let got = read_back(&cluster.addresses, &path, ATOMIC).await;
        let waited = killed.elapsed();
        eprintln!(
            "server {victim} killed {at:?} into a write (takes {took:?}); the writer said \
             {said:?}; read back {waited:?} after the kill: {got:?}"
        );
        assert!(
            got.is_ok(),
            "server {victim} killed mid-write: torn: {got:?}"
        );
        assert!(
            waited <= Duration::from_millis(LEASE_MS * 5 / 2),
            "the reader waited {waited:?} after the kill"
        );
    }
    cluster.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}

/// Mounts a `size_mb` tmpfs at `dir` (`None` where mounting is not allowed).
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(dir: &std::path::Path, size_mb: u64) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk(dir.to_path_buf())),
            Ok(o) => {
                common::missing(&format!(
                    "cannot mount a small file system here ({})",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                None
            }
            Err(e) => {
                common::missing(&format!("cannot mount a small file system here ({e})"));
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Server 1's data on a 12 MiB file system: 8 MiB written (4 MiB per server) fits; then a
/// 24 MiB write (12 MiB per server) cannot. Atomic: the write fails with a clear error and
/// the previous 8 MiB are intact, the size unchanged. Plain writes (the control): server
/// 0's half is overwritten, server 1's runs out part way — torn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_the_write_and_keeps_the_previous_bytes() {
    for strategy in [ATOMIC, "none"] {
        let name = if strategy == "none" {
            "disk-full-plain"
        } else {
            "disk-full"
        };
        let root = scratch(name);
        let Some(disk) = SmallDisk::mount(&root.join("server-1"), 12) else {
            return;
        };
        let cluster = servers(&root).await;
        let mut c = ClusterClient::connect_tcp(&cluster.addresses)
            .await
            .unwrap();
        let info = c.create("/full", 64 << 10, 2, false).await.unwrap();
        let mut f = File::from_info(info);
        f.set_atomic(Some(strategy.parse().unwrap())).unwrap();
        let small = 8u64 << 20;
        let first = Access::contiguous(ByteRange::new(0, small).unwrap()).unwrap();
        f.write(&mut c, &first, &vec![1u8; small as usize])
            .await
            .unwrap();
        let big = Access::contiguous(ByteRange::new(0, 3 * small).unwrap()).unwrap();
        let failed = f.write(&mut c, &big, &vec![2u8; 3 * small as usize]).await;
        let mut back = vec![0u8; small as usize];
        f.read_allowing_holes(&mut c, &first, &mut back)
            .await
            .unwrap();
        let size = f.size(Some(&mut c)).await.unwrap();
        let intact = back.iter().all(|&b| b == 1);
        eprintln!(
            "disk full ({strategy}): the big write said {failed:?}; the first 8 MiB intact: \
             {intact}; size {size}"
        );
        if strategy == "none" {
            assert!(
                !intact || size != small,
                "plain writes on a full disk left everything as it was: the control cannot fail"
            );
        } else {
            let e = failed.expect_err("the write cannot fit");
            assert!(e.message.contains("No space left"), "{e}");
            assert!(intact, "a failed atomic write changed the previous bytes");
            assert_eq!(size, small, "a failed atomic write changed the size");
            // The server lives on and takes writes that fit.
            f.write(&mut c, &first, &vec![3u8; small as usize])
                .await
                .unwrap();
        }
        cluster.stop().await;
        drop(disk);
        let _ = std::fs::remove_dir_all(&root);
    }
}
