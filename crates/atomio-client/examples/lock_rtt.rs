//! Lock round-trip latency: one client, one embedded server over loopback TCP, `n` calls
//! of acquire + release on one range (released with and without waiting for the ack).
//! `cargo run --release -p atomio-client --example lock_rtt -- [n]`

use atomio_client::{DirectData, File, Strategy};
use atomio_layout::{Access, ByteRange};
use std::time::Instant;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5000);
    let cluster = atomio_net::EmbeddedCluster::start(1);
    let addrs = cluster.serve_tcp().await.unwrap();
    let mut c = atomio_net::ClusterClient::connect_tcp(&addrs)
        .await
        .unwrap();
    let path = std::env::temp_dir().join(format!("lock-rtt-{}", std::process::id()));
    let mut f = File::direct(DirectData::open(&path, true).unwrap());
    f.set_atomic(Some(Strategy::bounding_extent())).unwrap();
    let a = Access::contiguous(ByteRange::new(0, 8).unwrap()).unwrap();
    for (name, s) in [
        ("bounding-extent", Strategy::bounding_extent()),
        ("none", Strategy::none()),
    ] {
        f.set_atomic(Some(s)).unwrap();
        let t = Instant::now();
        for _ in 0..n {
            f.write(&mut c, &a, &[1u8; 8]).await.unwrap();
        }
        println!(
            "{name}: {:.1} us per call",
            t.elapsed().as_secs_f64() / n as f64 * 1e6
        );
    }
    let _ = std::fs::remove_file(path);
}
