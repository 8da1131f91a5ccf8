//! Bad input over a real TCP connection to a real `atomio server` process: every kind of
//! malformed or hostile message gets a clear error or a closed connection, the server keeps
//! serving other clients, and nothing panics.

mod common;

use atomio_layout::{ByteRange, Node, ServerId};
use atomio_proto::frame::{encode, frame_length, LENGTH_BYTES};
use atomio_proto::limits::MAX_RANGES_PER_REQUEST;
use atomio_proto::{
    decode, ClientFrame, ErrorCode, FileId, LockDesc, LockId, LockMode, Reply, Request,
    ServerFrame, Wait, WirePattern, PROTOCOL_VERSION,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::Duration;

struct Server {
    child: Child,
    addr: String,
    stderr: std::path::PathBuf,
}

impl Server {
    fn start() -> Self {
        Self::start_with(&[])
    }

    fn start_with(env: &[(&str, &str)]) -> Self {
        // A directory per server: one restarted on a directory another server left less
        // than a lease ago would wait out its grace period.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("atomio-badinput-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let stderr = dir.join("stderr.log");
        let (child, addr) = common::start_server(
            Command::new(env!("CARGO_BIN_EXE_atomio"))
                .envs(env.iter().copied())
                .args(["server", "--listen", "127.0.0.1:0", "--data"])
                .arg(dir.join("data"))
                .stderr(std::fs::File::create(&stderr).unwrap()),
        );
        Server {
            child,
            addr,
            stderr,
        }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    fn assert_alive_and_clean(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the server exited"
        );
        let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        assert!(!log.contains("panicked"), "the server panicked:\n{log}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = self.stderr.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn send(s: &mut TcpStream, tag: u64, request: Request) {
    let mut buf = Vec::new();
    encode(&ClientFrame { tag, request }, &mut buf).unwrap();
    s.write_all(&buf).unwrap();
}

fn send_raw(s: &mut TcpStream, body: &[u8]) {
    let mut buf = (body.len() as u32).to_be_bytes().to_vec();
    buf.extend_from_slice(body);
    s.write_all(&buf).unwrap();
}

/// The next frame, or `None` if the server closed the connection.
fn recv(s: &mut TcpStream) -> Option<ServerFrame> {
    let mut len = [0u8; LENGTH_BYTES];
    if s.read_exact(&mut len).is_err() {
        return None;
    }
    let n = frame_length(&len).unwrap();
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).ok()?;
    Some(decode(&body).expect("the server sends valid frames"))
}

fn expect_error(s: &mut TcpStream, tag: u64, code: ErrorCode, text: &str) {
    let f = recv(s).expect("an error reply, not a closed connection");
    assert_eq!(f.tag, tag, "reply {f:?}");
    match f.reply {
        Reply::Error(e) => {
            assert_eq!(e.code, code, "{e}");
            assert!(
                e.message.contains(text),
                "message '{}' should mention '{text}'",
                e.message
            );
        }
        other => panic!("expected {code:?}, got {other:?}"),
    }
}

fn ping_ok(s: &mut TcpStream, nonce: u64) {
    send(s, 9000 + nonce, Request::Ping { nonce });
    let f = recv(s).expect("pong");
    assert_eq!(f.reply, Reply::Pong { nonce });
}

fn lock(s: &mut TcpStream, tag: u64, ranges: Vec<ByteRange>, wait: Wait) -> Reply {
    send(
        s,
        tag,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(ranges),
            wait,
        },
    );
    recv(s).expect("lock reply").reply
}

fn r(start: u64, end: u64) -> ByteRange {
    ByteRange { start, end }
}

#[test]
fn bad_input_gets_clear_errors_and_the_server_keeps_serving() {
    let mut server = Server::start();
    let mut good = server.connect();
    ping_ok(&mut good, 1);

    // Garbage body after a valid length: error on tag 0 (unreadable tag), connection usable.
    let mut c = server.connect();
    send_raw(
        &mut c,
        &[
            PROTOCOL_VERSION,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
        ],
    );
    expect_error(&mut c, 0, ErrorCode::Malformed, "undecodable");
    ping_ok(&mut c, 2);

    // Unknown message kind: valid tag, variant index 200. Answered on the tag.
    send_raw(&mut c, &[PROTOCOL_VERSION, 7, 200, 1]);
    expect_error(&mut c, 7, ErrorCode::Malformed, "undecodable");
    ping_ok(&mut c, 3);

    // Trailing bytes after a valid message.
    let mut frame = Vec::new();
    encode(
        &ClientFrame {
            tag: 8,
            request: Request::Ping { nonce: 1 },
        },
        &mut frame,
    )
    .unwrap();
    let mut body = frame[LENGTH_BYTES..].to_vec();
    body.extend_from_slice(&[1, 2, 3]);
    send_raw(&mut c, &body);
    expect_error(&mut c, 8, ErrorCode::Malformed, "trailing");

    // An empty frame.
    send_raw(&mut c, &[]);
    expect_error(&mut c, 0, ErrorCode::Malformed, "empty frame");
    ping_ok(&mut c, 4);

    // end < start.
    let e = lock(&mut c, 10, vec![r(10, 5)], Wait::NonBlocking);
    assert!(
        matches!(&e, Reply::Error(w) if w.code == ErrorCode::InvalidArgument && w.message.contains("before its start")),
        "{e:?}"
    );

    // Ranges past the largest file offset.
    let e = lock(
        &mut c,
        11,
        vec![r(u64::MAX - 5, u64::MAX)],
        Wait::NonBlocking,
    );
    assert!(
        matches!(&e, Reply::Error(w) if w.code == ErrorCode::InvalidArgument && w.message.contains("overflows")),
        "{e:?}"
    );

    // offset + length overflow inside a structured description.
    send(
        &mut c,
        12,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Pattern(WirePattern {
                base: u64::MAX - 10,
                nodes: vec![Node::Bytes { len: 100 }],
                stripe_size: 65536,
                object_servers: vec![ServerId(0)],
                server: ServerId(0),
            }),
            wait: Wait::NonBlocking,
        },
    );
    expect_error(&mut c, 12, ErrorCode::InvalidArgument, "overflows");

    // count × stride overflow in a vector.
    send(
        &mut c,
        13,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Pattern(WirePattern {
                base: 0,
                nodes: vec![
                    Node::Bytes { len: 1 },
                    Node::Vector {
                        count: u64::MAX,
                        blocklen: 1,
                        stride: u64::MAX,
                        elem: 0,
                    },
                ],
                stripe_size: 65536,
                object_servers: vec![ServerId(0)],
                server: ServerId(0),
            }),
            wait: Wait::NonBlocking,
        },
    );
    expect_error(&mut c, 13, ErrorCode::InvalidArgument, "overflow");

    // A node that refers forward (would be a cycle or a dangling reference).
    send(
        &mut c,
        14,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Pattern(WirePattern {
                base: 0,
                nodes: vec![Node::Vector {
                    count: 2,
                    blocklen: 1,
                    stride: 4,
                    elem: 0,
                }],
                stripe_size: 65536,
                object_servers: vec![ServerId(0)],
                server: ServerId(0),
            }),
            wait: Wait::NonBlocking,
        },
    );
    expect_error(
        &mut c,
        14,
        ErrorCode::InvalidArgument,
        "does not come before",
    );

    // More ranges than the limit.
    let many: Vec<ByteRange> = (0..=MAX_RANGES_PER_REQUEST as u64)
        .map(|i| r(2 * i, 2 * i + 1))
        .collect();
    let e = lock(&mut c, 15, many, Wait::NonBlocking);
    assert!(
        matches!(&e, Reply::Error(w) if w.code == ErrorCode::LimitExceeded),
        "{e:?}"
    );

    // Overlapping ranges within one request; an empty request.
    let e = lock(&mut c, 16, vec![r(0, 10), r(5, 20)], Wait::NonBlocking);
    assert!(
        matches!(&e, Reply::Error(w) if w.code == ErrorCode::InvalidArgument),
        "{e:?}"
    );
    let e = lock(&mut c, 17, vec![], Wait::NonBlocking);
    assert!(
        matches!(&e, Reply::Error(w) if w.code == ErrorCode::InvalidArgument),
        "{e:?}"
    );

    // Releasing an unknown request.
    send(
        &mut c,
        18,
        Request::LockRelease {
            lock: LockId(987_654),
            from: None,
        },
    );
    expect_error(&mut c, 18, ErrorCode::NotFound, "no open lock request");

    // Releasing (or extending) another client's request.
    let held = match lock(&mut good, 19, vec![r(100, 200)], Wait::NonBlocking) {
        Reply::Lock(p) => {
            assert_eq!(
                p.next_abs_offset, None,
                "uncontended lock should be fully granted"
            );
            p.lock
        }
        other => panic!("{other:?}"),
    };
    send(
        &mut c,
        20,
        Request::LockRelease {
            lock: held,
            from: None,
        },
    );
    expect_error(&mut c, 20, ErrorCode::NotOwner, "another client");
    send(
        &mut c,
        21,
        Request::LockMore {
            lock: held,
            wait: Wait::All,
        },
    );
    expect_error(&mut c, 21, ErrorCode::NotOwner, "another client");
    // …and the lock is still held: a conflicting non-blocking acquire gets nothing.
    match lock(&mut c, 22, vec![r(150, 160)], Wait::NonBlocking) {
        Reply::Lock(p) => assert_eq!((p.last_abs_offset, p.next_abs_offset), (0, Some(150))),
        other => panic!("{other:?}"),
    }
    ping_ok(&mut c, 5);

    // A wrong protocol version: error, then the connection is closed.
    let mut v = server.connect();
    send_raw(&mut v, &[PROTOCOL_VERSION + 1, 1, 3, 0]);
    expect_error(&mut v, 0, ErrorCode::Version, "not supported");
    assert!(
        recv(&mut v).is_none(),
        "connection should be closed after a version mismatch"
    );

    // An absurd length prefix: error, closed.
    let mut big = server.connect();
    big.write_all(&u32::MAX.to_be_bytes()).unwrap();
    expect_error(&mut big, 0, ErrorCode::LimitExceeded, "frame");
    assert!(recv(&mut big).is_none());

    // A truncated frame, then the client vanishes.
    let mut t = server.connect();
    t.write_all(&100u32.to_be_bytes()).unwrap();
    t.write_all(&[PROTOCOL_VERSION, 1, 2, 3]).unwrap();
    drop(t);

    // A client that vanishes while holding a lock and while another waits on it: the waiter
    // is granted once the server notices.
    let mut holder = server.connect();
    assert!(matches!(
        lock(&mut holder, 30, vec![r(1000, 1010)], Wait::NonBlocking),
        Reply::Lock(_)
    ));
    send(
        &mut good,
        31,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(vec![r(1005, 1020)]),
            wait: Wait::All,
        },
    );
    drop(holder);
    let f = recv(&mut good).expect("the waiter is granted after the holder vanishes");
    assert_eq!(f.tag, 31);
    assert!(
        matches!(f.reply, Reply::Lock(p) if p.next_abs_offset.is_none()),
        "{f:?}"
    );

    // Through all of that, other clients were served.
    ping_ok(&mut good, 6);
    ping_ok(&mut c, 7);
    server.assert_alive_and_clean();

    // And the server said what happened to its clients, at its default log level.
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read_to_string(&server.stderr).unwrap_or_default();
    for expected in [
        "client connected",
        "client disconnected: closed by the client",
        "client disconnected: LimitExceeded: closing the connection: a frame of 4294967295 bytes",
        "client disconnected: Malformed: closing the connection: the stream ended inside a frame",
    ] {
        assert!(
            log.contains(expected),
            "no '{expected}' in the server's log:\n{log}"
        );
    }
}

