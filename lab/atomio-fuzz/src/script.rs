//! The `serve` target: a script of steps from up to four clients against one storage
//! server's lock and data services, as the TCP server wires them (leases on, data in a
//! `FileStore`, lapsed clients fenced at the data service before their locks go).
//!
//! Script bytes, step after step: an op byte (`client = op & 3`, `kind = op >> 2`), then
//!
//! * kind 0 — a frame: `u16` big-endian length, then that many bytes (version byte and a
//!   postcard `ClientFrame`), decoded by the real decoder and dispatched by request class;
//! * kind 1 — time passes: one byte, × 10 ms; lapsed clients are fenced, then released;
//! * kind 2 — the client disconnects (both services forget it);
//! * kind 3 — the client opens a session and renews it with the proof it was given (a
//!   fuzzer cannot forge the keyed proof, so the script asks for the honest path);
//! * kind 4 — the lock service runs one slice of left-over work (long grants and releases
//!   run in slices between messages; the fuzzing server's slices are tiny, `FUZZ_SLICE`,
//!   so the script decides how they interleave with everything else);
//! * other kinds are skipped, so any byte string is a script.
//!
//! Lock descriptions that could cost more than `FUZZ_MAX_PIECES` pieces are skipped (the
//! real limits are probed by tests; such inputs only slow the fuzzer to a crawl).
//!
//! **Checked after every step:** the lock table's invariants (`check_invariants`: no two
//! conflicting grants, indexes consistent); a fenced client's data requests are refused.
//! **At the end:** left-over work is run, every client disconnects, the work that leaves is
//! run, and then no request and no index entry may be left.

use atomio_data::{DataService, FileStore};
use atomio_layout::{Access, Pattern};
use atomio_lock::{LeaseConfig, LockServer, Outgoing};
use atomio_proto::frame;
use atomio_proto::{ClientFrame, ClientId, ErrorCode, LockDesc, Reply, Request, RequestClass};
use std::collections::HashSet;
use std::path::PathBuf;

const CLIENTS: u64 = 4;
const LEASE_MS: u64 = 1000;
const TICK_MS: u64 = 10;
/// Ranges the fuzzed lock service grants or releases per step: tiny, so ordinary scripts
/// exercise slicing (`serve_timed` measures with the real default instead).
pub const FUZZ_SLICE: u64 = 8;
/// Most pieces a fuzzed lock description may cost the server (more are skipped, as if the
/// frame never came): with 8-range slices a request of millions of runs takes a million
/// steps, each followed by an O(table) check, and such inputs drag the fuzzer down to a few
/// executions per second while saying nothing new (at 2¹⁶ pieces it still ran ~1,500/s;
/// 4,096 pieces are still 512 slices). The real limits (2²⁴) are probed by unit tests and over TCP; `serve_timed`
/// runs uncapped.
pub const FUZZ_MAX_PIECES: u64 = 1 << 12;

/// One step of a script (see the module docs for its bytes).
#[derive(Clone, Debug)]
pub enum Step {
    Frame { client: u8, frame: ClientFrame },
    Raw { client: u8, bytes: Vec<u8> },
    Wait { ticks: u8 },
    Disconnect { client: u8 },
    Renew { client: u8 },
    Work,
}

/// A script built from steps: how the seed corpus is written.
#[derive(Clone, Debug, Default)]
pub struct Script(pub Vec<Step>);

impl Script {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for step in &self.0 {
            match step {
                Step::Frame { client, frame } => {
                    let mut f = Vec::new();
                    frame::encode(frame, &mut f).expect("corpus frames are small");
                    push_frame(&mut out, *client, &f[frame::LENGTH_BYTES..]);
                }
                Step::Raw { client, bytes } => push_frame(&mut out, *client, bytes),
                Step::Wait { ticks } => out.extend_from_slice(&[1 << 2, *ticks]),
                Step::Disconnect { client } => out.push((2 << 2) | (client & 3)),
                Step::Renew { client } => out.push((3 << 2) | (client & 3)),
                Step::Work => out.push(4 << 2),
            }
        }
        out
    }
}

