//! Locks on different files never conflict; on the same file they do (found by fuzzing:
//! the invariant check once compared grants across files).

use atomio_layout::ByteRange;
use atomio_lock::LockServer;
use atomio_proto::{ClientId, FileId, LockDesc, LockMode, Reply, Request, Wait};

fn lock(s: &mut LockServer, c: u64, file: u64) -> bool {
    let mut out = Vec::new();
    s.handle(
        ClientId(c),
        1,
        Request::LockNew {
            file: FileId(file),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(vec![ByteRange::new(10, 20).unwrap()]),
            wait: Wait::NonBlocking,
        },
        &mut out,
    );
    matches!(&out[..], [o] if matches!(o.reply, Reply::Lock(p) if p.next_abs_offset.is_none()))
}

#[test]
fn the_same_bytes_of_different_files_are_locked_at_once() {
    let mut s = LockServer::new();
    assert!(lock(&mut s, 1, 7));
    assert!(lock(&mut s, 2, 39));
    s.check_invariants().expect("no conflict across files");
    assert!(!lock(&mut s, 3, 7), "the same file's bytes conflict");
    s.check_invariants().expect("consistent");
}
