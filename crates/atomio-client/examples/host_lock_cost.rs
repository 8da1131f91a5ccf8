//! What an uncontended host lock costs: acquire + release of one range, many times, in one
//! process (`cargo run --release -p atomio-client --example host_lock_cost`).
use atomio_client::host_locks::HostLocks;
use atomio_layout::ByteRange;
use atomio_proto::LockMode;
use std::time::Instant;

fn main() {
    let path = std::env::temp_dir().join(format!("atomio-hostlock-cost-{}", std::process::id()));
    let t = HostLocks::open_at(&path).expect("open the table");
    let n = 200_000u64;
    for round in 0..3 {
        let t0 = Instant::now();
        for i in 0..n {
            let r = ByteRange {
                start: i * 47_008,
                end: (i + 1) * 47_008,
            };
            let h = t.acquire(LockMode::Write, &[r]).expect("uncontended");
            t.release(h).expect("release");
        }
        let ns = t0.elapsed().as_nanos() as f64 / n as f64;
        println!("round {round}: {ns:.0} ns per acquire + release");
    }
    let _ = std::fs::remove_file(path);
    calls();
}

/// One process writing IOR-hard-like calls (47,008 bytes, strided) into a direct file under
/// each strategy: what a call costs with its `pwrite`, side by side.
fn calls() {
    use atomio_client::{DirectData, File, Strategy};
    use atomio_layout::Access;
    let dir = std::env::temp_dir().join(format!("atomio-hostlock-calls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let data = vec![7u8; 47_008];
    let n = 5_000u64;
    for round in 0..3 {
        for name in [
            "none",
            "posix-fcntl",
            "ching:datatype:one-try",
            "ching:list:one-try",
        ] {
            let path = dir.join(format!("{round}-{}", name.replace(':', "-")));
            let mut f = File::direct(DirectData::open(&path, true).expect("file"));
            let s: Strategy = name.parse().expect("strategy");
            f.set_atomic(Some(s.clone())).expect("strategy");
            if s.uses_lock_service() {
                f.use_host_locks().expect("host locks");
            }
            let t0 = Instant::now();
            for i in 0..n {
                let start = i * 4 * 47_008;
                let a = Access::contiguous(ByteRange {
                    start,
                    end: start + 47_008,
                })
                .expect("range");
                f.write_local(&a, &data).expect("write");
            }
            let us = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
            println!("round {round}: {name:24} {us:6.2} us per call");
            let _ = std::fs::remove_file(&path);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
