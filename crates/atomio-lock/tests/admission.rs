//! Mandatory locks (`LockServer::admit`) against a per-byte model: random locks of three
//! clients (ranges and strided patterns, read and write, some only partly granted), then
//! random object writes under a random striping — a write is refused exactly when one of
//! its file bytes lies in another client's lock or in any read lock.

use atomio_layout::{Access, ByteRange, Layout, Pattern, ServerId};
use atomio_lock::LockServer;
use atomio_proto::data::{ObjPiece, Striping};
use atomio_proto::{ClientId, ErrorCode, FileId, LockDesc, LockMode, Request, Wait, WirePattern};
use proptest::prelude::*;

const FILE: FileId = FileId(9);

#[derive(Clone, Debug)]
enum Desc {
    Ranges(Vec<(u64, u64)>),
    /// `count` blocks of `block` bytes every `stride` bytes from `base`.
    Strided {
        base: u64,
        count: u64,
        block: u64,
        stride: u64,
    },
}

fn desc() -> impl Strategy<Value = Desc> {
    prop_oneof![
        prop::collection::vec((0u64..400, 1u64..40), 1..4).prop_map(|v| {
            let mut at = 0;
            Desc::Ranges(
                v.into_iter()
                    .map(|(gap, len)| {
                        let s = at + gap;
                        at = s + len;
                        (s, at)
                    })
                    .collect(),
            )
        }),
        (0u64..300, 1u64..8, 1u64..8, 0u64..8).prop_map(|(base, count, block, extra)| {
            Desc::Strided {
                base,
                count,
                block,
                stride: block + extra + 1,
            }
        }),
    ]
}

fn wire(d: &Desc) -> LockDesc {
    match d {
        Desc::Ranges(v) => LockDesc::Ranges(
            v.iter()
                .map(|&(s, e)| ByteRange::new(s, e).unwrap())
                .collect(),
        ),
        Desc::Strided {
            base,
            count,
            block,
            stride,
        } => {
            let p = Pattern::hvector(*count, *block, *stride, &Pattern::bytes(1).unwrap()).unwrap();
            let access = Access::new(*base, p).unwrap();
            // One server: the lock server sees the whole pattern.
            let layout = Layout::new(1 << 20, vec![ServerId(0)]).unwrap();
            LockDesc::Pattern(WirePattern::new(&access, &layout, ServerId(0)))
        }
    }
}

/// The file offset of byte `at` of `object` (the model's own arithmetic).
fn file_offset(st: Striping, object: u32, at: u64) -> u64 {
    let s = st.stripe_size;
    (at / s) * s * u64::from(st.objects) + u64::from(object) * s + at % s
}

/// (client, object, pieces as (offset, len)).
type ObjWrite = (u64, u32, Vec<(u64, u64)>);

#[derive(Clone, Debug)]
struct Case {
    locks: Vec<(u64, bool, Desc)>,
    striping: Striping,
    writes: Vec<ObjWrite>,
}

fn case() -> impl Strategy<Value = Case> {
    let lock = (1u64..4, any::<bool>(), desc());
    let striping = (prop::sample::select(vec![4u64, 16, 64, 1 << 20]), 1u32..4).prop_map(
        |(stripe_size, objects)| Striping {
            stripe_size,
            objects,
        },
    );
    (prop::collection::vec(lock, 0..6), striping).prop_flat_map(|(locks, striping)| {
        let pieces = prop::collection::vec((0u64..60, 1u64..30), 1..3).prop_map(|v| {
            let mut at = 0;
            v.into_iter()
                .map(|(gap, len)| {
                    let s = at + gap;
                    at = s + len;
                    (s, len)
                })
                .collect::<Vec<_>>()
        });
        let write = (1u64..4, 0..striping.objects, pieces);
        prop::collection::vec(write, 1..8).prop_map(move |writes| Case {
            locks: locks.clone(),
            striping,
            writes,
        })
    })
}

proptest! {
    #[test]
    fn admission_refuses_exactly_the_writes_that_reach_into_others_locks(c in case()) {
        let mut s = LockServer::new();
        for (i, (client, write, d)) in c.locks.iter().enumerate() {
            let mut out = Vec::new();
            s.handle(
                ClientId(*client),
                i as u64,
                Request::LockNew {
                    file: FILE,
                    mode: if *write { LockMode::Write } else { LockMode::Read },
                    desc: wire(d),
                    wait: Wait::NonBlocking,
                },
                &mut out,
            );
        }
        s.check_invariants().unwrap();
        let granted = s.granted();
        for (client, object, pieces) in &c.writes {
            let client = ClientId(*client);
            let conflict = pieces.iter().any(|&(off, len)| {
                (off..off + len).any(|b| {
                    let f = file_offset(c.striping, *object, b);
                    granted.iter().any(|&(_, owner, mode, r)| {
                        r.contains(f) && (owner != client || mode == LockMode::Read)
                    })
                })
            });
            let total: u64 = pieces.iter().map(|p| p.1).sum();
            let request = Request::Write {
                file: FILE,
                object: *object,
                striping: c.striping,
                pieces: pieces.iter().map(|&(offset, len)| ObjPiece { offset, len }).collect(),
                data: vec![0u8; total as usize].into(),
            };
            match s.admit(client, &request) {
                Ok(()) => prop_assert!(!conflict, "admitted a write into a held byte: {request:?}"),
                Err(e) => {
                    prop_assert_eq!(e.code, ErrorCode::Locked, "{}", e);
                    prop_assert!(conflict, "refused a free write: {}", e);
                }
            }
        }
        s.check_invariants().unwrap();
    }
}