fn push_frame(out: &mut Vec<u8>, client: u8, body: &[u8]) {
    let len = u16::try_from(body.len()).expect("corpus frames fit a u16 length");
    out.push(client & 3);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
}

/// Deliberate harness bugs: each must make `serve` fail (negative controls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    None,
    /// The end-of-run disconnect skips this client (its locks stay: a leak).
    SkipDisconnect(u8),
    /// Lapsed clients are released without being fenced at the data service.
    NoFence,
}

/// The server under test.
struct Node {
    control: Control,
    locks: LockServer,
    data: DataService<FileStore>,
    fenced: HashSet<ClientId>,
    now: u64,
    out: Vec<Outgoing>,
    /// Check the lock table after every step and skip lock descriptions over
    /// `FUZZ_MAX_PIECES` (both off when timing: the check is O(table)).
    checks: bool,
    steps: u64,
}

impl Node {
    fn new(dir: &std::path::Path, control: Control, slice: u64, checks: bool) -> Self {
        let store = FileStore::open(dir).expect("a scratch store opens");
        Self {
            control,
            locks: LockServer::new()
                .with_leases(LeaseConfig {
                    duration_ms: LEASE_MS,
                    key: 0x5eed,
                })
                .with_work_slice(slice),
            data: DataService::new(store),
            fenced: HashSet::new(),
            now: 0,
            out: Vec::new(),
            checks,
            steps: 0,
        }
    }

    fn request(&mut self, client: ClientId, tag: u64, request: Request) {
        self.out.clear();
        if self.checks && costs_too_much(&request) {
            return;
        }
        match request.class() {
            RequestClass::Lock => {
                self.locks.set_now(self.now);
                self.locks.handle(client, tag, request, &mut self.out);
            }
            RequestClass::Data | RequestClass::Meta => {
                // Mandatory locks: the lock service admits changes of bytes first.
                if request.needs_admission() {
                    self.locks.set_now(self.now);
                    if let Err(e) = self.locks.admit(client, &request) {
                        assert!(
                            matches!(
                                e.code,
                                ErrorCode::Locked
                                    | ErrorCode::InvalidArgument
                                    | ErrorCode::LimitExceeded
                                    | ErrorCode::LeaseExpired
                            ),
                            "admission failed oddly: {e}"
                        );
                        return;
                    }
                }
                let mut request = request;
                self.locks.stamp(&mut request);
                // Every answer this causes (versioning: a completion answers the writers
                // waiting for the versions it publishes).
                let mut replies = Vec::new();
                self.data.set_now(self.now);
                self.data.handle_all(client, tag, request, &mut replies);
                for (file, object) in self.data.take_synchronize() {
                    self.locks.synchronize_object(file, object, &mut self.out);
                }
                for (to, t, reply) in &replies {
                    if self.fenced.contains(&client) && (*to, *t) == (client, tag) {
                        assert!(
                            matches!(reply, Reply::Error(e) if e.code == ErrorCode::LeaseExpired),
                            "a fenced client's data request was served: {reply:?}"
                        );
                    }
                    if let Reply::Published { .. } = reply {
                        assert!(
                            !self.fenced.contains(to),
                            "a fenced client was told its version is published"
                        );
                    }
                }
            }
        }
    }

    fn wait(&mut self, ticks: u8) {
        self.now += u64::from(ticks) * TICK_MS;
        self.locks.set_now(self.now);
        for lapsed in self.locks.expire() {
            if self.control != Control::NoFence {
                self.data.fence(lapsed);
            }
            self.fenced.insert(lapsed);
            self.out.clear();
            self.locks.release_lapsed(lapsed, &mut self.out);
        }
    }

    /// One slice of the lock service's left-over work; whether there was any.
    fn work(&mut self) -> bool {
        self.out.clear();
        let any = self.locks.has_work();
        self.locks.work(&mut self.out);
        any
    }

