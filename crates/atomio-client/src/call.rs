//! The steps of one call on the lock service as a sans-IO machine: lock → I/O → release
//! (→ publish, for techniques that have one).
//!
//! ```text
//!  start ─► Lock (LockOp) ─► Io: Data (DataOp on atomio's servers) ─► Release ─► Done
//!                           └► Io: Local (the driver's pwrite/pread) ─┘
//! ```
//!
//! Every message carries its phase in the top bits of `sub`, so replies from different
//! steps never mix. The release is *detached*: its messages are emitted and the call is
//! done — a release needs nothing from anyone, and each connection is FIFO, so the client's
//! next request to a server comes after it; late acknowledgements are ignored. When the
//! I/O step fails, the locks are still released and the call reports the I/O error.
//!
//! Drivers: `File` (via `ClusterClient::run`) and the full-stack simulator (`sim`), which
//! delivers the very same messages to real `LockServer`s and `DataService`s in a seeded
//! random order and checks the resulting file with the verifier.
//!
//! **Invariants:** no data message is emitted before every lock of the call is held; no
//! release is emitted before every data message was answered (or the local I/O returned);
//! `Done`/`Failed` only when nothing of the call is awaited.

use atomio_lock::{LockOp, Send};
use atomio_net::{DataOp, Machine, Progress};
use atomio_proto::{Reply, WireError};

const PHASE_SHIFT: u32 = 28;
const LOCK: u32 = 1;
const DATA: u32 = 2;
const RELEASE: u32 = 3;

/// How a call's bytes move.
#[derive(Debug)]
pub enum CallIo {
    /// Messages to atomio's data servers.
    Data(DataOp),
    /// The driver does it (direct placement) and reports with `local_io_done`.
    Local,
}

#[derive(Debug)]
enum Phase {
    Locking,
    Io,
    /// Waiting for the driver's local I/O.
    LocalIo,
    Done,
    Failed(WireError),
}

#[derive(Debug)]
pub struct CallOp {
    lock: Option<LockOp>,
    io: CallIo,
    phase: Phase,
    /// An injected bug for the simulator's negative control: release before the data is
    /// acknowledged.
    release_early: bool,
}

fn tagged(phase: u32, out: &mut [Send], from: usize) {
    for s in &mut out[from..] {
        s.sub |= phase << PHASE_SHIFT;
    }
}

impl CallOp {
    /// A call that takes `lock` (none: no locks) and then does `io`.
    pub fn new(lock: Option<LockOp>, io: CallIo) -> Self {
        Self {
            lock,
            io,
            phase: Phase::Locking,
            release_early: false,
        }
    }

    /// Negative control for the simulator: release the locks as soon as the data messages
    /// are sent instead of when they are answered (a torn write must then be caught).
    pub fn with_early_release(mut self) -> Self {
        self.release_early = true;
        self
    }

    pub fn start(&mut self, out: &mut Vec<Send>) {
        match &mut self.lock {
            Some(l) => {
                let from = out.len();
                l.start(out);
                tagged(LOCK, out, from);
                self.after_lock_step(out);
            }
            None => self.begin_io(out),
        }
    }

    /// True when the driver must do the I/O itself now (then call `local_io_done`).
    pub fn needs_local_io(&self) -> bool {
        matches!(self.phase, Phase::LocalIo)
    }

    /// The driver's local I/O returned: release (detached) and finish.
    pub fn local_io_done(&mut self, result: Result<(), WireError>, out: &mut Vec<Send>) {
        if self.needs_local_io() {
            self.release(out);
            self.phase = match result {
                Ok(()) => Phase::Done,
                Err(e) => Phase::Failed(e),
            };
        }
    }

    /// What a finished read returned (servers placement).
    pub fn take_data(&mut self) -> Vec<u8> {
        match &mut self.io {
            CallIo::Data(d) => d.take_data(),
            CallIo::Local => Vec::new(),
        }
    }

    /// The call's lock operation, if it takes locks from the lock service.
    pub fn lock_op(&self) -> Option<&LockOp> {
        self.lock.as_ref()
    }

    /// Lock statistics (messages sent so far).
    pub fn lock_messages(&self) -> u64 {
        self.lock.as_ref().map_or(0, |l| l.stats().messages)
    }

