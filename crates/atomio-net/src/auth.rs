//! Shared-secret authentication of connections.
//!
//! A server started with a token (`--token-file`, `ATOMIO_TOKEN`, `ATOMIO_TOKEN_FILE`;
//! required on any non-loopback address) admits a connection only after a challenge:
//!
//! ```text
//! client → AuthStart            server → Challenge { nonce }   (32 random bytes)
//! client → Auth { mac }         server → Done, or Unauthorized and close
//! mac = HMAC-SHA256(token, "atomio-auth-v1" ‖ nonce)
//! ```
//!
//! The token itself never crosses the network and a recorded answer is useless for another
//! nonce. A server without a token answers `AuthStart` with `Done`, so a client with a token
//! talks to both. This authenticates, it does not encrypt: on networks with eavesdroppers
//! that matter, run atomio inside a secured network (TLS is not built yet).
//!
//! **Invariants:** no frame of an unauthenticated connection reaches a service; the MAC is
//! compared in constant time; a handshake takes at most `HANDSHAKE_DEADLINE`.

use atomio_proto::{ErrorCode, WireError};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;

/// Time a new connection has to authenticate.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// Shortest token accepted (bytes).
pub const MIN_TOKEN_BYTES: usize = 16;
const CONTEXT: &[u8] = b"atomio-auth-v1";

/// A shared secret.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)") // never print the secret
    }
}

impl Token {
    /// A token from its text (surrounding whitespace ignored).
    pub fn new(text: &str) -> Result<Self, WireError> {
        let t = text.trim();
        if t.len() < MIN_TOKEN_BYTES {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "a token must have at least {MIN_TOKEN_BYTES} characters (this one has {})",
                    t.len()
                ),
            ));
        }
        Ok(Self(t.as_bytes().to_vec()))
    }

    /// Reads a token file (its first line).
    pub fn from_file(path: &std::path::Path) -> Result<Self, WireError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            WireError::new(
                ErrorCode::InvalidArgument,
                format!("reading the token file {}: {e}", path.display()),
            )
        })?;
        Self::new(text.lines().next().unwrap_or(""))
    }

    /// `ATOMIO_TOKEN` (the secret itself), else `ATOMIO_TOKEN_FILE`, else none.
    pub fn from_env() -> Result<Option<Self>, WireError> {
        if let Ok(t) = std::env::var("ATOMIO_TOKEN") {
            if !t.trim().is_empty() {
                return Self::new(&t).map(Some);
            }
        }
        match std::env::var_os("ATOMIO_TOKEN_FILE") {
            Some(p) if !p.is_empty() => Self::from_file(std::path::Path::new(&p)).map(Some),
            _ => Ok(None),
        }
    }

    /// A fresh random token (hex), e.g. one per MPI job.
    pub fn generate() -> Self {
        use rand::RngCore;
        let mut b = [0u8; 24];
        rand::rngs::OsRng.fill_bytes(&mut b);
        Self(
            b.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<String>()
                .into_bytes(),
        )
    }

    /// The token's text.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    fn mac(&self) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(CONTEXT);
        m
    }

    /// The answer to `nonce`.
    pub fn answer(&self, nonce: &[u8; 32]) -> [u8; 32] {
        let mut m = self.mac();
        m.update(nonce);
        m.finalize().into_bytes().into()
    }

    /// Whether `mac` answers `nonce` (constant time).
    pub fn verify(&self, nonce: &[u8; 32], mac: &[u8; 32]) -> bool {
        let mut m = self.mac();
        m.update(nonce);
        m.verify_slice(mac).is_ok()
    }
}