    fn disconnect(&mut self, client: ClientId) {
        self.out.clear();
        self.locks.disconnect(client, &mut self.out);
        self.data.forget(client);
        self.fenced.remove(&client);
    }

    fn renew(&mut self, client: ClientId) {
        self.request(client, 0, Request::Hello);
        let proof = match self.out.first().map(|o| &o.reply) {
            Some(Reply::Session { proof, .. }) => *proof,
            _ => return, // lapsed: refused, as it should be
        };
        self.request(client, 1, Request::Renew { client, proof });
    }

    /// The invariant check after a step: always while the table is small; once it is larger
    /// (a request of many runs, granted in hundreds of slices) every 64th step, or the
    /// O(table) check per slice makes such inputs quadratic and the fuzzer crawls (with the
    /// bound at 4,096 entries a 3,100-run request took 165 ms and AFL++ fell to a few
    /// executions per second).
    fn check(&mut self) {
        self.steps += 1;
        let small = self.locks.index_entries() <= 256 && self.locks.open_requests() <= 64;
        if self.checks && (small || self.steps.is_multiple_of(64)) {
            self.final_check();
        }
    }

    fn final_check(&self) {
        if let Err(e) = self.locks.check_invariants() {
            panic!("lock table invariant broken: {e}");
        }
    }
}

/// Whether `request` is a lock description that can cost the server more than
/// `FUZZ_MAX_PIECES` pieces (the same estimate as the server's own limit check).
fn costs_too_much(request: &Request) -> bool {
    let Request::LockNew {
        desc: LockDesc::Pattern(w),
        ..
    } = request
    else {
        return false;
    };
    let Ok(pattern) = Pattern::from_nodes(w.nodes.clone()) else {
        return false;
    };
    let runs = pattern.run_count_upper();
    let span = Access::new(w.base, pattern)
        .ok()
        .and_then(|a| a.hull())
        .map_or(0, |h| h.end - h.start);
    runs.saturating_add(span / w.stripe_size.max(1)) > FUZZ_MAX_PIECES
}

/// `ATOMIO_FUZZ_TRACE=1`: print each step and the replies (to read a crashing input).
fn tracing_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("ATOMIO_FUZZ_TRACE").is_some())
}

/// A scratch directory for this thread's store, emptied before each run.
fn scratch() -> PathBuf {
    let base = std::env::var_os("ATOMIO_FUZZ_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            if shm.is_dir() {
                shm
            } else {
                std::env::temp_dir()
            }
        });
    // Per thread: the test harness runs targets on several threads of one process.
    let thread = format!("{:?}", std::thread::current().id());
    let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
    base.join(format!("atomio-fuzz-{}-{thread}", std::process::id()))
}

/// Runs `script` (any bytes) against a fresh server; panics on a broken invariant.
pub fn serve(script: &[u8]) {
    serve_with(script, Control::None);
}

/// `serve` with a deliberate harness bug (negative controls).
pub fn serve_with(script: &[u8], control: Control) {
    run(script, control, FUZZ_SLICE, true);
}

/// Runs `script` with the lock service's real work slice and returns the longest time one
/// step (one request, disconnect, expiry or slice of work) kept the server busy, invariant
/// checks skipped (only the final one runs): the worst stall a peer's messages caused.
pub fn serve_timed(script: &[u8]) -> std::time::Duration {
    run(
        script,
        Control::None,
        atomio_lock::DEFAULT_WORK_SLICE,
        false,
    )
}

/// Runs the lock service's left-over work to the end, checking after each slice; returns
/// the longest slice.
fn drain(node: &mut Node) -> std::time::Duration {
    let mut longest = std::time::Duration::ZERO;
    loop {
        let started = std::time::Instant::now();
        let any = node.work();
        longest = longest.max(started.elapsed());
        if tracing_on() && any {
            eprintln!("  drain: work slice took {:?}", started.elapsed());
        }
        if !any {
            return longest;
        }
        node.check();
    }
}

