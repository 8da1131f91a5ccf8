//! Runs a `DlmClient` on a thread of its own, with its own connections to the servers and
//! its own single-threaded runtime. Cached locks must be given back whenever a server asks
//! — also while the caller computes, sleeps in `MPI_Barrier` or runs another runtime — so
//! the machine cannot live on the caller's runtime (which runs only inside calls). Callers
//! send commands and await their answers; nothing else crosses the thread boundary.
//!
//! Liveness: while a command runs or flushes are owed, servers are pinged every
//! `PING_INTERVAL` of silence; after `DEFAULT_TIMEOUT` without hearing from any server the
//! servers the client depends on are treated as lost (the command fails, never hangs).
//! Dropping the agent flushes every cached lock's bytes and waits for the thread.
//!
//! **Invariants:** the machine sees the clock (CLOCK_MONOTONIC, ns — comparable between
//! processes on one host, which the breakdown benchmark relies on) before every event;
//! every frame it emits is sent before the next event is handled; every command gets
//! exactly one answer (a dropped caller is fine).

use super::machine::{DlmClient, DlmClientStats, Done, LockRecord, ReadDone};
use super::DlmSpec;
use atomio_layout::{ByteRange, Layout, ServerId};
use atomio_net::client::PING_INTERVAL;
use atomio_net::{ClientEvent, ClusterClient, Servers, DEFAULT_TIMEOUT};
use atomio_proto::{ErrorCode, FileId, WireError};
use bytes::Bytes;
use std::collections::HashMap;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// CLOCK_MONOTONIC in ns (one clock for every process on the host).
pub fn now_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

enum Cmd {
    Write {
        file: FileId,
        layout: Layout,
        ranges: Vec<ByteRange>,
        data: Vec<Bytes>,
        spec: DlmSpec,
        reply: oneshot::Sender<Result<(), WireError>>,
    },
    Read {
        file: FileId,
        layout: Layout,
        ranges: Vec<ByteRange>,
        len: usize,
        spec: DlmSpec,
        reply: oneshot::Sender<Result<ReadDone, WireError>>,
    },
    Flush {
        file: Option<FileId>,
        durable: bool,
        reply: oneshot::Sender<Result<(), WireError>>,
    },
    Stats {
        reply: oneshot::Sender<DlmClientStats>,
    },
    Log {
        reply: oneshot::Sender<Vec<LockRecord>>,
    },
}

enum Waiter {
    Unit(oneshot::Sender<Result<(), WireError>>),
    Data(oneshot::Sender<Result<ReadDone, WireError>>),
}

pub struct DlmAgent {
    tx: Option<mpsc::UnboundedSender<Cmd>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn gone() -> WireError {
    WireError::new(ErrorCode::Disconnected, "the DLM agent has stopped")
}

impl DlmAgent {
    /// Starts an agent connected to `servers` (a session of its own at each); `log`: keep
    /// a record of every lock's life (`lock_log`).
    pub async fn start(servers: Servers, log: bool) -> Result<Self, WireError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("atomio-dlm".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(WireError::new(
                            ErrorCode::Io,
                            format!("starting the DLM agent's runtime: {e}"),
                        )));
                        return;
                    }
                };
                rt.block_on(async move {
                    match ClusterClient::connect(&servers).await {
                        Ok(c) => {
                            let _ = ready_tx.send(Ok(()));
                            run(c, rx, log).await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
            })
            .map_err(|e| WireError::new(ErrorCode::Io, format!("starting the DLM agent: {e}")))?;
        ready_rx.await.map_err(|_| gone())??;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    fn send(&self, cmd: Cmd) -> Result<(), WireError> {
        self.tx
            .as_ref()
            .ok_or_else(gone)?
            .send(cmd)
            .map_err(|_| gone())
    }

    /// Writes `data` (the ranges' bytes in order, as consecutive parts: `pool::copy`) into
    /// the caches under cached locks.
    pub async fn write(
        &self,
        file: FileId,
        layout: Layout,
        ranges: Vec<ByteRange>,
        data: Vec<Bytes>,
        spec: DlmSpec,
    ) -> Result<(), WireError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Write {
            file,
            layout,
            ranges,
            data,
            spec,
            reply,
        })?;
        rx.await.map_err(|_| gone())?
    }

    /// Reads `ranges` (`len` bytes) under read locks.
    pub async fn read(
        &self,
        file: FileId,
        layout: Layout,
        ranges: Vec<ByteRange>,
        len: usize,
        spec: DlmSpec,
    ) -> Result<ReadDone, WireError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Read {
            file,
            layout,
            ranges,
            len,
            spec,
            reply,
        })?;
        rx.await.map_err(|_| gone())?
    }

    /// Gives back every cached lock of `file` (all files: `None`) with its bytes;
    /// `durable`: then `fsync` at the servers.
    pub async fn flush(&self, file: Option<FileId>, durable: bool) -> Result<(), WireError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Flush {
            file,
            durable,
            reply,
        })?;
        rx.await.map_err(|_| gone())?
    }

    pub async fn stats(&self) -> Result<DlmClientStats, WireError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Stats { reply })?;
        rx.await.map_err(|_| gone())
    }

    /// Every lock's life so far (empty unless started with `log`).
    pub async fn lock_log(&self) -> Result<Vec<LockRecord>, WireError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Log { reply })?;
        rx.await.map_err(|_| gone())
    }
}

