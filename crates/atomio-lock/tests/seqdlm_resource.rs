//! One SeqDLM / traditional-DLM lock resource: the paper's scenarios step by step, and
//! random clients (requests, revocation answers, downgrades, releases in any order) with
//! the invariants checked after every step and every request eventually granted; a
//! negative control (early grant over GRANTED locks) is caught.

use atomio_layout::{ByteRange, MAX_OFFSET};
use atomio_lock::seqdlm::{Config, Expand, GrantId, Mode, Out, ReqId, Resource, State};
use atomio_proto::ClientId;
use proptest::prelude::*;

fn r(start: u64, end: u64) -> ByteRange {
    ByteRange { start, end }
}

fn c(i: u64) -> ClientId {
    ClientId(i)
}

/// The grants in `out`, as (client, id, mode, range, state, sn).
fn grants(out: &[Out]) -> Vec<(ClientId, GrantId, Mode, ByteRange, State, u64)> {
    out.iter()
        .filter_map(|o| match o {
            Out::Grant { to, id, grant, .. } => {
                Some((*to, *id, grant.mode, grant.range, grant.state, grant.sn))
            }
            Out::Revoke { .. } => None,
        })
        .collect()
}

fn revokes(out: &[Out]) -> Vec<(ClientId, GrantId)> {
    out.iter()
        .filter_map(|o| match o {
            Out::Revoke { to, id } => Some((*to, *id)),
            Out::Grant { .. } => None,
        })
        .collect()
}

/// Fig. 1 / §II-A with a traditional DLM: C1's cached write lock is revoked, C0 waits for
/// the release (flush) before it is granted, and its grant is expanded to EOF.
#[test]
fn a_traditional_dlm_grants_after_the_holder_released() {
    let mut s = Resource::new(Config::DLM_BASIC);
    let mut out = Vec::new();
    s.request(c(1), ReqId(1), Mode::Pw, r(0, 21), &mut out)
        .unwrap();
    let g1 = grants(&out)[0];
    assert_eq!(g1.3, r(0, MAX_OFFSET), "expanded to EOF");
    out.clear();
    s.request(c(0), ReqId(1), Mode::Pw, r(10, 31), &mut out)
        .unwrap();
    assert_eq!(revokes(&out), vec![(c(1), g1.1)]);
    out.clear();
    s.revoked(c(1), g1.1, &mut out).unwrap();
    assert!(
        grants(&out).is_empty(),
        "no early grant in a traditional DLM"
    );
    s.release(c(1), g1.1, &mut out).unwrap();
    let g0 = grants(&out)[0];
    assert_eq!((g0.0, g0.3, g0.5), (c(0), r(10, MAX_OFFSET), 1));
    s.check().unwrap();
    // SeqDLM's modes are not served by it.
    assert!(s
        .request(c(2), ReqId(1), Mode::Nbw, r(0, 1), &mut out)
        .is_err());
}

/// §III-A1: with early grant, a conflicting NBW is granted as soon as the holder answered
/// the revocation, before its flush; write SNs order the two.
#[test]
fn early_grant_does_not_wait_for_the_flush() {
    let mut s = Resource::new(Config {
        early_revocation: false,
        contention_revocation: false,
        ..Config::SEQDLM
    });
    let mut out = Vec::new();
    s.request(c(0), ReqId(1), Mode::Nbw, r(0, 100), &mut out)
        .unwrap();
    let a = grants(&out)[0];
    out.clear();
    s.request(c(1), ReqId(1), Mode::Nbw, r(50, 150), &mut out)
        .unwrap();
    assert_eq!(revokes(&out), vec![(c(0), a.1)]);
    out.clear();
    s.revoked(c(0), a.1, &mut out).unwrap();
    let b = grants(&out)[0];
    assert_eq!(b.0, c(1));
    assert!(b.5 > a.5, "the later write has the larger SN");
    assert_eq!(s.min_unreleased_write_sn(r(60, 61)), Some(a.5));
    s.check().unwrap();
    s.release(c(0), a.1, &mut out).unwrap();
    assert_eq!(s.min_unreleased_write_sn(r(60, 61)), Some(b.5));
    s.check().unwrap();
}

