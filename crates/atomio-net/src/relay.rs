//! A delaying TCP relay: network round-trip time on one host.
//!
//! Over loopback a round trip costs almost nothing, so protocols that differ in how many
//! round trips sit on a call's critical path (a cached lock granted early vs. a lock that
//! waits for a revocation, a flush and a release) look alike, and only CPU cost separates
//! them. This machine's kernel has no `netem` qdisc, so the delay is added in user space:
//! a relay listens on loopback, connects to the real server for every connection it
//! accepts, and forwards each direction's bytes `rtt / 2` (± jitter) after they arrived.
//!
//! **Invariants:** bytes leave in the order they arrived (a chunk's due time is never
//! earlier than the previous chunk's, whatever the jitter: TCP does not reorder); a
//! chunk never leaves before its due time; a direction that ends (EOF or error) shuts
//! the peer's write side, so both ends see the close.
//!
//! Each direction of a connection is a reader thread and a writer thread joined by a
//! bounded channel (at most `MAX_QUEUED` chunks in flight: a peer that stops reading
//! stops the relay reading, as a network path would). Threads, not tasks: tokio's timer
//! wheel counts milliseconds, and the delays asked for are tens of microseconds. The
//! writer sleeps most of the wait and spins the last `SPIN` (timer slack would otherwise
//! add ~50–100 µs to every hop); the measured round trip is what `atomio relay` and the
//! benchmarks report, not the one asked for.

use rand::{Rng, SeedableRng};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Chunks queued per direction before the reader waits.
const MAX_QUEUED: usize = 256;
/// Bytes read at once.
const READ_SIZE: usize = 256 << 10;
/// The last part of a wait spent spinning instead of sleeping.
const SPIN: Duration = Duration::from_micros(80);

/// How much delay a relay adds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delay {
    /// Round-trip time added to a request and its answer (half each way).
    pub rtt: Duration,
    /// Each chunk's one-way delay varies by up to ± `jitter / 2` (order is kept).
    pub jitter: Duration,
}

impl Delay {
    pub fn rtt_us(rtt: u64, jitter: u64) -> Self {
        Self {
            rtt: Duration::from_micros(rtt),
            jitter: Duration::from_micros(jitter),
        }
    }

    fn one_way(&self, rng: &mut rand_chacha::ChaCha8Rng) -> Duration {
        let half = self.rtt / 2;
        if self.jitter.is_zero() {
            return half;
        }
        let j = self.jitter.as_nanos() as i64;
        let d = half.as_nanos() as i64 + rng.gen_range(-j / 2..=j / 2);
        Duration::from_nanos(d.max(0) as u64)
    }
}

/// A relay accepting on a loopback port and forwarding to one server (stopped when
/// dropped: it accepts nothing more; connections already relayed run until they close).
pub struct Relay {
    pub address: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Relay {
    /// Starts relaying `127.0.0.1:<ephemeral>` → `to` with `delay`.
    pub fn start(to: SocketAddr, delay: Delay) -> std::io::Result<Self> {
        Self::start_on("127.0.0.1:0", to, delay)
    }

    pub fn start_on(listen: &str, to: SocketAddr, delay: Delay) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen)?;
        let address = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::Builder::new()
            .name("atomio-relay".into())
            .spawn(move || {
                let mut seed = 0u64;
                for conn in listener.incoming() {
                    if stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(client) = conn else { continue };
                    seed += 1;
                    match TcpStream::connect(to) {
                        Ok(server) => {
                            if let Err(e) = relay_connection(client, server, delay, seed) {
                                tracing::warn!("relay to {to}: {e}");
                            }
                        }
                        Err(e) => {
                            tracing::warn!("relay cannot reach {to}: {e}");
                        }
                    }
                }
            })?;
        Ok(Self { address, stop })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the acceptor so it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

/// Starts one relay per address (each `host:port`), returning the relays (their
/// addresses in the same order).
pub fn relay_all(addrs: &[String], delay: Delay) -> std::io::Result<Vec<Relay>> {
    use std::net::ToSocketAddrs;
    addrs
        .iter()
        .map(|a| {
            let to = a.to_socket_addrs()?.next().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, format!("{a}: no address"))
            })?;
            Relay::start(to, delay)
        })
        .collect()
}