    fn after_lock_step(&mut self, out: &mut Vec<Send>) {
        let Some(l) = &self.lock else { return };
        match l.progress() {
            Progress::Waiting => {}
            Progress::Done => self.begin_io(out),
            // The lock protocol released whatever it had obtained.
            Progress::Failed(e) => self.phase = Phase::Failed(e),
        }
    }

    fn begin_io(&mut self, out: &mut Vec<Send>) {
        match &mut self.io {
            CallIo::Local => self.phase = Phase::LocalIo,
            CallIo::Data(d) => {
                self.phase = Phase::Io;
                let from = out.len();
                d.start(out);
                tagged(DATA, out, from);
                if self.release_early {
                    self.release(out);
                }
                self.after_data_step(out);
            }
        }
    }

    fn after_data_step(&mut self, out: &mut Vec<Send>) {
        let CallIo::Data(d) = &self.io else { return };
        let result = match d.progress() {
            Progress::Waiting => return,
            Progress::Done => Ok(()),
            Progress::Failed(e) => Err(e),
        };
        if !self.release_early {
            self.release(out);
        }
        self.phase = match result {
            Ok(()) => Phase::Done,
            Err(e) => Phase::Failed(e),
        };
    }

    fn release(&mut self, out: &mut Vec<Send>) {
        if let Some(l) = &mut self.lock {
            if l.progress() == Progress::Done {
                let from = out.len();
                l.release(out);
                tagged(RELEASE, out, from);
            }
        }
    }
}

impl CallOp {
    /// The call's all-or-nothing write, if it has one, and whether it is settled.
    pub fn txn(&self) -> Option<(atomio_proto::TxnId, bool)> {
        match &self.io {
            CallIo::Data(d) => d.txn(),
            CallIo::Local => None,
        }
    }
}

impl Machine for CallOp {
    fn on_reply(&mut self, sub: u32, reply: Reply, out: &mut Vec<Send>) {
        let inner = sub & ((1 << PHASE_SHIFT) - 1);
        match (sub >> PHASE_SHIFT, &self.phase) {
            (LOCK, Phase::Locking) => {
                if let Some(l) = &mut self.lock {
                    let from = out.len();
                    l.on_reply(inner, reply, out);
                    tagged(LOCK, out, from);
                }
                self.after_lock_step(out);
            }
            (DATA, Phase::Io) => {
                if let CallIo::Data(d) = &mut self.io {
                    // An atomic write's later steps (decide, finish) and in-doubt
                    // resolutions are sent from here.
                    let from = out.len();
                    d.on_reply(inner, reply, out);
                    tagged(DATA, out, from);
                }
                self.after_data_step(out);
            }
            // Release acknowledgements and anything stale: nothing to do.
            _ => {}
        }
    }

    fn progress(&self) -> Progress {
        match &self.phase {
            Phase::Locking | Phase::Io => Progress::Waiting,
            // The step the driver awaits is over; it now does the local I/O.
            Phase::LocalIo | Phase::Done => Progress::Done,
            Phase::Failed(e) => Progress::Failed(e.clone()),
        }
    }

    fn abandon(&mut self, error: WireError) {
        if let Some(l) = &mut self.lock {
            Machine::abandon(l, error.clone());
        }
        if let CallIo::Data(d) = &mut self.io {
            d.abandon(error.clone());
        }
        if !matches!(self.phase, Phase::Failed(_)) {
            self.phase = Phase::Failed(error);
        }
    }

    fn cleanup(&mut self, out: &mut Vec<Send>) -> Vec<(atomio_layout::ServerId, u32)> {
        // An unfinished all-or-nothing write is settled or left in doubt at its
        // participants *before* the locks go (each connection is FIFO).
        if let CallIo::Data(d) = &mut self.io {
            let from = out.len();
            d.cleanup(out);
            tagged(DATA, out, from);
        }
        let Some(l) = &mut self.lock else {
            return Vec::new();
        };
        let from = out.len();
        let orphans = l.cleanup(out);
        tagged(RELEASE, out, from);
        orphans
            .into_iter()
            .map(|(server, sub)| (server, sub | (LOCK << PHASE_SHIFT)))
            .collect()
    }
}
