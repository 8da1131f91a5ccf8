//! A client whose runtime stops running after a call (a C caller that goes on to wait in
//! MPI) must not keep anyone waiting: its releases are on the wire when the call returns.
//! Regression test: detached releases once sat in the writer task's queue until the
//! client's next call, and an MPI job deadlocked in its barrier.

use atomio_client::{File, Strategy};
use atomio_layout::{Access, ByteRange};
use std::time::{Duration, Instant};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn releases_leave_before_the_call_returns() {
    // Servers on their own thread and runtime, as in-job servers are.
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let servers = std::thread::spawn(move || {
        runtime().block_on(async move {
            let cluster = atomio_net::EmbeddedCluster::start(2);
            addr_tx.send(cluster.serve_tcp().await.unwrap()).unwrap();
            let _ = stop_rx.await;
        })
    });
    let addrs = addr_rx.recv().unwrap();
    let access = Access::contiguous(ByteRange::new(0, 300_000).unwrap()).unwrap();
    let data = vec![1u8; 300_000];
    for strategy in ["ching:datatype:one-try", "bounding-extent", "block:4096"] {
        let s: Strategy = strategy.parse().unwrap();
        // Client A: one atomic write, then its runtime is never driven again.
        let rt_a = runtime();
        let (mut a, mut fa) = rt_a.block_on(async {
            let mut c = atomio_net::ClusterClient::connect_tcp(&addrs)
                .await
                .unwrap();
            let mut f = File::create(&mut c, &format!("/idle-{strategy}"), 65536, 2)
                .await
                .unwrap();
            f.set_atomic(Some(s.clone())).unwrap();
            (c, f)
        });
        rt_a.block_on(fa.write(&mut a, &access, &data)).unwrap();
        // Client B, elsewhere, needs the same bytes.
        let rt_b = runtime();
        let t0 = Instant::now();
        let done = rt_b.block_on(async {
            let mut c = atomio_net::ClusterClient::connect_tcp(&addrs)
                .await
                .unwrap();
            let mut f = File::open(&mut c, &format!("/idle-{strategy}"))
                .await
                .unwrap();
            f.set_atomic(Some(s.clone())).unwrap();
            tokio::time::timeout(Duration::from_secs(10), f.write(&mut c, &access, &data)).await
        });
        assert!(
            matches!(done, Ok(Ok(()))),
            "{strategy}: the second writer waited {:?} for a lock the idle client had released",
            t0.elapsed()
        );
        drop((fa, a));
    }
    let _ = stop_tx.send(());
    servers.join().unwrap();
}
