//! All-or-nothing writes across data servers, end to end on real `DataService`s over
//! `FileStore`s: the client machine (`DataOp::write_atomic`) is driven with messages
//! delivered in a seeded random order, and a fault is injected after a random number of
//! deliveries — the writer vanishes, or one server is killed and restarted from its store
//! (what `kill -9` leaves: the page cache, so everything written to files). A reader then
//! reads everything back (resolving writes left in doubt) and must see the old bytes or the
//! new ones, never a mix; a writer told `Done` must be visible, one told `Aborted` not.

use atomio_data::{DataService, FileStore};
use atomio_layout::{ByteRange, Layout, ServerId};
use atomio_lock::Send;
use atomio_net::{DataOp, Machine, Progress};
use atomio_proto::{ClientId, ErrorCode, FileId, Reply, Request, TxnId, WireError};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;

const FILE: FileId = FileId(7);
const WRITER: ClientId = ClientId(1);
const READER: ClientId = ClientId(2);

struct Cluster {
    dirs: Vec<PathBuf>,
    servers: Vec<Option<DataService<FileStore>>>,
}

impl Cluster {
    fn new(n: usize, tag: &str) -> Self {
        let dirs: Vec<PathBuf> = (0..n)
            .map(|i| {
                let d = std::env::temp_dir()
                    .join(format!("atomio-aon-{}-{tag}-{i}", std::process::id()));
                let _ = std::fs::remove_dir_all(&d);
                d
            })
            .collect();
        let servers = dirs
            .iter()
            .map(|d| Some(DataService::new(FileStore::open(d).expect("store"))))
            .collect();
        Self { dirs, servers }
    }

    fn handle(&mut self, server: ServerId, client: ClientId, r: Request) -> Reply {
        match &mut self.servers[server.0 as usize] {
            Some(s) => s.handle_from(client, r),
            None => Reply::Error(WireError::new(ErrorCode::Disconnected, "down")),
        }
    }

    /// `kill -9` and restart: the service and its store are dropped without any cleanup;
    /// a new one recovers from the directory.
    fn crash_restart(&mut self, i: usize) {
        // Dropping runs no cleanup of ours (the store has no destructor logic; its files
        // close as a dead process's do), so this is what `kill -9` leaves.
        drop(self.servers[i].take().expect("running"));
        self.servers[i] = Some(DataService::new(
            FileStore::open(&self.dirs[i]).expect("reopen"),
        ));
    }

