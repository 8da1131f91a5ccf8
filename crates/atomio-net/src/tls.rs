//! TLS, for networks with eavesdroppers (optional; `auth` authenticates, this encrypts).
//!
//! A server given a certificate and its key (`atomio server --tls-cert/--tls-key`, or
//! `ATOMIO_TLS_CERT`/`ATOMIO_TLS_KEY`, PEM files) speaks only TLS: a plain client's bytes
//! fail the handshake and the connection is closed. A client given the certificate to trust
//! (`ATOMIO_TLS_CA`, PEM: the server's own self-signed certificate or the CA that signed it)
//! connects with TLS and checks the server's name against the certificate (an IP address
//! for `host:port` addresses with an IP, else the DNS name). The token handshake runs inside
//! TLS. rustls with the ring provider; TLS 1.2 and 1.3.
//!
//! **Invariants:** a server with TLS never reads an application frame from a peer that did
//! not complete the handshake; a client with a CA never sends a frame over an unverified
//! connection.

use atomio_proto::{ErrorCode, WireError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub use tokio_rustls::{TlsAcceptor, TlsConnector};

fn bad(what: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::InvalidArgument, what.to_string())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, WireError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| bad(format!("reading certificates from {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(bad(format!("{} holds no PEM certificate", path.display())));
    }
    Ok(certs)
}

/// A server's TLS from its certificate chain and private key (PEM files).
pub fn server(cert: &Path, key: &Path) -> Result<TlsAcceptor, WireError> {
    let chain = certificates(cert)?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| bad(format!("reading the private key {}: {e}", key.display())))?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(bad)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| bad(format!("certificate and key: {e}")))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The server's TLS as `ATOMIO_TLS_CERT` and `ATOMIO_TLS_KEY` say (both or neither).
pub fn server_from_env() -> Result<Option<TlsAcceptor>, WireError> {
    let cert = std::env::var_os("ATOMIO_TLS_CERT");
    let key = std::env::var_os("ATOMIO_TLS_KEY");
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(c), Some(k)) => server(Path::new(&c), Path::new(&k)).map(Some),
        _ => Err(bad(
            "set both ATOMIO_TLS_CERT and ATOMIO_TLS_KEY, or neither",
        )),
    }
}

/// A client's TLS trusting the certificates in `ca` (PEM).
pub fn client(ca: &Path) -> Result<TlsConnector, WireError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certificates(ca)? {
        roots
            .add(c)
            .map_err(|e| bad(format!("{}: {e}", ca.display())))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(bad)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The client's TLS as `ATOMIO_TLS_CA` says (`None`: plain TCP).
pub fn client_from_env() -> Result<Option<TlsConnector>, WireError> {
    std::env::var_os("ATOMIO_TLS_CA")
        .map(|ca| client(Path::new(&ca)))
        .transpose()
}

/// The name a server at `addr` (`host:port`) must prove: its IP address or DNS name.
pub fn server_name(addr: &str) -> Result<ServerName<'static>, WireError> {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| bad(format!("server name {host:?}: {e}")))
}

/// A TCP socket whose vectored writes are plain writes. std and tokio write a TCP socket
/// with `send(MSG_NOSIGNAL)` but a vectored write with `writev`, which raises `SIGPIPE` when
/// the peer has gone — fatal in a C program that does not ignore it (the MPI library's
/// ranks; found by the MPI suite's TLS step) — and rustls writes vectored.
pub struct NoSigPipe<S>(pub S);

/// What a vectored write becomes: a plain write of its first non-empty buffer (a short
/// write, which every caller of `write_vectored` handles).
fn first_nonempty<'a>(bufs: &'a [std::io::IoSlice<'_>]) -> &'a [u8] {
    bufs.iter()
        .find(|b| !b.is_empty())
        .map_or(&[][..], |b| &b[..])
}

impl<S: AsyncRead + Unpin> AsyncRead for NoSigPipe<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for NoSigPipe<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.poll_write(cx, first_nonempty(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        false
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: std::io::Read> std::io::Read for NoSigPipe<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl<S: std::io::Write> std::io::Write for NoSigPipe<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        self.0.write(first_nonempty(bufs))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// A blocking client connection over TLS (the lease keeper's), on `tcp`.
pub fn blocking(
    connector: &TlsConnector,
    addr: &str,
    tcp: std::net::TcpStream,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, NoSigPipe<std::net::TcpStream>>, WireError>
{
    let conn = rustls::ClientConnection::new(connector.config().clone(), server_name(addr)?)
        .map_err(|e| WireError::new(ErrorCode::Disconnected, format!("{addr}: TLS: {e}")))?;
    let mut s = rustls::StreamOwned::new(conn, NoSigPipe(tcp));
    // Complete the handshake now, so a bad certificate is this call's error.
    while s.conn.is_handshaking() {
        s.conn
            .complete_io(&mut s.sock)
            .map_err(|e| WireError::new(ErrorCode::Disconnected, format!("{addr}: TLS: {e}")))?;
    }
    Ok(s)
}