fn relay_connection(
    client: TcpStream,
    server: TcpStream,
    delay: Delay,
    seed: u64,
) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    pump(client.try_clone()?, server.try_clone()?, delay, seed * 2)?;
    pump(server, client, delay, seed * 2 + 1)
}

/// Bytes from `from` to `to`, each chunk held until its due time.
fn pump(from: TcpStream, to: TcpStream, delay: Delay, seed: u64) -> std::io::Result<()> {
    let (tx, rx) = sync_channel::<(Instant, Vec<u8>)>(MAX_QUEUED);
    std::thread::Builder::new()
        .name("atomio-relay-rd".into())
        .spawn(move || read_side(from, tx, delay, seed))?;
    std::thread::Builder::new()
        .name("atomio-relay-wr".into())
        .spawn(move || write_side(to, rx))?;
    Ok(())
}

fn read_side(mut from: TcpStream, tx: SyncSender<(Instant, Vec<u8>)>, delay: Delay, seed: u64) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut last_due = Instant::now();
    loop {
        let mut buf = vec![0u8; READ_SIZE];
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                buf.truncate(n);
                let due = (Instant::now() + delay.one_way(&mut rng)).max(last_due);
                last_due = due;
                if tx.send((due, buf)).is_err() {
                    break;
                }
            }
        }
    }
    // Dropping `tx` ends the writer once it has sent what is queued; it then shuts `to`'s
    // write side, so the far end sees the close.
}

fn write_side(mut to: TcpStream, rx: Receiver<(Instant, Vec<u8>)>) {
    while let Ok((due, buf)) = rx.recv() {
        wait_until(due);
        if to.write_all(&buf).is_err() {
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn wait_until(due: Instant) {
    let now = Instant::now();
    if due <= now {
        return;
    }
    let left = due - now;
    if left > SPIN {
        std::thread::sleep(left - SPIN);
    }
    while Instant::now() < due {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let mut c = c.unwrap();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    loop {
                        match c.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => c.write_all(&buf[..n]).unwrap(),
                        }
                    }
                });
            }
        });
        a
    }

    fn round_trip(s: &mut TcpStream, msg: &[u8]) -> Duration {
        let t = Instant::now();
        s.write_all(msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, msg);
        t.elapsed()
    }

    #[test]
    fn adds_the_round_trip_asked_for_and_keeps_bytes_in_order() {
        let server = echo_server();
        let relay = Relay::start(server, Delay::rtt_us(2_000, 0)).unwrap();
        let mut s = TcpStream::connect(relay.address).unwrap();
        s.set_nodelay(true).unwrap();
        let mut times: Vec<Duration> = (0..20u8).map(|i| round_trip(&mut s, &[i; 100])).collect();
        times.sort();
        // Never early; the median within a loose bound on a loaded machine.
        assert!(times[0] >= Duration::from_micros(2_000), "{times:?}");
        assert!(times[10] < Duration::from_millis(20), "{times:?}");
        // A long stream arrives whole and in order, with jitter too.
        let relay = Relay::start(server, Delay::rtt_us(200, 400)).unwrap();
        let mut s = TcpStream::connect(relay.address).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut w = s.try_clone().unwrap();
        let sent = data.clone();
        let writer = std::thread::spawn(move || w.write_all(&sent).unwrap());
        let mut back = vec![0u8; data.len()];
        s.read_exact(&mut back).unwrap();
        writer.join().unwrap();
        assert!(back == data, "bytes reordered or changed");
    }

    #[test]
    fn a_close_reaches_the_other_side() {
        let server = echo_server();
        let relay = Relay::start(server, Delay::rtt_us(100, 0)).unwrap();
        let mut s = TcpStream::connect(relay.address).unwrap();
        round_trip(&mut s, b"hello");
        s.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }
}