/// Peak resident memory of a process (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    rss(pid, "VmHWM:")
}

/// A memory figure of `/proc/PID/status` (`VmHWM:` peak, `VmRSS:` now), in bytes.
fn rss(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/PID/status"));
    kb << 10
}

/// A client that sends 100 reads of 32 MiB (3.2 GB of replies for ~4 KB of requests) and
/// reads nothing costs the server at most its reply budget (`MAX_QUEUED_REPLY_BYTES`), not
/// the replies: the server stops reading that client. Meanwhile another client is served
/// promptly, and when the first one finally reads, every reply arrives, whole and correct.
#[test]
fn a_client_that_does_not_read_its_replies_costs_only_its_budget() {
    use atomio_proto::data::ObjPiece;
    use atomio_proto::limits::MAX_QUEUED_REPLY_BYTES;
    const MIB: u64 = 1 << 20;
    const READS: u64 = 100;
    let mut server = Server::start();
    let pid = server.child.id();
    let mut a = server.connect();
    send(
        &mut a,
        1,
        Request::Create {
            path: "/budget".into(),
            stripe_size: 64 * MIB,
            object_servers: vec![ServerId(0)],
            exclusive: false,
        },
    );
    let Reply::File(meta) = recv(&mut a).expect("created").reply else {
        panic!("create failed");
    };
    let data: Vec<u8> = (0..32 * MIB).map(|i| (i % 251) as u8).collect();
    send(
        &mut a,
        2,
        Request::Write {
            file: meta.file,
            object: 0,
            striping: atomio_proto::Striping {
                stripe_size: 64 * MIB,
                objects: 1,
            },
            pieces: vec![ObjPiece {
                offset: 0,
                len: 32 * MIB,
            }],
            data: atomio_proto::data::Bytes::from(data.clone()),
        },
    );
    assert_eq!(
        recv(&mut a).unwrap().reply,
        Reply::Written { bytes: 32 * MIB }
    );
    let before = peak_rss(pid);
    // The requests must all be sent even though the server stops reading them: a thread.
    let mut writer = a.try_clone().unwrap();
    let file = meta.file;
    let sender = std::thread::spawn(move || {
        for t in 0..READS {
            send(
                &mut writer,
                100 + t,
                Request::Read {
                    file,
                    object: 0,
                    pieces: vec![ObjPiece {
                        offset: 0,
                        len: 32 * MIB,
                    }],
                },
            );
        }
    });
    std::thread::sleep(Duration::from_millis(1500));
    let mut b = server.connect();
    let t0 = std::time::Instant::now();
    ping_ok(&mut b, 7);
    let ping = t0.elapsed();
    let peak = peak_rss(pid);
    let grown = peak.saturating_sub(before);
    eprintln!(
        "server peak RSS {} MiB (before the reads {} MiB, grown {} MiB); another client's ping {:?}",
        peak >> 20,
        before >> 20,
        grown >> 20,
        ping
    );
    assert!(
        grown <= (MAX_QUEUED_REPLY_BYTES as u64) + 64 * MIB,
        "the server grew by {} MiB for one client's unread replies",
        grown >> 20
    );
    assert!(
        ping < Duration::from_millis(100),
        "another client waited {ping:?}"
    );
    // Now read everything: all replies arrive, in order, with the right bytes.
    a.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    for t in 0..READS {
        let f = recv(&mut a).expect("a read reply");
        assert_eq!(f.tag, 100 + t);
        match f.reply {
            Reply::Data(d) => assert!(d[..] == data[..], "read {t} returned other bytes"),
            other => panic!("read {t}: {other:?}"),
        }
    }
    sender.join().unwrap();
    ping_ok(&mut a, 8);
    server.assert_alive_and_clean();
}

