//! Times one lock server's hot path with no transport: the share of 4 clients' 128 Ki-lock
//! strided patterns that one of 4 servers owns, acquired (one-try) and fully released.
//! `cargo run --release -p atomio-lock --example server_hot`

use atomio_layout::{Access, Layout, Pattern, ServerId};
use atomio_lock::LockServer;
use atomio_proto::{ClientId, FileId, LockDesc, LockMode, Reply, Request, Wait, WirePattern};
use std::time::Instant;

fn main() {
    let (clients, servers, locks, spacing) = (4u64, 4u32, 131_072u64, 64u64);
    let layout = Layout::round_robin(65_536, servers, servers, 0).unwrap();
    let p = Pattern::hvector(locks, 1, spacing, &Pattern::bytes(1).unwrap()).unwrap();
    for round in 0..5 {
        let mut s = LockServer::with_id(ServerId(0));
        let mut out = Vec::new();
        let t0 = Instant::now();
        let mut ids = Vec::new();
        for c in 0..clients {
            let a = Access::new(c * locks * spacing, p.clone()).unwrap();
            s.handle(
                ClientId(c),
                c,
                Request::LockNew {
                    file: FileId(1),
                    mode: LockMode::Write,
                    desc: LockDesc::Pattern(WirePattern::new(&a, &layout, ServerId(0))),
                    wait: Wait::NonBlocking,
                },
                &mut out,
            );
            match out.pop().unwrap().reply {
                Reply::Lock(pr) => ids.push((c, pr.lock)),
                r => panic!("{r:?}"),
            }
        }
        let t1 = Instant::now();
        let held = s.stats().ranges_granted;
        for (c, id) in ids {
            s.handle(
                ClientId(c),
                0,
                Request::LockRelease {
                    lock: id,
                    from: None,
                },
                &mut out,
            );
        }
        let t2 = Instant::now();
        println!(
            "round {round}: {held} locks: acquire {:.0} ns/lock, release {:.0} ns/lock",
            (t1 - t0).as_nanos() as f64 / held as f64,
            (t2 - t1).as_nanos() as f64 / held as f64
        );
    }
}
