//! Versioning (Tran et al. 2010, BlobSeer) in the model: no locks; each write stores its
//! bytes as chunks, gets a version from the file's version manager, builds its tree and
//! completes; it returns once its snapshot is published, in version order.
//!
//! The version manager is the product's (`atomio_version::FileVersions`: assignment,
//! hints of the versions in flight, publication in order) at the file's metadata server
//! (server 0's data actor, as the product runs it). The rest is charged at the level of
//! messages and bytes, as the product moves them: chunks to the servers the pure placement
//! function names per 256 KiB leaf block; one dependent `NodeGet` round trip per tree
//! level below the root for the border of the base tree (clients cache nothing between
//! writes here: the cost of a fresh snapshot); one `NodePut` per server holding some of
//! its nodes (leaves and the inner nodes above them, 512 bytes each); then completion.
//!
//! Checked: publications are consecutive versions, and no writer is answered before its
//! version is published (the negative control answers at completion and is caught).
//!
//! Not modelled: readers, garbage collection, materialization into the base, stalled or
//! aborted writers, regions coalesced beyond the write's hull (the model declares each
//! write's hull: coarser hints than the product's up to 4,096 pieces).
//!
//! **Invariants:** a run returns only when every write was published and answered.

use crate::costs::Costs;
use crate::engine::{ActorId, Engine, EngineStats, Model, Ns, Out, JITTER_SEED};
use crate::platform::Platform;
use atomio_layout::RangeList;
use atomio_version::manager::FileVersions;
use atomio_version::Geometry;
use atomio_workloads::{CallKind, WorkloadPlan};
use serde::Serialize;

/// Bytes of a tree node on the wire.
const NODE_BYTES: u64 = 512;

#[derive(Clone, Debug, Serialize)]
pub struct VersioningResult {
    pub clients: u32,
    pub servers: u32,
    pub bytes: u64,
    pub seconds: f64,
    pub mib_per_s: f64,
    pub published: u64,
    pub events: u64,
}

enum Msg {
    Next,
    /// Chunks of `bytes` for `client` to a server.
    Chunks {
        client: u32,
        bytes: u64,
    },
    /// A manager request: assign a version for `client`'s regions.
    Assign {
        client: u32,
        hull: atomio_layout::ByteRange,
    },
    Assigned {
        version: u64,
    },
    /// Tree nodes fetched (one level) or stored (`nodes` of them).
    NodeGet {
        client: u32,
    },
    NodePut {
        client: u32,
        nodes: u64,
    },
    /// A server's plain answer.
    Done,
    Complete {
        client: u32,
        version: u64,
    },
    Published {
        version: u64,
    },
}

#[derive(Default)]
struct Writer {
    calls: Vec<(atomio_layout::ByteRange, Vec<u64>)>,
    next: usize,
    due: usize,
    version: u64,
    gets_left: u32,
    finished: Option<Ns>,
}

struct VersionModel<'a> {
    costs: &'a Costs,
    geometry: Geometry,
    manager: FileVersions,
    writers: Vec<Writer>,
    client_actors: Vec<ActorId>,
    data_actors: Vec<ActorId>,
    disk_bytes_per_s: Option<f64>,
    last_published: u64,
    published: u64,
    /// Negative control: writers are answered as soon as they complete.
    answer_early: bool,
}

fn ns(x: f64) -> Ns {
    x.max(0.0).round() as Ns
}

