//! SeqDLM's data servers across a crash: real `atomio server` processes, real clients
//! (each file's DLM agent). Several clients write overlapping noncontiguous ranges across
//! both stripes (flushes reach the servers in any order; the extent caches apply them in SN
//! order), every client syncs, then one server is killed (`kill -9`) and restarted on its
//! data directory. Every synced write must still be there, exactly as before the kill (the
//! file proven atomic by the verifier); and a write made after the restart must win over
//! all of them — its lock's SN is above every SN in the restarted server's extent log
//! (replayed at start), so its flush is not taken for an older one and discarded.

use atomio_client::{File, Strategy};
use atomio_layout::{Access, Pattern};
use atomio_net::{ClusterClient, LocalServers};
use atomio_verify::{Read, Verdict, Write};
use std::time::Instant;

fn exe() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_atomio").into()
}

const STRIPE: u64 = 4096;
const WRITERS: u32 = 3;
const ROUNDS: u64 = 4;

/// Writer w: 48 blocks of 600 bytes every 700, shifted by 300 per writer: every writer
/// overlaps its neighbours, every call spans both stripes.
fn access(w: u32) -> Access {
    let p = Pattern::hvector(48, 600, 700, &Pattern::bytes(1).unwrap()).unwrap();
    Access::new(300 * u64::from(w), p).unwrap()
}

async fn read_file(addrs: &[String], path: &str) -> Vec<u8> {
    let mut c = ClusterClient::connect_tcp(addrs).await.unwrap();
    let info = c.open(path).await.unwrap();
    c.read_all(&info).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn synced_seqdlm_writes_survive_kill_9_and_later_writes_win() {
    let dir = std::env::temp_dir().join(format!("atomio-seqdlm-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cluster = LocalServers::start_with(&exe(), 2, &dir, &["--lease-ms", "1000"])
        .await
        .expect("start servers");
    let addrs = cluster.addresses.clone();
    let path = "/seqdlm-restart";
    let seqdlm: Strategy = "seqdlm".parse().unwrap();
    {
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        File::create(&mut c, path, STRIPE, 2).await.unwrap();
    }
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let addrs = addrs.clone();
        let s = seqdlm.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
            let mut f = File::open(&mut c, path).await.unwrap();
            f.set_atomic(Some(s)).unwrap();
            let a = access(w);
            for op in 0..ROUNDS {
                let mut buf = vec![0u8; a.size() as usize];
                atomio_verify::fill(w, op, a.ranges(), &mut buf).unwrap();
                f.write(&mut c, &a, &buf).await.unwrap();
            }
            f.sync(Some(&mut c)).await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let before = read_file(&addrs, path).await;
    let writes: Vec<Write> = (0..WRITERS)
        .flat_map(|w| (0..ROUNDS).map(move |op| Write::new(w, op, access(w))))
        .collect();
    let report = atomio_verify::verify(&before[..], &writes, &[] as &[Read]).unwrap();
    assert_eq!(report.verdict, Verdict::Atomic, "before the kill: {report}");
    let log = dir.join("server-1").join("extents.log");
    let logged = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    assert!(logged > 0, "no extent log at {}", log.display());

    let killed = Instant::now();
    cluster.kill(1).await;
    cluster.restart(1).await.unwrap();
    let after = read_file(&addrs, path).await;
    eprintln!(
        "kill -9 + restart: {} bytes read back {:?} after the kill ({} bytes of extent log)",
        after.len(),
        killed.elapsed(),
        logged
    );
    assert!(
        after == before,
        "synced SeqDLM writes changed across kill -9 and restart"
    );

    // A write after the restart covers every byte the others wrote: it must win whole.
    let all = Access::new(0, Pattern::bytes(before.len() as u64).unwrap()).unwrap();
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    let mut f = File::open(&mut c, path).await.unwrap();
    f.set_atomic(Some(seqdlm)).unwrap();
    let mut buf = vec![0u8; all.size() as usize];
    atomio_verify::fill(9, 0, all.ranges(), &mut buf).unwrap();
    f.write(&mut c, &all, &buf).await.unwrap();
    f.sync(Some(&mut c)).await.unwrap();
    drop(f);
    let last = read_file(&addrs, path).await;
    assert!(
        last == buf,
        "a write made after the restart was not applied whole over the older ones (its SN \
         must be above the restarted server's logged SNs)"
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