/// §III-A2: a grant that conflicts with a request already queued behind it goes out
/// CANCELING, and the queued NBW is then granted at once (no revocation round trip).
#[test]
fn early_revocation_rides_on_the_grant() {
    // The paper's rule alone (the extension would send the second grant CANCELING too).
    let mut s = Resource::new(Config {
        contention_revocation: false,
        ..Config::SEQDLM
    });
    let mut out = Vec::new();
    s.request(c(9), ReqId(1), Mode::Pw, r(0, 10), &mut out)
        .unwrap();
    let blocker = grants(&out)[0];
    s.request(c(0), ReqId(1), Mode::Nbw, r(0, 10), &mut out)
        .unwrap();
    s.request(c(1), ReqId(1), Mode::Nbw, r(0, 10), &mut out)
        .unwrap();
    out.clear();
    s.revoked(c(9), blocker.1, &mut out).unwrap();
    assert!(grants(&out).is_empty(), "a PW blocks until released");
    // Its holder is hurried once: someone waits for the release of a CANCELING lock.
    assert_eq!(revokes(&out).len(), 1, "{out:?}");
    out.clear();
    s.release(c(9), blocker.1, &mut out).unwrap();
    let g = grants(&out);
    assert_eq!(g.len(), 2, "{out:?}");
    assert_eq!((g[0].0, g[0].4), (c(0), State::Canceling));
    assert_eq!((g[1].0, g[1].4), (c(1), State::Granted));
    assert!(revokes(&out).is_empty());
    s.check().unwrap();
}

/// The extension: once another client's lock over the requested bytes is CANCELING,
/// the range is write-shared right now, and the grant goes out CANCELING too (the next
/// writer is then granted without a revocation round trip). The paper's rule alone
/// (`contention_revocation: false`) grants it GRANTED: nobody was queued at that instant.
#[test]
fn contention_revocation_rides_on_grants_over_bytes_being_given_back() {
    for cr in [true, false] {
        let mut s = Resource::new(Config {
            contention_revocation: cr,
            ..Config::SEQDLM
        });
        let mut out = Vec::new();
        s.request(c(0), ReqId(1), Mode::Nbw, r(0, 100), &mut out)
            .unwrap();
        let a = grants(&out)[0];
        assert_eq!(a.4, State::Granted, "nobody else writes here yet");
        out.clear();
        s.request(c(1), ReqId(1), Mode::Nbw, r(50, 150), &mut out)
            .unwrap();
        assert_eq!(revokes(&out), vec![(c(0), a.1)]);
        out.clear();
        s.revoked(c(0), a.1, &mut out).unwrap();
        let b = grants(&out)[0];
        let want = if cr { State::Canceling } else { State::Granted };
        assert_eq!((b.0, b.4), (c(1), want), "cr {cr}");
        out.clear();
        // The third writer: granted at once with the extension, after a revocation of
        // c1's lock without it.
        s.request(c(2), ReqId(1), Mode::Nbw, r(60, 70), &mut out)
            .unwrap();
        if cr {
            assert_eq!(grants(&out).len(), 1, "{out:?}");
            assert!(revokes(&out).is_empty(), "{out:?}");
        } else {
            assert!(grants(&out).is_empty(), "{out:?}");
            assert_eq!(revokes(&out), vec![(c(1), b.1)]);
        }
        s.check().unwrap();
    }
}

/// §III-B1 / Fig. 12: BW blocks like a write lock, until its holder downgrades it to NBW
/// while canceling; then the next BW is granted early.
#[test]
fn a_downgraded_bw_lets_the_next_bw_in_early() {
    let mut s = Resource::new(Config {
        early_revocation: false,
        contention_revocation: false,
        ..Config::SEQDLM
    });
    let mut out = Vec::new();
    s.request(c(0), ReqId(1), Mode::Bw, r(0, 10), &mut out)
        .unwrap();
    let a = grants(&out)[0];
    out.clear();
    s.request(c(1), ReqId(1), Mode::Bw, r(0, 10), &mut out)
        .unwrap();
    s.revoked(c(0), a.1, &mut out).unwrap();
    assert!(grants(&out).is_empty(), "BW blocks while CANCELING");
    assert!(s.downgrade(c(0), a.1, Mode::Pw, &mut out).is_err());
    s.downgrade(c(0), a.1, Mode::Nbw, &mut out).unwrap();
    assert_eq!(grants(&out)[0].0, c(1));
    s.check().unwrap();
}