impl VersionModel<'_> {
    fn send(&self) -> f64 {
        self.costs.net.client_msg_ns + self.costs.lock.client_send_ns
    }

    /// Starts the writer's next write (its chunks), or finishes.
    fn next_write(&mut self, now: Ns, c: u32, out: &mut Vec<Out<Msg>>) -> Ns {
        let memcpy = self.costs.io.memcpy_byte_ns;
        let send = self.send();
        let w = &mut self.writers[c as usize];
        let Some((_, per_server)) = w.calls.get(w.next) else {
            w.finished = Some(now);
            return 0;
        };
        let mut cpu = 0.0;
        w.due = 0;
        for (s, &bytes) in per_server.iter().enumerate().filter(|(_, &b)| b > 0) {
            w.due += 1;
            cpu += send + bytes as f64 * memcpy;
            out.push(
                Out::net(self.data_actors[s], Msg::Chunks { client: c, bytes }).with_bytes(bytes),
            );
        }
        ns(cpu)
    }

    fn client_step(
        &mut self,
        now: Ns,
        c: u32,
        msg: Msg,
        first: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Result<Ns, String> {
        let n = &self.costs.net;
        let recv = ns(n.client_msg_ns + if first { n.client_batch_ns } else { 0.0 });
        let send = ns(self.send());
        let levels = u32::from(self.geometry.levels);
        let w = &mut self.writers[c as usize];
        Ok(match msg {
            Msg::Next => self.next_write(now, c, out),
            Msg::Done if w.due > 0 => {
                w.due -= 1;
                if w.due > 0 {
                    return Ok(recv);
                }
                if w.version == 0 {
                    // Chunks stored: ask for a version.
                    let hull = w.calls[w.next].0;
                    out.push(Out::net(
                        self.data_actors[0],
                        Msg::Assign { client: c, hull },
                    ));
                } else {
                    // Every node stored: complete.
                    let version = w.version;
                    out.push(Out::net(
                        self.data_actors[0],
                        Msg::Complete { client: c, version },
                    ));
                }
                recv + send
            }
            Msg::Assigned { version } => {
                w.version = version;
                w.gets_left = levels.saturating_sub(1);
                recv + self.tree_step(c, out)
            }
            Msg::Done => {
                // A NodeGet answered: the next level, or the puts.
                recv + self.tree_step(c, out)
            }
            Msg::Published { version } => {
                if version != w.version {
                    return Err(format!(
                        "writer {c} told {version} is published, it wrote {}",
                        w.version
                    ));
                }
                if version > self.last_published {
                    return Err(format!(
                        "writer {c} answered before {version} was published"
                    ));
                }
                w.version = 0;
                w.next += 1;
                recv + self.next_write(now + recv, c, out)
            }
            _ => return Err("a writer got a server's message".into()),
        })
    }

    /// One dependent `NodeGet` per level, then the `NodePut`s.
    fn tree_step(&mut self, c: u32, out: &mut Vec<Out<Msg>>) -> Ns {
        let send = self.send();
        let servers = self.data_actors.len();
        let fanout = u64::from(self.geometry.fanout.max(2));
        let chunk = self.geometry.chunk.max(1);
        let w = &mut self.writers[c as usize];
        if w.gets_left > 0 {
            w.gets_left -= 1;
            let s = (w.version as usize + w.gets_left as usize) % servers;
            out.push(Out::net(self.data_actors[s], Msg::NodeGet { client: c }));
            return ns(send);
        }
        // Its nodes: the leaves it touches and the inner nodes above them.
        let hull = w.calls[w.next].0;
        let mut level = hull.len().div_ceil(chunk) + 1;
        let mut nodes = 0;
        while level > 1 {
            nodes += level;
            level = level.div_ceil(fanout);
        }
        nodes += 1;
        let per = nodes.div_ceil(servers as u64);
        let targets = (nodes as usize).min(servers);
        w.due = targets;
        for i in 0..targets {
            let s = (w.version as usize + i) % servers;
            out.push(
                Out::net(
                    self.data_actors[s],
                    Msg::NodePut {
                        client: c,
                        nodes: per,
                    },
                )
                .with_bytes(per * NODE_BYTES),
            );
        }
        ns(targets as f64 * send)
    }

    fn server_step(
        &mut self,
        now: Ns,
        msg: Msg,
        first: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Result<Ns, String> {
        let (n, l, io) = (&self.costs.net, &self.costs.lock, &self.costs.io);
        let fixed = n.server_msg_ns * 2.0 + if first { n.server_batch_ns } else { 0.0 };
        let work = match msg {
            Msg::Chunks { client, bytes } => {
                out.push(Out::net(self.client_actors[client as usize], Msg::Done));
                let b = bytes as f64;
                let cpu =
                    b * (io.memcpy_byte_ns + self.costs.pwrite_ns(1 << 20) / f64::from(1 << 20));
                cpu.max(self.disk_bytes_per_s.map_or(0.0, |bw| b / bw * 1e9))
            }
            Msg::Assign { client, hull } => {
                let a = self
                    .manager
                    .assign(
                        u64::from(client),
                        RangeList::from_ranges(vec![hull]),
                        now / 1_000_000,
                    )
                    .map_err(|e| e.to_string())?;
                let hints = a.hints.len() as f64;
                out.push(Out::net(
                    self.client_actors[client as usize],
                    Msg::Assigned { version: a.version },
                ));
                l.server_request_ns + hints * l.server_list_range_ns
            }
            Msg::NodeGet { client } => {
                out.push(
                    Out::net(self.client_actors[client as usize], Msg::Done).with_bytes(NODE_BYTES),
                );
                l.server_request_ns
            }
            Msg::NodePut { client, nodes } => {
                out.push(Out::net(self.client_actors[client as usize], Msg::Done));
                nodes as f64 * l.server_request_ns
            }
            Msg::Complete { client, version } => {
                let published = self.manager.complete(version).map_err(|e| e.to_string())?;
                for v in &published {
                    if *v != self.last_published + 1 {
                        return Err(format!(
                            "version {v} published after {}",
                            self.last_published
                        ));
                    }
                    self.last_published = *v;
                    self.published += 1;
                }
                // Answer every writer whose version is now published (or, negative
                // control, this one at once).
                let mut answered = 0.0;
                for (i, w) in self.writers.iter().enumerate() {
                    let due = if self.answer_early {
                        i as u32 == client
                    } else {
                        w.version != 0 && published.contains(&w.version)
                    };
                    if due {
                        answered += 1.0;
                        out.push(Out::net(
                            self.client_actors[i],
                            Msg::Published { version: w.version },
                        ));
                    }
                }
                l.server_request_ns + answered * n.server_msg_ns
            }
            _ => return Err("a server got a writer's message".into()),
        };
        Ok(ns(fixed + work))
    }
}

impl Model for VersionModel<'_> {
    type Msg = Msg;
    fn handle(
        &mut self,
        now: Ns,
        actor: ActorId,
        _from: ActorId,
        msg: Msg,
        first: bool,
        out: &mut Vec<Out<Msg>>,
    ) -> Result<Ns, String> {
        if (actor.0 as usize) < self.writers.len() {
            self.client_step(now, actor.0, msg, first, out)
        } else {
            self.server_step(now, msg, first, out)
        }
    }
}

