//! The seed corpus: real protocol exchanges (locks that wait, partial releases, datatype
//! descriptions, leases that lapse and fence, every data request), written as scripts and
//! frames. Fuzzers start from these; the test suite checks the committed files match.

use crate::script::{Script, Step};
use atomio_layout::{Access, ByteRange, Layout, Order, Pattern, ServerId};
use atomio_proto::frame;
use atomio_proto::{
    ClientFrame, ClientId, DlmExpand, DlmMode, DlmPolicy, ErrorCode, FileId, LockDesc, LockId,
    LockMode, LockProgress, ObjPiece, Reply, Request, ServerFrame, SnBlock, TxnId, TxnOutcome,
    Wait, WireError, WirePattern,
};

fn f(client: u8, tag: u64, request: Request) -> Step {
    Step::Frame {
        client,
        frame: ClientFrame { tag, request },
    }
}

fn ranges(rs: &[(u64, u64)]) -> LockDesc {
    LockDesc::Ranges(
        rs.iter()
            .map(|&(start, end)| ByteRange { start, end })
            .collect(),
    )
}

fn lock(mode: LockMode, desc: LockDesc, wait: Wait) -> Request {
    Request::LockNew {
        file: FileId(7),
        mode,
        desc,
        wait,
    }
}

const SEQDLM: DlmPolicy = DlmPolicy {
    expand: DlmExpand::Greedy,
    early_grant: true,
    early_revocation: true,
    conversion: true,
    contention_revocation: true,
};
const BASIC: DlmPolicy = DlmPolicy {
    expand: DlmExpand::Lustre {
        crowded: 32,
        max_past: 32 << 20,
    },
    early_grant: false,
    early_revocation: false,
    conversion: false,
    contention_revocation: false,
};

fn dlm_lock(policy: DlmPolicy, mode: DlmMode, start: u64, end: u64) -> Request {
    Request::DlmLock {
        file: FileId(7),
        object: 0,
        policy,
        mode,
        range: ByteRange { start, end },
    }
}

fn dlm_cancel(id: u64, downgrade: Option<DlmMode>) -> Request {
    Request::DlmCancel {
        file: FileId(7),
        object: 0,
        id,
        downgrade,
    }
}

fn dlm_release(id: u64) -> Request {
    Request::DlmRelease {
        file: FileId(7),
        object: 0,
        id,
    }
}

/// A flush of `blocks` (offset, length, SN), each filled with `fill`.
fn seq_write(object: u32, blocks: &[(u64, u64, u64)], fill: u8) -> Request {
    let len: u64 = blocks.iter().map(|b| b.1).sum();
    Request::SeqWrite {
        file: FileId(7),
        object,
        blocks: blocks
            .iter()
            .map(|&(offset, len, sn)| SnBlock { offset, len, sn })
            .collect(),
        data: vec![fill; len as usize].into(),
        msn: 0,
    }
}

fn tile_pattern() -> LockDesc {
    let one = Pattern::bytes(1).expect("valid");
    let p = Pattern::subarray(&[64, 64], &[18, 18], &[15, 15], Order::C, &one).expect("valid");
    let access = Access::new(4096, p).expect("valid");
    let layout = Layout::round_robin(256, 1, 1, 0).expect("valid");
    LockDesc::Pattern(WirePattern::new(&access, &layout, ServerId(0)))
}

fn write(file: u64, object: u32, pieces: &[(u64, u64)], byte: u8) -> Request {
    let pieces: Vec<ObjPiece> = pieces
        .iter()
        .map(|&(offset, len)| ObjPiece { offset, len })
        .collect();
    let n: u64 = pieces.iter().map(|p| p.len).sum();
    Request::Write {
        file: FileId(file),
        object,
        // One object: object offsets are file offsets, so seeds' locks and writes meet.
        striping: atomio_proto::Striping {
            stripe_size: 256,
            objects: object + 1,
        },
        pieces,
        data: atomio_proto::data::Bytes::from(vec![byte; n as usize]),
    }
}