/// §III-D1 / Fig. 11: a read conflicting with the client's own NBW is granted as PW over
/// both, absorbing the NBW (no revocation in the same client).
#[test]
fn a_read_over_ones_own_nbw_is_upgraded_to_pw() {
    let mut s = Resource::new(Config {
        expand: Expand::None,
        ..Config::SEQDLM
    });
    let mut out = Vec::new();
    s.request(c(0), ReqId(1), Mode::Nbw, r(0, 10), &mut out)
        .unwrap();
    let w = grants(&out)[0];
    out.clear();
    s.request(c(0), ReqId(2), Mode::Pr, r(5, 20), &mut out)
        .unwrap();
    assert!(revokes(&out).is_empty());
    match &out[..] {
        [Out::Grant {
            grant, absorbed, ..
        }] => {
            assert_eq!((grant.mode, grant.range), (Mode::Pw, r(0, 20)));
            assert_eq!(absorbed, &vec![w.1]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.granted().count(), 1);
    s.check().unwrap();
}

/// Lustre's policy: greedy while few locks are granted, at most 32 MiB past the request
/// once more than 32 are.
#[test]
fn lustre_caps_expansion_when_crowded() {
    const MIB: u64 = 1 << 20;
    let mut s = Resource::new(Config::DLM_LUSTRE);
    let mut out = Vec::new();
    for i in 0..33 {
        s.request(c(i), ReqId(1), Mode::Pr, r(i, i + 1), &mut out)
            .unwrap();
    }
    assert!(grants(&out).iter().all(|g| g.3.end == MAX_OFFSET));
    out.clear();
    s.request(c(99), ReqId(1), Mode::Pr, r(100 * MIB, 101 * MIB), &mut out)
        .unwrap();
    assert_eq!(grants(&out)[0].3, r(100 * MIB, 133 * MIB));
}

/// A greedy grant stops at the first conflicting lock after it.
#[test]
fn greedy_expansion_stops_at_the_next_conflicting_lock() {
    let mut s = Resource::new(Config::DLM_BASIC);
    let mut out = Vec::new();
    s.request(c(1), ReqId(1), Mode::Pr, r(50, 60), &mut out)
        .unwrap();
    assert_eq!(grants(&out)[0].3, r(50, MAX_OFFSET));
    out.clear();
    s.request(c(2), ReqId(1), Mode::Pw, r(0, 10), &mut out)
        .unwrap();
    assert_eq!(grants(&out)[0].3, r(0, 50));
    out.clear();
    s.request(c(3), ReqId(1), Mode::Pr, r(60, 70), &mut out)
        .unwrap();
    assert_eq!(grants(&out)[0].3, r(60, MAX_OFFSET), "reads overlap reads");
    s.check().unwrap();
}

#[derive(Clone, Debug)]
enum Act {
    Request {
        client: u8,
        mode: u8,
        start: u8,
        len: u8,
    },
    /// The `n`-th outstanding revocation is answered (then maybe downgraded).
    Answer { n: u8, downgrade: bool },
    /// The `n`-th granted lock's holder releases it.
    Release { n: u8 },
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => (0u8..4, 0u8..4, 0u8..64, 1u8..32).prop_map(|(client, mode, start, len)| Act::Request { client, mode, start, len }),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(n, downgrade)| Act::Answer { n, downgrade }),
        2 => any::<u8>().prop_map(|n| Act::Release { n }),
    ]
}

fn configs() -> impl Strategy<Value = Config> {
    (
        0u8..3,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0u8..3,
        any::<bool>(),
    )
        .prop_map(|(kind, eg, er, conv, expand, cr)| {
            let expand = match expand {
                0 => Expand::None,
                1 => Expand::Greedy,
                _ => Expand::Lustre {
                    crowded: 2,
                    max_past: 16,
                },
            };
            match kind {
                0 => Config {
                    expand,
                    ..Config::DLM_BASIC
                },
                _ => Config {
                    expand,
                    early_grant: eg,
                    early_revocation: er,
                    conversion: conv || (!eg && !er && !cr),
                    contention_revocation: cr,
                },
            }
        })
}

