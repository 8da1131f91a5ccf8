//! Per-client limits cost only that client: one client filling its wait slots is refused,
//! another still waits (before, one client could take all 65,536 slots of a server).

use atomio_layout::ByteRange;
use atomio_lock::{LockServer, Outgoing};
use atomio_proto::limits::MAX_WAITING_PER_CLIENT;
use atomio_proto::{ClientId, ErrorCode, FileId, LockDesc, LockMode, Reply, Request, Wait};

fn lock(s: &mut LockServer, c: u64, tag: u64, at: u64, wait: Wait) -> Vec<Outgoing> {
    let mut out = Vec::new();
    s.handle(
        ClientId(c),
        tag,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(vec![ByteRange::new(at, at + 1).unwrap()]),
            wait,
        },
        &mut out,
    );
    out
}

#[test]
fn one_client_cannot_take_every_wait_slot() {
    let mut s = LockServer::new();
    let (holder, greedy, other) = (1, 2, 3);
    let mut held = Vec::new();
    s.handle(
        ClientId(holder),
        1,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(vec![ByteRange::new(0, 1 << 20).unwrap()]),
            wait: Wait::NonBlocking,
        },
        &mut held,
    );
    assert!(matches!(held[0].reply, Reply::Lock(p) if p.next_abs_offset.is_none()));
    for i in 0..MAX_WAITING_PER_CLIENT as u64 {
        let out = lock(&mut s, greedy, 100 + i, 1 + i, Wait::All);
        assert!(out.is_empty(), "request {i} should wait: {out:?}");
    }
    let refused = lock(&mut s, greedy, 1, 5000, Wait::All);
    assert!(
        matches!(&refused[..], [o] if matches!(&o.reply, Reply::Error(e) if e.code == ErrorCode::LimitExceeded)),
        "{refused:?}"
    );
    let parked = lock(&mut s, other, 1, 5000, Wait::All);
    assert!(parked.is_empty(), "another client still waits: {parked:?}");
    s.check_invariants().unwrap();
    let mut out = Vec::new();
    s.disconnect(ClientId(greedy), &mut out);
    s.check_invariants().unwrap();
    assert_eq!(s.report().waiting, 1);
}

/// A structured lock whose share would be cut into more pieces than the run limit (tiny
/// stripes over a large extent) is refused at once instead of occupying the server.
#[test]
fn a_pattern_cut_into_too_many_stripe_pieces_is_refused_quickly() {
    use atomio_layout::{Access, Layout, Pattern, ServerId};
    use atomio_proto::WirePattern;
    let access = Access::new(0, Pattern::bytes(65 << 20).unwrap()).unwrap();
    let desc = |stripe| {
        let layout = Layout::new(stripe, vec![ServerId(0)]).unwrap();
        LockDesc::Pattern(WirePattern::new(&access, &layout, ServerId(0)))
    };
    let mut s = LockServer::new();
    let t = std::time::Instant::now();
    let mut out = Vec::new();
    let req = |desc| Request::LockNew {
        file: FileId(1),
        mode: LockMode::Write,
        desc,
        wait: Wait::All,
    };
    s.handle(ClientId(1), 1, req(desc(2)), &mut out);
    assert!(
        matches!(&out[..], [o] if matches!(&o.reply, Reply::Error(e) if e.code == ErrorCode::LimitExceeded && e.message.contains("stripes"))),
        "{out:?}"
    );
    assert!(
        t.elapsed() < std::time::Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    // The same bytes in 64 KiB stripes are an ordinary lock.
    out.clear();
    s.handle(ClientId(1), 2, req(desc(64 << 10)), &mut out);
    assert!(
        matches!(out[0].reply, Reply::Lock(p) if p.next_abs_offset.is_none()),
        "{out:?}"
    );
}

/// A client's share of the lock table costs only that client: read locks over a strided
/// access hold one entry per separate range, so one client could fill the table (and the
/// server's memory). Past its share its request is refused with the prefix it got (still
/// held, released normally); another client still locks; writes, whose touching grants
/// share one entry, stay far from the limit.
#[test]
fn one_client_cannot_take_every_lock_entry() {
    use atomio_layout::{Access, Layout, Pattern, ServerId};
    use atomio_proto::WirePattern;
    const SHARE: usize = 1000;
    let strided = |runs: u64| {
        let p = Pattern::vector(runs, 8, 64, &Pattern::bytes(1).unwrap()).unwrap();
        let access = Access::new(0, p).unwrap();
        let layout = Layout::new(1 << 30, vec![ServerId(0)]).unwrap();
        LockDesc::Pattern(WirePattern::new(&access, &layout, ServerId(0)))
    };
    let mut s = LockServer::new()
        .with_work_slice(64)
        .with_client_entry_limit(SHARE);
    let mut out = Vec::new();
    let read = |desc| Request::LockNew {
        file: FileId(1),
        mode: LockMode::Read,
        desc,
        wait: Wait::All,
    };
    for tag in [1, 2] {
        s.handle(ClientId(1), tag, read(strided(600)), &mut out);
        while s.has_work() {
            s.work(&mut out);
            s.check_invariants().unwrap();
        }
    }
    let by_tag = |tag| out.iter().find(|o| o.tag == tag).map(|o| o.reply.clone());
    assert!(
        matches!(by_tag(1), Some(Reply::Lock(p)) if p.next_abs_offset.is_none()),
        "{out:?}"
    );
    match by_tag(2) {
        Some(Reply::Error(e)) => {
            assert_eq!(e.code, ErrorCode::LimitExceeded, "{e}");
            assert!(e.message.contains("this client holds 1000"), "{e}");
        }
        other => panic!("the second read lock passed the share: {other:?}"),
    }
    assert_eq!(
        s.index_entries(),
        SHARE,
        "the refused request keeps its prefix"
    );
    // Another client is not charged for the first one's entries.
    out.clear();
    s.handle(ClientId(2), 1, read(strided(600)), &mut out);
    while s.has_work() {
        s.work(&mut out);
    }
    assert!(
        matches!(&out[..], [o] if matches!(o.reply, Reply::Lock(p) if p.next_abs_offset.is_none())),
        "{out:?}"
    );
    // A write lock over as many runs of its own (no one else between) is one entry.
    out.clear();
    s.handle(
        ClientId(3),
        1,
        Request::LockNew {
            file: FileId(2),
            mode: LockMode::Write,
            desc: strided(100_000),
            wait: Wait::All,
        },
        &mut out,
    );
    while s.has_work() {
        s.work(&mut out);
    }
    assert!(
        matches!(&out[..], [o] if matches!(o.reply, Reply::Lock(p) if p.next_abs_offset.is_none())),
        "{out:?}"
    );
    s.check_invariants().unwrap();
    // Leaving frees the share.
    for c in 1..=3 {
        s.disconnect(ClientId(c), &mut out);
    }
    while s.has_work() {
        s.work(&mut out);
    }
    s.check_invariants().unwrap();
    assert_eq!((s.open_requests(), s.index_entries()), (0, 0));
}
