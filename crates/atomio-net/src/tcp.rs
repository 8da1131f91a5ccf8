//! TCP transport: length-prefixed versioned frames (see `atomio_proto::frame`) over
//! `TcpStream`s, for both the server side (`serve`) and the client side (`connect`).
//!
//! Each connection has a reader and a writer running in one task, so when either ends the
//! socket closes. Writers batch every frame already queued into one `write_all` (one system
//! call for thousands of small lock messages) and give up on a peer that accepts nothing for
//! `WRITE_STALL`.
//!
//! **Invariants:** a frame that cannot be decoded is answered with an error on its tag (or
//! tag 0 when even the tag is unreadable) and the connection stays usable; an oversized or
//! truncated frame, or an unsupported protocol version, gets an error and the connection is
//! closed (the byte stream can no longer be trusted); nothing a peer sends can panic the
//! process.

use crate::actor::{ClientEvent, Event, ReplySink, ServerHandle};
use crate::auth::Token;
use crate::frame_reader::{frame_memory, host_frame_memory, FrameReader, SMALL_FRAME};
use crate::reply_budget::{expected_reply_bytes, ReplyBudget};
use atomio_layout::ServerId;
use atomio_proto::frame::{encode, peek_tag};
use atomio_proto::limits::MAX_FRAME_BYTES;
use atomio_proto::{decode, ClientFrame, ErrorCode, Reply, ServerFrame, WireError};
use futures::StreamExt;
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::sync::Semaphore;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

/// A peer that accepts no bytes for this long is dropped.
pub const WRITE_STALL: Duration = Duration::from_secs(30);
/// Bytes batched into one write.
const BATCH_BYTES: usize = 1 << 20;

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .big_endian()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// Serves clients on `listener` until the listener fails; with a `token`, only clients
/// that prove it (see `auth`). Connections are accepted at once but served only from
/// `serve_from` on (a restarted server's grace period, see `grace`).
pub async fn serve(
    listener: TcpListener,
    server: ServerHandle,
    token: Option<Token>,
    serve_from: Option<tokio::time::Instant>,
    tls: Option<crate::tls::TlsAcceptor>,
) -> std::io::Result<()> {
    let token = token.map(Arc::new);
    let memory = frame_memory();
    let per_host = Arc::new(PerHost::from_env());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors and the like: keep serving the connections we have.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Some(slot) = per_host.take(peer.ip()) else {
            tracing::warn!(
                %peer,
                "connection refused: {} connections from this host already",
                per_host.cap
            );
            tokio::spawn(refuse(stream, per_host.cap));
            continue;
        };
        let memory = (memory.clone(), slot.memory.clone());
        let (server, token, tls) = (server.clone(), token.clone(), tls.clone());
        tokio::spawn(async move {
            let _slot = slot;
            if let Some(t) = serve_from {
                tokio::time::sleep_until(t).await;
            }
            let Some(tls) = tls else {
                let mut stream = stream;
                if authenticated(&mut stream, peer, token).await {
                    let (rd, wr) = stream.into_split();
                    serve_connection(rd, wr, peer, server, memory).await;
                }
                return;
            };
            let accepted = tokio::time::timeout(
                crate::auth::HANDSHAKE_DEADLINE,
                tls.accept(crate::tls::NoSigPipe(stream)),
            )
            .await;
            match accepted {
                Ok(Ok(mut stream)) => {
                    if authenticated(&mut stream, peer, token).await {
                        let (rd, wr) = tokio::io::split(stream);
                        serve_connection(rd, wr, peer, server, memory).await;
                    }
                }
                Ok(Err(e)) => tracing::warn!(%peer, "connection refused: TLS handshake: {e}"),
                Err(_) => tracing::warn!(%peer, "connection refused: TLS handshake timed out"),
            }
        });
    }
}

/// Connections per peer address (see `MAX_CONNECTIONS_PER_HOST`) and each host's share of
/// the partial-frame memory (`PARTIAL_FRAME_BYTES_PER_HOST`), kept while it has connections.
struct PerHost {
    cap: usize,
    open: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, (usize, Arc<Semaphore>)>>,
}

