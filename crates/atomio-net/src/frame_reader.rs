//! Reading a server's incoming frames with bounded memory and time.
//!
//! A length prefix promises up to `MAX_FRAME_BYTES` (64 MiB); a peer can send the prefix
//! and most of the body and then stall, and the server would hold the partial frame as long
//! as the connection lives (measured before: 20 such connections, 1.3 GB resident, forever).
//! Two bounds close that:
//!
//! * **memory**: a frame larger than `SMALL_FRAME` is buffered only after it takes its size
//!   (in KiB) from its host's semaphore of `PARTIAL_FRAME_BYTES_PER_HOST` and then from a
//!   server-wide one of `PARTIAL_FRAME_BYTES`; until then its bytes stay in the peer's
//!   socket (TCP pushes back on the peer). The host's share comes first, so one host that
//!   stalls frames waits for itself and leaves the rest of the server's budget to the others.
//!   Small frames need no permit: they are bounded by `SMALL_FRAME` × connections.
//! * **kind**: a frame longer than `MAX_CONTROL_FRAME_BYTES` is judged from its first
//!   bytes (the request's kind) against its kind's limit (`frame::max_request_frame`)
//!   before the rest is buffered: a lock request or a list of node keys may not fill
//!   64 MiB; such a frame is refused on its tag and the connection closed.
//! * **time**: once its length prefix has arrived, a frame must arrive whole within
//!   `FRAME_DEADLINE`, or the connection is closed with a `Timeout` error — so a stalled
//!   peer gives its permits back.
//!
//! **Invariants:** the permit of a frame is held exactly while its buffer lives (it is
//! returned with the `Frame`); a clean end of stream between frames is `None`, anything
//! else that ends a frame early is an error, after which the caller closes the connection.

use atomio_proto::frame::{frame_length, max_request_frame, LENGTH_BYTES, REQUEST_HEAD_BYTES};
use atomio_proto::limits::{MAX_CONTROL_FRAME_BYTES, MAX_FRAME_BYTES};
use atomio_proto::{ErrorCode, WireError};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Frames up to this size are read without a permit.
pub const SMALL_FRAME: usize = 64 << 10;
/// Bytes all connections of a server together may hold in large frames being received.
pub const PARTIAL_FRAME_BYTES: usize = 256 << 20;
/// Bytes the connections from one host (IP address) may hold in large frames being
/// received: two full frames at once, or 128 writes of 1 MiB (a client's largest data
/// message) from the processes of one node.
pub const PARTIAL_FRAME_BYTES_PER_HOST: usize = 128 << 20;
/// Time a frame may take to arrive once its length prefix has.
pub const FRAME_DEADLINE: Duration = Duration::from_secs(30);

/// The server-wide budget of large-frame bytes, in KiB permits.
pub fn frame_memory() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(PARTIAL_FRAME_BYTES >> 10))
}

/// One host's budget of large-frame bytes, in KiB permits.
pub fn host_frame_memory() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(PARTIAL_FRAME_BYTES_PER_HOST >> 10))
}

/// One received frame (without its length prefix) and the memory permits it holds.
pub struct Frame {
    pub body: Vec<u8>,
    _permits: Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)>,
}

pub struct FrameReader<R> {
    rd: BufReader<R>,
    /// The server's budget and this connection's host's.
    memory: Arc<Semaphore>,
    host_memory: Arc<Semaphore>,
    deadline: Duration,
    /// The tag of the request whose frame was refused by its kind's limit (else 0).
    refused_tag: u64,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(rd: R, memory: Arc<Semaphore>, host_memory: Arc<Semaphore>) -> Self {
        Self {
            rd: BufReader::with_capacity(SMALL_FRAME, rd),
            memory,
            host_memory,
            deadline: FRAME_DEADLINE,
            refused_tag: 0,
        }
    }

    #[cfg(test)]
    fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The tag to answer the last error on: the refused request's when its kind's frame
    /// limit refused it, else 0.
    pub fn error_tag(&self) -> u64 {
        self.refused_tag
    }

