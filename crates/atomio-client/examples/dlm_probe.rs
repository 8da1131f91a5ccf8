//! Probe: per-write latency of cached-lock DLMs, 8 clients strided 1 MiB on one stripe.
use atomio_client::{File, Strategy};
use atomio_layout::{Access, ByteRange};
use atomio_net::{ClusterClient, EmbeddedCluster};
use std::time::Instant;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let strategy = std::env::args().nth(1).unwrap_or("seqdlm".into());
    let clients: u64 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let writes: u64 = 16;
    let x: u64 = 1 << 20;
    let cluster = EmbeddedCluster::start(4);
    let addrs = cluster.serve_tcp().await.unwrap();
    {
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        File::create(&mut c, "/p", 1 << 20, 1).await.unwrap();
    }
    let s: Strategy = strategy.parse().unwrap();
    let mut tasks = Vec::new();
    let t0 = Instant::now();
    for cl in 0..clients {
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        let mut f = File::open(&mut c, "/p").await.unwrap();
        f.set_atomic(Some(s.clone())).unwrap();
        tasks.push(tokio::spawn(async move {
            let buf = vec![cl as u8; x as usize];
            let mut lat = Vec::new();
            for k in 0..writes {
                let off = (k * clients + cl) * x;
                let a = Access::contiguous(ByteRange { start: off, end: off + x }).unwrap();
                let t = Instant::now();
                f.write(&mut c, &a, &buf).await.unwrap();
                lat.push(t.elapsed().as_micros() as u64);
            }
            let pio = Instant::now();
            f.flush_cache().await.unwrap();
            (lat, pio, f.dlm_stats().await)
        }));
    }
    let mut all = Vec::new();
    let mut last_pio = t0;
    for t in tasks {
        let (lat, pio, st) = t.await.unwrap();
        all.extend(lat);
        last_pio = last_pio.max(pio);
        eprintln!("{st:?}");
    }
    all.sort();
    println!(
        "{strategy}: pio {:.3}s total {:.3}s; write latency µs p50 {} p90 {} max {}",
        (last_pio - t0).as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        all[all.len() / 2],
        all[all.len() * 9 / 10],
        all[all.len() - 1]
    );
}