/// One connection's place in its host's count, given back on drop.
struct HostSlot {
    hosts: Arc<PerHost>,
    ip: std::net::IpAddr,
    memory: Arc<Semaphore>,
}

impl PerHost {
    fn from_env() -> Self {
        let cap = std::env::var("ATOMIO_MAX_CONNECTIONS_PER_HOST")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(atomio_proto::limits::MAX_CONNECTIONS_PER_HOST)
            .max(1);
        Self {
            cap,
            open: Default::default(),
        }
    }

    fn take(self: &Arc<Self>, ip: std::net::IpAddr) -> Option<HostSlot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let (n, memory) = open.entry(ip).or_insert_with(|| (0, host_frame_memory()));
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(HostSlot {
            hosts: self.clone(),
            ip,
            memory: memory.clone(),
        })
    }
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        let mut open = self.hosts.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((n, _)) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Tells a peer over its host's connection limit why, then closes.
async fn refuse(stream: TcpStream, cap: usize) {
    let e = WireError::new(
        ErrorCode::LimitExceeded,
        format!("this host already has {cap} connections to the server, its limit"),
    );
    refuse_and_close(stream, e).await
}

/// Sends `e` on tag 0 (for at most a second) and closes the connection (the caller drops
/// the stream: its descriptor and slots go with it).
async fn refuse_and_close<W: AsyncWrite + Unpin>(mut wr: W, e: WireError) {
    let frame = ServerFrame {
        tag: 0,
        reply: Reply::Error(e),
    };
    let mut buf = Vec::new();
    if encode(&frame, &mut buf).is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            wr.write_all(&buf).await?;
            wr.shutdown().await
        })
        .await;
    }
}

/// Whether the peer proved the token (or none is required).
async fn authenticated<S>(
    stream: &mut S,
    peer: std::net::SocketAddr,
    token: Option<Arc<Token>>,
) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Some(token) = token else { return true };
    match crate::auth::server_handshake(stream, &token).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(%peer, "connection refused: {e}");
            false
        }
    }
}

async fn serve_connection<R, W>(
    rd: R,
    wr: W,
    peer: std::net::SocketAddr,
    server: ServerHandle,
    // The server's partial-frame budget and the peer's host's share.
    (memory, host_memory): (Arc<Semaphore>, Arc<Semaphore>),
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some(_client_slot) = server.admit_client() else {
        let max = server.max_clients();
        tracing::warn!(%peer, "connection refused: the server serves {max} clients, its limit");
        let e = WireError::new(
            ErrorCode::LimitExceeded,
            format!("the server serves {max} clients, its limit; this connection is closed"),
        );
        return refuse_and_close(wr, e).await;
    };
    let client = server.new_client_id();
    tracing::info!(%peer, ?client, "client connected");
    let (tx, rx) = mpsc::unbounded_channel::<ServerFrame>();
    let queued = Arc::new(AtomicUsize::new(0));
    let connected = Event::Connected {
        client,
        sink: ReplySink::Connection(tx.clone()),
        queued: queued.clone(),
    };
    if server.send(connected).await.is_err() {
        return;
    }
    let budget = Arc::new(ReplyBudget::default());
    let written = {
        let budget = budget.clone();
        move |f: &ServerFrame| budget.release(f.tag)
    };
    let mut writer = std::pin::pin!(write_loop(wr, rx, Some(queued.clone()), written));
    let direct = Direct {
        tx: &tx,
        queued: &queued,
    };
    let ended = tokio::select! {
        why = read_client_frames(FrameReader::new(rd, memory, host_memory), client, &server, direct, &budget) => Some(why),
        () = &mut writer => None,
    };
    let why = ended
        .as_deref()
        .unwrap_or("it accepted no replies (or the socket failed)");
    tracing::info!(%peer, ?client, "client disconnected: {why}");
    let reader_done = ended.is_some();
    let _ = server.send(Event::Disconnected { client }).await;
    drop(tx);
    if reader_done {
        // Let the writer flush the last replies (e.g. the error that closed the stream).
        let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    }
}