    /// The next frame; `None` at a clean end of stream; an error ends the connection.
    pub async fn next(&mut self) -> Option<Result<Frame, WireError>> {
        let mut head = [0u8; LENGTH_BYTES];
        // The first byte may take any time (an idle client); the rest of the prefix may not.
        match self.rd.read(&mut head[..1]).await {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(closed(e))),
        }
        let rest = tokio::time::timeout(self.deadline, self.rd.read_exact(&mut head[1..])).await;
        if let Some(e) = self.failed(rest) {
            return Some(Err(e));
        }
        let n = match frame_length(&head) {
            Some(n) if n <= MAX_FRAME_BYTES => n,
            _ => {
                return Some(Err(WireError::new(
                    ErrorCode::LimitExceeded,
                    format!(
                        "closing the connection: a frame of {} bytes (frames are limited to \
                         {MAX_FRAME_BYTES} bytes)",
                        u32::from_be_bytes(head)
                    ),
                )))
            }
        };
        // Each kind of request has its largest frame (`max_request_frame`): a frame over
        // the smallest of them is judged from its first bytes, before the rest is buffered.
        let mut head = Vec::new();
        if n > MAX_CONTROL_FRAME_BYTES {
            head.resize(REQUEST_HEAD_BYTES, 0);
            let read = tokio::time::timeout(self.deadline, self.rd.read_exact(&mut head)).await;
            if let Some(e) = self.failed(read) {
                return Some(Err(e));
            }
            if let Some((tag, max)) = max_request_frame(&head) {
                if n > max {
                    self.refused_tag = tag;
                    return Some(Err(WireError::new(
                        ErrorCode::LimitExceeded,
                        format!(
                            "closing the connection: a frame of {n} bytes for a request of \
                             a kind limited to {max} bytes"
                        ),
                    )));
                }
            }
        }
        let permits = if n > SMALL_FRAME {
            let kib = n.div_ceil(1024) as u32;
            let host = self.host_memory.clone().acquire_many_owned(kib).await;
            let server = self.memory.clone().acquire_many_owned(kib).await;
            match (host, server) {
                (Ok(h), Ok(s)) => Some((h, s)),
                _ => return Some(Err(closed("the server is stopping"))),
            }
        } else {
            None
        };
        let mut body = vec![0u8; n];
        body[..head.len()].copy_from_slice(&head);
        let rest = &mut body[head.len()..];
        let read = tokio::time::timeout(self.deadline, self.rd.read_exact(rest)).await;
        if let Some(e) = self.failed(read) {
            return Some(Err(e));
        }
        Some(Ok(Frame {
            body,
            _permits: permits,
        }))
    }

    /// The error of a frame that did not arrive whole, if it did not.
    fn failed(
        &self,
        r: Result<std::io::Result<usize>, tokio::time::error::Elapsed>,
    ) -> Option<WireError> {
        match r {
            Ok(Ok(_)) => None,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Some(WireError::new(
                ErrorCode::Malformed,
                "closing the connection: the stream ended inside a frame",
            )),
            Ok(Err(e)) => Some(closed(e)),
            Err(_) => Some(WireError::new(
                ErrorCode::Timeout,
                format!(
                    "closing the connection: a frame did not arrive whole within {:?}",
                    self.deadline
                ),
            )),
        }
    }
}

