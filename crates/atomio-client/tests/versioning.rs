//! Versioning end to end: real servers (in-process actors over loopback TCP), several
//! writers writing overlapping noncontiguous regions at once with no locks, readers reading
//! the newest snapshot meanwhile, the file proven atomic by the verifier; old snapshots read
//! back; the user's file as the base (direct placement) and materialized; collection of old
//! snapshots while writers run, then every kept snapshot intact.

use atomio_client::versioned::VersionStats;
use atomio_client::{DirectData, File, Strategy};
use atomio_layout::{Access, Pattern, RangeList};
use atomio_net::{ClusterClient, EmbeddedCluster};
use atomio_verify::{Read, Verdict, Write};

/// Writer w: `blocks` blocks of ¾ `block` every `block` bytes, shifted by 5/16 block per
/// writer, so every writer overlaps its neighbours.
fn access(w: u32, block: u64, blocks: u64) -> Access {
    let p = Pattern::hvector(blocks, block / 4 * 3, block, &Pattern::bytes(1).unwrap()).unwrap();
    Access::new(block / 16 * 5 * u64::from(w), p).unwrap()
}

fn small_chunks() -> atomio_version::Geometry {
    // Small chunks and fan-out so writes share leaves and trees have several levels.
    atomio_version::Geometry::new(4096, 4, 1 << 30).unwrap()
}

/// A new client of `addrs` with `path` open under versioning, in `small_chunks`.
async fn versioned_client(addrs: &[String], path: &str) -> (ClusterClient, File) {
    let mut c = ClusterClient::connect_tcp(addrs).await.unwrap();
    let mut f = File::open(&mut c, path).await.unwrap();
    f.set_atomic(Some(Strategy::versioning())).unwrap();
    f.set_version_geometry(small_chunks());
    (c, f)
}

async fn run_writers(
    addrs: &[String],
    path: &str,
    writers: u32,
    rounds: u64,
    readers: u32,
) -> (Vec<Write>, Vec<(u32, u64, Access, Vec<u8>)>) {
    run_writers_with(addrs, path, writers, rounds, readers, false).await
}

async fn run_writers_with(
    addrs: &[String],
    path: &str,
    writers: u32,
    rounds: u64,
    readers: u32,
    ignore_hints: bool,
) -> (Vec<Write>, Vec<(u32, u64, Access, Vec<u8>)>) {
    // Everyone starts together, so writes are really concurrent.
    let start = std::sync::Arc::new(tokio::sync::Barrier::new((writers + readers) as usize));
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (mut c, mut f) = versioned_client(addrs, path).await;
        if ignore_hints {
            f.ignore_version_hints_unsafely(&mut c).await.unwrap();
        }
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let a = access(w, 1024, 64);
            for op in 0..rounds {
                let mut buf = vec![0u8; a.size() as usize];
                atomio_verify::fill(w, op, a.ranges(), &mut buf).unwrap();
                f.write(&mut c, &a, &buf).await.unwrap();
            }
            assert_eq!(f.version_stats().unwrap().writes, rounds);
            Vec::new()
        }));
    }
    for r in 0..readers {
        let (mut c, mut f) = versioned_client(addrs, path).await;
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let mut reads = Vec::new();
            let a = Access::contiguous(atomio_layout::ByteRange::new(0, 64 * 1024 + 2048).unwrap())
                .unwrap();
            for i in 0..rounds * 2 {
                let mut buf = vec![0u8; a.size() as usize];
                f.read_allowing_holes(&mut c, &a, &mut buf).await.unwrap();
                reads.push((1000 + r, i, a.clone(), buf));
            }
            reads
        }));
    }
    let mut reads = Vec::new();
    for t in tasks {
        reads.extend(t.await.unwrap());
    }
    let writes = (0..writers)
        .flat_map(|w| (0..rounds).map(move |op| Write::new(w, op, access(w, 1024, 64))))
        .collect();
    (writes, reads)
}

