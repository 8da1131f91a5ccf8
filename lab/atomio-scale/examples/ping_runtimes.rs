//! K = 1, 2, 4, 8 clients pinging, one ping at a time each, all at once, free running:
//! the clients as tasks of one 2-worker multi-thread runtime (`bench locks`' clients),
//! each with a server process of its own, or (`fan-in`) all at one server. Prints the
//! client process's and the servers' CPU per ping, and wall per ping (all).
//!
//! ```sh
//! cargo run --release -p atomio-scale --example ping_runtimes -- target/release/atomio [fan-in]
//! ```
//!
//! Measured: at 4–8 tasks a server that several connections keep busy spends ~6 µs per
//! ping against ~10.5 µs with one connection each.
use atomio_layout::ServerId;
use atomio_proto::Request;
use std::time::Instant;

fn cpu(pid: Option<u32>) -> f64 {
    let clock = match pid {
        None => nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID,
        Some(p) => nix::time::clock_getcpuclockid(nix::unistd::Pid::from_raw(p as i32)).unwrap(),
    };
    let t = nix::time::clock_gettime(clock).unwrap();
    t.tv_sec() as f64 * 1e9 + t.tv_nsec() as f64
}

async fn pings(addr: String, n: u64) {
    let mut c = atomio_net::ClusterClient::connect_tcp(&[addr])
        .await
        .unwrap();
    for i in 0..n {
        c.rpc_all(vec![(ServerId(0), Request::Ping { nonce: i })])
            .await
            .unwrap();
    }
}

fn main() {
    let exe = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let n: u64 = 5000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fan_in = std::env::args().nth(2).as_deref() == Some("fan-in");
    for k in [1u32, 2, 4, 8] {
        let mut servers = Vec::new();
        for i in 0..(if fan_in { 1 } else { k }) {
            let dir = std::env::temp_dir().join(format!("pingrt-{}-{k}-{i}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            servers.push(
                rt.block_on(atomio_net::LocalServers::start(&exe, 1, &dir))
                    .unwrap(),
            );
        }
        let addrs: Vec<String> = servers.iter().map(|s| s.addresses[0].clone()).collect();
        let pids: Vec<u32> = servers.iter().map(|s| s.pids()[0].unwrap()).collect();
        for rep in 0..3 {
            let run = |count: u64| {
                let tasks: Vec<_> = (0..k as usize)
                    .map(|i| rt.spawn(pings(addrs[i % addrs.len()].clone(), count)))
                    .collect();
                rt.block_on(async {
                    for t in tasks {
                        t.await.unwrap();
                    }
                });
            };
            run(300);
            let (c0, s0, t0) = (
                cpu(None),
                pids.iter().map(|&p| cpu(Some(p))).sum::<f64>(),
                Instant::now(),
            );
            run(n);
            let total = (n * k as u64) as f64;
            let c = (cpu(None) - c0) / total;
            let s = (pids.iter().map(|&p| cpu(Some(p))).sum::<f64>() - s0) / total;
            let w = t0.elapsed().as_nanos() as f64 / total;
            println!("k={k} rep {rep}: client CPU/ping {c:.0} ns  server CPU/ping {s:.0} ns  wall/ping {w:.0} ns");
        }
        for s in servers {
            rt.block_on(s.stop());
        }
    }
}