fn run(script: &[u8], control: Control, slice: u64, checks: bool) -> std::time::Duration {
    let mut longest = std::time::Duration::ZERO;
    let dir = ScratchDir(scratch());
    empty_store(&dir.0);
    let mut node = Node::new(&dir.0, control, slice, checks);
    let trace = tracing_on();
    let mut rest = script;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let client = ClientId(u64::from(op & 3));
        let started = std::time::Instant::now();
        if trace {
            eprintln!("t={} ms {client}: op {op:#04x}", node.now);
        }
        match op >> 2 {
            0 => {
                let Some(len) = rest.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
                    break;
                };
                let body = &rest[2..];
                let body = &body[..usize::from(len).min(body.len())];
                rest = &rest[2 + body.len()..];
                if let Ok(f) = frame::decode::<ClientFrame>(body) {
                    if trace {
                        eprintln!("  {f:?}");
                    }
                    node.request(client, f.tag, f.request);
                    if trace {
                        eprintln!("  -> {:?}", node.out);
                    }
                }
            }
            1 => {
                let Some((&ticks, tail)) = rest.split_first() else {
                    break;
                };
                rest = tail;
                node.wait(ticks);
            }
            2 => node.disconnect(client),
            3 => node.renew(client),
            4 => {
                node.work();
                if trace {
                    eprintln!("  work -> {:?}", node.out);
                }
            }
            _ => {}
        }
        longest = longest.max(started.elapsed());
        if trace {
            eprintln!("  took {:?}", started.elapsed());
        }
        node.check();
    }
    longest = longest.max(drain(&mut node));
    for c in 0..CLIENTS {
        if control != Control::SkipDisconnect(c as u8) {
            let started = std::time::Instant::now();
            node.disconnect(ClientId(c));
            longest = longest.max(started.elapsed());
            if tracing_on() {
                eprintln!("  end: {c} disconnected, took {:?}", started.elapsed());
            }
        }
    }
    longest = longest.max(drain(&mut node));
    node.final_check();
    assert_eq!(
        (node.locks.open_requests(), node.locks.index_entries()),
        (0, 0),
        "locks left behind after every client disconnected"
    );
    drop(node);
    drop(dir);
    longest
}

/// A run's scratch store, removed when the run ends — also when a check panics (the
/// negative controls do: their stores used to stay in `/dev/shm`). Under AFL++ the next
/// input empties it instead: cheaper than a fresh store each time.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !under_afl() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Whether AFL++ runs this process (it runs many inputs in one process).
fn under_afl() -> bool {
    std::env::var_os("__AFL_SHM_ID").is_some()
}

/// Removes every object, metadata and staging file of the store in `dir` but keeps its directories
/// and id, so opening it again costs a lookup, not a new store (a fifth of the time of a
/// small input went to making and removing directories).
fn empty_store(dir: &std::path::Path) {
    // The staging area and the decision log too: what one input staged or decided must not
    // be recovered by the next (inputs would depend on each other, and the log would grow
    // with every input AFL++ ran).
    let _ = std::fs::remove_file(dir.join("decisions.log"));
    // SeqDLM's extent log likewise: a store opening replays it, so a log kept from input to
    // input made every input slower than the last (the serve target fell to ~150 execs/s)
    // and let one input's flushes shape the next one's.
    let _ = std::fs::remove_file(dir.join("extents.log"));
    for sub in ["objects", "meta", "staging"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name() != atomio_data::STORE_ID_FILE {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every input starts from an empty store: what one input flushed (SeqDLM's extent log)
    /// or decided (the decision log) is gone before the next runs. A log kept across inputs
    /// made each input replay every earlier one's records at open.
    #[test]
    fn no_log_survives_from_one_input_to_the_next() {
        let dir = scratch();
        std::fs::create_dir_all(&dir).expect("scratch directory");
        for log in ["extents.log", "decisions.log"] {
            std::fs::write(dir.join(log), [7u8; 40]).expect("scratch store is writable");
        }
        empty_store(&dir);
        for log in ["extents.log", "decisions.log"] {
            assert!(!dir.join(log).exists(), "{log} survived the reset");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