/// A fresh challenge.
pub fn nonce() -> [u8; 32] {
    use rand::RngCore;
    let mut n = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

/// The error a server sends an unauthenticated peer before closing.
pub fn refused(why: &str) -> WireError {
    WireError::new(
        ErrorCode::Unauthorized,
        format!(
            "{why}: this server requires a token (set ATOMIO_TOKEN or ATOMIO_TOKEN_FILE to \
             the server's)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_token_answers_a_challenge() {
        let t = Token::new("correct horse battery staple").unwrap();
        let other = Token::new("correct horse battery stapler").unwrap();
        let n = nonce();
        assert!(t.verify(&n, &t.answer(&n)));
        assert!(!t.verify(&n, &other.answer(&n)));
        assert!(
            !t.verify(&nonce(), &t.answer(&n)),
            "an answer is bound to its nonce"
        );
    }

    #[test]
    fn short_tokens_are_refused_and_never_printed() {
        assert!(Token::new("short").is_err());
        let t = Token::generate();
        assert_eq!(t.expose().len(), 48);
        assert_eq!(format!("{t:?}"), "Token(..)");
    }
}

/// Largest handshake frame accepted (an `Auth` is ~40 bytes).
const HANDSHAKE_FRAME: usize = 256;

/// The I/O of a handshake, over any byte stream (async for the transports, blocking for the
/// lease keeper's connection): write one frame, read one frame.
mod wire {
    use super::HANDSHAKE_FRAME;
    use atomio_proto::frame::{encode, frame_length, LENGTH_BYTES};
    use atomio_proto::{decode, ErrorCode, WireError};
    use serde::de::DeserializeOwned;
    use serde::Serialize;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

    fn io(e: std::io::Error) -> WireError {
        WireError::new(ErrorCode::Disconnected, format!("authentication: {e}"))
    }

    fn check_len(len: usize) -> Result<usize, WireError> {
        if len > HANDSHAKE_FRAME {
            return Err(WireError::new(
                ErrorCode::Malformed,
                format!("a {len}-byte frame during authentication"),
            ));
        }
        Ok(len)
    }

    pub async fn send<T: Serialize, W: AsyncWrite + Unpin>(
        w: &mut W,
        msg: &T,
    ) -> Result<(), WireError> {
        let mut buf = Vec::new();
        encode(msg, &mut buf)?;
        w.write_all(&buf).await.map_err(io)
    }

    /// The frame's body, decoded (or the decode error with the raw body for its tag).
    pub async fn recv<T: DeserializeOwned, R: AsyncRead + Unpin>(
        r: &mut R,
    ) -> Result<(Result<T, WireError>, Vec<u8>), WireError> {
        let mut len = [0u8; LENGTH_BYTES];
        r.read_exact(&mut len).await.map_err(io)?;
        let n = check_len(frame_length(&len).unwrap_or(usize::MAX))?;
        let mut body = vec![0u8; n];
        r.read_exact(&mut body).await.map_err(io)?;
        Ok((decode(&body), body))
    }

    pub fn send_blocking<T: Serialize>(
        w: &mut impl std::io::Write,
        msg: &T,
    ) -> Result<(), WireError> {
        let mut buf = Vec::new();
        encode(msg, &mut buf)?;
        w.write_all(&buf).map_err(io)
    }

    pub fn recv_blocking<T: DeserializeOwned>(r: &mut impl std::io::Read) -> Result<T, WireError> {
        let mut len = [0u8; LENGTH_BYTES];
        r.read_exact(&mut len).map_err(io)?;
        let n = check_len(frame_length(&len).unwrap_or(usize::MAX))?;
        let mut body = vec![0u8; n];
        r.read_exact(&mut body).map_err(io)?;
        decode(&body)
    }
}

use atomio_proto::{ClientFrame, Reply, Request, ServerFrame};

/// Tag of the handshake's frames.
const AUTH_TAG: u64 = u64::MAX - 1;

/// The client's next frame after `reply` to `AuthStart`; `None` when authenticated.
fn client_step(token: &Token, reply: Reply) -> Result<Option<ClientFrame>, WireError> {
    match reply {
        Reply::Done => Ok(None),
        Reply::Challenge { nonce } => Ok(Some(ClientFrame {
            tag: AUTH_TAG,
            request: Request::Auth {
                mac: token.answer(&nonce),
            },
        })),
        Reply::Error(e) => Err(e),
        other => Err(WireError::new(
            ErrorCode::Malformed,
            format!("unexpected answer during authentication: {other:?}"),
        )),
    }
}

fn start() -> ClientFrame {
    ClientFrame {
        tag: AUTH_TAG,
        request: Request::AuthStart,
    }
}

/// Client side, on a new async stream: proves `token` (or learns none is needed).
pub async fn client_handshake<S>(stream: &mut S, token: &Token) -> Result<(), WireError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let run = async {
        wire::send(stream, &start()).await?;
        let mut reply = wire::recv::<ServerFrame, _>(stream).await?.0?.reply;
        while let Some(next) = client_step(token, reply)? {
            wire::send(stream, &next).await?;
            reply = wire::recv::<ServerFrame, _>(stream).await?.0?.reply;
        }
        Ok(())
    };
    tokio::time::timeout(HANDSHAKE_DEADLINE, run)
        .await
        .map_err(|_| WireError::new(ErrorCode::Timeout, "authentication timed out"))?
}

/// Client side, blocking (the stream's own timeouts bound it).
pub fn client_handshake_blocking<S>(stream: &mut S, token: &Token) -> Result<(), WireError>
where
    S: std::io::Read + std::io::Write,
{
    wire::send_blocking(stream, &start())?;
    let mut reply = wire::recv_blocking::<ServerFrame>(stream)?.reply;
    while let Some(next) = client_step(token, reply)? {
        wire::send_blocking(stream, &next)?;
        reply = wire::recv_blocking::<ServerFrame>(stream)?.reply;
    }
    Ok(())
}

/// Server side, on a new connection: `Ok` once the peer proved `token`. On `Err` the peer
/// has been told why (when it can be) and the caller closes the connection.
pub async fn server_handshake<S>(stream: &mut S, token: &Token) -> Result<(), WireError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let run = async {
        let (first, body) = wire::recv::<ClientFrame, _>(stream).await.map_err(|e| {
            // A large first frame: a client without a token starting its work.
            match e.code {
                ErrorCode::Malformed => (0, refused("the first request was not AuthStart")),
                _ => (0, e),
            }
        })?;
        let tag = atomio_proto::frame::peek_tag(&body).unwrap_or(0);
        let first = match first {
            Ok(ClientFrame {
                request: Request::AuthStart,
                tag,
            }) => tag,
            _ => return Err((tag, refused("the first request was not AuthStart"))),
        };
        let n = nonce();
        let challenge = ServerFrame {
            tag: first,
            reply: Reply::Challenge { nonce: n },
        };
        wire::send(stream, &challenge).await.map_err(|e| (0, e))?;
        let (answer, body) = wire::recv::<ClientFrame, _>(stream)
            .await
            .map_err(|e| (0, e))?;
        let tag = atomio_proto::frame::peek_tag(&body).unwrap_or(0);
        match answer {
            Ok(ClientFrame {
                request: Request::Auth { mac },
                tag,
            }) if token.verify(&n, &mac) => {
                let done = ServerFrame {
                    tag,
                    reply: Reply::Done,
                };
                wire::send(stream, &done).await.map_err(|e| (0, e))
            }
            _ => Err((tag, refused("wrong token"))),
        }
    };
    let outcome = match tokio::time::timeout(HANDSHAKE_DEADLINE, run).await {
        Ok(r) => r,
        Err(_) => Err((0, refused("no authentication within the deadline"))),
    };
    if let Err((tag, e)) = outcome {
        if e.code == ErrorCode::Unauthorized {
            let told = ServerFrame {
                tag,
                reply: Reply::Error(e.clone()),
            };
            let _ =
                tokio::time::timeout(std::time::Duration::from_secs(1), wire::send(stream, &told))
                    .await;
        }
        return Err(e);
    }
    Ok(())
}

/// A server may listen beyond loopback only with a token: anyone who reaches the port
/// could otherwise take, hold and break locks and overwrite data.
pub fn check_listen(addr: std::net::SocketAddr, token: Option<&Token>) -> Result<(), WireError> {
    if addr.ip().is_loopback() || token.is_some() {
        return Ok(());
    }
    Err(WireError::new(
        ErrorCode::Unauthorized,
        format!(
            "refusing to listen on {addr} without a token: any host that reaches it could \
             take locks and overwrite data. Give one (--token-file, ATOMIO_TOKEN or \
             ATOMIO_TOKEN_FILE; the same for every server and client of the job) or listen \
             on loopback"
        ),
    ))
}
