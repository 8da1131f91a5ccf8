//! What every client-side protocol machine looks like to a driver: replies in, messages
//! out, and a progress the driver waits on. `LockOp` (locks), `DataOp` (object I/O) and
//! `atomio_client::CallOp` (the steps of one atomic call) implement it, so one driver
//! (`ClusterClient::drive`) runs them all over TCP or in-process links, and the seeded
//! simulators run the very same machines.
//!
//! **Invariant:** a machine reports `Done` or `Failed` only when it expects no further
//! reply for the current step; after `abandon` it reports `Failed` at once.

use atomio_lock::{LockOp, Send, Status};
use atomio_proto::{Reply, WireError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Replies are still expected.
    Waiting,
    /// The current step finished.
    Done,
    Failed(WireError),
}

pub trait Machine {
    /// One reply to the message this machine sent as `sub`; new messages go to `out`.
    fn on_reply(&mut self, sub: u32, reply: Reply, out: &mut Vec<Send>);
    fn progress(&self) -> Progress;
    /// The transport failed: no more replies will come.
    fn abandon(&mut self, error: WireError);
    /// After `abandon`: messages that free what this machine may hold at servers (to
    /// `out`), and the (server, sub) of opening lock requests whose reply — naming the lock
    /// to release — is still to come. See `LockOp::cleanup`.
    fn cleanup(&mut self, _out: &mut Vec<Send>) -> Vec<(atomio_layout::ServerId, u32)> {
        Vec::new()
    }
}

impl Machine for LockOp {
    fn on_reply(&mut self, sub: u32, reply: Reply, out: &mut Vec<Send>) {
        LockOp::on_reply(self, sub, reply, out)
    }
    fn progress(&self) -> Progress {
        match self.status() {
            Status::Held | Status::Released => Progress::Done,
            Status::Acquiring | Status::Releasing => Progress::Waiting,
            Status::Failed(e) => Progress::Failed(e),
        }
    }
    fn abandon(&mut self, error: WireError) {
        LockOp::abandon(self, error)
    }
    fn cleanup(&mut self, out: &mut Vec<Send>) -> Vec<(atomio_layout::ServerId, u32)> {
        LockOp::cleanup(self, out)
    }
}