    fn disconnect_everywhere(&mut self, client: ClientId) {
        for s in self.servers.iter_mut().flatten() {
            s.forget(client);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    /// After `n` deliveries the writer is gone (disconnected from every server).
    WriterVanishes(usize),
    /// After `n` deliveries server `s` is killed and restarted; the writer's op is
    /// abandoned (its connection there broke) and it cleans up at the others.
    ServerCrash(usize, usize),
}

/// Delivers `op`'s messages in random order until it is finished or the fault strikes.
fn drive(
    op: &mut DataOp,
    first: Vec<Send>,
    client: ClientId,
    cluster: &mut Cluster,
    rng: &mut ChaCha8Rng,
    fault: Fault,
) -> Progress {
    let mut queue = first;
    let mut delivered = 0usize;
    while !queue.is_empty() {
        match fault {
            Fault::WriterVanishes(n) if delivered == n => {
                cluster.disconnect_everywhere(client);
                return Progress::Failed(WireError::new(ErrorCode::Disconnected, "vanished"));
            }
            Fault::ServerCrash(n, s) if delivered == n => {
                cluster.crash_restart(s);
                let e = WireError::new(ErrorCode::Disconnected, "server crashed");
                op.abandon(e.clone());
                // What was already sent to the other servers still arrives (their
                // connections are fine), then what cleanup sends.
                let mut out = std::mem::take(&mut queue);
                op.cleanup(&mut out);
                for m in out {
                    if m.server.0 as usize != s {
                        cluster.handle(m.server, client, m.request);
                    }
                }
                // The writer's session at the crashed server is gone; it lives on elsewhere.
                return Progress::Failed(e);
            }
            _ => {}
        }
        let m = queue.swap_remove(rng.gen_range(0..queue.len()));
        delivered += 1;
        let reply = cluster.handle(m.server, client, m.request);
        op.on_reply(m.sub, reply, &mut queue);
    }
    op.progress()
}

fn read_all(cluster: &mut Cluster, layout: &Layout, len: u64, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let ranges = [ByteRange::new(0, len).unwrap()];
    let mut op = DataOp::read(FILE, layout, ranges.iter().copied(), len as usize);
    let mut out = Vec::new();
    op.start(&mut out);
    let p = drive(&mut op, out, READER, cluster, rng, Fault::None);
    assert_eq!(
        p,
        Progress::Done,
        "the reader must resolve whatever is in doubt"
    );
    op.take_data()
}

fn write_atomic(
    cluster: &mut Cluster,
    layout: &Layout,
    ranges: &[ByteRange],
    data: &[u8],
    seq: u64,
    rng: &mut ChaCha8Rng,
    fault: Fault,
) -> (Progress, usize) {
    let txn = TxnId { origin: 99, seq };
    let mut op = DataOp::write_atomic(FILE, layout, ranges.iter().copied(), data, txn, seq);
    let mut out = Vec::new();
    op.start(&mut out);
    let messages = out.len();
    (drive(&mut op, out, WRITER, cluster, rng, fault), messages)
}

/// One scenario: write `old` everywhere, then `new` with a fault; read back.
fn scenario(seed: u64, servers: usize, fault_kind: u8) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut cluster = Cluster::new(servers, &format!("{seed}-{fault_kind}"));
    let layout = Layout::round_robin(16, servers as u32, servers as u32, 0).unwrap();
    let len = 16 * servers as u64 * rng.gen_range(1..4u64);
    let all = [ByteRange::new(0, len).unwrap()];
    let old = vec![0xAAu8; len as usize];
    let (p, _) = write_atomic(&mut cluster, &layout, &all, &old, 1, &mut rng, Fault::None);
    assert_eq!(p, Progress::Done, "seed {seed}: the first write");
    // The second write covers a random part of every server's bytes.
    let start = rng.gen_range(0..8);
    let ranges = [ByteRange::new(start, len - rng.gen_range(0..8)).unwrap()];
    let size = ranges[0].len() as usize;
    let new = vec![0x55u8; size];
    // Messages: stage per chunk, decide, finishes: pick a point among them.
    let at = rng.gen_range(0..(servers * 2 + 3));
    let fault = match fault_kind {
        0 => Fault::WriterVanishes(at),
        _ => Fault::ServerCrash(at, rng.gen_range(0..servers)),
    };
    let (p, _) = write_atomic(&mut cluster, &layout, &ranges, &new, 2, &mut rng, fault);
    let got = read_all(&mut cluster, &layout, len, &mut rng);
    let mut expect_new = old.clone();
    expect_new[ranges[0].start as usize..ranges[0].end as usize].fill(0x55);
    let is_old = got == old;
    let is_new = got == expect_new;
    assert!(
        is_old || is_new,
        "seed {seed} servers {servers} {fault:?}: a torn write is visible: {got:?}"
    );
    match &p {
        Progress::Done => assert!(is_new, "seed {seed} {fault:?}: told Done, but not visible"),
        Progress::Failed(e) if e.code == ErrorCode::Aborted => {
            assert!(is_old, "seed {seed} {fault:?}: told Aborted, but visible")
        }
        _ => {}
    }
    // Nothing is left staged or in doubt once the reader has been everywhere.
    for (i, s) in cluster.servers.iter().enumerate() {
        let s = s.as_ref().unwrap();
        assert_eq!(
            s.txns().in_doubt_count(),
            0,
            "seed {seed} {fault:?}: server {i} still has writes in doubt"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn a_vanished_writer_leaves_old_or_new_bytes(seed in 0u64..1_000_000, servers in 1usize..4) {
        scenario(seed, servers, 0);
    }

    #[test]
    fn a_server_killed_mid_write_leaves_old_or_new_bytes(seed in 0u64..1_000_000, servers in 1usize..4) {
        scenario(seed, servers, 1);
    }
}

/// Negative control: the same writes without staging (plain `Write` messages) do tear
/// under the same faults — the scenario can tell.
#[test]
fn plain_writes_tear_under_the_same_faults() {
    let mut torn = 0;
    for seed in 0..40u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut cluster = Cluster::new(3, &format!("plain-{seed}"));
        let layout = Layout::round_robin(16, 3, 3, 0).unwrap();
        let all = [ByteRange::new(0, 96).unwrap()];
        let mut op = DataOp::write(FILE, &layout, all.iter().copied(), &[0xAA; 96]);
        let mut out = Vec::new();
        op.start(&mut out);
        assert_eq!(
            drive(&mut op, out, WRITER, &mut cluster, &mut rng, Fault::None),
            Progress::Done
        );
        let mut op = DataOp::write(FILE, &layout, all.iter().copied(), &[0x55; 96]);
        let mut out = Vec::new();
        op.start(&mut out);
        let at = rng.gen_range(1..3);
        drive(
            &mut op,
            out,
            WRITER,
            &mut cluster,
            &mut rng,
            Fault::WriterVanishes(at),
        );
        let got = read_all(&mut cluster, &layout, 96, &mut rng);
        if got != vec![0xAA; 96] && got != vec![0x55; 96] {
            torn += 1;
        }
    }
    assert!(
        torn > 0,
        "plain writes never tore: the scenario cannot see a torn write"
    );
}

/// A decider killed after logging its commit but before applying its own bytes redoes the
/// write when it restarts.
#[test]
fn a_decider_restarted_between_commit_and_apply_redoes_the_write() {
    use atomio_data::{DecisionRecord, ObjectStore};
    let mut cluster = Cluster::new(1, "redo");
    let txn = TxnId { origin: 5, seq: 1 };
    let pieces = vec![atomio_proto::ObjPiece { offset: 0, len: 4 }];
    let staged = cluster.handle(
        ServerId(0),
        WRITER,
        Request::Stage {
            txn,
            decider: None,
            file: FILE,
            object: 0,
            striping: atomio_proto::Striping {
                stripe_size: 1 << 16,
                objects: 4,
            },
            pieces: pieces.clone(),
            data: vec![1, 2, 3, 4].into(),
        },
    );
    assert_eq!(staged, Reply::Written { bytes: 4 });
    // The commit record reaches the log; the process dies before applying.
    let s = cluster.servers[0].as_mut().unwrap();
    s.store_mut()
        .log_decision(DecisionRecord::Committed(txn))
        .unwrap();
    cluster.crash_restart(0);
    let read = cluster.handle(
        ServerId(0),
        READER,
        Request::Read {
            file: FILE,
            object: 0,
            pieces,
        },
    );
    assert_eq!(read, Reply::Data(vec![1, 2, 3, 4].into()));
    let s = cluster.servers[0].as_ref().unwrap();
    assert_eq!(
        s.txns().staged_count(),
        0,
        "applied and unstaged at restart"
    );
}

/// An undecided write of a vanished writer at its decider is aborted there, and the
/// writer's late `Decide` is refused.
#[test]
fn a_late_decide_after_resolution_is_refused() {
    let mut cluster = Cluster::new(2, "late");
    let layout = Layout::round_robin(16, 2, 2, 0).unwrap();
    let txn = TxnId { origin: 6, seq: 1 };
    let ranges = [ByteRange::new(0, 32).unwrap()];
    let mut op = DataOp::write_atomic(FILE, &layout, ranges.iter().copied(), &[9; 32], txn, 1);
    let mut out = Vec::new();
    op.start(&mut out);
    // Both stages delivered; the writer's session at server 1 then breaks.
    for m in std::mem::take(&mut out) {
        let r = cluster.handle(m.server, WRITER, m.request);
        op.on_reply(m.sub, r, &mut out);
    }
    let decide = out.pop().expect("Decide");
    assert!(matches!(decide.request, Request::Decide { .. }));
    cluster.servers[1].as_mut().unwrap().forget(WRITER);
    // A reader at server 1 is told the bytes are in doubt and resolves them (aborted).
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    assert_eq!(read_all(&mut cluster, &layout, 32, &mut rng), vec![0; 32]);
    // The writer's Decide now fails: nothing of the write is anywhere.
    let r = cluster.handle(decide.server, WRITER, decide.request);
    assert!(
        matches!(&r, Reply::Error(e) if e.code == ErrorCode::Aborted),
        "{r:?}"
    );
    op.on_reply(decide.sub, r, &mut out);
    for m in std::mem::take(&mut out) {
        let r = cluster.handle(m.server, WRITER, m.request);
        op.on_reply(m.sub, r, &mut out);
    }
    assert!(matches!(op.progress(), Progress::Failed(e) if e.code == ErrorCode::Aborted));
    assert_eq!(read_all(&mut cluster, &layout, 32, &mut rng), vec![0; 32]);
}