/// The seed's writes: odd ones are client 0's (origin 77), even ones client 1's (78) — a
/// server binds an origin to one client.
fn txn(seq: u64) -> TxnId {
    TxnId {
        origin: 77 + (1 - seq % 2),
        seq,
    }
}

fn stage(
    seq: u64,
    decider: Option<ServerId>,
    object: u32,
    pieces: &[(u64, u64)],
    byte: u8,
) -> Request {
    let Request::Write {
        file,
        pieces,
        data,
        striping,
        ..
    } = write(1, object, pieces, byte)
    else {
        unreachable!("write() builds a Write")
    };
    Request::Stage {
        txn: txn(seq),
        decider,
        file,
        object,
        striping,
        pieces,
        data,
    }
}

/// Named scripts for the `serve` target.
/// Versioning's requests: two writers assigned overlapping versions that complete out of
/// order (the lower one's completion publishes both), nodes put and read back, a snapshot,
/// a collection, a hole punched, and a third writer gone mid-version (aborted).
fn versioning_script() -> Script {
    use atomio_version::{Geometry, Node, NodeKey, Pos};
    let file = FileId(9);
    let g = Geometry::new(64, 4, 1 << 12).expect("valid");
    let regions = |a: u64, b: u64| {
        atomio_layout::RangeList::from_ranges(vec![ByteRange { start: a, end: b }])
    };
    let key = |level, index, version| NodeKey {
        pos: Pos { level, index },
        version,
    };
    let leaf = Node::Leaf(atomio_version::Leaf::default()).encode();
    let inner = Node::Inner(vec![None; 4]).encode();
    Script(vec![
        f(
            0,
            1,
            Request::VersionOpen {
                file,
                geometry: Some(g),
            },
        ),
        f(
            1,
            1,
            Request::VersionOpen {
                file,
                geometry: None,
            },
        ),
        f(
            0,
            2,
            Request::VersionAssign {
                file,
                writer: 1,
                regions: regions(0, 100),
            },
        ),
        f(
            1,
            2,
            Request::VersionAssign {
                file,
                writer: 2,
                regions: regions(50, 150),
            },
        ),
        f(
            1,
            3,
            Request::NodePut {
                file,
                nodes: vec![
                    (key(0, 1, 2), leaf.clone().into()),
                    (key(5, 0, 2), inner.clone().into()),
                ],
            },
        ),
        f(1, 4, Request::VersionComplete { file, version: 2 }),
        f(
            0,
            3,
            Request::NodePut {
                file,
                nodes: vec![(key(0, 0, 1), leaf.into())],
            },
        ),
        f(0, 4, Request::VersionComplete { file, version: 1 }),
        f(
            0,
            5,
            Request::NodeGet {
                file,
                keys: vec![key(0, 0, 1), key(3, 3, 3)],
            },
        ),
        f(
            2,
            1,
            Request::VersionOpen {
                file,
                geometry: None,
            },
        ),
        f(
            2,
            2,
            Request::VersionAssign {
                file,
                writer: 3,
                regions: regions(0, 4096),
            },
        ),
        Step::Disconnect { client: 2 },
        f(
            0,
            6,
            Request::VersionSnapshot {
                file,
                version: None,
            },
        ),
        f(0, 7, Request::VersionList { file }),
        f(
            0,
            8,
            Request::VersionGcPlan {
                file,
                keep_last: 1,
                newer_than_ms: None,
            },
        ),
        f(
            0,
            9,
            Request::NodeDrop {
                file,
                keys: vec![key(0, 0, 1)],
            },
        ),
        f(
            0,
            10,
            Request::NodeDropVersions {
                file,
                versions: vec![3],
            },
        ),
        f(
            0,
            11,
            Request::Punch {
                file,
                object: 0,
                ranges: vec![ByteRange { start: 0, end: 10 }],
            },
        ),
        f(
            0,
            12,
            Request::VersionBase {
                file,
                version: 2,
                done: true,
            },
        ),
        f(
            0,
            13,
            Request::VersionSnapshot {
                file,
                version: Some(1),
            },
        ),
    ])
}