fn closed(e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::Disconnected, format!("connection failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[tokio::test]
    async fn frames_arrive_whole_and_a_clean_end_is_none() {
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut r = FrameReader::new(rx, frame_memory(), host_frame_memory());
        let big = vec![7u8; SMALL_FRAME + 10];
        tx.write_all(&framed(b"abc")).await.unwrap();
        tx.write_all(&framed(&big)).await.unwrap();
        drop(tx);
        assert_eq!(r.next().await.unwrap().unwrap().body, b"abc");
        assert_eq!(r.next().await.unwrap().unwrap().body, big);
        assert!(r.next().await.is_none());
    }

    #[tokio::test]
    async fn oversized_truncated_and_stalled_frames_are_errors() {
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut r = FrameReader::new(rx, frame_memory(), host_frame_memory());
        tx.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        let e = r.next().await.unwrap().err().unwrap();
        assert_eq!(e.code, ErrorCode::LimitExceeded);

        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut r = FrameReader::new(rx, frame_memory(), host_frame_memory());
        tx.write_all(&100u32.to_be_bytes()).await.unwrap();
        tx.write_all(&[1, 2, 3]).await.unwrap();
        drop(tx);
        let e = r.next().await.unwrap().err().unwrap();
        assert_eq!(e.code, ErrorCode::Malformed);

        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut r = FrameReader::new(rx, frame_memory(), host_frame_memory())
            .with_deadline(Duration::from_millis(50));
        tx.write_all(&100u32.to_be_bytes()).await.unwrap();
        tx.write_all(&[1, 2, 3]).await.unwrap(); // and then nothing
        let e = r.next().await.unwrap().err().unwrap();
        assert_eq!(e.code, ErrorCode::Timeout);
        drop(tx);
    }

    /// A frame longer than its kind allows is refused from its prefix and first bytes, on
    /// its request's tag, before the rest arrives or any memory budget is taken.
    #[tokio::test]
    async fn a_frame_over_its_kinds_limit_is_refused_from_its_first_bytes() {
        use atomio_proto::limits::MAX_LIST_FRAME_BYTES;
        use atomio_proto::{ClientFrame, FileId, LockDesc, LockMode, Request, Wait};
        let mut full = Vec::new();
        let request = Request::LockNew {
            file: FileId(1),
            mode: LockMode::Read,
            desc: LockDesc::Ranges(Vec::new()),
            wait: Wait::NonBlocking,
        };
        atomio_proto::encode(&ClientFrame { tag: 55, request }, &mut full).unwrap();
        let body = &full[LENGTH_BYTES..];
        let memory = frame_memory();
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut r = FrameReader::new(rx, memory.clone(), host_frame_memory());
        let n = MAX_LIST_FRAME_BYTES as u32 + 1;
        tx.write_all(&n.to_be_bytes()).await.unwrap();
        tx.write_all(body).await.unwrap();
        tx.write_all(&[0u8; 64]).await.unwrap(); // and nothing more: not waited for
        let e = tokio::time::timeout(Duration::from_secs(5), r.next())
            .await
            .expect("judged at once")
            .unwrap()
            .err()
            .unwrap();
        assert_eq!(e.code, ErrorCode::LimitExceeded, "{e}");
        assert_eq!(r.error_tag(), 55);
        assert_eq!(memory.available_permits(), PARTIAL_FRAME_BYTES >> 10);
    }

    /// Large frames wait for memory: with the budget taken by a stalled frame, the next
    /// large frame is not buffered until the stalled one gives its permit back.
    #[tokio::test]
    async fn large_frames_wait_for_the_shared_memory_budget() {
        let memory = Arc::new(Semaphore::new(100)); // 100 KiB
        let (mut stalled_tx, stalled_rx) = tokio::io::duplex(1 << 20);
        let mut stalled = FrameReader::new(stalled_rx, memory.clone(), host_frame_memory())
            .with_deadline(Duration::from_millis(300));
        stalled_tx
            .write_all(&(90u32 << 10).to_be_bytes())
            .await
            .unwrap();
        stalled_tx.write_all(&[0u8; 1000]).await.unwrap();
        let stalled_task = tokio::spawn(async move { stalled.next().await.map(|r| r.is_err()) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            memory.available_permits(),
            10,
            "the stalled frame holds 90 KiB"
        );

        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut r = FrameReader::new(rx, memory.clone(), host_frame_memory());
        tx.write_all(&framed(&vec![1u8; 80 << 10])).await.unwrap();
        let t0 = std::time::Instant::now();
        let f = r.next().await.unwrap().unwrap();
        assert_eq!(f.body.len(), 80 << 10);
        assert!(
            t0.elapsed() >= Duration::from_millis(150),
            "read before the stalled frame gave its memory back"
        );
        assert_eq!(stalled_task.await.unwrap(), Some(true));
        drop(f);
        assert_eq!(memory.available_permits(), 100);
    }

    /// A host's share comes first: with its share taken by its own stalled frame, the
    /// host's next large frame waits, while another host's is read at once from the
    /// server's budget that is left.
    #[tokio::test]
    async fn one_hosts_stalled_frames_wait_for_its_own_share() {
        let server = Arc::new(Semaphore::new(200)); // KiB
        let (host_a, host_b) = (Arc::new(Semaphore::new(100)), Arc::new(Semaphore::new(100)));
        let (mut stalled_tx, stalled_rx) = tokio::io::duplex(1 << 20);
        let mut stalled = FrameReader::new(stalled_rx, server.clone(), host_a.clone())
            .with_deadline(Duration::from_millis(300));
        stalled_tx
            .write_all(&(90u32 << 10).to_be_bytes())
            .await
            .unwrap();
        stalled_tx.write_all(&[0u8; 1000]).await.unwrap();
        let stalled_task = tokio::spawn(async move { stalled.next().await.map(|r| r.is_err()) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            (host_a.available_permits(), server.available_permits()),
            (10, 110)
        );

        // Host A's next large frame waits for A's share...
        let (mut a_tx, a_rx) = tokio::io::duplex(1 << 20);
        let mut a = FrameReader::new(a_rx, server.clone(), host_a.clone());
        a_tx.write_all(&framed(&vec![1u8; 80 << 10])).await.unwrap();
        let a_task = tokio::spawn(async move {
            let t0 = std::time::Instant::now();
            let f = a.next().await.unwrap().unwrap();
            (f.body.len(), t0.elapsed())
        });
        // ...while host B's is read at once.
        let (mut b_tx, b_rx) = tokio::io::duplex(1 << 20);
        let mut b = FrameReader::new(b_rx, server.clone(), host_b.clone());
        b_tx.write_all(&framed(&vec![2u8; 80 << 10])).await.unwrap();
        let t0 = std::time::Instant::now();
        let f = b.next().await.unwrap().unwrap();
        assert_eq!(f.body.len(), 80 << 10);
        assert!(
            t0.elapsed() < Duration::from_millis(150),
            "host B waited for host A"
        );
        let (len, waited) = a_task.await.unwrap();
        assert_eq!(len, 80 << 10);
        assert!(
            waited >= Duration::from_millis(150),
            "host A passed its share"
        );
        assert_eq!(stalled_task.await.unwrap(), Some(true));
        drop(f);
        assert_eq!(
            (
                host_a.available_permits(),
                host_b.available_permits(),
                server.available_permits()
            ),
            (100, 100, 200)
        );
    }
}
