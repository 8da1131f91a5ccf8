//! Leases at the lock server: a silent holder lapses, is refused from then on, and its
//! locks go to the waiters only when the driver says it is fenced.

use atomio_layout::ByteRange;
use atomio_lock::{LeaseConfig, LockServer, Outgoing};
use atomio_proto::{ClientId, ErrorCode, FileId, LockDesc, LockMode, Reply, Request, Wait};

const LEASE: u64 = 1_000;

fn server() -> LockServer {
    LockServer::new().with_leases(LeaseConfig {
        duration_ms: LEASE,
        key: 42,
    })
}

fn lock(s: &mut LockServer, c: ClientId, tag: u64, wait: Wait) -> Vec<Outgoing> {
    let mut out = Vec::new();
    s.handle(
        c,
        tag,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(vec![ByteRange::new(0, 100).unwrap()]),
            wait,
        },
        &mut out,
    );
    out
}

fn ask(s: &mut LockServer, c: ClientId, request: Request) -> Reply {
    let mut out = Vec::new();
    s.handle(c, 9, request, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    out.pop().unwrap().reply
}

fn code(r: &Reply) -> Option<ErrorCode> {
    match r {
        Reply::Error(e) => Some(e.code),
        _ => None,
    }
}

fn granted(out: &[Outgoing], to: ClientId, tag: u64) -> bool {
    out.iter().any(|o| {
        o.to == to
            && o.tag == tag
            && matches!(o.reply, Reply::Lock(p) if p.next_abs_offset.is_none())
    })
}

#[test]
fn a_silent_holder_lapses_and_its_waiter_gets_the_lock_after_fencing() {
    let mut s = server();
    let (a, b) = (ClientId(1), ClientId(2));
    s.set_now(0);
    assert!(granted(&lock(&mut s, a, 1, Wait::All), a, 1));
    assert!(lock(&mut s, b, 2, Wait::All).is_empty(), "b waits behind a");
    // b keeps renewing; a is silent.
    for t in (200..=LEASE).step_by(200) {
        s.set_now(t);
        assert_eq!(
            ask(&mut s, b, Request::Ping { nonce: t }),
            Reply::Pong { nonce: t }
        );
        assert!(
            s.expire().is_empty(),
            "nobody lapses within the lease (t = {t})"
        );
    }
    s.set_now(LEASE + 1);
    assert_eq!(s.expire(), vec![a]);
    assert!(s.expire().is_empty(), "reported once");
    // Until the driver has fenced a, a keeps its locks: b still waits.
    s.check_invariants().unwrap();
    let mut out = Vec::new();
    s.release_lapsed(a, &mut out);
    assert!(granted(&out, b, 2), "{out:?}");
    assert!(
        out.iter().all(|o| o.to == b),
        "nothing to the fenced client: {out:?}"
    );
    s.check_invariants().unwrap();
    // a wakes up: everything but pings is refused, and its lease cannot be renewed.
    let again = lock(&mut s, a, 3, Wait::NonBlocking);
    assert_eq!(code(&again[0].reply), Some(ErrorCode::LeaseExpired));
    assert_eq!(
        code(&ask(&mut s, a, Request::Hello)),
        Some(ErrorCode::LeaseExpired)
    );
    assert_eq!(
        ask(&mut s, a, Request::Ping { nonce: 5 }),
        Reply::Pong { nonce: 5 }
    );
}

#[test]
fn a_lapsed_waiter_is_told_why() {
    let mut s = server();
    let (a, b) = (ClientId(1), ClientId(2));
    s.set_now(0);
    assert!(granted(&lock(&mut s, a, 1, Wait::All), a, 1));
    assert!(lock(&mut s, b, 2, Wait::All).is_empty());
    // a renews through its lease keeper (another connection); b is silent while waiting.
    let keeper = ClientId(3);
    let Reply::Session {
        proof, lease_ms, ..
    } = ask(&mut s, a, Request::Hello)
    else {
        panic!("no session")
    };
    assert_eq!(lease_ms, LEASE);
    s.set_now(LEASE);
    assert_eq!(
        ask(&mut s, keeper, Request::Renew { client: a, proof }),
        Reply::Renewed
    );
    s.set_now(LEASE + 1);
    assert_eq!(s.expire(), vec![b], "the renewed holder keeps its lease");
    let mut out = Vec::new();
    s.release_lapsed(b, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].to, out[0].tag), (b, 2));
    assert_eq!(code(&out[0].reply), Some(ErrorCode::LeaseExpired));
    assert_eq!(s.open_requests(), 1);
    s.check_invariants().unwrap();
}

#[test]
fn renewals_need_the_proof_and_a_live_lease() {
    let mut s = server();
    let (a, other) = (ClientId(1), ClientId(2));
    s.set_now(0);
    let Reply::Session { client, proof, .. } = ask(&mut s, a, Request::Hello) else {
        panic!("no session")
    };
    assert_eq!(client, a);
    let forged = Request::Renew {
        client: a,
        proof: proof ^ 1,
    };
    assert_eq!(code(&ask(&mut s, other, forged)), Some(ErrorCode::NotOwner));
    let unknown = Request::Renew {
        client: ClientId(77),
        proof: 0,
    };
    assert!(code(&ask(&mut s, other, unknown)).is_some());
    assert!(granted(&lock(&mut s, a, 1, Wait::All), a, 1));
    // Silent past the lease while holding: a late renewal does not bring it back.
    s.set_now(LEASE + 5);
    assert_eq!(
        code(&ask(&mut s, other, Request::Renew { client: a, proof })),
        Some(ErrorCode::LeaseExpired)
    );
    assert_eq!(s.expire(), vec![a]);
    // A disconnect forgets the lapsed client.
    let mut out = Vec::new();
    s.disconnect(a, &mut out);
    assert_eq!(s.open_requests(), 0);
}

#[test]
fn without_leases_nothing_expires() {
    let mut s = LockServer::new();
    let a = ClientId(1);
    s.set_now(0);
    assert!(granted(&lock(&mut s, a, 1, Wait::All), a, 1));
    s.set_now(u64::MAX / 2);
    assert!(s.expire().is_empty());
    assert!(matches!(
        ask(&mut s, a, Request::Hello),
        Reply::Session { lease_ms: 0, .. }
    ));
}
