//! A server's file descriptors are a budgeted cache: a client that writes one byte to each
//! of many more files than the server may hold open, and never syncs, does not run the
//! server out of descriptors — every write and every later `Sync` succeeds, and a new client
//! is served afterwards. The server runs under `prlimit --nofile` far below the file count,
//! so a server that kept a handle per dirty file would fail with EMFILE well before the end.
//!
//! Negative control: under a limit below the server's own handle budget
//! (`MAX_OPEN_OBJECTS`, 256), the same client must see errors — proof that the limit
//! reaches the server and that the file count exceeds it.

mod common;

use atomio_layout::{Access, ByteRange};
use atomio_net::ClusterClient;
use std::process::{Child, Command};

const FILES: usize = 1500;

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server(dir: &std::path::Path, nofile: u32) -> (Server, String) {
    let (child, addr) = common::start_server(
        Command::new("prlimit")
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg(env!("CARGO_BIN_EXE_atomio"))
            .args(["server", "--listen", "127.0.0.1:0", "--data"])
            .arg(dir)
            .env("ATOMIO_LOG", "error"),
    );
    (Server(child), addr)
}

/// One byte to each of `FILES` new files through the server's messages, no sync; then
/// `Sync` of every tenth file. Returns the errors seen (write or sync), first few kept.
async fn write_many(addr: &str) -> (usize, Vec<String>) {
    let mut c = ClusterClient::connect_tcp(&[addr.to_string()])
        .await
        .expect("connect");
    let one = Access::contiguous(ByteRange::new(0, 1).unwrap()).unwrap();
    let (mut failed, mut seen) = (0, Vec::new());
    let mut note = |e: String| {
        failed += 1;
        if seen.len() < 3 {
            seen.push(e);
        }
    };
    let mut files = Vec::new();
    for i in 0..FILES {
        let r = async {
            let info = c.create(&format!("f{i}"), 4096, 1, false).await?;
            let mut f = atomio_client::File::from_info(info);
            f.write(&mut c, &one, &[i as u8]).await?;
            Ok::<_, atomio_proto::WireError>(f)
        }
        .await;
        match r {
            Ok(f) => files.push(f),
            Err(e) => note(format!("file {i}: {e}")),
        }
    }
    for f in files.iter_mut().step_by(10) {
        if let Err(e) = f.sync(Some(&mut c)).await {
            note(format!("sync: {e}"));
        }
    }
    (failed, seen)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn many_dirty_files_never_exhaust_the_servers_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, addr) = server(dir.path(), 512);
    rt().block_on(async {
        let (failed, seen) = write_many(&addr).await;
        assert_eq!(failed, 0, "{failed} writes or syncs failed: {seen:?}");
        // A new client is served afterwards, and its Sync works.
        let mut c = ClusterClient::connect_tcp(std::slice::from_ref(&addr))
            .await
            .unwrap();
        let info = c.create("after", 4096, 1, false).await.unwrap();
        let mut f = atomio_client::File::from_info(info);
        let one = Access::contiguous(ByteRange::new(0, 1).unwrap()).unwrap();
        f.write(&mut c, &one, b"x").await.unwrap();
        f.sync(Some(&mut c)).await.unwrap();
    });
    // Every file holds its byte.
    rt().block_on(async {
        let mut cl = ClusterClient::connect_tcp(std::slice::from_ref(&addr))
            .await
            .unwrap();
        for i in [0, FILES / 2, FILES - 1] {
            let info = cl.open(&format!("f{i}")).await.unwrap();
            let mut f = atomio_client::File::from_info(info);
            let one = Access::contiguous(ByteRange::new(0, 1).unwrap()).unwrap();
            let mut b = [0u8; 1];
            f.read(&mut cl, &one, &mut b).await.unwrap();
            assert_eq!(b[0], i as u8, "file {i}");
        }
    });
}

#[test]
fn the_descriptor_limit_reaches_the_server_negative_control() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, addr) = server(dir.path(), 160);
    let (failed, seen) = rt().block_on(write_many(&addr));
    assert!(
        failed > 0,
        "with 160 descriptors and a budget of 256 handles, {FILES} files never failed: \
         the limit does not reach the server"
    );
    eprintln!("control: {failed} failures, e.g. {seen:?}");
}