fn lock(s: &mut LockServer, client: u64, mode: LockMode, start: u64, end: u64) {
    let mut out = Vec::new();
    s.handle(
        ClientId(client),
        1,
        Request::LockNew {
            file: FILE,
            mode,
            desc: LockDesc::Ranges(vec![ByteRange::new(start, end).unwrap()]),
            wait: Wait::NonBlocking,
        },
        &mut out,
    );
    assert_eq!(out.len(), 1, "{out:?}");
}

const ONE: Striping = Striping {
    stripe_size: 64,
    objects: 1,
};

fn write(object: u32, striping: Striping, offset: u64, len: u64) -> Request {
    Request::Write {
        file: FILE,
        object,
        striping,
        pieces: vec![ObjPiece { offset, len }],
        data: vec![7u8; len as usize].into(),
    }
}

fn code(r: Result<(), atomio_proto::WireError>) -> Option<ErrorCode> {
    r.err().map(|e| e.code)
}

/// A file keeps the striping its first write named; another is refused, so a peer cannot
/// map its pieces onto other file bytes than everyone else's.
#[test]
fn a_file_keeps_the_striping_its_first_write_named() {
    let mut s = LockServer::new();
    assert_eq!(code(s.admit(ClientId(1), &write(0, ONE, 0, 4))), None);
    let other = Striping {
        stripe_size: 64,
        objects: 2,
    };
    assert_eq!(
        code(s.admit(ClientId(2), &write(0, other, 0, 4))),
        Some(ErrorCode::InvalidArgument)
    );
    // Once its objects are dropped, the file may come back striped otherwise.
    let drop = Request::DropObjects { file: FILE };
    assert_eq!(code(s.admit(ClientId(1), &drop)), None);
    assert_eq!(code(s.admit(ClientId(2), &write(0, other, 0, 4))), None);
    assert_eq!(
        code(s.admit(ClientId(2), &write(0, ONE, 0, 4))),
        Some(ErrorCode::InvalidArgument)
    );
    // An object outside the striping, or a zero stripe, is refused before anything.
    assert_eq!(
        code(s.admit(ClientId(2), &write(2, other, 0, 4))),
        Some(ErrorCode::InvalidArgument)
    );
}

/// Truncating or dropping a file's objects under another client's lock is refused; the
/// holder itself, and a resize that keeps every locked byte, are admitted.
#[test]
fn resizes_and_drops_respect_others_locks() {
    let mut s = LockServer::new();
    assert_eq!(code(s.admit(ClientId(1), &write(0, ONE, 0, 4))), None);
    lock(&mut s, 1, LockMode::Write, 100, 200);
    let resize = |size| Request::SetObjectSize {
        file: FILE,
        object: 0,
        size,
    };
    assert_eq!(
        code(s.admit(ClientId(2), &resize(150))),
        Some(ErrorCode::Locked)
    );
    assert_eq!(code(s.admit(ClientId(2), &resize(200))), None);
    assert_eq!(code(s.admit(ClientId(1), &resize(0))), None);
    let drop = Request::DropObjects { file: FILE };
    assert_eq!(code(s.admit(ClientId(2), &drop)), Some(ErrorCode::Locked));
    assert_eq!(code(s.admit(ClientId(1), &drop)), None);
    // A read lock: nobody may change its bytes, not even its holder.
    lock(&mut s, 2, LockMode::Read, 300, 310);
    assert_eq!(
        code(s.admit(ClientId(1), &resize(305))),
        Some(ErrorCode::Locked)
    );
    assert_eq!(
        code(s.admit(ClientId(2), &write(0, ONE, 300, 1))),
        Some(ErrorCode::Locked)
    );
}

/// A resize under a striping whose row of strips passes 2^64 (fuzzing found it panicking
/// on an overflow) is judged from the end of the file's byte space: refused under another
/// client's lock, never a panic.
#[test]
fn a_resize_under_an_absurd_striping_is_judged_not_a_panic() {
    let mut s = LockServer::new();
    let huge = Striping {
        stripe_size: 1 << 62,
        objects: 8,
    };
    assert_eq!(code(s.admit(ClientId(1), &write(7, huge, 0, 4))), None);
    let huge_resize = Request::SetObjectSize {
        file: FILE,
        object: 7,
        size: u64::MAX,
    };
    assert_eq!(code(s.admit(ClientId(2), &huge_resize)), None);
    // Object 1's strip 0 is file bytes [2^62, 2^63): a lock there refuses resizing it,
    // though the whole row of strips does not fit in 64 bits.
    lock(&mut s, 1, LockMode::Write, (1 << 62) + 10, (1 << 62) + 20);
    let resize = |object, size| Request::SetObjectSize {
        file: FILE,
        object,
        size,
    };
    assert_eq!(
        code(s.admit(ClientId(2), &resize(1, 5))),
        Some(ErrorCode::Locked)
    );
    assert_eq!(code(s.admit(ClientId(2), &resize(1, 20))), None);
    // Object 7's bytes lie past the byte space: no lock can be there.
    assert_eq!(code(s.admit(ClientId(2), &resize(7, 5))), None);
}

/// A write crossing too many strips to check is refused with a clear limit error (the
/// check's cost on the lock thread is bounded).
#[test]
fn a_write_over_too_many_strips_is_refused() {
    let mut s = LockServer::new();
    lock(&mut s, 1, LockMode::Write, 0, 1);
    let tiny = Striping {
        stripe_size: 1,
        objects: 2,
    };
    let e = s
        .admit(ClientId(2), &write(0, tiny, 1, 1 << 18))
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::LimitExceeded, "{e}");
    assert!(e.message.contains("strips"), "{e}");
}