pub fn scripts() -> Vec<(&'static str, Script)> {
    use LockMode::{Read, Write};
    let w = |rs: &[(u64, u64)], wait| lock(Write, ranges(rs), wait);
    let many: Vec<(u64, u64)> = (0..40).map(|i| (i * 100, i * 100 + 50)).collect();
    vec![
        ("versioning", versioning_script()),
        (
            // Long requests run in slices (`FUZZ_SLICE` ranges per step): a 40-range read
            // lock is granted over several work steps while a writer waits behind it; a
            // partial release is overtaken by a full one; a client leaves mid-grant.
            "sliced-grants-and-releases",
            Script(vec![
                f(0, 1, lock(Read, ranges(&many), Wait::All)),
                f(1, 1, w(&[(3900, 3960)], Wait::All)),
                Step::Work,
                Step::Work,
                Step::Work,
                Step::Work,
                f(
                    1,
                    2,
                    Request::LockRelease {
                        lock: LockId(1),
                        from: None,
                    },
                ),
                Step::Work,
                f(2, 1, w(&many, Wait::NonBlocking)),
                f(
                    0,
                    2,
                    Request::LockRelease {
                        lock: LockId(0),
                        from: Some(1000),
                    },
                ),
                f(
                    0,
                    3,
                    Request::LockRelease {
                        lock: LockId(0),
                        from: None,
                    },
                ),
                Step::Work,
                Step::Disconnect { client: 2 },
                Step::Work,
                Step::Work,
            ]),
        ),
        (
            "overlap-wait-release",
            Script(vec![
                f(0, 1, w(&[(0, 100), (200, 300)], Wait::NonBlocking)),
                f(1, 1, w(&[(50, 150)], Wait::All)),
                f(2, 1, lock(Read, ranges(&[(90, 120)]), Wait::Until(110))),
                f(
                    0,
                    2,
                    Request::LockRelease {
                        lock: LockId(1),
                        from: Some(60),
                    },
                ),
                f(
                    0,
                    3,
                    Request::LockRelease {
                        lock: LockId(1),
                        from: None,
                    },
                ),
                f(
                    1,
                    2,
                    Request::LockRelease {
                        lock: LockId(2),
                        from: None,
                    },
                ),
                Step::Disconnect { client: 2 },
            ]),
        ),
        (
            "datatype-tiles",
            Script(vec![
                f(0, 1, lock(Write, tile_pattern(), Wait::All)),
                f(1, 1, lock(Write, tile_pattern(), Wait::NonBlocking)),
                f(
                    1,
                    2,
                    Request::LockMore {
                        lock: LockId(2),
                        wait: Wait::Until(5000),
                    },
                ),
                f(
                    0,
                    2,
                    Request::LockRelease {
                        lock: LockId(1),
                        from: None,
                    },
                ),
                f(
                    1,
                    3,
                    Request::LockMore {
                        lock: LockId(2),
                        wait: Wait::All,
                    },
                ),
            ]),
        ),
        (
            "lease-lapse-fence",
            Script(vec![
                Step::Renew { client: 0 },
                f(0, 1, Request::Hello),
                f(0, 2, w(&[(0, 4096)], Wait::All)),
                f(1, 1, w(&[(100, 200)], Wait::All)),
                Step::Wait { ticks: 60 },
                Step::Renew { client: 1 },
                Step::Wait { ticks: 60 },
                f(0, 3, write(7, 0, &[(0, 16)], 0xaa)),
                // Writes of a lapsed client stop at the lock service's admission; its
                // reads reach the data service, which must have fenced it.
                f(
                    0,
                    7,
                    Request::Read {
                        file: FileId(7),
                        object: 0,
                        pieces: vec![ObjPiece { offset: 0, len: 16 }],
                    },
                ),
                f(
                    0,
                    4,
                    Request::Renew {
                        client: ClientId(0),
                        proof: 1,
                    },
                ),
                f(0, 5, Request::Ping { nonce: 9 }),
                Step::Disconnect { client: 0 },
                f(0, 6, w(&[(0, 10)], Wait::NonBlocking)),
            ]),
        ),
        (
            "data-requests",
            Script(vec![
                f(
                    0,
                    1,
                    Request::Create {
                        path: "/out/file".into(),
                        stripe_size: 65536,
                        object_servers: vec![ServerId(0)],
                        exclusive: true,
                    },
                ),
                f(
                    0,
                    2,
                    Request::Open {
                        path: "/out/file".into(),
                    },
                ),
                f(0, 3, write(1, 0, &[(0, 8), (100, 8)], 0x11)),
                f(
                    1,
                    1,
                    Request::Read {
                        file: FileId(1),
                        object: 0,
                        pieces: vec![ObjPiece {
                            offset: 4,
                            len: 200,
                        }],
                    },
                ),
                f(1, 2, Request::Sync { file: FileId(1) }),
                f(1, 3, Request::ObjectSizes { file: FileId(1) }),
                f(
                    1,
                    4,
                    Request::SetObjectSize {
                        file: FileId(1),
                        object: 0,
                        size: 50,
                    },
                ),
                f(1, 5, Request::Locate),
                f(2, 1, Request::Stats),
                f(1, 6, Request::DropObjects { file: FileId(1) }),
                f(
                    0,
                    4,
                    Request::Remove {
                        path: "/out/file".into(),
                    },
                ),
            ]),
        ),
        (
            // All-or-nothing writes: one decided here and committed; one of a client that
            // leaves, decided elsewhere, so its bytes are in doubt until resolved; one
            // resolved as aborted before its writer's late Decide.
            "staged-writes",
            Script(vec![
                f(0, 1, stage(1, None, 0, &[(0, 8), (16, 8)], 0x21)),
                f(0, 2, stage(1, None, 1, &[(0, 4)], 0x22)),
                f(
                    0,
                    3,
                    Request::Decide {
                        txn: txn(1),
                        settled_below: 1,
                    },
                ),
                f(1, 1, stage(2, Some(ServerId(3)), 0, &[(4, 8)], 0x23)),
                Step::Disconnect { client: 1 },
                f(2, 1, write(1, 0, &[(0, 12)], 0x24)),
                f(2, 2, Request::Resolve { txn: txn(2) }),
                f(
                    2,
                    3,
                    Request::Finish {
                        txn: txn(2),
                        outcome: TxnOutcome::Abort,
                    },
                ),
                f(0, 4, stage(3, None, 0, &[(40, 4)], 0x25)),
                f(2, 4, Request::Resolve { txn: txn(3) }),
                f(
                    0,
                    5,
                    Request::Decide {
                        txn: txn(3),
                        settled_below: 3,
                    },
                ),
                f(
                    0,
                    6,
                    Request::Finish {
                        txn: txn(3),
                        outcome: TxnOutcome::Unknown,
                    },
                ),
            ]),
        ),
        (
            // Mandatory locks: changes of bytes another client holds locked are refused
            // (writes, a stage, a truncation, dropping the objects); the holder's own write
            // and writes elsewhere are admitted; another striping for the file is refused.
            "mandatory-locks",
            Script(vec![
                f(0, 1, w(&[(0, 64)], Wait::All)),
                f(1, 1, write(7, 0, &[(8, 8)], 0x31)),
                f(0, 2, write(7, 0, &[(0, 8)], 0x32)),
                f(1, 2, write(7, 0, &[(64, 8)], 0x33)),
                f(
                    1,
                    3,
                    Request::SetObjectSize {
                        file: FileId(7),
                        object: 0,
                        size: 4,
                    },
                ),
                f(1, 4, Request::DropObjects { file: FileId(7) }),
                f(1, 5, lock(LockMode::Read, ranges(&[(100, 110)]), Wait::All)),
                f(0, 3, write(7, 0, &[(100, 4)], 0x34)),
                f(1, 6, write(7, 1, &[(0, 4)], 0x35)),
                Step::Disconnect { client: 0 },
                f(1, 7, write(7, 0, &[(8, 8)], 0x36)),
            ]),
        ),
        (
            "hostile",
            Script(vec![
                f(0, 1, w(&[(u64::MAX - 10, u64::MAX)], Wait::All)),
                f(0, 2, w(&[(10, 5)], Wait::All)),
                f(
                    0,
                    3,
                    Request::LockRelease {
                        lock: LockId(99),
                        from: None,
                    },
                ),
                f(0, 4, write(1, 0, &[(1 << 62, 4)], 0)),
                f(
                    0,
                    5,
                    Request::SetObjectSize {
                        file: FileId(1),
                        object: 3,
                        size: u64::MAX,
                    },
                ),
                Step::Raw {
                    client: 1,
                    bytes: vec![9, 1, 2, 3],
                },
                Step::Raw {
                    client: 1,
                    bytes: vec![],
                },
            ]),
        ),
        (
            // Cached-lock DLMs: SeqDLM NBW locks early-granted and revoked, a CANCELING lock
            // hurried, flushes with SNs (one of a lock this client does not hold: refused),
            // an upgrade absorbing the client's own lock, a traditional DLM's PW, a policy
            // clash, a departed holder.
            "dlm",
            Script(vec![
                f(0, 1, dlm_lock(SEQDLM, DlmMode::Nbw, 0, 64)),
                f(1, 1, dlm_lock(SEQDLM, DlmMode::Nbw, 32, 96)),
                f(0, 2, dlm_cancel(0, Some(DlmMode::Nbw))),
                f(0, 3, seq_write(0, &[(0, 16, 0)], 0x31)),
                f(1, 2, seq_write(0, &[(40, 8, 1)], 0x32)),
                f(1, 3, seq_write(0, &[(40, 8, 0)], 0x33)),
                f(1, 4, dlm_lock(SEQDLM, DlmMode::Pr, 0, 8)),
                f(0, 4, dlm_release(0)),
                f(1, 5, dlm_lock(SEQDLM, DlmMode::Pw, 100, 120)),
                f(2, 1, dlm_lock(BASIC, DlmMode::Pw, 0, 8)),
                f(2, 2, dlm_lock(BASIC, DlmMode::Pw, 0, u64::MAX)),
                f(2, 3, write(1, 0, &[(0, 12)], 0x34)),
                Step::Disconnect { client: 1 },
                f(0, 5, dlm_lock(SEQDLM, DlmMode::Bw, 0, 1 << 20)),
            ]),
        ),
    ]
}

