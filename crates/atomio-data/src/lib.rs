//! atomio's data providers: where servers keep file bytes (`store`) and the state machine
//! that serves data requests (`service`).

pub mod extent_cache;
pub mod extent_log;
pub mod seq_writes;
pub mod service;
pub mod store;
pub mod txn;
pub mod version_board;
pub mod versions;

pub use service::DataService;
pub use store::{
    object_file_name, DecisionRecord, FileStore, MemStore, ObjectStore, Recovered, StagedWrite,
    IN_DOUBT_FILE, STORE_ID_FILE,
};

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_layout::ServerId;
    use atomio_proto::data::Bytes;
    use atomio_proto::{ErrorCode, FileId, ObjPiece, Reply, Request};

    /// Every behaviour test runs against both stores.
    fn each_store(test: impl Fn(&mut dyn FnMut(Request) -> Reply)) {
        let mut mem = DataService::new(MemStore::new());
        test(&mut |r| mem.handle(r));
        let dir = std::env::temp_dir().join(format!(
            "atomio-data-test-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        let mut files = DataService::new(FileStore::open(&dir).unwrap());
        test(&mut |r| files.handle(r));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn rand_suffix() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        N.fetch_add(1, Ordering::Relaxed)
    }

    #[test]
    fn create_open_write_read_sync_sizes_drop() {
        each_store(|call| {
            let created = call(Request::Create {
                path: "/a".into(),
                stripe_size: 16,
                object_servers: vec![ServerId(0), ServerId(1)],
                exclusive: true,
            });
            let Reply::File(meta) = created else {
                panic!("{created:?}")
            };
            assert_eq!(
                call(Request::Open { path: "/a".into() }),
                Reply::File(meta.clone())
            );
            assert!(matches!(
                call(Request::Create { path: "/a".into(), stripe_size: 16, object_servers: vec![ServerId(0)], exclusive: true }),
                Reply::Error(e) if e.code == ErrorCode::Exists
            ));
            let f = meta.file;
            let w = call(Request::Write {
                file: f,
                object: 1,
                striping: atomio_proto::Striping {
                    stripe_size: 1 << 16,
                    objects: 4,
                },
                pieces: vec![
                    ObjPiece { offset: 2, len: 3 },
                    ObjPiece { offset: 10, len: 2 },
                ],
                data: Bytes::from(vec![1, 2, 3, 4, 5]),
            });
            assert_eq!(w, Reply::Written { bytes: 5 });
            let r = call(Request::Read {
                file: f,
                object: 1,
                pieces: vec![ObjPiece { offset: 0, len: 14 }],
            });
            assert_eq!(
                r,
                Reply::Data(Bytes::from(vec![0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 4, 5, 0, 0]))
            );
            // An object never written reads as zeros.
            let r = call(Request::Read {
                file: f,
                object: 0,
                pieces: vec![ObjPiece { offset: 5, len: 2 }],
            });
            assert_eq!(r, Reply::Data(Bytes::from(vec![0, 0])));
            assert_eq!(call(Request::Sync { file: f }), Reply::Done);
            assert_eq!(
                call(Request::ObjectSizes { file: f }),
                Reply::Sizes(vec![(1, 12)])
            );
            assert_eq!(call(Request::DropObjects { file: f }), Reply::Done);
            assert_eq!(call(Request::ObjectSizes { file: f }), Reply::Sizes(vec![]));
            assert_eq!(call(Request::Remove { path: "/a".into() }), Reply::Done);
            assert!(
                matches!(call(Request::Open { path: "/a".into() }), Reply::Error(e) if e.code == ErrorCode::NotFound)
            );
        });
    }

    #[test]
    fn bad_requests_get_clear_errors() {
        each_store(|call| {
            let f = FileId(9);
            let bad = |r: Reply, code: ErrorCode, text: &str| match r {
                Reply::Error(e) => {
                    assert_eq!(e.code, code, "{e}");
                    assert!(e.message.contains(text), "{e}");
                }
                other => panic!("expected an error, got {other:?}"),
            };
            bad(
                call(Request::Write {
                    file: f,
                    object: 0,
                    striping: atomio_proto::Striping {
                        stripe_size: 1 << 16,
                        objects: 4,
                    },
                    pieces: vec![ObjPiece { offset: 0, len: 4 }],
                    data: Bytes::from(vec![1]),
                }),
                ErrorCode::InvalidArgument,
                "came with them",
            );
            bad(
                call(Request::Write {
                    file: f,
                    object: 0,
                    striping: atomio_proto::Striping {
                        stripe_size: 1 << 16,
                        objects: 4,
                    },
                    pieces: vec![
                        ObjPiece { offset: 4, len: 4 },
                        ObjPiece { offset: 6, len: 1 },
                    ],
                    data: Bytes::from(vec![0; 5]),
                }),
                ErrorCode::InvalidArgument,
                "overlaps",
            );
            bad(
                call(Request::Read {
                    file: f,
                    object: 0,
                    pieces: vec![ObjPiece { offset: 0, len: 0 }],
                }),
                ErrorCode::InvalidArgument,
                "empty",
            );
            bad(
                call(Request::Read {
                    file: f,
                    object: 0,
                    pieces: vec![ObjPiece {
                        offset: u64::MAX - 1,
                        len: 4,
                    }],
                }),
                ErrorCode::InvalidArgument,
                "overflows",
            );
            bad(
                call(Request::Open {
                    path: String::new(),
                }),
                ErrorCode::InvalidArgument,
                "path",
            );
            bad(
                call(Request::Create {
                    path: "/z".into(),
                    stripe_size: 0,
                    object_servers: vec![ServerId(0)],
                    exclusive: false,
                }),
                ErrorCode::InvalidArgument,
                "stripe size",
            );
        });
    }
}

#[cfg(test)]
mod owner_tests {
    use super::*;

    /// One store per directory: a second open while the first lives is a clear error; once
    /// the first is dropped the directory opens again.
    #[test]
    fn a_directory_is_one_servers_at_a_time() {
        let dir = std::env::temp_dir().join(format!("atomio-owner-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = FileStore::open(&dir).unwrap();
        let err = FileStore::open(&dir)
            .err()
            .expect("a second store on the same directory");
        assert!(
            err.to_string().contains("in use by another atomio server"),
            "{err}"
        );
        drop(first);
        FileStore::open(&dir).expect("free again");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod recovery_tests {
    use super::*;
    use atomio_proto::{ClientId, FileId, ObjPiece, Reply, Request, TxnId, TxnOutcome};

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("atomio-recover-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// What a crash can leave half-done is dropped at the next open, never trusted: a
    /// staged write cut mid-file (`.tmp`), a staged file whose length disagrees with its
    /// header, a decision record cut short. Whole records are kept.
    #[test]
    fn half_written_staging_and_decisions_are_dropped_whole_ones_kept() {
        let d = dir("half");
        let c = ClientId(1);
        let committed = TxnId { origin: 1, seq: 1 };
        let in_doubt = TxnId { origin: 1, seq: 2 };
        {
            let mut s = DataService::new(FileStore::open(&d).unwrap());
            let stage = |txn, decider| Request::Stage {
                txn,
                decider,
                file: FileId(3),
                object: 0,
                striping: atomio_proto::Striping {
                    stripe_size: 1 << 16,
                    objects: 4,
                },
                pieces: vec![ObjPiece { offset: 0, len: 4 }],
                data: vec![7; 4].into(),
            };
            assert_eq!(
                s.handle_from(c, stage(committed, None)),
                Reply::Written { bytes: 4 }
            );
            let decide = Request::Decide {
                txn: committed,
                settled_below: 1,
            };
            assert_eq!(s.handle_from(c, decide), Reply::Done);
            let other = Some(atomio_layout::ServerId(5));
            assert_eq!(
                s.handle_from(c, stage(in_doubt, other)),
                Reply::Written { bytes: 4 }
            );
        }
        let staging = d.join("staging");
        std::fs::write(staging.join("00000000000000aa.tmp"), b"half").unwrap();
        std::fs::write(staging.join("00000000000000bb.stage"), b"\x05\0\0\0junk").unwrap();
        let log = d.join("decisions.log");
        let mut bytes = std::fs::read(&log).unwrap();
        assert_eq!(bytes.len(), 17, "one commit record");
        bytes.extend_from_slice(&[9; 5]);
        std::fs::write(&log, &bytes).unwrap();

        let mut s = DataService::new(FileStore::open(&d).unwrap());
        assert_eq!(
            std::fs::read(&log).unwrap().len(),
            17,
            "the cut record is gone"
        );
        let mut left: Vec<String> = std::fs::read_dir(&staging)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left.len(),
            1,
            "only the in-doubt write's staged file stays: {left:?}"
        );
        assert_eq!(s.txns().in_doubt_count(), 1);
        // The committed write is still known to have committed.
        assert_eq!(
            s.handle_from(ClientId(2), Request::Resolve { txn: committed }),
            Reply::Outcome { committed: true }
        );
        // The in-doubt one blocks its bytes until its outcome is handed down.
        let read = Request::Read {
            file: FileId(3),
            object: 0,
            pieces: vec![ObjPiece { offset: 0, len: 4 }],
        };
        assert!(
            matches!(s.handle_from(ClientId(2), read.clone()), Reply::InDoubt { txn, .. } if txn == in_doubt)
        );
        assert!(
            d.join("objects").join(IN_DOUBT_FILE).exists(),
            "same-host readers are told to go through the server"
        );
        let abort = Request::Finish {
            txn: in_doubt,
            outcome: TxnOutcome::Abort,
        };
        assert_eq!(s.handle_from(ClientId(2), abort), Reply::Done);
        assert_eq!(
            s.handle_from(ClientId(2), read),
            Reply::Data(vec![7; 4].into())
        );
        assert!(!d.join("objects").join(IN_DOUBT_FILE).exists());
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[cfg(test)]
mod decision_limit_tests {
    use super::*;
    use atomio_proto::limits::MAX_DECISIONS_PER_SERVER;
    use atomio_proto::{ClientId, ErrorCode, Reply, Request, TxnId};

    /// Asking about made-up writes records aborts (a real writer may still be staging
    /// one), but only up to the server's bound; decisions already taken are still answered.
    #[test]
    fn resolving_made_up_writes_is_bounded() {
        let mut s = DataService::new(MemStore::new());
        let peer = ClientId(9);
        for seq in 0..MAX_DECISIONS_PER_SERVER as u64 {
            let r = s.handle_from(
                peer,
                Request::Resolve {
                    txn: TxnId { origin: 1, seq },
                },
            );
            assert_eq!(r, Reply::Outcome { committed: false });
        }
        let over = TxnId { origin: 2, seq: 0 };
        let r = s.handle_from(peer, Request::Resolve { txn: over });
        assert!(
            matches!(&r, Reply::Error(e) if e.code == ErrorCode::LimitExceeded),
            "{r:?}"
        );
        let known = TxnId { origin: 1, seq: 5 };
        let r = s.handle_from(peer, Request::Resolve { txn: known });
        assert_eq!(r, Reply::Outcome { committed: false });
        assert_eq!(s.txns().decisions_kept(), MAX_DECISIONS_PER_SERVER);
    }
}

#[cfg(test)]
mod origin_tests {
    use super::*;
    use atomio_proto::{ClientId, ErrorCode, FileId, ObjPiece, Reply, Request, TxnId};

    fn stage(txn: TxnId) -> Request {
        Request::Stage {
            txn,
            decider: None,
            file: FileId(1),
            object: 0,
            striping: atomio_proto::Striping {
                stripe_size: 1 << 16,
                objects: 4,
            },
            pieces: vec![ObjPiece { offset: 0, len: 2 }],
            data: vec![1, 2].into(),
        }
    }

    /// A peer cannot stage under another client's origin, nor make a decider forget that
    /// client's decisions with a `settled_below` of its own.
    #[test]
    fn a_peer_cannot_speak_for_another_clients_writes() {
        let mut s = DataService::new(MemStore::new());
        let (a, b) = (ClientId(1), ClientId(2));
        let mine = TxnId { origin: 10, seq: 1 };
        assert_eq!(s.handle_from(a, stage(mine)), Reply::Written { bytes: 2 });
        let decide = Request::Decide {
            txn: mine,
            settled_below: 1,
        };
        assert_eq!(s.handle_from(a, decide), Reply::Done);
        let theirs = TxnId { origin: 10, seq: 7 };
        let r = s.handle_from(b, stage(theirs));
        assert!(
            matches!(&r, Reply::Error(e) if e.code == ErrorCode::NotOwner),
            "{r:?}"
        );
        let forget = Request::Decide {
            txn: theirs,
            settled_below: u64::MAX,
        };
        let r = s.handle_from(b, forget);
        assert!(
            matches!(&r, Reply::Error(e) if e.code == ErrorCode::Aborted),
            "{r:?}"
        );
        let r = s.handle_from(b, Request::Resolve { txn: mine });
        assert_eq!(
            r,
            Reply::Outcome { committed: true },
            "the decision must survive"
        );
    }
}