/// Twenty clients of one host each announce a 60 MiB frame, send 59 MiB of it and stall
/// (1.2 GB of partial frames): the server buffers at most that host's share of the
/// partial-frame budget (128 MiB of 256), keeps answering other clients promptly, and
/// another host's large write goes through at once.
#[test]
fn stalled_partial_frames_cost_at_most_the_partial_frame_budget() {
    const MIB: usize = 1 << 20;
    let mut server = Server::start();
    let pid = server.child.id();
    let before = peak_rss(pid);
    let mut closers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..20 {
        let mut s = server.connect();
        closers.push(s.try_clone().unwrap());
        senders.push(std::thread::spawn(move || {
            let _ = s.write_all(&((60 * MIB) as u32).to_be_bytes());
            let _ = s.write_all(&vec![0u8; 59 * MIB]); // blocks once the server stops reading
        }));
    }
    std::thread::sleep(Duration::from_millis(2500));
    let mut other = server.connect();
    let t0 = std::time::Instant::now();
    ping_ok(&mut other, 11);
    let ping = t0.elapsed();
    // Another host's large write is not stuck behind the stalled host's frames.
    let mut elsewhere = connect_from("127.0.0.2", &server.addr);
    let t0 = std::time::Instant::now();
    send(
        &mut elsewhere,
        1,
        Request::Write {
            file: FileId(1),
            object: 0,
            striping: atomio_proto::Striping {
                stripe_size: 1 << 16,
                objects: 1,
            },
            pieces: vec![atomio_proto::data::ObjPiece {
                offset: 0,
                len: 8 * MIB as u64,
            }],
            data: atomio_proto::data::Bytes::from(vec![5u8; 8 * MIB]),
        },
    );
    let written = recv(&mut elsewhere).expect("a reply to the write");
    let write = t0.elapsed();
    let grown = peak_rss(pid).saturating_sub(before);
    eprintln!(
        "20 stalled 60 MiB frames from one host: server grew {} MiB; another client's ping \
         {ping:?}; another host's 8 MiB write {write:?}",
        grown >> 20
    );
    assert!(
        matches!(written.reply, Reply::Written { bytes } if bytes == 8 * MIB as u64),
        "{written:?}"
    );
    assert!(
        grown <= (128 + 64) as u64 * MIB as u64,
        "the server grew by {} MiB holding partial frames",
        grown >> 20
    );
    assert!(ping < Duration::from_millis(100), "ping took {ping:?}");
    assert!(write < Duration::from_secs(2), "the write took {write:?}");
    for c in &closers {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    for t in senders {
        t.join().unwrap();
    }
    ping_ok(&mut other, 12);
    server.assert_alive_and_clean();
}

/// `runs` runs of 8 bytes every 16 from byte 8 (between those of the 8-byte vector at 0),
/// as a struct of two halves: not a single grid box, so a lock server walks it range by
/// range against the vector's owner.
fn between_pattern(runs: u64) -> LockDesc {
    let half = runs / 2;
    LockDesc::Pattern(WirePattern {
        base: 0,
        nodes: vec![
            Node::Bytes { len: 8 },
            Node::Vector {
                count: half,
                blocklen: 1,
                stride: 16,
                elem: 0,
            },
            Node::Struct {
                fields: vec![
                    atomio_layout::Field {
                        disp: 8,
                        blocklen: 1,
                        elem: 1,
                    },
                    atomio_layout::Field {
                        disp: 8 + half * 16,
                        blocklen: 1,
                        elem: 1,
                    },
                ],
            },
        ],
        stripe_size: 65536,
        object_servers: vec![ServerId(0)],
        server: ServerId(0),
    })
}

/// Sends `locks` structured lock requests of 2²³ runs each (the issue's "two datatype
/// requests of 2²⁴ runs froze the server 19 s" class) from one client while another pings;
/// `answered` checks each reply. Returns (how long until all were answered, the worst ping,
/// how much the server grew); checks the memory is returned once the client left.
fn huge_pattern_locks(
    mode: LockMode,
    locks: u64,
    answered: fn(&Reply) -> bool,
) -> (Duration, Duration, u64) {
    const RUNS: u64 = 1 << 23;
    // This raw client sends no renewals: a lease longer than the probe (on a loaded machine
    // the grants can take longer than the default 5 s lease).
    // MIMALLOC_PURGE_DELAY=0: freed memory goes back to the system at once (by default
    // mimalloc keeps it for reuse: 122 MiB stayed resident after these read locks).
    let mut server =
        Server::start_with(&[("ATOMIO_LEASE_MS", "120000"), ("MIMALLOC_PURGE_DELAY", "0")]);
    let pid = server.child.id();
    let before = peak_rss(pid);
    let mut a = server.connect();
    a.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    for file in 1..=locks {
        send(
            &mut a,
            file,
            Request::LockNew {
                file: FileId(file),
                mode,
                desc: LockDesc::Pattern(WirePattern {
                    base: 0,
                    nodes: vec![
                        Node::Bytes { len: 8 },
                        Node::Vector {
                            count: RUNS,
                            blocklen: 1,
                            stride: 16,
                            elem: 0,
                        },
                    ],
                    stripe_size: 65536,
                    object_servers: vec![ServerId(0)],
                    server: ServerId(0),
                }),
                wait: Wait::All,
            },
        );
    }
    // A writer nobody is near is granted at once (the server leaps to the next other
    // lock), so write requests come in pairs: a second writer's runs fall between the
    // first's, described so that the server cannot prove them apart (two fields, not one
    // box), and are checked one by one against the first's — the long work to slice.
    let replies = match mode {
        LockMode::Write => {
            for file in 1..=locks {
                send(
                    &mut a,
                    100 + file,
                    Request::LockNew {
                        file: FileId(file),
                        mode,
                        desc: between_pattern(RUNS),
                        wait: Wait::All,
                    },
                );
            }
            2 * locks
        }
        LockMode::Read => locks,
    };
    let t0 = std::time::Instant::now();
    let all_answered = std::thread::spawn(move || {
        for _ in 0..replies {
            let f = recv(&mut a).expect("a lock reply");
            assert!(answered(&f.reply), "{f:?}");
        }
        t0.elapsed()
    });
    let mut b = server.connect();
    let mut pings = Vec::new();
    while !all_answered.is_finished() {
        let t = std::time::Instant::now();
        ping_ok(&mut b, 20);
        pings.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = all_answered.join().unwrap();
    pings.sort();
    let worst = *pings.last().expect("at least one ping");
    let grown = peak_rss(pid).saturating_sub(before);
    // The client is gone: its locks are released (in slices); is the memory returned?
    // (Released in slices, so on a loaded machine it takes a while: wait up to 30 s.)
    let released = std::time::Instant::now();
    let mut after = rss(pid, "VmRSS:");
    while after > before + (32 << 20) && released.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(250));
        ping_ok(&mut b, 21);
        after = rss(pid, "VmRSS:");
    }
    eprintln!(
        "{locks} {mode:?} locks of {RUNS} runs answered in {took:?}; {} pings meanwhile, \
         median {:?}, worst {worst:?}; server grew {} MiB; resident {} MiB after they were \
         released (peak {} MiB)",
        pings.len(),
        pings[pings.len() / 2],
        grown >> 20,
        after >> 20,
        peak_rss(pid) >> 20
    );
    assert!(
        after <= before + (32 << 20),
        "{} MiB still resident after the locks were released",
        after >> 20
    );
    assert!(
        pings.len() >= 2,
        "the locks took {took:?}: too fast to probe"
    );
    server.assert_alive_and_clean();
    (took, worst, grown)
}