/// Named frame streams for the `decode` target: every script's frames, and replies.
pub fn frames() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, script) in scripts() {
        let mut bytes = Vec::new();
        for step in &script.0 {
            if let Step::Frame { frame: fr, .. } = step {
                frame::encode(fr, &mut bytes).expect("small");
            }
        }
        out.push((format!("requests-{name}"), bytes));
    }
    let progress = LockProgress {
        lock: LockId(3),
        last_abs_offset: 100,
        next_abs_offset: Some(150),
    };
    let replies = [
        Reply::Lock(progress),
        Reply::Released(progress),
        Reply::Pong { nonce: 1 },
        Reply::Session {
            client: ClientId(4),
            proof: 77,
            lease_ms: 5000,
        },
        Reply::Renewed,
        Reply::Done,
        Reply::Challenge { nonce: [3; 32] },
        Reply::Stats(atomio_proto::ServerReport {
            connections: 3,
            waiting: 1,
            ..Default::default()
        }),
        Reply::Data(atomio_proto::data::Bytes::from(vec![1, 2, 3])),
        Reply::Sizes(vec![(0, 10), (1, 4096)]),
        Reply::Error(WireError::new(ErrorCode::LeaseExpired, "lapsed")),
        Reply::DlmGrant {
            id: 5,
            mode: DlmMode::Bw,
            range: ByteRange {
                start: 64,
                end: atomio_layout::MAX_OFFSET,
            },
            canceling: true,
            sn: 12,
            absorbed: vec![3, 4],
        },
        Reply::DlmRevoke {
            file: FileId(7),
            object: 2,
            id: 5,
        },
    ];
    let mut bytes = Vec::new();
    for (tag, reply) in replies.into_iter().enumerate() {
        frame::encode(
            &ServerFrame {
                tag: tag as u64,
                reply,
            },
            &mut bytes,
        )
        .expect("small");
    }
    out.push(("replies".into(), bytes));
    out
}
