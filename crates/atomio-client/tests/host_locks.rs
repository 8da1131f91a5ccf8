//! The host lock table against a per-byte model (every grant and refusal), across real
//! processes (mutual exclusion proven by a shared file no two writers may interleave in,
//! with a negative control that runs the same writers unlocked and must be caught), and
//! against a holder killed with `kill -9` (its locks come back).
//!
//! Child processes are this test binary run again with `ATOMIO_HOST_LOCKS_CHILD` set: the
//! `child` test then plays one client and exits.

use atomio_client::host_locks::{HostHeld, HostLocks};
use atomio_layout::ByteRange;
use atomio_proto::LockMode;
use proptest::prelude::*;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "ATOMIO_HOST_LOCKS_CHILD";

fn r(start: u64, end: u64) -> ByteRange {
    ByteRange { start, end }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atomio-hostlocks-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

// ---- the model ----

/// Model of the table with no waiters: a call is granted iff no held call of another
/// mode pair conflicts on any byte.
#[derive(Default)]
struct Model {
    /// Per byte: writers and readers holding it.
    bytes: Vec<(u32, u32)>,
}

impl Model {
    fn grantable(&self, mode: LockMode, ranges: &[ByteRange]) -> bool {
        ranges.iter().flat_map(|r| r.start..r.end).all(|b| {
            let (w, rd) = self.bytes[b as usize];
            w == 0 && (mode == LockMode::Read || rd == 0)
        })
    }
    fn apply(&mut self, mode: LockMode, ranges: &[ByteRange], add: bool) {
        // Overlapping ranges of one call count once: lock the union.
        let list = atomio_layout::RangeList::from_ranges(ranges.to_vec());
        for b in list.as_slice().iter().flat_map(|r| r.start..r.end) {
            let e = &mut self.bytes[b as usize];
            let c = match mode {
                LockMode::Write => &mut e.0,
                LockMode::Read => &mut e.1,
            };
            *c = if add { *c + 1 } else { *c - 1 };
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Take {
        client: usize,
        write: bool,
        ranges: Vec<(u64, u64)>,
    },
    Release(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let take = (
        0..4usize,
        any::<bool>(),
        prop::collection::vec((0..200u64, 1..40u64), 1..5),
    )
        .prop_map(|(client, write, v)| Op::Take {
            client,
            write,
            ranges: v.into_iter().map(|(s, l)| (s, s + l)).collect(),
        });
    // Combs of 65-84 one- or two-byte ranges: calls the table compares outside its mutex.
    let comb = (
        0..4usize,
        any::<bool>(),
        0..20u64,
        2..3u64,
        65..85u64,
        1..3u64,
    )
        .prop_map(|(client, write, start, step, count, len)| Op::Take {
            client,
            write,
            ranges: (0..count)
                .map(|i| (start + i * step, start + i * step + len.min(step)))
                .collect(),
        });
    prop::collection::vec(
        prop_oneof![3 => take, 1 => comb, 2 => (0..64usize).prop_map(Op::Release)],
        1..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every grant and refusal of four handles on one table is the model's.
    #[test]
    fn grants_and_refusals_match_a_per_byte_model(ops in ops()) {
        let dir = scratch("model");
        let path = dir.join("table");
        let first = HostLocks::open_at(&path).unwrap();
        let clients: Vec<HostLocks> = std::iter::once(first)
            .chain((1..4).map(|_| HostLocks::open_at(&path).unwrap()))
            .collect();
        let mut model = Model { bytes: vec![(0, 0); 256] };
        let mut held: Vec<(usize, LockMode, Vec<ByteRange>, HostHeld)> = Vec::new();
        for op in ops {
            match op {
                Op::Take { client, write, ranges } => {
                    let mode = if write { LockMode::Write } else { LockMode::Read };
                    let ranges: Vec<ByteRange> = ranges.iter().map(|&(s, e)| r(s, e)).collect();
                    let want = model.grantable(mode, &ranges);
                    let got = clients[client].try_acquire(mode, &ranges).unwrap();
                    prop_assert_eq!(got.is_some(), want, "{:?} {:?}", mode, ranges);
                    if let Some(h) = got {
                        model.apply(mode, &ranges, true);
                        held.push((client, mode, ranges, h));
                    }
                }
                Op::Release(i) if !held.is_empty() => {
                    let (client, mode, ranges, h) = held.remove(i % held.len());
                    clients[client].release(h).unwrap();
                    model.apply(mode, &ranges, false);
                }
                Op::Release(_) => {}
            }
        }
        for (client, _, _, h) in held {
            clients[client].release(h).unwrap();
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A waiting call is not overtaken: a later call that conflicts with it waits behind it
/// even when what blocks the first does not block the second.
#[test]
fn a_later_call_does_not_overtake_an_earlier_waiting_one() {
    let dir = scratch("fifo");
    let path = dir.join("table");
    let a = HostLocks::open_at(&path).unwrap();
    let held = a.acquire(LockMode::Write, &[r(0, 10)]).unwrap();
    let waiter = {
        let path = path.clone();
        std::thread::spawn(move || {
            let b = HostLocks::open_at(&path).unwrap();
            let h = b.acquire(LockMode::Write, &[r(5, 20)]).unwrap();
            std::thread::sleep(Duration::from_millis(30));
            b.release(h).unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let c = HostLocks::open_at(&path).unwrap();
    // [15, 20) is free of holders, but the earlier waiter wants it.
    assert!(c
        .try_acquire(LockMode::Write, &[r(15, 20)])
        .unwrap()
        .is_none());
    let free = c.try_acquire(LockMode::Write, &[r(20, 30)]).unwrap();
    c.release(free.expect("bytes nobody holds or wants"))
        .unwrap();
    a.release(held).unwrap();
    waiter.join().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

// ---- processes ----

/// What one child does, from `ATOMIO_HOST_LOCKS_CHILD=<role>:<table>:<data file>:<seed>`.
#[test]
fn child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (role, table, data, seed) = (
        parts[0],
        Path::new(parts[1]),
        Path::new(parts[2]),
        parts[3].parse::<u64>().unwrap(),
    );
    let t = HostLocks::open_at(table).unwrap();
    match role {
        // Take a lock, say so, and wait to be killed.
        "hold" => {
            let _h = t.acquire(LockMode::Write, &[r(0, 1 << 20)]).unwrap();
            println!("held");
            std::thread::sleep(Duration::from_secs(120));
        }
        // Write stamps under locks (or without, "unlocked") and check them.
        "stamp" | "unlocked" => {
            let torn = stamp(&t, data, seed, role == "stamp");
            println!("torn {torn}");
        }
        other => panic!("unknown child role {other}"),
    }
    std::process::exit(0);
}

/// 300 calls: a few random ranges of a 64 KiB file each, filled with this call's stamp
/// under a write lock on them, then read back still under the lock. Returns how many
/// calls found a byte that was not theirs (another writer inside their locked bytes).
fn stamp(t: &HostLocks, data: &Path, seed: u64, locked: bool) -> u32 {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(data)
        .unwrap();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut torn = 0;
    for call in 0..300u64 {
        // Odd calls are combs of 100 ranges (compared outside the table's mutex).
        let ranges: Vec<ByteRange> = match call % 2 {
            0 => (0..1 + next() % 3)
                .map(|_| {
                    let s = next() % 60_000;
                    r(s, s + 256 + next() % 4096)
                })
                .collect(),
            _ => {
                let (start, step) = (next() % 1_000, 300 + next() % 300);
                (0..100)
                    .map(|i| r(start + i * step, start + i * step + 64))
                    .collect()
            }
        };
        let list = atomio_layout::RangeList::from_ranges(ranges);
        let stamp = (seed as u8).wrapping_mul(31).wrapping_add(call as u8) | 1;
        let held = locked.then(|| t.acquire(LockMode::Write, list.as_slice()).unwrap());
        for r in list.as_slice() {
            f.write_all_at(&vec![stamp; r.len() as usize], r.start)
                .unwrap();
        }
        std::thread::yield_now();
        let mut bad = false;
        for r in list.as_slice() {
            let mut buf = vec![0u8; r.len() as usize];
            f.read_exact_at(&mut buf, r.start).unwrap();
            bad |= buf.iter().any(|&b| b != stamp);
        }
        torn += u32::from(bad);
        if let Some(h) = held {
            t.release(h).unwrap();
        }
    }
    torn
}

fn spawn_child(role: &str, table: &Path, data: &Path, seed: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env(
            CHILD,
            format!("{role}:{}:{}:{seed}", table.display(), data.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// What the child said after `word` (libtest prints "test child ... " before it, on the
/// same line).
fn said_after(c: &mut std::process::Child, word: &str) -> String {
    let out = c.stdout.take().unwrap();
    let line = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.split_once(word).map(|(_, rest)| rest.trim().to_string()))
        .unwrap_or_else(|| panic!("child said no '{word}'"));
    line
}

fn torn_calls(role: &str, name: &str) -> u32 {
    let dir = scratch(name);
    let (table, data) = (dir.join("table"), dir.join("data"));
    std::fs::write(&data, vec![0u8; 65_536]).unwrap();
    let mut kids: Vec<_> = (1..=4)
        .map(|s| spawn_child(role, &table, &data, s))
        .collect();
    let torn = kids
        .iter_mut()
        .map(|k| {
            let torn = said_after(k, "torn ");
            assert!(k.wait().unwrap().success());
            torn.parse::<u32>().unwrap()
        })
        .sum();
    let _ = std::fs::remove_dir_all(dir);
    torn
}

/// Four processes write overlapping stamps under host locks: none ever finds another's
/// byte inside its locked ranges. The same writers unlocked are caught (the check can fail).
#[test]
fn processes_writing_under_host_locks_never_interleave_and_unlocked_ones_are_caught() {
    assert_eq!(
        torn_calls("stamp", "stamp"),
        0,
        "a writer met another inside its locks"
    );
    let caught = (1..=10)
        .map(|i| torn_calls("unlocked", &format!("unlocked{i}")))
        .find(|&t| t > 0);
    assert!(
        caught.is_some(),
        "unlocked writers were never caught interleaving"
    );
}

/// A holder killed with `kill -9` gives its locks back: the next conflicting call is
/// granted after the table notices the process is gone.
#[test]
fn a_killed_holder_s_locks_come_back() {
    let dir = scratch("killed");
    let table = dir.join("table");
    let mut holder = spawn_child("hold", &table, &dir.join("none"), 0);
    said_after(&mut holder, "held");
    let t = HostLocks::open_at(&table).unwrap();
    assert!(t
        .try_acquire(LockMode::Read, &[r(10, 20)])
        .unwrap()
        .is_none());
    holder.kill().unwrap();
    holder.wait().unwrap();
    let t0 = Instant::now();
    let h = t.acquire(LockMode::Write, &[r(10, 20)]).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(t.stats().reaped, 1);
    t.release(h).unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// The table's file lives while a handle does: the last one to close removes it, and a
/// handle opened after that starts a fresh (empty) table.
#[test]
fn the_last_handle_removes_the_table() {
    let dir = scratch("last");
    let path = dir.join("table");
    let a = HostLocks::open_at(&path).unwrap();
    let b = HostLocks::open_at(&path).unwrap();
    let held = b.acquire(LockMode::Write, &[r(0, 10)]).unwrap();
    drop(a);
    assert!(path.exists(), "removed while a handle was open");
    b.release(held).unwrap();
    drop(b);
    assert!(!path.exists(), "the last handle left its table");
    let c = HostLocks::open_at(&path).unwrap();
    let h = c.try_acquire(LockMode::Write, &[r(0, 10)]).unwrap();
    assert!(h.is_some(), "a fresh table is empty");
    let _ = std::fs::remove_dir_all(dir);
}
