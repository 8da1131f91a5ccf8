//! Cached-lock DLMs end to end: real servers (in-process actors reached over loopback TCP),
//! real clients (each file's DLM agent on its own thread), overlapping noncontiguous writes
//! across stripes from several writers at once, then the file proven atomic by the
//! verifier — for SeqDLM (Fig. 10 modes: BW across stripes, NBW inside one), the
//! traditional DLMs and the forced-mode ablations. Negative control: NBW forced across
//! stripes (the paper's Fig. 8 anomaly) is caught tearing writes.

use atomio_client::{File, Strategy};
use atomio_layout::{Access, Pattern};
use atomio_net::{ClusterClient, EmbeddedCluster};
use atomio_verify::{Read, Verdict, Write};

/// Writer w: `blocks` blocks of ¾ `block` every `block` bytes, shifted by 5/16 block per
/// writer, so every writer overlaps its neighbours and every call spans every stripe.
fn access(w: u32, block: u64, blocks: u64) -> Access {
    let p = Pattern::hvector(blocks, block / 4 * 3, block, &Pattern::bytes(1).unwrap()).unwrap();
    Access::new(block / 16 * 5 * u64::from(w), p).unwrap()
}

struct Run {
    writers: u32,
    rounds: u64,
    stripe: u64,
    stripes: u32,
    block: u64,
    blocks: u64,
}

/// A run that does not finish within a minute is a hang (a lock never given back).
async fn run(strategy: &str, r: &Run) -> (Verdict, String) {
    tokio::time::timeout(std::time::Duration::from_secs(60), run_inner(strategy, r))
        .await
        .unwrap_or_else(|_| panic!("{strategy}: the run hung"))
}

async fn run_inner(strategy: &str, r: &Run) -> (Verdict, String) {
    let cluster = EmbeddedCluster::start(4);
    let addrs = cluster.serve_tcp().await.unwrap();
    let path = "/dlm";
    {
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        File::create(&mut c, path, r.stripe, r.stripes)
            .await
            .unwrap();
    }
    let strategy: Strategy = strategy.parse().unwrap();
    let mut tasks = Vec::new();
    for w in 0..r.writers {
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        let mut f = File::open(&mut c, path).await.unwrap();
        f.set_atomic(Some(strategy.clone())).unwrap();
        let (rounds, block, blocks) = (r.rounds, r.block, r.blocks);
        tasks.push(tokio::spawn(async move {
            let a = access(w, block, blocks);
            for op in 0..rounds {
                let mut buf = vec![0u8; a.size() as usize];
                atomio_verify::fill(w, op, a.ranges(), &mut buf).unwrap();
                f.write(&mut c, &a, &buf).await.unwrap();
            }
            f.flush_cache().await.unwrap();
            f.dlm_stats().await.unwrap()
        }));
    }
    let mut revocations = 0;
    for t in tasks {
        revocations += t.await.unwrap().revocations;
    }
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    let info = c.open(path).await.unwrap();
    let file = c.read_all(&info).await.unwrap();
    let writes: Vec<Write> = (0..r.writers)
        .flat_map(|w| (0..r.rounds).map(move |op| Write::new(w, op, access(w, r.block, r.blocks))))
        .collect();
    let report = atomio_verify::verify(&file[..], &writes, &[] as &[Read]).unwrap();
    (
        report.verdict,
        format!("{report} ({revocations} revocations)"),
    )
}

const ACROSS: Run = Run {
    writers: 3,
    rounds: 4,
    stripe: 4096,
    stripes: 4,
    block: 1024,
    blocks: 64,
};

#[tokio::test(flavor = "multi_thread")]
async fn every_dlm_keeps_overlapping_writes_across_stripes_atomic() {
    for s in [
        "seqdlm",
        "seqdlm:no-er",
        "seqdlm:bw:no-conv",
        "seqdlm:pw",
        "dlm-basic",
        "dlm-lustre",
    ] {
        for _ in 0..3 {
            let (verdict, report) = run(s, &ACROSS).await;
            assert_eq!(verdict, Verdict::Atomic, "{s}: {report}");
        }
    }
}

/// Inside one stripe NBW is enough (Fig. 10), and the SN-ordered data servers keep it
/// atomic although flushes overtake each other.
#[tokio::test(flavor = "multi_thread")]
async fn nbw_inside_one_stripe_is_atomic() {
    let one = Run {
        stripes: 1,
        stripe: 1 << 20,
        ..ACROSS
    };
    for s in ["seqdlm", "seqdlm:nbw"] {
        for _ in 0..3 {
            let (verdict, report) = run(s, &one).await;
            assert_eq!(verdict, Verdict::Atomic, "{s}: {report}");
        }
    }
}

/// Negative control: NBW forced across stripes lets early grants interleave differently
/// at different stripes (Fig. 8) — the verifier must catch a torn write.
#[tokio::test(flavor = "multi_thread")]
async fn nbw_across_stripes_is_caught() {
    let many = Run {
        writers: 4,
        rounds: 8,
        ..ACROSS
    };
    for attempt in 1..=200 {
        let (verdict, report) = run("seqdlm:nbw", &many).await;
        if verdict == Verdict::Violated {
            eprintln!("caught after {attempt} attempt(s): {report}");
            return;
        }
    }
    panic!("200 runs of NBW across stripes never tore a write");
}

/// A read of bytes this client wrote and still caches (the servers' file is shorter): the
/// read sees them and is not refused as past the end; with every DLM's read rules (an
/// upgrade to PW, a PW lock reused, or the client's own lock given back first).
#[tokio::test(flavor = "multi_thread")]
async fn a_client_reads_its_own_cached_writes() {
    for s in ["seqdlm", "seqdlm:nbw:no-conv", "seqdlm:pw", "dlm-basic"] {
        let cluster = EmbeddedCluster::start(2);
        let addrs = cluster.serve_tcp().await.unwrap();
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        File::create(&mut c, "/own", 4096, 2).await.unwrap();
        let mut f = File::open(&mut c, "/own").await.unwrap();
        f.set_atomic(Some(s.parse::<Strategy>().unwrap())).unwrap();
        for round in 0..4u8 {
            let a = Access::new(1000 * u64::from(round), Pattern::bytes(6000).unwrap()).unwrap();
            let buf = vec![round + 1; 6000];
            f.write(&mut c, &a, &buf).await.unwrap();
            let mut out = vec![0u8; 6000];
            tokio::time::timeout(
                std::time::Duration::from_secs(20),
                f.read(&mut c, &a, &mut out),
            )
            .await
            .unwrap_or_else(|_| panic!("{s}: the read hung"))
            .unwrap_or_else(|e| panic!("{s}: round {round}: {e}"));
            assert!(
                out == buf,
                "{s}: round {round}: the read missed the client's own write"
            );
        }
    }
}