#[tokio::test(flavor = "multi_thread")]
async fn overlapping_writers_without_locks_are_atomic_and_readers_see_whole_snapshots() {
    let cluster = EmbeddedCluster::start(3);
    let addrs = cluster.serve_tcp().await.unwrap();
    let path = "/versioned";
    {
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        File::create(&mut c, path, 4096, 3).await.unwrap();
    }
    let (writes, reads) = run_writers(&addrs, path, 4, 6, 2).await;
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    let mut f = File::open(&mut c, path).await.unwrap();
    f.set_atomic(Some(Strategy::versioning())).unwrap();
    let size = f.size(Some(&mut c)).await.unwrap();
    let mut file = vec![0u8; size as usize];
    let all = Access::contiguous(atomio_layout::ByteRange::new(0, size).unwrap()).unwrap();
    f.read(&mut c, &all, &mut file).await.unwrap();
    assert!(reads.len() >= 20);
    let reads: Vec<Read> = reads
        .iter()
        .map(|(r, i, a, buf)| Read::new(*r, *i, a.clone(), &buf[..]))
        .collect();
    // The file alone: proven atomic. With the readers' snapshots the verifier's bounded
    // search may not find the serial order (`every_read_is_exactly_the_snapshot_of_its_
    // version` checks reads exactly against version order); it must never find a violation.
    let report = atomio_verify::verify(&file[..], &writes, &[] as &[Read]).unwrap();
    assert_eq!(report.verdict, Verdict::Atomic, "{report}");
    let report = atomio_verify::verify(&file[..], &writes, &reads).unwrap();
    assert_ne!(report.verdict, Verdict::Violated, "{report}");

    // Every snapshot stays readable: version 1 is exactly one write.
    let mut v =
        atomio_client::versioned::VersionedFile::open(&mut c, f.info().unwrap().id(), path, None)
            .await
            .unwrap();
    let list = v.list(&mut c).await.unwrap();
    assert_eq!(list.len(), 24, "{list:?}");
    let ranges = RangeList::from_ranges(vec![atomio_layout::ByteRange::new(0, size).unwrap()]);
    let mut first = vec![0u8; size as usize];
    let (got, _, _) = v.read(&mut c, Some(1), &ranges, &mut first).await.unwrap();
    assert_eq!(got, 1);
    // Version 1 is some writer's first write alone.
    let alone = (0..4u32).any(|w| {
        let a = access(w, 1024, 64);
        let mut want = vec![0u8; a.size() as usize];
        atomio_verify::fill(w, 0, a.ranges(), &mut want).unwrap();
        let mut expect = vec![0u8; size as usize];
        let mut at = 0;
        for r in a.ranges() {
            let n = r.len() as usize;
            expect[r.start as usize..r.end as usize].copy_from_slice(&want[at..at + n]);
            at += n;
        }
        expect == first
    });
    assert!(alone, "version 1 is not one write alone");
}

