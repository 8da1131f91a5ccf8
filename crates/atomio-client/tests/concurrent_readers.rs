//! Concurrent atomic readers: while writers overwrite overlapping strided regions, readers
//! read them; under every atomic strategy each read must see each write all or nothing (the
//! verifier checks reads for serializability with the writes). Without atomicity, torn
//! reads must be caught — the negative control.

use atomio_client::{DirectData, File, PlacementKind, Strategy};
use atomio_layout::{Access, Pattern};
use atomio_net::EmbeddedCluster;
use atomio_verify::{Read, Verdict, Write};

/// Writers, readers and rounds of one run.
#[derive(Clone, Copy)]
struct Shape {
    writers: u32,
    readers: u32,
    rounds: u64,
    stripe: u64,
    /// Block spacing of the accesses (bytes): large blocks make calls take long enough for
    /// unlocked clients' messages to interleave at the servers.
    block: u64,
    /// Readers read elements of this many bytes, every 4th (ROMIO noncontig's pattern,
    /// locked and read by windows on the user's file); 0: windows of 13/8 block.
    elem: u64,
}

/// Small enough that the verifier's serial-order search always decides.
/// Distinct local file names for runs in one process.
static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

const SMALL: Shape = Shape {
    writers: 2,
    readers: 2,
    rounds: 3,
    stripe: 4096,
    block: 128,
    elem: 0,
};
/// Readers of 4-byte elements, every 4th, over every writer's bytes.
const SMALL_ELEMENTS: Shape = Shape { elem: 4, ..SMALL };
/// More concurrency: reads are still proven torn when they are, but a full serial order
/// placing every read is not always found (the verifier may answer Inconclusive).
const LARGE: Shape = Shape {
    writers: 3,
    readers: 2,
    rounds: 4,
    stripe: 4096,
    block: 128,
    elem: 0,
};
/// For the negative control: calls of megabytes over every server, so unlocked clients'
/// messages interleave at the servers.
const TEARING: Shape = Shape {
    writers: 3,
    readers: 2,
    rounds: 4,
    stripe: 65536,
    block: 65536,
    elem: 0,
};

/// Writer w's access: 64 blocks of ¾ block every block bytes, shifted by 5/16 block per
/// writer, so every writer overlaps its neighbours.
fn writer_access(w: u32, block: u64) -> Access {
    let p = Pattern::hvector(64, block / 4 * 3, block, &Pattern::bytes(1).unwrap()).unwrap();
    Access::new(block / 16 * 5 * u64::from(w), p).unwrap()
}

/// Readers read windows overlapping all writers (or, with `elem`, every 4th element of
/// `elem` bytes over all of them, from element `r`).
fn reader_access(r: u32, block: u64, elem: u64) -> Access {
    if elem > 0 {
        let n = 64 * block / (4 * elem);
        let p = Pattern::hvector(n, 1, 4 * elem, &Pattern::bytes(elem).unwrap()).unwrap();
        return Access::new(elem * u64::from(r % 4), p).unwrap();
    }
    let p = Pattern::hvector(32, block / 8 * 13, block * 2, &Pattern::bytes(1).unwrap()).unwrap();
    Access::new(block / 8 + block / 2 * u64::from(r), p).unwrap()
}

