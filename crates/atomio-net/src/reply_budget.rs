//! Per-connection reply budget: how many bytes of replies one TCP client may have coming.
//!
//! A request is cheap to send and its reply may not be (a `Read` of 32 MiB costs ~40 bytes
//! on the wire): a client that sends reads and never reads the replies would make the
//! server hold every reply in memory (measured before this module: 100 such reads, 3.3 GB
//! resident). So the connection's reader *reserves* each request's expected reply size
//! before handing the request on, and stops reading that client's socket while its
//! reservations exceed the budget; the writer gives a reservation back once the reply is on
//! the wire. The cost of a client that stops reading is then its own: its requests wait in
//! its socket (TCP pushes back on it), everyone else is served as before.
//!
//! **Invariants:** `bytes` is the sum of `by_tag`; a reservation is admitted when nothing
//! is reserved (so one request larger than the budget still runs, alone) or when it fits;
//! releases of unknown tags (a client may reuse tags; errors the reader answers itself are
//! never reserved) change nothing, so a hostile client can only shrink its own budget.

use atomio_proto::limits::{MAX_FRAME_BYTES, MAX_QUEUED_REPLY_BYTES};
use atomio_proto::Request;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::Notify;

/// What a reply costs beyond its data (frame header, tag, small bodies).
const REPLY_OVERHEAD: usize = 256;

/// The bytes a reply to `request` is expected to take (reads: the data; at most a frame;
/// nothing for requests answered only when refused, whose error replies are small).
pub fn expected_reply_bytes(request: &Request) -> usize {
    if matches!(
        request,
        Request::DlmCancel { .. } | Request::DlmRelease { .. }
    ) {
        return 0;
    }
    let data = match request {
        Request::Read { pieces, .. } => pieces
            .iter()
            .fold(0usize, |a, p| a.saturating_add(p.len as usize)),
        _ => 0,
    };
    data.saturating_add(REPLY_OVERHEAD).min(MAX_FRAME_BYTES)
}

#[derive(Debug, Default)]
struct State {
    bytes: usize,
    by_tag: HashMap<u64, usize>,
}

#[derive(Debug)]
pub struct ReplyBudget {
    limit: usize,
    state: Mutex<State>,
    freed: Notify,
}

impl Default for ReplyBudget {
    fn default() -> Self {
        Self::new(MAX_QUEUED_REPLY_BYTES)
    }
}

impl ReplyBudget {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            state: Mutex::new(State::default()),
            freed: Notify::new(),
        }
    }

    fn try_reserve(&self, tag: u64, cost: usize) -> bool {
        if cost == 0 {
            return true; // no reply expected: nothing to give back later
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.bytes != 0 && s.bytes.saturating_add(cost) > self.limit {
            return false;
        }
        s.bytes += cost;
        *s.by_tag.entry(tag).or_default() += cost;
        true
    }

    /// Waits until `cost` more bytes fit, then reserves them for the reply tagged `tag`.
    pub async fn reserve(&self, tag: u64, cost: usize) {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable(); // registered before the check: no release is missed
            if self.try_reserve(tag, cost) {
                return;
            }
            freed.await;
        }
    }

    /// The reply tagged `tag` is on the wire: its reservation (if any) is free again.
    pub fn release(&self, tag: u64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cost) = s.by_tag.remove(&tag) {
            s.bytes -= cost;
            drop(s);
            self.freed.notify_waiters();
        }
    }

    /// Bytes reserved now.
    #[cfg(test)]
    pub fn reserved(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_reservation_waits_until_a_release_makes_room() {
        let b = Arc::new(ReplyBudget::new(100));
        b.reserve(1, 60).await;
        b.reserve(2, 40).await;
        assert_eq!(b.reserved(), 100);
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move { b.reserve(3, 50).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "reserved past the budget");
        b.release(99); // unknown tag: nothing changes
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        b.release(1);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the release woke the waiter")
            .unwrap();
        assert_eq!(b.reserved(), 90);
    }

    #[tokio::test]
    async fn one_request_larger_than_the_budget_runs_alone() {
        let b = ReplyBudget::new(100);
        b.reserve(1, 1000).await; // nothing reserved: admitted
        assert_eq!(b.reserved(), 1000);
        assert!(!b.try_reserve(2, 1));
        b.release(1);
        assert!(b.try_reserve(2, 1));
    }

    #[test]
    fn reads_are_expected_to_cost_their_data_and_at_most_a_frame() {
        use atomio_proto::data::ObjPiece;
        use atomio_proto::FileId;
        let read = |lens: &[u64]| Request::Read {
            file: FileId(1),
            object: 0,
            pieces: lens
                .iter()
                .map(|&len| ObjPiece { offset: 0, len })
                .collect(),
        };
        assert_eq!(
            expected_reply_bytes(&read(&[1000, 24])),
            1024 + REPLY_OVERHEAD
        );
        assert_eq!(expected_reply_bytes(&read(&[u64::MAX, 5])), MAX_FRAME_BYTES);
        assert_eq!(
            expected_reply_bytes(&Request::Ping { nonce: 1 }),
            REPLY_OVERHEAD
        );
    }
}
