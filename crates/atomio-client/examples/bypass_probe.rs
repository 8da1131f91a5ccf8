//! Probe: time `n` contiguous 47008-byte writes through (a) a direct file, (b) a server file
//! whose object files this client reaches directly, (c) the same through messages.
use atomio_client::{DirectData, File, Strategy};
use atomio_layout::{Access, ByteRange};
use std::time::Instant;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n = 1408u64;
    let xfer = 47008u64;
    let dir = std::env::temp_dir().join(format!("probe-{}", std::process::id()));
    let cluster = atomio_net::EmbeddedCluster::start_on_disk(4, &dir.join("servers")).unwrap();
    let addrs = cluster.serve_tcp().await.unwrap();
    let mut c = atomio_net::ClusterClient::connect_tcp(&addrs)
        .await
        .unwrap();
    let data = vec![7u8; xfer as usize];
    let direct = dir.join("direct.dat");
    let mut files = vec![
        (
            "direct",
            File::direct(DirectData::open(&direct, true).unwrap()),
        ),
        (
            "servers (files)",
            File::create(&mut c, "/p1", 65536, 4).await.unwrap(),
        ),
    ];
    let info = c.create("/p2", 65536, 4, false).await.unwrap();
    files.push(("servers (messages)", File::from_info(info)));
    let only = std::env::args().nth(1);
    for (name, f) in &mut files {
        if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
            continue;
        }
        f.set_atomic(Some(Strategy::none())).unwrap();
        let t = Instant::now();
        for k in 0..n {
            let a = Access::contiguous(ByteRange::at(k * 4 * xfer, xfer).unwrap()).unwrap();
            f.write(&mut c, &a, &data).await.unwrap();
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "{name}: {:.3} s, {:.0} MiB/s (object files: {})",
            s,
            (n * xfer) as f64 / s / 1048576.0,
            f.bypasses_messages()
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}