/// Runs writers and readers concurrently; returns the verdict.
async fn run(strategy: Strategy, shape: Shape, data: PlacementKind) -> (Verdict, String) {
    let Shape {
        writers,
        readers,
        rounds,
        stripe,
        block,
        elem,
    } = shape;
    // Clients reach the (in-process) servers over loopback TCP, one connection per server,
    // as deployed clients do; that is what lets unlocked clients' messages interleave.
    let cluster = EmbeddedCluster::start(4);
    let addrs = cluster.serve_tcp().await.unwrap();
    let connect = || atomio_net::ClusterClient::connect_tcp(&addrs);
    let path = "/readers";
    let local = std::env::temp_dir().join(format!(
        "atomio-readers-{}-{}.dat",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let local_path = local.clone();
    {
        let mut c = connect().await.unwrap();
        File::create(&mut c, path, stripe, 4).await.unwrap();
        std::fs::File::create(&local).unwrap();
    }
    // Every task opens the file its own way: on the servers, or the local file directly.
    let open = async |c: &mut atomio_net::ClusterClient| match data {
        PlacementKind::Servers => File::open(c, path).await.unwrap(),
        PlacementKind::Direct => File::direct(DirectData::open(&local, false).unwrap()),
    };
    let mut tasks = Vec::new();
    for w in 0..writers {
        let mut c = connect().await.unwrap();
        let mut f = open(&mut c).await;
        f.set_atomic(Some(strategy.clone())).unwrap();
        tasks.push(tokio::spawn(async move {
            let a = writer_access(w, block);
            for op in 0..rounds {
                let mut buf = vec![0u8; a.size() as usize];
                atomio_verify::fill(w, op, a.ranges(), &mut buf).unwrap();
                f.write(&mut c, &a, &buf).await.unwrap();
            }
            Vec::new()
        }));
    }
    for r in 0..readers {
        let mut c = connect().await.unwrap();
        let mut f = open(&mut c).await;
        f.set_atomic(Some(strategy.clone())).unwrap();
        tasks.push(tokio::spawn(async move {
            let a = reader_access(r, block, elem);
            let mut seen = Vec::new();
            for op in 0..rounds * 2 {
                let mut buf = vec![0u8; a.size() as usize];
                // Reads may start before the writers reach their end: unwritten bytes read
                // as zeros, which is what the verifier expects of them.
                f.read_allowing_holes(&mut c, &a, &mut buf).await.unwrap();
                seen.push((op, buf));
            }
            seen
        }));
    }
    let mut reads = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        let seen = t.await.unwrap();
        if i >= writers as usize {
            reads.push((i as u32 - writers, seen));
        }
    }
    let mut c = connect().await.unwrap();
    let file = match data {
        PlacementKind::Servers => {
            let info = c.open(path).await.unwrap();
            c.read_all(&info).await.unwrap()
        }
        PlacementKind::Direct => std::fs::read(&local_path).unwrap(),
    };
    let _ = std::fs::remove_file(&local_path);
    let writes: Vec<Write> = (0..writers)
        .flat_map(|w| (0..rounds).map(move |op| Write::new(w, op, writer_access(w, block))))
        .collect();
    let read_ops: Vec<Read> = reads
        .iter()
        .flat_map(|(r, seen)| {
            seen.iter()
                .map(move |(op, buf)| Read::new(*r, *op, reader_access(*r, block, elem), &buf[..]))
        })
        .collect();
    let report = atomio_verify::verify(&file[..], &writes, &read_ops).unwrap();
    (report.verdict, report.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn atomic_readers_see_each_write_whole() {
    for s in [
        "ching:datatype:one-try",
        "ching:list:alt-try",
        "bounding-extent",
        "block:4096",
    ] {
        let strategy: Strategy = s.parse().unwrap();
        for data in PlacementKind::ALL {
            for _ in 0..3 {
                let (verdict, report) = run(strategy.clone(), SMALL, data).await;
                assert_eq!(verdict, Verdict::Atomic, "{s} on {data}: {report}");
            }
            // With more concurrency nothing may be proven torn (Inconclusive is allowed: no
            // torn read or write was found, but no full serial order either).
            let (verdict, report) = run(strategy.clone(), LARGE, data).await;
            assert_ne!(verdict, Verdict::Violated, "{s} on {data}: {report}");
        }
    }
}

/// Readers of small elements (ROMIO noncontig's 4-byte ints, every 4th) lock and read by
/// windows on the user's file under every byte-range method: still never a torn read.
#[tokio::test(flavor = "multi_thread")]
async fn small_element_readers_see_each_write_whole() {
    for s in [
        "ching:posix:two-phase",
        "ching:list:alt-try",
        "ching:datatype:one-try",
        "bounding-extent",
    ] {
        let strategy: Strategy = s.parse().unwrap();
        for data in PlacementKind::ALL {
            for _ in 0..3 {
                let (verdict, report) = run(strategy.clone(), SMALL_ELEMENTS, data).await;
                assert_eq!(verdict, Verdict::Atomic, "{s} on {data}: {report}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn torn_reads_are_caught_without_atomicity() {
    for attempt in 1..=60 {
        let (verdict, report) = run(Strategy::none(), TEARING, PlacementKind::Servers).await;
        if verdict == Verdict::Violated {
            eprintln!("caught after {attempt} attempt(s): {report}");
            return;
        }
    }
    panic!("60 unlocked runs with concurrent readers never produced a torn read or write");
}