/// Huge write locks (one index entry each: a request's touching grants share a hull) are
/// granted in slices while another client is served.
#[test]
fn huge_lock_requests_run_in_slices_while_others_are_served() {
    let (_, worst, grown) = huge_pattern_locks(
        LockMode::Write,
        6,
        |r| matches!(r, Reply::Lock(p) if p.next_abs_offset.is_none()),
    );
    // The target is 100 ms; the bound leaves room for a loaded 2-core machine (before
    // slicing, a ping waited for the whole grant: 900 ms for these six).
    assert!(
        worst < Duration::from_millis(250),
        "a ping waited {worst:?}"
    );
    assert!(grown < 256 << 20, "the server grew {} MiB", grown >> 20);
}

/// Huge read locks hold one entry per separate range (~60 B each): one client asking for
/// 2 × 2²³ of them is refused at its share of the table (`MAX_LOCKS_PER_CLIENT`) with a
/// clear error, and the server's memory stays bounded.
#[test]
fn huge_read_locks_stop_at_the_clients_share() {
    let (_, worst, grown) = huge_pattern_locks(LockMode::Read, 2, |r| {
        matches!(r, Reply::Error(e) if e.code == ErrorCode::LimitExceeded
            && e.message.contains("this client holds"))
    });
    assert!(
        worst < Duration::from_millis(250),
        "a ping waited {worst:?}"
    );
    assert!(grown < 256 << 20, "the server grew {} MiB", grown >> 20);
}