/// Replies the reader sends itself (errors about frames it could not decode), counted like
/// the actor's so the writer's accounting stays exact.
#[derive(Clone, Copy)]
struct Direct<'a> {
    tx: &'a mpsc::UnboundedSender<ServerFrame>,
    queued: &'a AtomicUsize,
}

impl Direct<'_> {
    fn error(&self, tag: u64, e: WireError) {
        self.queued.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(ServerFrame {
            tag,
            reply: Reply::Error(e),
        });
    }
}

async fn read_client_frames<R: AsyncRead + Unpin>(
    mut frames: FrameReader<R>,
    client: atomio_proto::ClientId,
    server: &ServerHandle,
    direct: Direct<'_>,
    budget: &ReplyBudget,
) -> String {
    while let Some(item) = frames.next().await {
        let frame = match item {
            Ok(f) => f,
            Err(e) => {
                let why = e.to_string();
                direct.error(frames.error_tag(), e);
                return why;
            }
        };
        // A large frame is decoded on a blocking thread, never on the runtime's (which runs
        // the lock service: a 64 MiB frame took seconds there, and every client waited).
        // Its memory permits are held until it is decoded; lists over their limits are
        // refused from their counts while decoding (`atomio_proto::bounded`).
        let (decoded, frame) = if frame.body.len() > SMALL_FRAME {
            let work = move || (decode::<ClientFrame>(&frame.body), frame);
            match tokio::task::spawn_blocking(work).await {
                Ok(done) => done,
                Err(_) => return "the server is stopping".into(),
            }
        } else {
            (decode::<ClientFrame>(&frame.body), frame)
        };
        let bytes = &frame.body;
        match decoded {
            Ok(f) => {
                drop(frame); // its bytes and memory permits
                             // Stops reading this client while the replies it has coming exceed its
                             // budget (see `reply_budget`).
                budget
                    .reserve(f.tag, expected_reply_bytes(&f.request))
                    .await;
                let ev = Event::Frame {
                    client,
                    tag: f.tag,
                    request: f.request,
                };
                if server.send(ev).await.is_err() {
                    return "the server is stopping".into();
                }
            }
            Err(e) => {
                // Another version's body cannot be read at all, not even its tag.
                let fatal = e.code == ErrorCode::Version;
                let tag = if fatal {
                    0
                } else {
                    peek_tag(bytes).unwrap_or(0)
                };
                let why = e.to_string();
                direct.error(tag, e);
                if fatal {
                    return why;
                }
            }
        }
    }
    "closed by the client".into()
}

