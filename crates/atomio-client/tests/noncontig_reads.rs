//! Atomic reads of many small pieces on the user's file (ROMIO test/noncontig's pattern:
//! 4-byte elements, every 4th, through a vector file view) move in a few large requests
//! under a few shared lock ranges, whatever the byte-range strategy: O(windows) `pread`s
//! and lock ranges per call, never O(pieces). Counted with the file's `IoStats`.

use atomio_client::{DirectData, File, Strategy};
use atomio_layout::{Access, Pattern};
use atomio_net::EmbeddedCluster;

/// One call's view: `k` elements of 4 bytes, every 4th from byte `4 * rank`, as the MPI
/// library builds it from noncontig's filetype (a resized struct of a vector) for call `c`.
fn noncontig_call(k: u64, rank: u64, c: u64) -> Access {
    let e = 4u64;
    let extent = k * 4 * e;
    let vec = Pattern::hvector(k, 1, 4 * e, &Pattern::bytes(e).unwrap()).unwrap();
    let tile =
        Pattern::resized(extent, &Pattern::structure(&[(rank * e, 1, &vec)]).unwrap()).unwrap();
    Access::view_window(0, &tile, c * k * e, k * e).unwrap()
}

fn expected(a: &Access, file: &[u8]) -> Vec<u8> {
    a.ranges()
        .flat_map(|r| file[r.start as usize..r.end as usize].to_vec())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn small_piece_reads_take_windows_not_pieces() {
    let cluster = EmbeddedCluster::start(2);
    let path = std::env::temp_dir().join(format!("atomio-nc-reads-{}.dat", std::process::id()));
    // 2,500 pieces in a 40 KB extent (one window), and 640,000 in a 10 MB extent (three
    // windows of 4 MiB).
    let cases = [(2_500u64, 1u64), (640_000, 3)];
    let size = cases.iter().map(|&(k, _)| k * 16).max().unwrap() * 2;
    let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    for s in [
        "ching:posix:two-phase",
        "ching:list:alt-try",
        "ching:datatype:one-try",
        "block:4096",
        "bounding-extent",
    ] {
        let strategy: Strategy = s.parse().unwrap();
        for host in [false, true] {
            let mut c = cluster.connect().await.unwrap();
            let mut f = File::direct(DirectData::open(&path, false).unwrap());
            f.set_atomic(Some(strategy.clone())).unwrap();
            if host {
                f.use_host_locks().unwrap();
            }
            for &(k, windows) in &cases {
                for (rank, call) in [(1u64, 0u64), (3, 1)] {
                    let a = noncontig_call(k, rank, call);
                    assert_eq!(a.ranges().count() as u64, k);
                    let before = f.stats();
                    let mut out = vec![0u8; a.size() as usize];
                    f.read(&mut c, &a, &mut out).await.unwrap();
                    let d = f.stats();
                    assert_eq!(out, expected(&a, &bytes), "{s} host={host} k={k}");
                    let preads = d.read_syscalls - before.read_syscalls;
                    let ranges = d.lock_ranges - before.lock_ranges;
                    let requests = d.lock_requests - before.lock_requests;
                    assert!(
                        preads <= windows,
                        "{s} host={host}: {k} pieces read with {preads} preads (windows: {windows})"
                    );
                    // One lock range per window at most, and a few requests (a stripe
                    // boundary of the lock space may cut a range in two).
                    assert!(
                        ranges <= 4 * windows && requests <= 4 * windows + 4,
                        "{s} host={host}: {k} pieces locked as {ranges} ranges in {requests} requests"
                    );
                }
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// Writes of the same pieces where every process shares the file's pages lock their
/// windows and rewrite them (one `pread` and one `pwrite` a window), and the bytes between
/// the pieces keep what they held; where caches are private they keep locking exactly
/// their pieces, one `pwrite` each.
#[tokio::test(flavor = "multi_thread")]
async fn small_piece_writes_rewrite_windows_on_shared_pages_only() {
    let cluster = EmbeddedCluster::start(2);
    let path = std::env::temp_dir().join(format!("atomio-nc-writes-{}.dat", std::process::id()));
    let old: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for private in [false, true] {
        std::fs::write(&path, &old).unwrap();
        let mut c = cluster.connect().await.unwrap();
        let mut d = DirectData::open(&path, false).unwrap();
        if private {
            d.set_caches(atomio_client::Caches::Private);
        }
        let mut f = File::direct(d);
        f.set_atomic(Some("ching:list:one-try".parse().unwrap()))
            .unwrap();
        let a = noncontig_call(2_500, 2, 0);
        f.write(&mut c, &a, &vec![9u8; a.size() as usize])
            .await
            .unwrap();
        let s = f.stats();
        if private {
            assert_eq!((s.lock_ranges, s.write_syscalls), (2_500, 2_500));
        } else {
            assert!(s.lock_ranges <= 4 && s.write_syscalls == 1, "{s:?}");
        }
        let mut want = old.clone();
        for r in a.ranges() {
            want[r.start as usize..r.end as usize].fill(9);
        }
        assert_eq!(std::fs::read(&path).unwrap(), want, "private={private}");
    }
    let _ = std::fs::remove_file(&path);
}