/// Connects to `addr` from the loopback address `from` (another "host" on one machine).
fn connect_from(from: &str, addr: &str) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        socket.connect(addr.parse().unwrap()).await.unwrap()
    });
    let s = s.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// One host opening connections until refused takes only its own share of the server:
/// the connection over the per-host limit gets `LimitExceeded` and is closed, another host
/// still connects and is served, and a slot freed is a slot reusable.
#[test]
fn one_host_cannot_take_every_connection() {
    const CAP: usize = 64;
    let cap = CAP.to_string();
    let mut server = Server::start_with(&[("ATOMIO_MAX_CONNECTIONS_PER_HOST", &cap)]);
    let pid = server.child.id();
    let before = peak_rss(pid);
    let mut mine: Vec<TcpStream> = (0..CAP).map(|_| server.connect()).collect();
    for (i, c) in mine.iter_mut().enumerate() {
        ping_ok(c, i as u64);
    }
    let mut over = server.connect();
    expect_error(&mut over, 0, ErrorCode::LimitExceeded, "connections");
    assert!(
        recv(&mut over).is_none(),
        "the refused connection is closed"
    );
    let mut other = connect_from("127.0.0.2", &server.addr);
    let t0 = std::time::Instant::now();
    ping_ok(&mut other, 1);
    let ping = t0.elapsed();
    let grown = peak_rss(pid).saturating_sub(before);
    eprintln!(
        "{CAP} connections from one host, the next refused; another host's ping {ping:?}; \
         server grew {} MiB",
        grown >> 20
    );
    assert!(ping < Duration::from_millis(100), "ping took {ping:?}");
    drop(mine.pop());
    // The slot comes back once the server has seen the close.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = server.connect();
        send(&mut again, 1, Request::Ping { nonce: 2 });
        match recv(&mut again).map(|f| f.reply) {
            Some(Reply::Pong { nonce: 2 }) => break,
            r if std::time::Instant::now() < deadline => {
                assert!(matches!(r, Some(Reply::Error(_)) | None), "{r:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
            r => panic!("the freed slot was not given back: {r:?}"),
        }
    }
    server.assert_alive_and_clean();
}

/// One client asking for 10,000 locks that must wait (behind a holder) takes only its own
/// 1,024 wait slots: every request past them is refused at once with a clear error; another
/// client still waits, is served when the holder leaves, and pings promptly throughout; the
/// server stays small.
#[test]
fn one_client_filling_its_wait_slots_is_refused_and_costs_only_its_share() {
    use atomio_proto::limits::MAX_WAITING_PER_CLIENT;
    const ASKS: u64 = 10_000;
    const HELD: u64 = 1 << 20;
    let mut server = Server::start_with(&[("ATOMIO_LEASE_MS", "120000")]);
    let pid = server.child.id();
    let before = peak_rss(pid);
    let mut holder = server.connect();
    let got = lock(&mut holder, 1, vec![r(0, HELD)], Wait::NonBlocking);
    assert!(
        matches!(got, Reply::Lock(p) if p.next_abs_offset.is_none()),
        "{got:?}"
    );
    let mut greedy = server.connect();
    let mut pinger = server.connect();
    let mut pings = Vec::new();
    for i in 0..ASKS {
        send(
            &mut greedy,
            100 + i,
            Request::LockNew {
                file: FileId(1),
                mode: LockMode::Write,
                desc: LockDesc::Ranges(vec![r(i, i + 1)]),
                wait: Wait::All,
            },
        );
        if i % 1000 == 0 {
            let t = std::time::Instant::now();
            ping_ok(&mut pinger, i);
            pings.push(t.elapsed());
        }
    }
    let refused = ASKS - MAX_WAITING_PER_CLIENT as u64;
    for _ in 0..refused {
        let f = recv(&mut greedy).expect("a refusal");
        match f.reply {
            Reply::Error(e) if e.code == ErrorCode::LimitExceeded => {
                assert!(e.message.contains("waiting"), "{e}")
            }
            other => panic!("request {} was not refused: {other:?}", f.tag),
        }
    }
    // Another client still gets a wait slot (its byte is the holder's, no one else's).
    let mut other = server.connect();
    send(
        &mut other,
        1,
        Request::LockNew {
            file: FileId(1),
            mode: LockMode::Write,
            desc: LockDesc::Ranges(vec![r(HELD - 1, HELD)]),
            wait: Wait::All,
        },
    );
    let t = std::time::Instant::now();
    ping_ok(&mut pinger, 99);
    pings.push(t.elapsed());
    send(
        &mut holder,
        2,
        Request::LockRelease {
            lock: match got {
                Reply::Lock(p) => p.lock,
                _ => unreachable!(),
            },
            from: None,
        },
    );
    let granted = recv(&mut other).expect("the other client's lock");
    assert!(
        matches!(granted.reply, Reply::Lock(p) if p.next_abs_offset.is_none()),
        "{granted:?}"
    );
    let grown = peak_rss(pid).saturating_sub(before);
    let worst = pings.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{ASKS} waiting requests from one client: {refused} refused; another client waited \
         and was granted; worst ping {worst:?}; server grew {} MiB",
        grown >> 20
    );
    assert!(
        worst < Duration::from_millis(100),
        "a ping waited {worst:?}"
    );
    assert!(grown < 256 << 20, "the server grew {} MiB", grown >> 20);
    drop(greedy);
    drop(holder);
    drop(other);
    server.assert_alive_and_clean();
}