/// Drives random clients; returns the first invariant violation, if any. Every request is
/// granted in the end (clients answer every revocation and release everything).
fn drive(cfg: Config, acts: &[Act], fault: bool) -> Result<(), String> {
    let mut s = Resource::new(cfg);
    s.fault_grant_over_granted = fault;
    let mut out = Vec::new();
    let mut pending_revokes: Vec<(ClientId, GrantId)> = Vec::new();
    let mut asked = 0u64;
    let mut granted_reqs = 0u64;
    let mut absorbed_total = 0u64;
    let mut take = |out: &mut Vec<Out>, pending: &mut Vec<(ClientId, GrantId)>| {
        for o in out.drain(..) {
            match o {
                Out::Revoke { to, id } => pending.push((to, id)),
                Out::Grant { absorbed, .. } => {
                    granted_reqs += 1;
                    absorbed_total += absorbed.len() as u64;
                }
            }
        }
    };
    for a in acts {
        match *a {
            Act::Request {
                client,
                mode,
                start,
                len,
            } => {
                let mode = if cfg.traditional() {
                    [Mode::Pr, Mode::Pw][mode as usize % 2]
                } else {
                    Mode::ALL[mode as usize]
                };
                asked += 1;
                let range = r(u64::from(start), u64::from(start) + u64::from(len));
                s.request(c(u64::from(client)), ReqId(asked), mode, range, &mut out)
                    .map_err(|e| e.to_string())?;
            }
            Act::Answer { n, downgrade } => {
                if pending_revokes.is_empty() {
                    continue;
                }
                let (to, id) = pending_revokes.remove(n as usize % pending_revokes.len());
                // The lock may be gone already (released, or absorbed by an upgrade).
                if s.revoked(to, id, &mut out).is_ok() && downgrade && cfg.conversion {
                    let mode = s.granted().find(|(g, _)| *g == id).map(|(_, g)| g.mode);
                    if let Some(m) = mode {
                        let _ = s.downgrade(to, id, m.downgraded(false), &mut out);
                    }
                }
            }
            Act::Release { n } => {
                let all: Vec<(GrantId, ClientId)> =
                    s.granted().map(|(id, g)| (id, g.client)).collect();
                if !all.is_empty() {
                    let (id, client) = all[n as usize % all.len()];
                    s.release(client, id, &mut out).map_err(|e| e.to_string())?;
                }
            }
        }
        take(&mut out, &mut pending_revokes);
        s.check()?;
    }
    // Drain: everyone answers and releases; every request must be granted.
    for _ in 0..10_000 {
        if s.queued() == 0 && s.granted().next().is_none() {
            break;
        }
        // One at a time: a release may grant an upgrade that absorbs other locks.
        let first = s.granted().map(|(id, g)| (id, g.client)).next();
        if let Some((id, client)) = first {
            let _ = s.revoked(client, id, &mut out);
            s.release(client, id, &mut out).map_err(|e| e.to_string())?;
            take(&mut out, &mut pending_revokes);
            s.check()?;
        }
    }
    if s.queued() != 0 {
        return Err(format!("{} requests never granted", s.queued()));
    }
    if granted_reqs != asked {
        return Err(format!("{asked} requests, {granted_reqs} grants"));
    }
    let _ = absorbed_total;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn random_clients_keep_the_invariants_and_every_request_is_granted(
        cfg in configs(),
        acts in prop::collection::vec(act(), 1..80),
    ) {
        prop_assert_eq!(drive(cfg, &acts, false), Ok(()));
    }
}

/// Negative control: early grant that does not wait for CANCELING puts two GRANTED NBW
/// locks on the same bytes; the invariant check catches it.
#[test]
fn early_grant_over_granted_locks_is_caught() {
    let acts = [
        Act::Request {
            client: 0,
            mode: 1,
            start: 0,
            len: 8,
        },
        Act::Request {
            client: 1,
            mode: 1,
            start: 4,
            len: 8,
        },
    ];
    let e = drive(Config::SEQDLM, &acts, true).unwrap_err();
    assert!(e.contains("conflicts"), "{e}");
    assert_eq!(drive(Config::SEQDLM, &acts, false), Ok(()));
}