/// Runs `plan`'s writes under versioning on `servers` servers.
pub fn run(
    plan: &WorkloadPlan,
    servers: u32,
    costs: &Costs,
    platform: &Platform,
    answer_early: bool,
    tick: impl FnMut(EngineStats),
) -> Result<VersioningResult, String> {
    let clients = plan.clients.len() as u32;
    if clients == 0 || servers == 0 {
        return Err("at least one client and one server".into());
    }
    let geometry = Geometry::default();
    let chunk = geometry.chunk.max(1);
    let writers: Vec<Writer> = plan
        .clients
        .iter()
        .map(|cl| Writer {
            calls: cl
                .calls
                .iter()
                .filter(|c| c.kind == CallKind::Write)
                .filter_map(|c| c.access.as_ref())
                .filter_map(|a| {
                    let hull = a.hull()?;
                    // Chunks of leaf block b go to server b mod n (the pure placement
                    // function, the file's hash left out).
                    let mut per = vec![0u64; servers as usize];
                    for r in a.ranges() {
                        let mut s = r.start;
                        while s < r.end {
                            let b = s / chunk;
                            let e = r.end.min((b + 1) * chunk);
                            per[(b % u64::from(servers)) as usize] += e - s;
                            s = e;
                        }
                    }
                    Some((hull, per))
                })
                .collect(),
            ..Writer::default()
        })
        .collect();
    let mut engine = Engine::new(platform.latency_ns).with_jitter(
        platform.jitter,
        platform.jitter_ns,
        JITTER_SEED,
    );
    let (client_actors, data_actors) =
        crate::lockbench::place(&mut engine, platform, clients, servers);
    let mut model = VersionModel {
        costs,
        geometry,
        manager: FileVersions::new(geometry),
        writers,
        client_actors: client_actors.clone(),
        data_actors,
        disk_bytes_per_s: platform.server_disk_bytes_per_s,
        last_published: 0,
        published: 0,
        answer_early,
    };
    let writes: u64 = model.writers.iter().map(|w| w.calls.len() as u64).sum();
    engine.max_events = 1_000 * writes.max(1) + 10_000_000;
    for &a in &client_actors {
        engine.inject(0, a, Msg::Next);
    }
    let stats = engine.run(&mut model, tick)?;
    let mut end = 0;
    for (i, w) in model.writers.iter().enumerate() {
        end = end.max(
            w.finished
                .ok_or_else(|| format!("writer {i} never finished"))?,
        );
    }
    if model.published != writes {
        return Err(format!("{} of {writes} writes published", model.published));
    }
    let bytes: u64 = plan
        .clients
        .iter()
        .flat_map(|c| c.calls.iter())
        .filter(|c| c.kind == CallKind::Write)
        .map(|c| c.bytes())
        .sum();
    let seconds = end.max(1) as f64 / 1e9;
    Ok(VersioningResult {
        clients,
        servers,
        bytes,
        seconds,
        mib_per_s: bytes as f64 / seconds / f64::from(1 << 20),
        published: model.published,
        events: stats.events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomio_workloads::Workload;

    #[test]
    fn versions_publish_in_order_and_early_answers_are_caught() {
        let c = Costs::for_tests();
        let p = Platform::ching07(&c);
        let tile = Workload::from_name("tile", &["--tile-x", "32", "--tile-y", "32"])
            .unwrap()
            .plan(9)
            .unwrap();
        let r = run(&tile, 4, &c, &p, false, |_| {}).unwrap();
        assert_eq!(r.published, 9);
        assert!(r.mib_per_s > 0.0);
        let e = run(&tile, 4, &c, &p, true, |_| {}).unwrap_err();
        assert!(e.contains("before"), "{e}");
    }
}