/// Drains `rx` into the socket, batching; ends when `rx` closes or the peer stalls.
/// `written` is called for each message once it is on the wire.
async fn write_loop<T: Serialize, W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::UnboundedReceiver<T>,
    queued: Option<Arc<AtomicUsize>>,
    mut written: impl FnMut(&T),
) {
    let mut buf = Vec::with_capacity(64 << 10);
    let mut batch = Vec::new();
    while let Some(msg) = rx.recv().await {
        if let Err(e) = encode(&msg, &mut buf) {
            tracing::error!("dropping an unencodable message: {e}");
        }
        batch.push(msg);
        while buf.len() < BATCH_BYTES {
            match rx.try_recv() {
                Ok(m) => {
                    if let Err(e) = encode(&m, &mut buf) {
                        tracing::error!("dropping an unencodable message: {e}");
                    }
                    batch.push(m);
                }
                Err(_) => break,
            }
        }
        match tokio::time::timeout(WRITE_STALL, wr.write_all(&buf)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
        if let Some(q) = &queued {
            q.fetch_sub(batch.len(), Ordering::Relaxed);
        }
        batch.drain(..).for_each(|m| written(&m));
        buf.clear();
    }
    let _ = wr.shutdown().await;
}

/// A client-side connection to one server: frames go out through the returned sender
/// (count each in the returned counter: the writer subtracts what it has written, so a
/// client can wait until its frames are on the wire); replies (and the loss of the
/// connection) arrive on `events` tagged with `server`.
pub async fn connect(
    addr: &str,
    server: ServerId,
    events: mpsc::UnboundedSender<ClientEvent>,
) -> Result<(mpsc::UnboundedSender<ClientFrame>, Arc<AtomicUsize>), WireError> {
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
        .await
        .map_err(|_| {
            WireError::new(
                ErrorCode::Timeout,
                format!("connecting to {addr} timed out"),
            )
        })?
        .map_err(|e| {
            WireError::new(
                ErrorCode::Disconnected,
                format!("cannot connect to {addr}: {e}"),
            )
        })?;
    let _ = stream.set_nodelay(true);
    let token = Token::from_env()?;
    match crate::tls::client_from_env()? {
        None => {
            let mut stream = stream;
            client_authenticate(&mut stream, addr, token.as_ref()).await?;
            let (rd, wr) = stream.into_split();
            Ok(spawn_connection(rd, wr, addr, server, events))
        }
        Some(tls) => {
            let name = crate::tls::server_name(addr)?;
            let mut stream = tokio::time::timeout(
                crate::auth::HANDSHAKE_DEADLINE,
                tls.connect(name, crate::tls::NoSigPipe(stream)),
            )
            .await
            .map_err(|_| {
                WireError::new(
                    ErrorCode::Timeout,
                    format!("{addr}: TLS handshake timed out"),
                )
            })?
            .map_err(|e| WireError::new(ErrorCode::Disconnected, format!("{addr}: TLS: {e}")))?;
            client_authenticate(&mut stream, addr, token.as_ref()).await?;
            let (rd, wr) = tokio::io::split(stream);
            Ok(spawn_connection(rd, wr, addr, server, events))
        }
    }
}

async fn client_authenticate<S>(
    stream: &mut S,
    addr: &str,
    token: Option<&Token>,
) -> Result<(), WireError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if let Some(token) = token {
        crate::auth::client_handshake(stream, token)
            .await
            .map_err(|e| WireError::new(e.code, format!("{addr}: {}", e.message)))?;
    }
    Ok(())
}

/// Runs a client connection's reader and writer; see `connect`.
fn spawn_connection<R, W>(
    rd: R,
    wr: W,
    addr: &str,
    server: ServerId,
    events: mpsc::UnboundedSender<ClientEvent>,
) -> (mpsc::UnboundedSender<ClientFrame>, Arc<AtomicUsize>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel::<ClientFrame>();
    let unsent = Arc::new(AtomicUsize::new(0));
    let counter = unsent.clone();
    let addr = addr.to_string();
    tokio::spawn(async move {
        let reader = read_server_frames(rd, server, &events);
        let writer = write_loop(wr, rx, Some(counter), |_: &ClientFrame| {});
        let why = tokio::select! {
            why = reader => why,
            () = writer => format!("connection to {addr} closed while sending"),
        };
        let _ = events.send(ClientEvent::Lost(
            server,
            WireError::new(ErrorCode::Disconnected, why),
        ));
    });
    (tx, unsent)
}

async fn read_server_frames<R: AsyncRead + Unpin>(
    rd: R,
    server: ServerId,
    events: &mpsc::UnboundedSender<ClientEvent>,
) -> String {
    let mut frames = FramedRead::new(rd, codec());
    while let Some(item) = frames.next().await {
        match item
            .map_err(|e| e.to_string())
            .and_then(|b| decode::<ServerFrame>(&b).map_err(|e| e.to_string()))
        {
            Ok(f) => {
                if events.send(ClientEvent::Frame(server, f)).is_err() {
                    return "client dropped".into();
                }
            }
            Err(e) => return format!("{server} sent an unreadable frame: {e}"),
        }
    }
    format!("{server} closed the connection")
}
