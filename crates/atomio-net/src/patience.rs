//! Waiting out mandatory locks. A server refuses (`Locked`) a change of bytes another
//! client holds a lock on; a caller that takes no lock of its own (a plain write, a
//! resize, a remove) waits for those bytes the way a POSIX `write` waits for a mandatory
//! lock: it tries again after growing pauses, for at most `LOCKED_PATIENCE` — longer than
//! a default lease, so a holder that froze or vanished has lost its locks by then, while a
//! holder that keeps its locks for good makes the call fail with the server's message.

use atomio_proto::{ErrorCode, WireError};
use std::time::{Duration, Instant};

/// How long a refused change waits for the bytes in all.
pub const LOCKED_PATIENCE: Duration = Duration::from_secs(15);
const FIRST_PAUSE: Duration = Duration::from_millis(1);
const LONGEST_PAUSE: Duration = Duration::from_millis(100);

/// Pauses between attempts of one refused change.
#[derive(Debug)]
pub struct LockedBackoff {
    start: Instant,
    pause: Duration,
}

impl Default for LockedBackoff {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            pause: FIRST_PAUSE,
        }
    }
}

impl LockedBackoff {
    /// After a failed attempt: `true` (having paused) if it was refused by another's lock
    /// and patience is left, so the caller tries again; `false` to give up with `e`.
    pub async fn again(&mut self, e: &WireError) -> bool {
        if e.code != ErrorCode::Locked || self.start.elapsed() >= LOCKED_PATIENCE {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
        true
    }
}