/// Mandatory locks at a real server: a peer cannot write into, truncate or drop bytes
/// another client holds a write lock on (clear `Locked` errors, nothing changed), nor dodge
/// the check by naming another striping; writes elsewhere go on, and once the holder
/// releases, the same write is admitted.
#[test]
fn a_peer_cannot_change_bytes_another_client_holds_locked() {
    use atomio_proto::data::{Bytes, ObjPiece};
    use atomio_proto::Striping;
    let mut server = Server::start();
    let striping = Striping {
        stripe_size: 1 << 16,
        objects: 1,
    };
    let write = |offset: u64, len: u64, byte: u8, striping: Striping| Request::Write {
        file: FileId(1),
        object: 0,
        striping,
        pieces: vec![ObjPiece { offset, len }],
        data: Bytes::from(vec![byte; len as usize]),
    };
    let mut holder = server.connect();
    let Reply::Lock(held) = lock(&mut holder, 1, vec![r(0, 4096)], Wait::All) else {
        panic!("the holder's lock");
    };
    assert_eq!(held.next_abs_offset, None, "granted whole");
    send(&mut holder, 2, write(0, 4096, 0xAA, striping));
    assert_eq!(
        recv(&mut holder).unwrap().reply,
        Reply::Written { bytes: 4096 }
    );

    let mut peer = server.connect();
    send(&mut peer, 1, write(1000, 100, 0xEE, striping));
    expect_error(
        &mut peer,
        1,
        ErrorCode::Locked,
        "another client holds a lock",
    );
    let two = Striping {
        stripe_size: 1 << 16,
        objects: 2,
    };
    send(&mut peer, 2, write(1000, 100, 0xEE, two));
    expect_error(&mut peer, 2, ErrorCode::InvalidArgument, "striped");
    send(
        &mut peer,
        3,
        Request::SetObjectSize {
            file: FileId(1),
            object: 0,
            size: 10,
        },
    );
    expect_error(&mut peer, 3, ErrorCode::Locked, "resizing");
    send(&mut peer, 4, Request::DropObjects { file: FileId(1) });
    expect_error(&mut peer, 4, ErrorCode::Locked, "dropping");
    // A well-behaved client meanwhile: served promptly.
    let mut other = server.connect();
    let t0 = std::time::Instant::now();
    ping_ok(&mut other, 1);
    let ping = t0.elapsed();
    let peak = peak_rss(server.child.id());
    eprintln!(
        "mandatory locks: 4 refused changes; another client's ping {:.1} ms; server peak RSS \
         {} MiB",
        ping.as_secs_f64() * 1e3,
        peak >> 20
    );
    assert!(ping < Duration::from_millis(100), "ping {ping:?}");
    assert!(peak < 256 << 20, "peak RSS {} MiB", peak >> 20);
    // Operators see them (`atomio stats`).
    send(&mut other, 2, Request::Stats);
    let Reply::Stats(report) = recv(&mut other).unwrap().reply else {
        panic!("stats");
    };
    assert_eq!(
        (report.changes_admitted, report.changes_refused),
        (1, 3),
        "{report:?}"
    );
    // Bytes nobody holds: admitted (a lock-free writer needs no lock of its own).
    send(&mut peer, 5, write(4096, 100, 0xEE, striping));
    assert_eq!(
        recv(&mut peer).unwrap().reply,
        Reply::Written { bytes: 100 }
    );

    // Nothing the peer sent reached the held bytes.
    send(
        &mut holder,
        3,
        Request::Read {
            file: FileId(1),
            object: 0,
            pieces: vec![ObjPiece {
                offset: 0,
                len: 4196,
            }],
        },
    );
    let Reply::Data(bytes) = recv(&mut holder).unwrap().reply else {
        panic!("the holder's read");
    };
    assert!(
        bytes[..4096].iter().all(|&b| b == 0xAA),
        "held bytes changed"
    );
    assert!(bytes[4096..].iter().all(|&b| b == 0xEE));

    send(
        &mut holder,
        4,
        Request::LockRelease {
            lock: held.lock,
            from: None,
        },
    );
    assert!(matches!(
        recv(&mut holder).unwrap().reply,
        Reply::Released(_)
    ));
    send(&mut peer, 6, write(1000, 100, 0xEE, striping));
    assert_eq!(
        recv(&mut peer).unwrap().reply,
        Reply::Written { bytes: 100 }
    );
    server.assert_alive_and_clean();
}