/// Negative control: writers that build their trees without forward references to the
/// versions in flight lose parts of each other's writes — the verifier must say so.
#[tokio::test(flavor = "multi_thread")]
async fn trees_built_without_forward_references_are_caught_torn() {
    let mut caught = 0;
    for round in 0..10 {
        let cluster = EmbeddedCluster::start(3);
        let addrs = cluster.serve_tcp().await.unwrap();
        let path = format!("/torn-{round}");
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        File::create(&mut c, &path, 4096, 3).await.unwrap();
        // One write each, all at once: a lost write shows (its bytes no other covers stay
        // zero); repeated rounds would hide it under the same writer's next write.
        let (writes, _) = run_writers_with(&addrs, &path, 8, 1, 0, true).await;
        let mut f = File::open(&mut c, &path).await.unwrap();
        f.set_atomic(Some(Strategy::versioning())).unwrap();
        let size = f.size(Some(&mut c)).await.unwrap();
        let mut file = vec![0u8; size as usize];
        let all = Access::contiguous(atomio_layout::ByteRange::new(0, size).unwrap()).unwrap();
        f.read(&mut c, &all, &mut file).await.unwrap();
        let report = atomio_verify::verify(&file[..], &writes, &[] as &[Read]).unwrap();
        if report.verdict != Verdict::Atomic {
            caught += 1;
        }
    }
    assert!(
        caught >= 5,
        "ignoring forward references was caught in only {caught} of 10 runs"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_users_file_is_the_base_and_is_materialized() {
    let dir = tempdir();
    let user = dir.join("data");
    std::fs::write(&user, vec![7u8; 200_000]).unwrap();
    let cluster = EmbeddedCluster::start(2);
    let addrs = cluster.serve_tcp().await.unwrap();
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    let d = DirectData::open(&user, false).unwrap();
    let mut f = File::direct(d);
    f.set_atomic(Some(Strategy::versioning())).unwrap();
    f.set_version_geometry(small_chunks());
    let a = access(0, 1024, 16);
    let buf = vec![9u8; a.size() as usize];
    f.write(&mut c, &a, &buf).await.unwrap();
    // Before materializing, the user's file is untouched and a versioned read mixes both.
    assert!(std::fs::read(&user).unwrap().iter().all(|&b| b == 7));
    let mut got = vec![0u8; 4096];
    let r = Access::contiguous(atomio_layout::ByteRange::new(0, 4096).unwrap()).unwrap();
    f.read(&mut c, &r, &mut got).await.unwrap();
    assert_eq!(&got[..768], &[9u8; 768][..]);
    assert_eq!(&got[768..1024], &[7u8; 256][..]);
    assert_eq!(f.size(Some(&mut c)).await.unwrap(), 200_000);
    // A second snapshot, then materialize: the first can no longer be read (its unwritten
    // bytes would come from a base that now holds the second).
    let b = Access::contiguous(atomio_layout::ByteRange::new(100, 200).unwrap()).unwrap();
    f.write(&mut c, &b, &[5u8; 100]).await.unwrap();
    f.materialize(&mut c).await.unwrap();
    assert!(f
        .read_snapshot(&mut c, Some(1), &r, &mut got, false)
        .await
        .is_err());
    f.read_snapshot(&mut c, Some(2), &r, &mut got, false)
        .await
        .unwrap();
    assert_eq!(&got[100..200], &[5u8; 100][..]);
    let bytes = std::fs::read(&user).unwrap();
    assert_eq!(bytes.len(), 200_000);
    assert_eq!(&bytes[100..200], &[5u8; 100][..]);
    assert_eq!(&bytes[..100], &[9u8; 100][..]);
    assert_eq!(&bytes[200..768], &[9u8; 568][..]);
    assert_eq!(&bytes[768..1024], &[7u8; 256][..]);
    assert!(bytes[16 * 1024..].iter().all(|&b| b == 7));

    // The base is the snapshot now: a change made to the file outside atomio shows, and
    // the next versioned write builds on the file as it is.
    use std::os::unix::fs::FileExt;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&user)
        .unwrap()
        .write_all_at(&[b'z'; 100], 100)
        .unwrap();
    f.read(&mut c, &r, &mut got).await.unwrap();
    assert_eq!(&got[100..200], &[b'z'; 100][..]);
    let head = Access::contiguous(atomio_layout::ByteRange::new(0, 50).unwrap()).unwrap();
    f.write(&mut c, &head, &[3u8; 50]).await.unwrap();
    f.read(&mut c, &r, &mut got).await.unwrap();
    assert_eq!(&got[..50], &[3u8; 50][..]);
    assert_eq!(&got[50..100], &[9u8; 50][..]);
    assert_eq!(&got[100..200], &[b'z'; 100][..]);
    // Every snapshot up to the base is garbage now (the base holds it).
    let report = f.collect_versions(&mut c, 1, None).await.unwrap();
    assert_eq!(report.collected, vec![1, 2], "{report:?}");
    f.read(&mut c, &r, &mut got).await.unwrap();
    assert_eq!(&got[..50], &[3u8; 50][..]);
    assert_eq!(&got[100..200], &[b'z'; 100][..]);
}

#[tokio::test(flavor = "multi_thread")]
async fn collection_keeps_the_newest_snapshots_intact_and_frees_the_rest() {
    let cluster = EmbeddedCluster::start(2);
    let addrs = cluster.serve_tcp().await.unwrap();
    let path = "/gc";
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    File::create(&mut c, path, 4096, 2).await.unwrap();
    let (writes, _) = run_writers(&addrs, path, 3, 5, 0).await;
    let mut f = File::open(&mut c, path).await.unwrap();
    f.set_atomic(Some(Strategy::versioning())).unwrap();
    let id = f.info().unwrap().id();
    let mut v = atomio_client::versioned::VersionedFile::open(&mut c, id, path, None)
        .await
        .unwrap();
    let size = f.size(Some(&mut c)).await.unwrap();
    let ranges = RangeList::from_ranges(vec![atomio_layout::ByteRange::new(0, size).unwrap()]);
    let mut before = vec![0u8; size as usize];
    let (latest, _, _) = v.read(&mut c, None, &ranges, &mut before).await.unwrap();
    let mut prev = vec![0u8; size as usize];
    v.read(&mut c, Some(latest - 1), &ranges, &mut prev)
        .await
        .unwrap();
    let report = v.collect(&mut c, 2, None).await.unwrap();
    assert_eq!(report.collected.len() as u64, latest - 2, "{report:?}");
    assert!(
        report.nodes_freed > 0 && report.bytes_punched > 0,
        "{report:?}"
    );
    // A fresh client (no cache) reads the kept snapshots as before; older ones are gone.
    let mut c2 = ClusterClient::connect_tcp(&addrs).await.unwrap();
    let mut v2 = atomio_client::versioned::VersionedFile::open(&mut c2, id, path, None)
        .await
        .unwrap();
    let mut after = vec![0u8; size as usize];
    v2.read(&mut c2, None, &ranges, &mut after).await.unwrap();
    assert_eq!(after, before);
    v2.read(&mut c2, Some(latest - 1), &ranges, &mut after)
        .await
        .unwrap();
    assert_eq!(after, prev);
    assert!(v2
        .read(&mut c2, Some(1), &ranges, &mut after)
        .await
        .is_err());
    let report = atomio_verify::verify(&before[..], &writes, &[] as &[Read]).unwrap();
    assert_eq!(report.verdict, Verdict::Atomic, "{report}");
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "atomio-versioning-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

/// The exact check behind the verifier's: every read equals the model of the version it
/// read (all writes up to it applied in version order), with writers and readers running
/// at once through the versioned store directly (which says which version each call made
/// or read).
#[tokio::test(flavor = "multi_thread")]
async fn every_read_is_exactly_the_snapshot_of_its_version() {
    use atomio_client::versioned::VersionedFile;
    let cluster = EmbeddedCluster::start(3);
    let addrs = cluster.serve_tcp().await.unwrap();
    let id = atomio_proto::data::file_id("/exact");
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(6));
    let mut writers = Vec::new();
    for w in 0..4u32 {
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        let mut v = VersionedFile::open(&mut c, id, "/exact", Some(small_chunks()))
            .await
            .unwrap();
        let start = start.clone();
        writers.push(tokio::spawn(async move {
            start.wait().await;
            let a = access(w, 1024, 64);
            let mut made = Vec::new();
            for op in 0..6 {
                let mut buf = vec![0u8; a.size() as usize];
                atomio_verify::fill(w, op, a.ranges(), &mut buf).unwrap();
                let version = v.write(&mut c, &a, &buf).await.unwrap();
                made.push((version, a.clone(), buf));
            }
            made
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        let mut v = VersionedFile::open(&mut c, id, "/exact", Some(small_chunks()))
            .await
            .unwrap();
        let start = start.clone();
        readers.push(tokio::spawn(async move {
            start.wait().await;
            let r = RangeList::from_ranges(vec![atomio_layout::ByteRange::new(0, 70_000).unwrap()]);
            let mut seen = Vec::new();
            for _ in 0..30 {
                let mut buf = vec![0u8; 70_000];
                let (version, _, _) = v.read(&mut c, None, &r, &mut buf).await.unwrap();
                seen.push((version, buf));
            }
            seen
        }));
    }
    let mut writes = std::collections::BTreeMap::new();
    for t in writers {
        for (version, a, buf) in t.await.unwrap() {
            assert!(
                writes.insert(version, (a, buf)).is_none(),
                "version {version} twice"
            );
        }
    }
    let model = |upto: u64| {
        let mut m = vec![0u8; 70_000];
        for (_, (a, buf)) in writes.range(..=upto) {
            let mut at = 0;
            for r in a.ranges() {
                let n = r.len() as usize;
                m[r.start as usize..r.end as usize].copy_from_slice(&buf[at..at + n]);
                at += n;
            }
        }
        m
    };
    let mut checked = 0;
    for t in readers {
        for (version, buf) in t.await.unwrap() {
            assert!(
                buf == model(version),
                "a read of version {version} differs from its snapshot"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 60);
    assert_eq!(
        writes.keys().copied().collect::<Vec<_>>(),
        (1..=24).collect::<Vec<_>>()
    );
}

/// A write of more pieces than a write may declare (10,000 > 4,096) declares coalesced
/// regions and still reads back exactly, under another writer's overlapping write.
#[tokio::test(flavor = "multi_thread")]
async fn writes_of_very_many_pieces_declare_coalesced_regions() {
    use atomio_client::versioned::VersionedFile;
    let cluster = EmbeddedCluster::start(2);
    let addrs = cluster.serve_tcp().await.unwrap();
    let id = atomio_proto::data::file_id("/many");
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    let mut v = VersionedFile::open(&mut c, id, "/many", Some(small_chunks()))
        .await
        .unwrap();
    let many = Access::new(
        0,
        Pattern::hvector(10_000, 3, 10, &Pattern::bytes(1).unwrap()).unwrap(),
    )
    .unwrap();
    v.write(&mut c, &many, &vec![1u8; 30_000]).await.unwrap();
    let over = Access::contiguous(atomio_layout::ByteRange::new(50_000, 60_000).unwrap()).unwrap();
    v.write(&mut c, &over, &vec![2u8; 10_000]).await.unwrap();
    let r = RangeList::from_ranges(vec![atomio_layout::ByteRange::new(0, 100_000).unwrap()]);
    let mut got = vec![0u8; 100_000];
    v.read(&mut c, None, &r, &mut got).await.unwrap();
    for (i, b) in got.iter().enumerate() {
        let want = if (50_000..60_000).contains(&i) {
            2
        } else if i % 10 < 3 {
            1
        } else {
            0
        };
        assert_eq!(*b, want, "byte {i}");
    }
}

/// Retention without any collector: each writer collects before it writes (three writers
/// collecting at once: a plan covers the versions of plans still running), so however many
/// writes run, the published snapshots stored stay bounded; the newest snapshot stays exactly the writes', and
/// the same writers with no retention leave every snapshot (the negative control: the
/// bound comes from the retention, not from the workload).
#[tokio::test(flavor = "multi_thread")]
async fn writers_with_retention_bound_the_stored_snapshots_without_a_collector() {
    use atomio_version::VersionState;
    let cluster = EmbeddedCluster::start(2);
    let addrs = cluster.serve_tcp().await.unwrap();
    let keep = 2u64;
    let (writers, rounds) = (3u32, 6u64);
    for retention in [Some(keep), None] {
        let path = format!("/retention-{}", retention.is_some());
        let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
        File::create(&mut c, &path, 4096, 2).await.unwrap();
        let stored_max = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut tasks = Vec::new();
        for w in 0..writers {
            let (mut c, mut f) = versioned_client(&addrs, &path).await;
            f.set_version_retention(retention);
            let stored_max = stored_max.clone();
            tasks.push(tokio::spawn(async move {
                let a = access(w, 1024, 64);
                let mut writes = Vec::new();
                for op in 0..rounds {
                    let mut buf = vec![0u8; a.size() as usize];
                    atomio_verify::fill(w, op, a.ranges(), &mut buf).unwrap();
                    f.write(&mut c, &a, &buf).await.unwrap();
                    writes.push(Write::new(w, op, a.clone()));
                    let stored = f
                        .list_versions(&mut c)
                        .await
                        .unwrap()
                        .iter()
                        .filter(|r| r.state == VersionState::Published)
                        .count() as u64;
                    stored_max.fetch_max(stored, std::sync::atomic::Ordering::Relaxed);
                }
                let n = f.version_stats().unwrap().writer_collections;
                (writes, n)
            }));
        }
        let mut writes = Vec::new();
        let mut collections = 0;
        for t in tasks {
            let (w, n) = t.await.unwrap();
            writes.extend(w);
            collections += n;
        }
        let max = stored_max.load(std::sync::atomic::Ordering::Relaxed);
        match retention {
            // A collection keeps the newest `k` and whatever an in-flight writer builds on
            // (at most `writers` back); each writer publishes at most once between two of
            // its own collections.
            Some(k) => {
                let bound = k.max(u64::from(writers)) + u64::from(writers);
                assert!(max <= bound, "{max} stored, bound {bound}");
                assert!(collections > 0);
            }
            None => {
                assert_eq!(max, rounds * u64::from(writers));
                assert_eq!(collections, 0);
            }
        }
        let mut f = File::open(&mut c, &path).await.unwrap();
        f.set_atomic(Some(Strategy::versioning())).unwrap();
        let size = f.size(Some(&mut c)).await.unwrap();
        let all = Access::contiguous(atomio_layout::ByteRange::new(0, size).unwrap()).unwrap();
        let mut got = vec![0u8; size as usize];
        f.read(&mut c, &all, &mut got).await.unwrap();
        let report = atomio_verify::verify(&got[..], &writes, &[] as &[Read]).unwrap();
        assert_eq!(report.verdict, Verdict::Atomic, "{report}");
    }
}

/// Stored bytes per object file under `dir/server-*/objects/`, only the files that hold any
/// (the base file's objects are empty here: every write goes to versions; dot-files are
/// the store's own).
fn stored_object_files(dir: &std::path::Path) -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for server in std::fs::read_dir(dir).unwrap() {
        let objects = server.unwrap().path().join("objects");
        for f in std::fs::read_dir(&objects).unwrap() {
            let f = f.unwrap();
            let bytes = f.metadata().unwrap().blocks() * 512;
            if bytes > 0 && !f.file_name().to_string_lossy().starts_with('.') {
                out.push((f.path().display().to_string(), bytes));
            }
        }
    }
    out
}

/// A writer's successive writes go to different chunk object files, so after a collection
/// each file holds at most one kept write's bytes: whole overwrites never pile several
/// live regions between punched holes into one file (on ext4 that cost an extent-index
/// block per file beyond the data, and `bench version-gc` went over its 5x bound).
#[tokio::test(flavor = "multi_thread")]
async fn a_writers_kept_writes_sit_in_separate_object_files() {
    let dir = tempdir();
    let cluster = EmbeddedCluster::start_on_disk(2, &dir).unwrap();
    let addrs = cluster.serve_tcp().await.unwrap();
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    let size = 64u64 << 10;
    File::create(&mut c, "/turns", 4096, 2).await.unwrap();
    let mut f = File::open(&mut c, "/turns").await.unwrap();
    f.set_atomic(Some(Strategy::versioning())).unwrap();
    f.set_version_geometry(atomio_version::Geometry::new(4096, 4, 1 << 30).unwrap());
    let all = Access::contiguous(atomio_layout::ByteRange::new(0, size).unwrap()).unwrap();
    let (keep, overwrites) = (2u64, 11u8);
    for op in 0..overwrites {
        f.write(&mut c, &all, &vec![op; size as usize])
            .await
            .unwrap();
    }
    f.collect_versions(&mut c, keep, None).await.unwrap();
    let stored = stored_object_files(&dir);
    // Each write puts half the file on each of the 2 servers (4 KiB chunks alternate).
    let per_server_write = size / 2;
    let total: u64 = stored.iter().map(|(_, b)| b).sum();
    assert_eq!(total, keep * size, "{stored:?}");
    for (path, bytes) in &stored {
        assert!(
            *bytes <= per_server_write,
            "{path} holds {bytes} bytes, more than one write's {per_server_write}: {stored:?}"
        );
    }
    let mut got = vec![0u8; size as usize];
    f.read(&mut c, &all, &mut got).await.unwrap();
    assert!(got.iter().all(|&b| b == overwrites - 1));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client that has not walked a snapshot asks at once for every node the versions since
/// its last walk could have on its read's paths: a fresh reader of a nine-level tree makes
/// a round trip or two for nodes, not one per level (without the speculative ask: 9+).
#[tokio::test(flavor = "multi_thread")]
async fn a_new_snapshot_is_walked_in_a_few_node_round_trips_not_one_per_level() {
    let cluster = EmbeddedCluster::start(2);
    let addrs = cluster.serve_tcp().await.unwrap();
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    File::create(&mut c, "/rounds", 4096, 2).await.unwrap();
    let mut w = File::open(&mut c, "/rounds").await.unwrap();
    w.set_atomic(Some(Strategy::versioning())).unwrap();
    // 4 KiB chunks, fan-out 4, 1 GiB: nine inner levels above the leaves.
    w.set_version_geometry(small_chunks());
    let a = access(0, 1024, 64);
    let mut buf = vec![0u8; a.size() as usize];
    for op in 0..3 {
        atomio_verify::fill(0, op, a.ranges(), &mut buf).unwrap();
        w.write(&mut c, &a, &buf).await.unwrap();
    }
    let mut rc = ClusterClient::connect_tcp(&addrs).await.unwrap();
    let mut r = File::open(&mut rc, "/rounds").await.unwrap();
    r.set_atomic(Some(Strategy::versioning())).unwrap();
    let mut got = vec![0u8; a.size() as usize];
    r.read(&mut rc, &a, &mut got).await.unwrap();
    assert_eq!(got, buf);
    let s = r.version_stats().unwrap();
    assert!(s.nodes_fetched >= 10, "{s:?}");
    assert!(s.node_rounds <= 2, "{s:?}");
}

/// What `reads_on_and_off` turns on for one reader and off for the other.
#[derive(Clone, Copy)]
enum SameHost {
    Boards,
    Follower,
}

/// One versioning writer on a fresh 3-server cluster writes the same region `writes`
/// times; after each write (and `pause`), two readers read it, one with `switch` on and
/// one with it off, and each must see that write. Returns their stats (on, off).
async fn reads_on_and_off(
    path: &str,
    switch: SameHost,
    writes: u64,
    pause: std::time::Duration,
) -> (VersionStats, VersionStats) {
    let dir = tempdir();
    let cluster = EmbeddedCluster::start_on_disk(3, &dir).unwrap();
    let addrs = cluster.serve_tcp().await.unwrap();
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    File::create(&mut c, path, 4096, 3).await.unwrap();
    let mut w = File::open(&mut c, path).await.unwrap();
    w.set_atomic(Some(Strategy::versioning())).unwrap();
    w.set_version_geometry(small_chunks());
    let mut readers = Vec::new();
    for on in [true, false] {
        let (mut rc, mut r) = versioned_client(&addrs, path).await;
        match switch {
            SameHost::Boards => r.use_version_boards(&mut rc, on).await.unwrap(),
            SameHost::Follower => r.use_node_follower(&mut rc, on).await.unwrap(),
        }
        readers.push((rc, r));
    }
    let a = access(1, 1024, 64);
    let mut buf = vec![0u8; a.size() as usize];
    for op in 0..writes {
        atomio_verify::fill(1, op, a.ranges(), &mut buf).unwrap();
        w.write(&mut c, &a, &buf).await.unwrap();
        tokio::time::sleep(pause).await;
        for (rc, r) in &mut readers {
            let mut got = vec![0u8; a.size() as usize];
            r.read(rc, &a, &mut got).await.unwrap();
            assert!(
                got == buf,
                "write {op} returned, yet a later read missed it"
            );
        }
    }
    let stats = (
        readers[0].1.version_stats().unwrap(),
        readers[1].1.version_stats().unwrap(),
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    stats
}

/// A reader on the servers' host resolves the newest snapshot and its tree from the
/// servers' boards and node logs: no round trip at all, and still every write that
/// returned before the read is in it. Turned off, the same reads ask the servers.
#[tokio::test(flavor = "multi_thread")]
async fn a_reader_on_the_servers_host_reads_the_newest_snapshot_with_no_round_trip() {
    let (on, off) =
        reads_on_and_off("/boards", SameHost::Boards, 20, std::time::Duration::ZERO).await;
    assert_eq!((on.snapshot_rounds, on.node_rounds), (0, 0), "{on:?}");
    assert_eq!(on.board_reads, 20, "{on:?}");
    assert!(on.nodes_from_logs >= 20, "{on:?}");
    assert_eq!(off.snapshot_rounds, 20, "{off:?}");
    assert!(off.node_rounds >= 20, "{off:?}");
    assert_eq!((off.board_reads, off.nodes_from_logs), (0, 0), "{off:?}");
}

/// A reader of the newest snapshot on the servers' host follows their node logs in the
/// background: a new snapshot's nodes are in its cache before it reads it (no pull inside
/// the read), and every read is still the newest write. Without the follower every such
/// read pulls the logs itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_following_reader_finds_a_new_snapshots_nodes_already_pulled() {
    // The follower wakes on the servers' appends; 200 ms gives it time to pull.
    let pause = std::time::Duration::from_millis(200);
    let (on, off) = reads_on_and_off("/follow", SameHost::Follower, 10, pause).await;
    assert_eq!((on.snapshot_rounds, on.node_rounds), (0, 0), "{on:?}");
    // The first read starts the follower (and pulls); later ones should find the nodes
    // taken in. Timing on a loaded machine may leave a few to their own pull.
    assert!(on.nodes_followed >= 20, "{on:?}");
    assert!(on.log_pulls < 10, "{on:?}");
    assert_eq!(off.nodes_followed, 0, "{off:?}");
    assert!(off.log_pulls >= 10, "{off:?}");
}

/// Same-host readers beside concurrent overlapping writers: every read is a whole
/// snapshot (the verifier), and the boards and logs answer every read — none asks a
/// server for the snapshot or for a node.
#[tokio::test(flavor = "multi_thread")]
async fn same_host_readers_beside_concurrent_writers_see_whole_snapshots_with_no_round_trip() {
    let dir = tempdir();
    let cluster = EmbeddedCluster::start_on_disk(3, &dir).unwrap();
    let addrs = cluster.serve_tcp().await.unwrap();
    let path = "/boards-concurrent";
    let mut c = ClusterClient::connect_tcp(&addrs).await.unwrap();
    File::create(&mut c, path, 4096, 3).await.unwrap();
    let (writers, rounds) = (4u32, 30u64);
    let writer_addrs = addrs.clone();
    let writing =
        tokio::spawn(async move { run_writers(&writer_addrs, path, writers, rounds, 0).await });
    let (mut rc, mut r) = versioned_client(&addrs, path).await;
    let a =
        Access::contiguous(atomio_layout::ByteRange::new(0, 64 * 1024 + 2048).unwrap()).unwrap();
    let mut reads = Vec::new();
    while reads.len() < 200 && !writing.is_finished() {
        let mut buf = vec![0u8; a.size() as usize];
        r.read_allowing_holes(&mut rc, &a, &mut buf).await.unwrap();
        reads.push(buf);
    }
    let (writes, _) = writing.await.unwrap();
    let s = r.version_stats().unwrap();
    assert!(s.board_reads >= 5, "{s:?}");
    assert_eq!(
        (s.snapshot_rounds, s.node_rounds, s.nodes_fetched),
        (0, 0, 0),
        "{s:?}"
    );
    let mut f = File::open(&mut c, path).await.unwrap();
    f.set_atomic(Some(Strategy::versioning())).unwrap();
    let size = f.size(Some(&mut c)).await.unwrap();
    let mut file = vec![0u8; size as usize];
    let all = Access::contiguous(atomio_layout::ByteRange::new(0, size).unwrap()).unwrap();
    f.read(&mut c, &all, &mut file).await.unwrap();
    let reads: Vec<Read> = reads
        .iter()
        .enumerate()
        .map(|(i, buf)| Read::new(1000, i as u64, a.clone(), &buf[..]))
        .collect();
    let report = atomio_verify::verify(&file[..], &writes, &reads).unwrap();
    assert_ne!(report.verdict, Verdict::Violated, "{report}");
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
