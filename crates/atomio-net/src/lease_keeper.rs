//! The client's lease keeper: a thread of its own that renews this client's lease at every
//! server that keeps leases, over a small blocking connection of its own per server.
//!
//! Why not renew on the client's connections: their tasks run on the caller's runtime,
//! which does not run while the caller is busy — in a long `pwrite` under its locks (direct
//! placement), or in C code between calls (MPI). A lease must outlive those, and must *not*
//! outlive the process: a `SIGSTOP`ped or killed process stops this thread too, so its
//! leases lapse and the servers fence it.
//!
//! The keeper also tells the client how long its leases are surely still valid (`check`):
//! a server's lease runs from when it *received* a renewal, which is after the keeper
//! *sent* it, so `sent + lease` is a safe lower bound without synchronized clocks.
//!
//! **Invariants:** `check` fails once any lease may have lapsed (its last acknowledged
//! renewal was sent more than `VALID_FRACTION` of the lease ago) or a server said it did;
//! the thread never holds a lock while doing I/O; it ends when the client is dropped.

use atomio_proto::frame::{encode, frame_length, LENGTH_BYTES};
use atomio_proto::limits::MAX_FRAME_BYTES;
use atomio_proto::{
    decode, ClientFrame, ClientId, ErrorCode, Reply, Request, ServerFrame, WireError,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The share of a lease after which the client no longer trusts it for starting I/O.
const VALID_FRACTION: (u32, u32) = (3, 4);
/// Renewals per lease.
const RENEWALS_PER_LEASE: u32 = 5;

/// This client's session at one server, as `Hello` returned it.
#[derive(Clone, Copy, Debug)]
pub struct Session {
    pub client: ClientId,
    pub proof: u64,
    pub lease: Duration,
    /// When the `Hello` that opened the session was sent (the lease runs from after it).
    pub opened: Instant,
}

#[derive(Debug)]
struct ServerLease {
    addr: String,
    session: Session,
    /// Send time of the last renewal the server acknowledged.
    renewed: Instant,
    /// The server said the lease is gone.
    lost: Option<WireError>,
}

pub struct LeaseKeeper {
    leases: Arc<Vec<Mutex<ServerLease>>>,
    /// Dropping it ends the thread.
    _stop: std::sync::mpsc::Sender<()>,
}

fn locked(m: &Mutex<ServerLease>) -> std::sync::MutexGuard<'_, ServerLease> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LeaseKeeper {
    /// Starts renewing `sessions` (server address, session); `None` if none has a lease.
    pub fn start(sessions: Vec<(String, Session)>) -> std::io::Result<Option<Self>> {
        let sessions: Vec<_> = sessions
            .into_iter()
            .filter(|(_, s)| !s.lease.is_zero())
            .collect();
        let Some(shortest) = sessions.iter().map(|(_, s)| s.lease).min() else {
            return Ok(None);
        };
        let leases: Arc<Vec<Mutex<ServerLease>>> = Arc::new(
            sessions
                .into_iter()
                .map(|(addr, session)| {
                    Mutex::new(ServerLease {
                        addr,
                        session,
                        renewed: session.opened,
                        lost: None,
                    })
                })
                .collect(),
        );
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let every = shortest / RENEWALS_PER_LEASE;
        let shared = leases.clone();
        std::thread::Builder::new()
            .name("atomio-lease".into())
            .spawn(move || renew_loop(&shared, every, &stopped))?;
        Ok(Some(Self {
            leases,
            _stop: stop,
        }))
    }

    /// The time `check` is worth waiting for when it fails only because no recent renewal
    /// was acknowledged (renewals delayed, e.g. by a restarted server's grace period): two
    /// renewal intervals of the shortest lease. A server that says the lease is gone
    /// fails at once.
    pub fn patience(&self) -> Option<Duration> {
        if self.leases.iter().any(|l| locked(l).lost.is_some()) {
            return None;
        }
        self.leases
            .iter()
            .map(|l| locked(l).session.lease * 2 / RENEWALS_PER_LEASE)
            .min()
    }

    /// Fails if any lease may have lapsed: then locks this client believes it holds may be
    /// someone else's by now, and it must not start I/O under them.
    pub fn check(&self) -> Result<(), WireError> {
        for l in self.leases.iter() {
            let l = locked(l);
            if let Some(e) = &l.lost {
                return Err(e.clone());
            }
            let valid = l.session.lease * VALID_FRACTION.0 / VALID_FRACTION.1;
            let since = l.renewed.elapsed();
            if since > valid {
                return Err(WireError::new(
                    ErrorCode::LeaseExpired,
                    format!(
                        "no renewal of the lease at {} acknowledged for {} ms (lease {} ms): \
                         this client's locks there may have been released",
                        l.addr,
                        since.as_millis(),
                        l.session.lease.as_millis()
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn renew_loop(
    leases: &[Mutex<ServerLease>],
    every: Duration,
    stopped: &std::sync::mpsc::Receiver<()>,
) {
    let mut conns: Vec<Option<Conn>> = (0..leases.len()).map(|_| None).collect();
    let mut tag = 0u64;
    loop {
        for (l, conn) in leases.iter().zip(conns.iter_mut()) {
            let (addr, session) = {
                let l = locked(l);
                if l.lost.is_some() {
                    continue;
                }
                (l.addr.clone(), l.session)
            };
            tag += 1;
            let sent = Instant::now();
            match renew(conn, &addr, &session, tag) {
                Ok(()) => locked(l).renewed = sent,
                Err(e) if e.code == ErrorCode::LeaseExpired || e.code == ErrorCode::NotFound => {
                    tracing::warn!("lease at {addr}: {e}");
                    locked(l).lost = Some(WireError::new(ErrorCode::LeaseExpired, e.message));
                }
                Err(e) => {
                    // A transient failure: reconnect on the next round; `check` notices if
                    // renewals stay away long enough to matter.
                    tracing::debug!("renewing the lease at {addr}: {e}");
                    *conn = None;
                }
            }
        }
        match stopped.recv_timeout(every) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// A renewal connection: plain TCP, or TLS over it (`ATOMIO_TLS_CA`).
trait ReadWrite: std::io::Read + std::io::Write + Send {}
impl<T: std::io::Read + std::io::Write + Send> ReadWrite for T {}
type Conn = Box<dyn ReadWrite>;

/// One renewal, answered within half a lease.
fn renew(
    conn: &mut Option<Conn>,
    addr: &str,
    session: &Session,
    tag: u64,
) -> Result<(), WireError> {
    let io = |e: std::io::Error| WireError::new(ErrorCode::Disconnected, format!("{addr}: {e}"));
    let limit = session.lease / 2;
    if conn.is_none() {
        use std::net::ToSocketAddrs;
        let sock = addr.to_socket_addrs().map_err(io)?.next().ok_or_else(|| {
            WireError::new(
                ErrorCode::InvalidArgument,
                format!("{addr} resolves to nothing"),
            )
        })?;
        let s = TcpStream::connect_timeout(&sock, limit).map_err(io)?;
        s.set_nodelay(true).map_err(io)?;
        s.set_read_timeout(Some(limit)).map_err(io)?;
        s.set_write_timeout(Some(limit)).map_err(io)?;
        let mut s: Conn = match crate::tls::client_from_env()? {
            Some(tls) => Box::new(crate::tls::blocking(&tls, addr, s)?),
            None => Box::new(s),
        };
        if let Some(token) = crate::auth::Token::from_env()? {
            crate::auth::client_handshake_blocking(&mut s, &token)?;
        }
        *conn = Some(s);
    }
    let s = conn.as_mut().expect("connected above");
    let mut buf = Vec::new();
    let frame = ClientFrame {
        tag,
        request: Request::Renew {
            client: session.client,
            proof: session.proof,
        },
    };
    encode(&frame, &mut buf)?;
    s.write_all(&buf).map_err(io)?;
    // Replies come in order on this connection; skip any stale one (an earlier renewal
    // that timed out).
    loop {
        let mut len = [0u8; LENGTH_BYTES];
        s.read_exact(&mut len).map_err(io)?;
        let n = frame_length(&len).unwrap_or(0);
        if n > MAX_FRAME_BYTES {
            return Err(WireError::new(ErrorCode::Malformed, "oversized reply"));
        }
        let mut body = vec![0u8; n];
        s.read_exact(&mut body).map_err(io)?;
        let reply: ServerFrame = decode(&body)?;
        if reply.tag != tag {
            continue;
        }
        return match reply.reply {
            Reply::Renewed => Ok(()),
            Reply::Error(e) => Err(e),
            other => Err(WireError::new(
                ErrorCode::Malformed,
                format!("unexpected answer to a renewal: {other:?}"),
            )),
        };
    }
}