/// Over the server's client limit a connection gets one `LimitExceeded` and is closed (it
/// was left open before, with its requests never answered, holding a descriptor and its
/// host's slot); clients already connected are served, and a freed place is reusable.
#[test]
fn connections_over_the_client_limit_are_refused_and_closed() {
    const CAP: usize = 8;
    let cap = CAP.to_string();
    let mut server = Server::start_with(&[("ATOMIO_MAX_CLIENTS", &cap)]);
    let mut mine: Vec<TcpStream> = (0..CAP)
        .map(|i| connect_from(&format!("127.0.0.{}", 2 + i % 3), &server.addr))
        .collect();
    for (i, c) in mine.iter_mut().enumerate() {
        ping_ok(c, i as u64);
    }
    for _ in 0..3 {
        let mut over = server.connect();
        expect_error(&mut over, 0, ErrorCode::LimitExceeded, "clients");
        // Closed by the server (end of stream), not merely silent (a read timeout).
        over.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut byte = [0u8; 1];
        match over.read(&mut byte) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("the refused connection was left open: {other:?}"),
        }
    }
    ping_ok(&mut mine[0], 100);
    drop(mine.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = server.connect();
        send(&mut again, 1, Request::Ping { nonce: 2 });
        match recv(&mut again).map(|f| f.reply) {
            Some(Reply::Pong { nonce: 2 }) => break,
            r if std::time::Instant::now() < deadline => {
                assert!(matches!(r, Some(Reply::Error(_)) | None), "{r:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
            r => panic!("the freed place was not given back: {r:?}"),
        }
    }
    server.assert_alive_and_clean();
}

/// The contents of a frame (no length prefix) for `request`.
fn body_of(tag: u64, request: Request) -> Vec<u8> {
    let mut buf = Vec::new();
    encode(&ClientFrame { tag, request }, &mut buf).unwrap();
    buf.split_off(LENGTH_BYTES)
}

/// A whole frame like `one` (a request whose one list holds one item) but with that list
/// holding `n` copies of the item: `empty` is the same request with the list empty.
fn with_copies(tag: u64, empty: Request, one: Request, n: u64) -> Vec<u8> {
    let (e, o) = (body_of(tag, empty), body_of(tag, one));
    let at = e.iter().zip(&o).position(|(a, b)| a != b).unwrap();
    let item = &o[at + 1..at + 1 + (o.len() - e.len())];
    let mut body = e[..at].to_vec();
    let mut count = n;
    loop {
        let b = (count & 0x7f) as u8;
        count >>= 7;
        if count == 0 {
            body.push(b);
            break;
        }
        body.push(b | 0x80);
    }
    for _ in 0..n {
        body.extend_from_slice(item);
    }
    body.extend_from_slice(&e[at + 1..]);
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend(body);
    frame
}

/// Another host's well-behaved client: pings and takes and releases a lock every 5 ms
/// until stopped; returns its slowest round trip.
struct Pinger {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Duration>,
}

impl Pinger {
    fn start(addr: &str) -> Self {
        let mut s = connect_from("127.0.0.9", addr);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut worst = Duration::ZERO;
            let mut i = 0u64;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let t0 = std::time::Instant::now();
                ping_ok(&mut s, i);
                let got = lock(
                    &mut s,
                    1,
                    vec![r(1 << 40, (1 << 40) + 1)],
                    Wait::NonBlocking,
                );
                let Reply::Lock(p) = got else {
                    panic!("the well-behaved client's lock was refused: {got:?}");
                };
                assert_eq!(p.next_abs_offset, None, "granted whole");
                let release = Request::LockRelease {
                    lock: p.lock,
                    from: None,
                };
                send(&mut s, 2, release);
                let f = recv(&mut s).expect("release reply");
                assert_eq!(f.tag, 2, "{f:?}");
                worst = worst.max(t0.elapsed());
                std::thread::sleep(Duration::from_millis(5));
            }
            worst
        });
        Self { stop, thread }
    }

    fn stop(self) -> Duration {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// Sends `frame` from `host` and returns the error it got (its tag and code).
fn abuse(addr: &str, host: &str, frame: Vec<u8>) -> (u64, ErrorCode, String) {
    let s = connect_from(host, addr);
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&frame); // the server may close before the end
    });
    let mut s = s;
    let f = recv(&mut s).expect("an error reply");
    let _ = s.shutdown(std::net::Shutdown::Both);
    writer.join().unwrap();
    match f.reply {
        Reply::Error(e) => (f.tag, e.code, e.message),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// The huge frames (64 MiB of ranges, read pieces or tree nodes; one lock request
/// of 10 M ranges that fits its kind's frame; the node frame from 4 hosts at once): each
/// is refused with `LimitExceeded` on its tag — from its first bytes or from its list's
/// count, never by decoding it whole on the lock service's thread — while another host's
/// client pings and locks within bounds that the unbounded server broke by far (the targets, 100 ms and 256 MiB, are measured on a quiet machine)
/// (it reached 977–3,282 MiB, and the other client stalled up to 9.8 s).
#[test]
fn huge_frames_are_refused_before_they_cost_memory_or_time() {
    use atomio_proto::data::{Bytes, ObjPiece};
    use atomio_version::{NodeKey, Pos};
    let mut server = Server::start();
    let pid = server.child.id();
    let pinger = Pinger::start(&server.addr);
    let lock_of = |ranges: Vec<ByteRange>| Request::LockNew {
        file: FileId(1),
        mode: LockMode::Write,
        desc: LockDesc::Ranges(ranges),
        wait: Wait::NonBlocking,
    };
    let ranges = |n| with_copies(7, lock_of(vec![]), lock_of(vec![r(0, 1)]), n);
    let read_of = |pieces| Request::Read {
        file: FileId(1),
        object: 0,
        pieces,
    };
    let one = ObjPiece { offset: 0, len: 1 };
    let pieces = with_copies(7, read_of(vec![]), read_of(vec![one]), 33_000_000);
    let put_of = |nodes| Request::NodePut {
        file: FileId(1),
        nodes,
    };
    let key = NodeKey {
        pos: Pos { level: 0, index: 0 },
        version: 1,
    };
    let nodes = with_copies(
        7,
        put_of(vec![]),
        put_of(vec![(key, Bytes::from(Vec::new()))]),
        16_000_000,
    );
    let t0 = std::time::Instant::now();
    let a = server.addr.clone();
    for (what, frame, text) in [
        ("64 MiB of ranges", ranges(33_000_000), "limited to"),
        ("20 MiB of ranges", ranges(10 << 20), "ranges"),
        ("64 MiB of read pieces", pieces, "limited to"),
        ("64 MiB of tree nodes", nodes.clone(), "nodes"),
    ] {
        let (tag, code, message) = abuse(&a, "127.0.0.2", frame);
        assert_eq!(
            (tag, code),
            (7, ErrorCode::LimitExceeded),
            "{what}: {message}"
        );
        assert!(message.contains(text), "{what}: {message}");
    }
    let hosts: Vec<_> = (3..7)
        .map(|h| {
            let (a, frame) = (a.clone(), nodes.clone());
            std::thread::spawn(move || abuse(&a, &format!("127.0.0.{h}"), frame))
        })
        .collect();
    for h in hosts {
        let (tag, code, message) = h.join().unwrap();
        assert_eq!((tag, code), (7, ErrorCode::LimitExceeded), "{message}");
    }
    let worst = pinger.stop();
    let peak = peak_rss(pid);
    eprintln!(
        "huge frames refused in {:?}; the other host's worst ping + lock {worst:?}; server \
         peak RSS {} MiB",
        t0.elapsed(),
        peak >> 20
    );
    // Bounds that catch the unbounded server (977-3,282 MiB, others stalled 3.5-9.8 s)
    // whatever else loads the machine: on two shared cores, with the suite's other tests
    // beside it, the worst ping reached 1.27 s and the peak 269 MiB. The targets themselves
    // (100 ms, 256 MiB) are measured on a quiet machine, outside the suite.
    assert!(
        worst < Duration::from_millis(2500),
        "ping + lock took {worst:?}"
    );
    assert!(peak < 640 << 20, "peak RSS {} MiB", peak >> 20);
    let mut after = server.connect();
    ping_ok(&mut after, 1);
    server.assert_alive_and_clean();
}
