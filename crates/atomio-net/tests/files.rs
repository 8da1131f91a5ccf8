//! The data path end to end on embedded clusters (memory and on-disk stores): create/open,
//! strided and list writes, reads back, size, sync, remove, and bad input.

use atomio_layout::{Access, ByteRange, Pattern};
use atomio_net::EmbeddedCluster;
use atomio_proto::ErrorCode;

fn pattern_bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

async fn round_trip(cluster: EmbeddedCluster) {
    let mut c = cluster.connect().await.unwrap();
    let f = c.create("/t/strided", 100, 3, true).await.unwrap();
    assert_eq!(c.open("/t/strided").await.unwrap(), f);
    // 50 blocks of 7 bytes every 23 bytes: crosses strips and servers.
    let access = Access::new(
        5,
        Pattern::hvector(50, 7, 23, &Pattern::bytes(1).unwrap()).unwrap(),
    )
    .unwrap();
    let data = pattern_bytes(access.size() as usize, 3);
    c.write(&f, &access, &data).await.unwrap();
    let mut back = vec![0; data.len()];
    c.read(&f, &access, &mut back).await.unwrap();
    assert_eq!(back, data);
    let end = access.hull().unwrap().end;
    assert_eq!(c.size(&f).await.unwrap(), end);
    // The gaps read as zeros; the whole file matches a flat model.
    let mut model = vec![0u8; end as usize];
    for (r, chunk) in access.ranges().zip(data.chunks(7)) {
        model[r.start as usize..r.end as usize].copy_from_slice(chunk);
    }
    let all = Access::contiguous(ByteRange::new(0, end).unwrap()).unwrap();
    let mut flat = vec![0; end as usize];
    c.read(&f, &all, &mut flat).await.unwrap();
    assert_eq!(flat, model);
    // Explicit lists.
    let ranges = [
        ByteRange::new(1000, 1010).unwrap(),
        ByteRange::new(1200, 1201).unwrap(),
    ];
    c.write_list(&f, &ranges, &[9; 11]).await.unwrap();
    let mut b = [0; 11];
    c.read_list(&f, &ranges, &mut b).await.unwrap();
    assert_eq!(b, [9; 11]);
    c.sync(&f).await.unwrap();
    c.remove("/t/strided").await.unwrap();
    assert_eq!(
        c.open("/t/strided").await.unwrap_err().code,
        ErrorCode::NotFound
    );
}

#[tokio::test]
async fn data_round_trips_in_memory() {
    round_trip(EmbeddedCluster::start(4)).await;
}

#[tokio::test]
async fn data_round_trips_on_disk() {
    let dir = std::env::temp_dir().join(format!("atomio-net-files-{}", std::process::id()));
    round_trip(EmbeddedCluster::start_on_disk(3, &dir).unwrap()).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn bad_calls_get_clear_errors() {
    let cluster = EmbeddedCluster::start(2);
    let mut c = cluster.connect().await.unwrap();
    let f = c.create("/t/bad", 64, 2, false).await.unwrap();
    let r = |s, e| ByteRange::new(s, e).unwrap();
    // Zero-length and overlapping ranges within one call.
    let e = c.write_list(&f, &[r(0, 0)], &[]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
    let e = c
        .write_list(&f, &[r(0, 10), r(5, 12)], &[0; 17])
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
    // A buffer shorter than the pattern.
    let a = Access::new(
        0,
        Pattern::hvector(4, 1, 8, &Pattern::bytes(4).unwrap()).unwrap(),
    )
    .unwrap();
    let e = c.write(&f, &a, &[0; 15]).await.unwrap_err();
    assert!(
        e.message.contains("buffer holds 15 bytes") && e.message.contains("16"),
        "{e}"
    );
    // Reads past the end.
    c.write_list(&f, &[r(0, 100)], &[1; 100]).await.unwrap();
    let mut out = [0; 10];
    let e = c.read_list(&f, &[r(95, 105)], &mut out).await.unwrap_err();
    assert!(e.message.contains("past the end"), "{e}");
    // Creating an existing file exclusively; opening a missing one.
    assert_eq!(
        c.create("/t/bad", 64, 2, true).await.unwrap_err().code,
        ErrorCode::Exists
    );
    assert_eq!(
        c.open("/t/none").await.unwrap_err().code,
        ErrorCode::NotFound
    );
}