impl Drop for DlmAgent {
    fn drop(&mut self) {
        // Closing the channel makes the agent flush everything and stop.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

enum Event {
    Cmd(Option<Cmd>),
    Net(Option<ClientEvent>),
    Tick,
}

/// The agent's loop: commands and frames in, frames and answers out.
async fn run(mut c: ClusterClient, mut rx: mpsc::UnboundedReceiver<Cmd>, log: bool) {
    let mut m = DlmClient::new();
    if log {
        m = m.with_log();
    }
    if let Some((soft, hard)) = limits_from_env() {
        m = m.with_limits(soft, hard);
    }
    let mut waiters: HashMap<u64, Waiter> = HashMap::new();
    let mut next_id = 0u64;
    let mut closing = false;
    const CLOSE_ID: u64 = u64::MAX;
    let mut ticker = tokio::time::interval(PING_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_heard = Instant::now();
    loop {
        let event = tokio::select! {
            cmd = rx.recv(), if !closing => Event::Cmd(cmd),
            ev = c.recv_event() => Event::Net(ev),
            _ = ticker.tick() => Event::Tick,
        };
        m.set_now(now_ns());
        match event {
            Event::Cmd(None) => {
                closing = true;
                m.flush(CLOSE_ID, None, false);
            }
            Event::Cmd(Some(cmd)) => {
                next_id += 1;
                let id = next_id;
                match cmd {
                    Cmd::Write {
                        file,
                        layout,
                        ranges,
                        data,
                        spec,
                        reply,
                    } => {
                        waiters.insert(id, Waiter::Unit(reply));
                        m.write(id, file, layout, ranges, data, spec);
                    }
                    Cmd::Read {
                        file,
                        layout,
                        ranges,
                        len,
                        spec,
                        reply,
                    } => {
                        waiters.insert(id, Waiter::Data(reply));
                        m.read(id, file, layout, ranges, len, spec);
                    }
                    Cmd::Flush {
                        file,
                        durable,
                        reply,
                    } => {
                        waiters.insert(id, Waiter::Unit(reply));
                        m.flush(id, file, durable);
                    }
                    Cmd::Stats { reply } => {
                        let _ = reply.send(m.stats().clone());
                    }
                    Cmd::Log { reply } => {
                        let _ = reply.send(m.lock_log());
                    }
                }
            }
            Event::Net(None) => {
                // Every connection is gone: fail whatever waits, then stop.
                for s in 0..c.servers() {
                    m.on_lost(
                        ServerId(s as u32),
                        WireError::new(ErrorCode::Disconnected, "all connections are gone"),
                    );
                }
                answer(&mut m, &mut waiters);
                return;
            }
            Event::Net(Some(ClientEvent::Frame(server, f))) => {
                last_heard = Instant::now();
                m.on_frame(server, f.tag, f.reply);
            }
            Event::Net(Some(ClientEvent::Lost(server, e))) => m.on_lost(server, e),
            Event::Tick => {
                if !m.idle() {
                    if last_heard.elapsed() >= DEFAULT_TIMEOUT {
                        for s in 0..c.servers() {
                            m.on_lost(
                                ServerId(s as u32),
                                WireError::new(
                                    ErrorCode::Timeout,
                                    format!("no server answered for {DEFAULT_TIMEOUT:?}"),
                                ),
                            );
                        }
                    } else if last_heard.elapsed() >= PING_INTERVAL {
                        c.ping_all().await;
                    }
                } else {
                    last_heard = Instant::now();
                }
            }
        }
        for s in m.take_sends() {
            if let Err(e) = c.send_frame(s.server, s.tag, s.request).await {
                m.on_lost(s.server, e);
            }
        }
        // No `flush` here: this runtime runs the connections' writers whenever the loop
        // waits, and it always does (the caller's answer need not wait for the socket).
        if answer(&mut m, &mut waiters) && closing {
            c.flush().await;
            return;
        }
    }
}

/// Hands finished commands their answers; true once the closing flush is done.
fn answer(m: &mut DlmClient, waiters: &mut HashMap<u64, Waiter>) -> bool {
    let mut closed = false;
    for (id, done) in m.take_done() {
        if id == u64::MAX {
            closed = true;
            continue;
        }
        match (waiters.remove(&id), done) {
            (Some(Waiter::Unit(tx)), Done::Write(r) | Done::Flush(r)) => {
                let _ = tx.send(r);
            }
            (Some(Waiter::Data(tx)), Done::Read(r)) => {
                let _ = tx.send(r);
            }
            _ => {}
        }
    }
    closed
}

/// `ATOMIO_DLM_CACHE_MB`: the dirty bytes (MiB) past which idle locks are given back; a
/// call waits once four times that is owed.
fn limits_from_env() -> Option<(u64, u64)> {
    let mb: u64 = std::env::var("ATOMIO_DLM_CACHE_MB")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((mb << 20, (mb << 20).saturating_mul(4)))
}
