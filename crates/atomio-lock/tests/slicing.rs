//! Long lock work runs in slices: a request of many runs is granted and released a slice
//! at a time (`LockServer::work`), and every message that arrives in between is answered
//! at once — a ping, another client's lock on other bytes — instead of after seconds.

use atomio_layout::{Access, ByteRange, Layout, Pattern, ServerId};
use atomio_lock::{LockServer, Outgoing};
use atomio_proto::{
    ClientId, FileId, LockDesc, LockId, LockMode, Reply, Request, Wait, WirePattern,
};

const RUNS: u64 = 100_000;
const SLICE: u64 = 1_000;

/// `RUNS` runs of 8 bytes every 64 bytes from offset 0.
fn strided() -> LockDesc {
    let p = Pattern::vector(RUNS, 8, 64, &Pattern::bytes(1).unwrap()).unwrap();
    let access = Access::new(0, p).unwrap();
    let layout = Layout::new(1 << 30, vec![ServerId(0)]).unwrap();
    LockDesc::Pattern(WirePattern::new(&access, &layout, ServerId(0)))
}

fn send(s: &mut LockServer, c: u64, tag: u64, request: Request) -> Vec<Outgoing> {
    let mut out = Vec::new();
    s.handle(ClientId(c), tag, request, &mut out);
    s.check_invariants().unwrap();
    out
}

/// Runs work slices until one produces an answer for `client`; returns how many it took.
fn work_until_answer(s: &mut LockServer, client: u64) -> (u64, Vec<Outgoing>) {
    for n in 1..=10 * RUNS / SLICE {
        let mut out = Vec::new();
        s.work(&mut out);
        s.check_invariants().unwrap();
        if out.iter().any(|o| o.to == ClientId(client)) {
            return (n, out);
        }
        assert!(
            s.has_work(),
            "work ran out without answering client {client}"
        );
    }
    panic!("no answer after {} slices", 10 * RUNS / SLICE);
}

#[test]
fn a_long_grant_and_release_run_in_slices_with_others_served_between() {
    for mode in [LockMode::Read, LockMode::Write] {
        // Range by range (no leaps): a write nobody is near is otherwise granted at once
        // (`a_long_write_nobody_is_near_is_granted_in_one_step`).
        let mut s = LockServer::new()
            .with_work_slice(SLICE)
            .with_leap_after(u64::MAX);
        let lock = Request::LockNew {
            file: FileId(1),
            mode,
            desc: strided(),
            wait: Wait::All,
        };
        assert!(
            send(&mut s, 1, 1, lock).is_empty(),
            "answered before its slices ran"
        );
        assert!(s.has_work());
        // Between slices: a ping, and a lock on bytes past the long request's end.
        let pong = send(&mut s, 2, 7, Request::Ping { nonce: 9 });
        assert!(matches!(
            pong[..],
            [Outgoing {
                tag: 7,
                reply: Reply::Pong { nonce: 9 },
                ..
            }]
        ));
        let past = Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(vec![ByteRange::new(RUNS * 64, RUNS * 64 + 10).unwrap()]),
            wait: Wait::NonBlocking,
        };
        let other = send(&mut s, 2, 8, past);
        assert!(
            matches!(&other[..], [o] if matches!(o.reply, Reply::Lock(p) if p.next_abs_offset.is_none())),
            "{other:?}"
        );

        let (slices, out) = work_until_answer(&mut s, 1);
        assert!(
            // The first slice ran when the request arrived.
            (RUNS / SLICE - 1..=RUNS / SLICE).contains(&slices),
            "{mode:?}: {slices} slices for {RUNS} runs"
        );
        assert!(
            matches!(out[0].reply, Reply::Lock(p) if p.next_abs_offset.is_none() && p.last_abs_offset == (RUNS - 1) * 64 + 8),
            "{out:?}"
        );
        assert!(!s.has_work());

        // A writer over the first bytes waits until the release reaches them: the
        // release is cut back from the top, a slice at a time.
        let head = Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(vec![ByteRange::new(0, 4).unwrap()]),
            wait: Wait::All,
        };
        assert!(send(&mut s, 3, 1, head).is_empty(), "the head is held");
        let release = Request::LockRelease {
            lock: LockId(0),
            from: None,
        };
        let now = send(&mut s, 1, 2, release);
        if mode == LockMode::Write {
            // Granted write bytes nobody interleaves with are one hull: freed at once.
            assert!(
                matches!(&now[..], [a, b] if matches!(a.reply, Reply::Released(_)) && b.to == ClientId(3)),
                "{now:?}"
            );
            assert!(!s.has_work());
            continue;
        }
        assert!(
            now.is_empty(),
            "{RUNS} read ranges released in one step: {now:?}"
        );
        let mut slices = 0;
        let mut answered = Vec::new();
        while s.has_work() {
            let mut out = Vec::new();
            s.work(&mut out);
            s.check_invariants().unwrap();
            slices += 1;
            answered.extend(out.into_iter().map(|o| (slices, o.to, o.reply)));
        }
        assert!(
            slices >= RUNS / SLICE - 1,
            "{mode:?}: release took {slices} slices"
        );
        // The release is answered when it reaches the bottom; the waiter there is granted
        // in the same slice or (when that slice's budget went to the release) the next.
        assert!(
            matches!(&answered[..], [(a, ClientId(1), Reply::Released(_)), (b, ClientId(3), Reply::Lock(_))] if *b == slices && *b - *a <= 1),
            "{answered:?}"
        );
        assert_eq!(s.index_entries(), 2, "the other client's two locks");
    }
}

/// A client that leaves while its long release runs: the rest is released unanswered,
/// and a later session under the same id starts with nothing of it.
#[test]
fn a_departed_clients_long_requests_are_released_in_slices() {
    let mut s = LockServer::new().with_work_slice(SLICE);
    let lock = Request::LockNew {
        file: FileId(1),
        mode: LockMode::Read,
        desc: strided(),
        wait: Wait::All,
    };
    assert!(send(&mut s, 1, 1, lock).is_empty());
    work_until_answer(&mut s, 1);
    let mut out = Vec::new();
    s.disconnect(ClientId(1), &mut out);
    s.check_invariants().unwrap();
    assert!(
        s.has_work(),
        "a long release continues after the disconnect"
    );
    assert_eq!(
        s.report().lock_clients,
        0,
        "the departed client holds nothing"
    );
    let mut slices = 0;
    while s.has_work() {
        let mut out = Vec::new();
        s.work(&mut out);
        s.check_invariants().unwrap();
        assert!(out.is_empty(), "nobody to answer: {out:?}");
        slices += 1;
    }
    assert!(slices >= RUNS / SLICE - 1, "{slices}");
    assert_eq!((s.open_requests(), s.index_entries()), (0, 0));
}

#[test]
fn a_long_write_nobody_is_near_is_granted_in_one_step() {
    let mut s = LockServer::new().with_work_slice(SLICE);
    let lock = Request::LockNew {
        file: FileId(1),
        mode: LockMode::Write,
        desc: strided(),
        wait: Wait::All,
    };
    let out = send(&mut s, 1, 1, lock);
    assert!(
        matches!(&out[..], [o] if matches!(o.reply, Reply::Lock(p)
            if p.next_abs_offset.is_none() && p.last_abs_offset == (RUNS - 1) * 64 + 8)),
        "{out:?}"
    );
    assert!(!s.has_work());
    assert_eq!(s.index_entries(), 1);
}
