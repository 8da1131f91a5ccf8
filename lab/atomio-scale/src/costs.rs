//! The cost file: what one message, one lock range, one copied or written byte costs on the
//! machine `atomio-lab sim calibrate` ran on.
//!
//! Every figure is measured by a short microbenchmark through the product's own code (see
//! `calibrate`); none is fitted to a benchmark the model is later checked against. The
//! model charges them as CPU time of the actor that does the work.
//!
//! **Invariants:** a loaded file has this build's `schema`, at least one core, and every
//! figure finite and ≥ 0 (`validate`); bad input is an error, never a panic.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Bumped whenever a field's meaning changes.
pub const SCHEMA: u32 = 6;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    pub schema: u32,
    pub machine: Machine,
    pub net: NetCosts,
    pub lock: LockCosts,
    pub io: IoCosts,
    /// The raw measurements the figures come from (name, value, unit), for the record.
    #[serde(default)]
    pub samples: Vec<Sample>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Cores every process of a loopback run shares.
    pub cores: u32,
    pub cpu: String,
    pub kernel: String,
    /// The kernel's scheduler tick (1 s / `CONFIG_HZ`): how long a core left idle beside
    /// a busy one with tasks queued can stay idle. Cost files from before it: 0 (the
    /// model then keeps one shared run queue).
    #[serde(default)]
    pub tick_ns: f64,
    /// How recently a task must have run to count as cache-hot, which a core running out
    /// of work does not take from another core's queue (the kernel's
    /// `sched_migration_cost`).
    #[serde(default)]
    pub migration_cost_ns: f64,
}

impl Machine {
    /// How this machine's cores take ready processes: per-core run queues when the tick
    /// was measured, else one shared queue.
    pub fn placement(&self) -> crate::engine::Placement {
        if self.tick_ns >= 1.0 {
            crate::engine::Placement::PerCore {
                hot_ns: self.migration_cost_ns.round() as crate::engine::Ns,
                tick_ns: self.tick_ns.round() as crate::engine::Ns,
            }
        } else {
            crate::engine::Placement::Shared
        }
    }
}

/// Messages through atomio's TCP transport (tokio, frames, the server's actors).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetCosts {
    /// Client CPU per message, each way (a send or a receive), when messages come in a
    /// stream (pipelined pings: many per read).
    pub client_msg_ns: f64,
    /// Client CPU to pick up a batch of messages from one connection (a wake-up, a poll,
    /// a read): pings one at a time from several processes at once pay it per message.
    pub client_batch_ns: f64,
    pub server_msg_ns: f64,
    pub server_batch_ns: f64,
    /// One-way delay that is nobody's CPU (loopback: scheduling; on a cluster the
    /// platform's latency replaces it).
    pub wire_ns: f64,
    /// Time an idle core takes to start a woken job (large on VMs whose halted virtual
    /// CPUs are woken through the host), measured by a ping-pong across two idle cores
    /// against one on a single core (`calibrate::measure_wake`). Cost files from before
    /// it: 0.
    #[serde(default)]
    pub wake_ns: f64,
    /// The sequential ping round trip these come from (for the record).
    pub ping_rtt_ns: f64,
}

/// Lock work, measured on the sans-IO state machines in this process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockCosts {
    /// CPU per atomic call beyond what the model charges for its locks, messages and
    /// bytes (the call path: `CallOp`, the lease check, the detached release's flush, and
    /// the servers' reads the model's batching does not reproduce) — four processes making
    /// one-at-a-time 8-byte atomic calls at once, less the model's charge for that very
    /// scenario. `[bytes per call, ns]` by increasing bytes (8 B, and the workloads' piece
    /// sizes, whose bytes leave the next call's path cold caches), linear between points,
    /// flat outside them. Charged to the client, per call (never per lock request).
    pub client_call_curve: Vec<[f64; 2]>,
    /// Client CPU to set up one lock operation (plan, `LockOp`).
    pub client_op_ns: f64,
    /// Client protocol CPU per lock message it sends (building the request).
    pub client_send_ns: f64,
    /// Client protocol CPU per reply it handles (`LockOp::on_reply`).
    pub client_reply_ns: f64,
    /// Client CPU per explicit range (POSIX/list plans: cutting, encoding).
    pub client_range_ns: f64,
    /// Server table CPU per lock request or `LockMore` handled.
    pub server_request_ns: f64,
    /// Server table CPU per range granted of an explicit list (POSIX, list).
    pub server_list_range_ns: f64,
    /// Server table CPU per range granted of a structured description (datatype: the
    /// server finds its share of the pattern).
    pub server_pattern_range_ns: f64,
    /// Server table CPU per range granted past the horizon: checked one by one against
    /// the hull and description of another request it interleaves with, splitting that
    /// hull (interleaved writers: S3D's neighbours), instead of the fast path's run.
    pub server_checked_range_ns: f64,
    /// Server table CPU per other owner a checked range was checked against (a walk in a
    /// hull of k owners checks each range against k − 1 descriptions: S3D's 8 clients
    /// share a lock stripe's hull 8 ways, its 4 clients 4 ways). Cost files from before
    /// it: 0 (everything in the per-range figure).
    #[serde(default)]
    pub server_owner_check_ns: f64,
    /// Server table CPU per release handled.
    pub server_release_ns: f64,
    /// Server table CPU per index entry a release removes beyond its first (a hull that
    /// interleaved grants split is released piece by piece).
    pub server_entry_release_ns: f64,
    /// Server CPU per explicit range decoded from the wire.
    pub server_decode_range_ns: f64,
}

/// Bytes moved by a client or a server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoCosts {
    /// `memcpy` of a large buffer, per byte.
    pub memcpy_byte_ns: f64,
    /// `pwrite` into a fresh file (page cache, pages allocated): ns per call at each
    /// measured size, `[bytes, ns]` by increasing size (interpolated between them).
    pub pwrite_curve: Vec<[f64; 2]>,
    /// `[writers, factor]` by increasing writers: `writers` threads writing interleaved
    /// pieces of one fresh file, each from its own buffer, took `factor` × the time one
    /// writer takes for the same calls in file order (the curve). Measured at once; one
    /// writer alone writing its interleaved share costs as much per call (out-of-order
    /// allocation, not the wait for the inode lock, is what costs), so the model charges
    /// it to every write of a file with that many writers. 1 writer: 1.
    pub pwrite_interleaved: Vec<[f64; 2]>,
    /// `[writers, spin]` by increasing writers, of the same runs: the process's CPU beyond
    /// one core per second of wall. The file's writes are serialized (the inode lock),
    /// but a writer that waits for it spins while its owner runs (the rwsem's optimistic
    /// spinning) and holds a core the other processes then lack. The model charges a
    /// waiting writer `spin` × the time it waits, up to one write's.
    pub pwrite_spin: Vec<[f64; 2]>,
    /// `[writers per page, factor]`: interleaved writers whose pieces overlap their
    /// neighbours' (a tile's ghost cells, so that many writers per page on average) took
    /// `factor` × the time of the same writers without overlap. The model scales the
    /// factor's excess linearly with the plan's writers per page.
    pub pwrite_shared: [f64; 2],
    /// The product's direct-file call path per call, beyond its `pwrite`s.
    pub direct_call_ns: f64,
    /// Two threads writing one file got `pwrite_parallel_speedup` × one thread's rate;
    /// below 1.3 the model serializes writes to one file (ext4's `i_rwsem`).
    pub pwrite_parallel_speedup: f64,
    pub pwrite_serialized: bool,
    /// Copies through a shared mapping (many small pieces, `mapped.rs`): per page first
    /// touched and per byte.
    pub mmap_page_ns: f64,
    pub mmap_byte_ns: f64,
    /// `[writers, ns]` by increasing writers (from 2): `writers` threads copying their
    /// small pieces (384 B, interleaved in pairs so that two share every page, as
    /// neighbours do) through mappings of one fresh file at once took `ns` per byte of all
    /// of them. One writer alone costs its pages and bytes (above); together, page faults
    /// of one file serialize and a shared page is faulted by each of its writers, which no
    /// per-writer figure predicts.
    pub mmap_shared_byte_ns: Vec<[f64; 2]>,
    /// `[writers, busy]` of the same runs: their CPU beyond one core per second of wall.
    /// No lock serializes these copies (page faults and zeroing contend; perf shows no
    /// spinning), but they leave cores idle: recorded, and the model charges core time
    /// (`mmap_shared_core_byte_ns`), not this CPU.
    pub mmap_spin: Vec<[f64; 2]>,
    /// How much calls of one kind differ: the standard deviation of the log of one
    /// `pwrite`'s time, a writer alone writing 4 KiB, 47,008 B and 128 KiB calls (the
    /// median of the three; 0.2–0.35 here). The model spreads every job's cost by a
    /// log-normal factor of mean 1 and this σ (`Engine::with_jitter`). Cost files from
    /// before it: 0.
    #[serde(default)]
    pub cost_spread: f64,
    /// The call time that spread was measured on (the median of the three sizes'
    /// geometric means): a job k times as long is spread by σ/√k.
    #[serde(default)]
    pub cost_spread_ns: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub name: String,
    pub value: f64,
    pub unit: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CostsError {
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}: not a cost file: {err}")]
    Parse {
        path: String,
        err: serde_json::Error,
    },
    #[error(
        "{path}: schema {found}, this build reads {SCHEMA}: run `atomio-lab sim calibrate` again"
    )]
    Schema { path: String, found: u32 },
    #[error("{path}: {field} = {value} (must be finite and >= 0)")]
    Bad {
        path: String,
        field: &'static str,
        value: f64,
    },
    #[error("{path}: machine.cores = 0")]
    NoCores { path: String },
    #[error("{path}: io.pwrite_curve must list sizes in increasing order, at least one")]
    Curve { path: String },
    #[error("{path}: {field} must list writer counts in increasing order")]
    Contention { path: String, field: &'static str },
}

impl Costs {
    /// Reads and checks a cost file.
    pub fn load(path: &Path) -> Result<Self, CostsError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|err| CostsError::Io {
            path: p.clone(),
            err,
        })?;
        Self::parse(&text, &p)
    }

    /// Parses and checks the JSON of a cost file (`origin` names it in errors).
    pub fn parse(text: &str, origin: &str) -> Result<Self, CostsError> {
        let c: Costs = serde_json::from_str(text).map_err(|err| CostsError::Parse {
            path: origin.to_string(),
            err,
        })?;
        c.validate(origin)?;
        Ok(c)
    }

    pub fn save(&self, path: &Path) -> Result<(), CostsError> {
        let p = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|err| CostsError::Io {
                path: p.clone(),
                err,
            })?;
        }
        let text = serde_json::to_string_pretty(self).expect("costs serialize");
        std::fs::write(path, text + "\n").map_err(|err| CostsError::Io { path: p, err })
    }

    /// The figure-by-figure median of several calibrations of one machine (every number at
    /// the same place in the files, curves point by point; a flag by majority), their
    /// samples all kept. A virtual machine's speed can drift from minute to minute (one
    /// calibration's draw moved single figures by 20–40 %); rounds a minute apart and their median set the model's terms instead.
    pub fn median_of(all: &[Costs]) -> Result<Costs, String> {
        let values = all
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).map_err(|e| e.to_string())?;
                if let Some(o) = v.as_object_mut() {
                    o.remove("samples");
                }
                Ok(v)
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut med: Costs =
            serde_json::from_value(median_value(&values, "")?).map_err(|e| e.to_string())?;
        med.samples = all.iter().flat_map(|c| c.samples.clone()).collect();
        med.validate("the median of the calibrations")
            .map_err(|e| e.to_string())?;
        Ok(med)
    }

    /// Every figure finite and ≥ 0, at least one core, this schema.
    pub fn validate(&self, origin: &str) -> Result<(), CostsError> {
        if self.schema != SCHEMA {
            return Err(CostsError::Schema {
                path: origin.to_string(),
                found: self.schema,
            });
        }
        if self.machine.cores == 0 {
            return Err(CostsError::NoCores {
                path: origin.to_string(),
            });
        }
        for (field, value) in self.figures() {
            if !value.is_finite() || value < 0.0 {
                return Err(CostsError::Bad {
                    path: origin.to_string(),
                    field,
                    value,
                });
            }
        }
        let curve = &self.io.pwrite_curve;
        let bad_point = curve
            .iter()
            .find(|[b, ns]| !(b.is_finite() && ns.is_finite() && *b > 0.0 && *ns >= 0.0));
        if let Some(&[_, value]) = bad_point {
            return Err(CostsError::Bad {
                path: origin.to_string(),
                field: "io.pwrite_curve",
                value,
            });
        }
        if curve.is_empty() || curve.windows(2).any(|w| w[0][0] >= w[1][0]) {
            return Err(CostsError::Curve {
                path: origin.to_string(),
            });
        }
        let [sharing, factor] = self.io.pwrite_shared;
        if !(sharing.is_finite() && sharing > 1.0 && factor.is_finite() && factor > 0.0) {
            return Err(CostsError::Bad {
                path: origin.to_string(),
                field: "io.pwrite_shared",
                value: if sharing > 1.0 { factor } else { sharing },
            });
        }
        // Factors and per-byte costs are positive; spins may be 0 (nobody spun).
        for (field, c, least) in [
            (
                "io.pwrite_interleaved",
                &self.io.pwrite_interleaved,
                f64::MIN_POSITIVE,
            ),
            (
                "io.mmap_shared_byte_ns",
                &self.io.mmap_shared_byte_ns,
                f64::MIN_POSITIVE,
            ),
            ("io.pwrite_spin", &self.io.pwrite_spin, 0.0),
            ("lock.client_call_curve", &self.lock.client_call_curve, 0.0),
            ("io.mmap_spin", &self.io.mmap_spin, 0.0),
        ] {
            let bad = c
                .iter()
                .find(|[k, f]| !(k.is_finite() && f.is_finite() && *k >= 1.0 && *f >= least));
            if let Some(&[_, value]) = bad {
                return Err(CostsError::Bad {
                    path: origin.to_string(),
                    field,
                    value,
                });
            }
            if c.windows(2).any(|w| w[0][0] >= w[1][0]) {
                return Err(CostsError::Contention {
                    path: origin.to_string(),
                    field,
                });
            }
        }
        Ok(())
    }

    /// How much slower each `pwrite` into a file with `writers` interleaved writers is
    /// than the curve's: 1 for one writer, linear between `pwrite_interleaved`'s points
    /// (from 1 writer at 1), the last point's factor beyond.
    pub fn pwrite_interleaved(&self, writers: f64) -> f64 {
        interpolate(&self.io.pwrite_interleaved, [1.0, 1.0], writers)
    }

    /// The call path's CPU for a call of `bytes` (`client_call_curve`; 0 without one).
    pub fn client_call_ns(&self, bytes: u64) -> f64 {
        let c = &self.lock.client_call_curve;
        c.first()
            .map_or(0.0, |&first| interpolate(c, first, bytes as f64))
    }

    /// CPU a `pwrite`r of a file with `writers` writers burns per ns it waits for the
    /// file (`pwrite_spin`, linear between points, 0 for one writer).
    pub fn pwrite_spin(&self, writers: f64) -> f64 {
        interpolate(&self.io.pwrite_spin, [1.0, 0.0], writers)
    }

    /// Core time per byte of copies through mappings of one file by `writers` writers
    /// whose neighbours share pages, summed over the writers: the wall per byte
    /// (`mmap_shared_byte_ns`) times the cores they had (`writers`, at most the machine's).
    /// Not the CPU they burnt (1 + `mmap_spin` cores): the rest of the cores' time they
    /// sat idle, waiting on each other's faults of shared folios, and a model that charged
    /// only the CPU ran the calibration's own writers 1.2–1.3× faster than they ran.
    /// `None` without a measurement.
    pub fn mmap_shared_core_byte_ns(&self, writers: f64) -> Option<f64> {
        let cores = writers.min(f64::from(self.machine.cores)).max(1.0);
        self.mmap_shared_byte_ns(writers).map(|b| b * cores)
    }

    /// How much slower `pwrite`s into a file are when its writers share `sharing` writers
    /// per page on average (1: none shared): `pwrite_shared`'s excess over 1, scaled
    /// linearly by the sharing's excess over 1, never below a tenth.
    pub fn pwrite_shared(&self, sharing: f64) -> f64 {
        let [measured, factor] = self.io.pwrite_shared;
        let share = ((sharing - 1.0) / (measured - 1.0)).max(0.0);
        (1.0 + (factor - 1.0) * share).max(0.1)
    }

    /// ns per byte of copies through mappings of one file by `writers` writers whose
    /// neighbours share pages (`mmap_shared_byte_ns`, linear between points, flat outside
    /// them); `None` without a measurement.
    pub fn mmap_shared_byte_ns(&self, writers: f64) -> Option<f64> {
        let c = &self.io.mmap_shared_byte_ns;
        let first = *c.first()?;
        Some(interpolate(c, first, writers))
    }

    /// CPU of one `pwrite` of `bytes` into a fresh file: the measured curve, linear
    /// between its points, at the first point's cost below it, and at the last segment's
    /// slope beyond it.
    pub fn pwrite_ns(&self, bytes: u64) -> f64 {
        let c = &self.io.pwrite_curve;
        let x = bytes as f64;
        let Some(&[x0, y0]) = c.first() else {
            return 0.0;
        };
        if x <= x0 {
            return y0;
        }
        for w in c.windows(2) {
            let ([xa, ya], [xb, yb]) = (w[0], w[1]);
            if x <= xb {
                return ya + (yb - ya) * (x - xa) / (xb - xa);
            }
        }
        match c.as_slice() {
            [.., [xa, ya], [xb, yb]] => yb + (yb - ya).max(0.0) / (xb - xa) * (x - xb),
            _ => y0 * x / x0,
        }
    }

    /// Every cost figure with its name.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        let (n, l, i) = (&self.net, &self.lock, &self.io);
        vec![
            ("machine.tick_ns", self.machine.tick_ns),
            ("machine.migration_cost_ns", self.machine.migration_cost_ns),
            ("net.client_msg_ns", n.client_msg_ns),
            ("net.client_batch_ns", n.client_batch_ns),
            ("net.server_msg_ns", n.server_msg_ns),
            ("net.server_batch_ns", n.server_batch_ns),
            ("net.wire_ns", n.wire_ns),
            ("net.wake_ns", n.wake_ns),
            ("net.ping_rtt_ns", n.ping_rtt_ns),
            ("lock.client_op_ns", l.client_op_ns),
            ("lock.client_send_ns", l.client_send_ns),
            ("lock.client_reply_ns", l.client_reply_ns),
            ("lock.client_range_ns", l.client_range_ns),
            ("lock.server_request_ns", l.server_request_ns),
            ("lock.server_list_range_ns", l.server_list_range_ns),
            ("lock.server_pattern_range_ns", l.server_pattern_range_ns),
            ("lock.server_checked_range_ns", l.server_checked_range_ns),
            ("lock.server_owner_check_ns", l.server_owner_check_ns),
            ("lock.server_release_ns", l.server_release_ns),
            ("lock.server_entry_release_ns", l.server_entry_release_ns),
            ("lock.server_decode_range_ns", l.server_decode_range_ns),
            ("io.memcpy_byte_ns", i.memcpy_byte_ns),
            ("io.direct_call_ns", i.direct_call_ns),
            ("io.pwrite_parallel_speedup", i.pwrite_parallel_speedup),
            ("io.mmap_page_ns", i.mmap_page_ns),
            ("io.cost_spread", i.cost_spread),
            ("io.cost_spread_ns", i.cost_spread_ns),
            ("io.mmap_byte_ns", i.mmap_byte_ns),
        ]
    }

    /// Plausible round figures of a 2-core machine, for tests of the model's mechanics
    /// only (never for predictions: those read a calibrated file).
    pub fn for_tests() -> Self {
        Costs {
            schema: SCHEMA,
            machine: Machine {
                cores: 2,
                cpu: "test".into(),
                kernel: "test".into(),
                tick_ns: 0.0,
                migration_cost_ns: 0.0,
            },
            net: NetCosts {
                client_msg_ns: 300.0,
                client_batch_ns: 10_000.0,
                server_msg_ns: 400.0,
                server_batch_ns: 10_000.0,
                wire_ns: 1_000.0,
                wake_ns: 0.0,
                ping_rtt_ns: 22_000.0,
            },
            lock: LockCosts {
                client_call_curve: vec![[8.0, 5_000.0], [65_536.0, 8_000.0]],
                client_op_ns: 2_000.0,
                client_send_ns: 120.0,
                client_reply_ns: 50.0,
                client_range_ns: 30.0,
                server_request_ns: 750.0,
                server_list_range_ns: 2.0,
                server_pattern_range_ns: 14.0,
                server_checked_range_ns: 300.0,
                server_owner_check_ns: 0.0,
                server_release_ns: 400.0,
                server_entry_release_ns: 100.0,
                server_decode_range_ns: 5.0,
            },
            io: IoCosts {
                memcpy_byte_ns: 0.1,
                pwrite_curve: vec![[4096.0, 4_000.0], [1048576.0, 200_000.0]],
                pwrite_interleaved: vec![[2.0, 1.1], [4.0, 1.2]],
                pwrite_spin: vec![[2.0, 0.3], [4.0, 0.5]],
                pwrite_shared: [1.125, 1.1],
                direct_call_ns: 1_000.0,
                pwrite_parallel_speedup: 1.0,
                pwrite_serialized: true,
                mmap_page_ns: 500.0,
                mmap_byte_ns: 0.15,
                mmap_shared_byte_ns: vec![[2.0, 0.5], [4.0, 0.7]],
                mmap_spin: vec![[2.0, 0.2], [4.0, 0.4]],
                cost_spread: 0.0,
                cost_spread_ns: 0.0,
            },
            samples: Vec::new(),
        }
    }
}

/// `curve`'s value at `x` (points by increasing x): linear from `start` to the first
/// point and between points, the last point's value beyond.
fn interpolate(curve: &[[f64; 2]], start: [f64; 2], x: f64) -> f64 {
    let mut prev = start;
    for &[k, f] in curve {
        if x <= k {
            let span = (k - prev[0]).max(1e-9);
            return prev[1] + (f - prev[1]) * (x - prev[0]).clamp(0.0, span) / span;
        }
        prev = [k, f];
    }
    prev[1]
}

/// The median, place by place, of JSON values of one shape (`at`: where, for errors).
fn median_value(vs: &[serde_json::Value], at: &str) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    let first = vs.first().ok_or("nothing to take a median of")?;
    let differ = || format!("the calibrations differ in shape at '{at}'");
    Ok(match first {
        Value::Number(_) => {
            if let Some(mut ints) = vs.iter().map(Value::as_u64).collect::<Option<Vec<_>>>() {
                // Counts (schema, cores): the lower middle, still an integer.
                ints.sort_unstable();
                Value::from(ints[(ints.len() - 1) / 2])
            } else {
                let mut xs = vs
                    .iter()
                    .map(|v| v.as_f64().ok_or_else(differ))
                    .collect::<Result<Vec<_>, _>>()?;
                xs.sort_by(f64::total_cmp);
                let n = xs.len();
                let m = if n % 2 == 1 {
                    xs[n / 2]
                } else {
                    (xs[n / 2 - 1] + xs[n / 2]) / 2.0
                };
                Value::from(m)
            }
        }
        Value::Bool(_) => {
            let yes = vs.iter().filter(|v| v.as_bool() == Some(true)).count();
            Value::Bool(2 * yes > vs.len())
        }
        Value::Array(a) => {
            let arrays = vs
                .iter()
                .map(|v| {
                    v.as_array()
                        .filter(|x| x.len() == a.len())
                        .ok_or_else(differ)
                })
                .collect::<Result<Vec<_>, _>>()?;
            (0..a.len())
                .map(|i| {
                    let column: Vec<Value> = arrays.iter().map(|x| x[i].clone()).collect();
                    median_value(&column, &format!("{at}[{i}]"))
                })
                .collect::<Result<Vec<_>, _>>()?
                .into()
        }
        Value::Object(o) => {
            let mut out = serde_json::Map::new();
            for k in o.keys() {
                let column = vs
                    .iter()
                    .map(|v| v.get(k).cloned().ok_or_else(differ))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert(k.clone(), median_value(&column, &format!("{at}.{k}"))?);
            }
            Value::Object(out)
        }
        // Names (the CPU, the kernel): the first round's.
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_file_loads_back_equal() {
        let dir = std::env::temp_dir().join(format!("atomio-costs-{}", std::process::id()));
        let path = dir.join("c.json");
        let c = Costs::for_tests();
        c.save(&path).unwrap();
        assert_eq!(Costs::load(&path).unwrap(), c);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_median_of_calibrations_is_taken_figure_by_figure() {
        let base = Costs::for_tests();
        let rounds: Vec<Costs> = [1.0, 3.0, 2.0]
            .iter()
            .map(|&k| {
                let mut c = base.clone();
                c.net.wake_ns = 10_000.0 * k;
                c.io.pwrite_curve = vec![[4096.0, 1_000.0 * k], [1e6, 90_000.0 + k]];
                c.io.pwrite_serialized = k != 3.0;
                c.samples = vec![Sample {
                    name: format!("round {k}"),
                    value: k,
                    unit: "x".into(),
                }];
                c
            })
            .collect();
        let m = Costs::median_of(&rounds).unwrap();
        assert_eq!(m.net.wake_ns, 20_000.0);
        // Curves point by point: the sizes stay, each cost is its own median.
        assert_eq!(m.io.pwrite_curve, vec![[4096.0, 2_000.0], [1e6, 90_002.0]]);
        assert!(m.io.pwrite_serialized, "two of three said so");
        assert_eq!(
            (m.schema, m.machine.cores),
            (base.schema, base.machine.cores)
        );
        assert_eq!(m.lock, base.lock);
        assert_eq!(m.samples.len(), 3, "every round's samples kept");
        // Two rounds: the middle of the two.
        assert_eq!(
            Costs::median_of(&rounds[..2]).unwrap().net.wake_ns,
            20_000.0
        );
        // Curves of different lengths are not one shape: an error, not a guess.
        let mut odd = rounds.clone();
        odd[1].io.pwrite_curve.pop();
        let e = Costs::median_of(&odd).unwrap_err();
        assert!(e.contains("pwrite_curve"), "{e}");
        assert!(Costs::median_of(&[]).is_err());
    }

    #[test]
    fn bad_files_are_refused_with_the_field_named() {
        let mut c = Costs::for_tests();
        c.lock.server_pattern_range_ns = -1.0;
        let text = serde_json::to_string(&c).unwrap();
        let e = Costs::parse(&text, "x").unwrap_err().to_string();
        assert!(e.contains("lock.server_pattern_range_ns"), "{e}");
        let mut c = Costs::for_tests();
        c.schema = SCHEMA + 1;
        let e = Costs::parse(&serde_json::to_string(&c).unwrap(), "x").unwrap_err();
        assert!(matches!(e, CostsError::Schema { .. }), "{e}");
        assert!(Costs::parse("{\"schema\": 1}", "x").is_err());
        assert!(Costs::parse("not json", "x").is_err());
        let mut c = Costs::for_tests();
        c.machine.cores = 0;
        assert!(Costs::parse(&serde_json::to_string(&c).unwrap(), "x").is_err());
        let mut c = Costs::for_tests();
        c.io.pwrite_curve.reverse();
        assert!(Costs::parse(&serde_json::to_string(&c).unwrap(), "x").is_err());
        c.io.pwrite_curve.clear();
        assert!(Costs::parse(&serde_json::to_string(&c).unwrap(), "x").is_err());
    }

    #[test]
    fn contention_starts_at_one_writer_and_interpolates() {
        let mut c = Costs::for_tests();
        c.io.pwrite_interleaved = vec![[2.0, 1.2], [4.0, 1.6]];
        assert_eq!(c.pwrite_interleaved(1.0), 1.0);
        assert_eq!(c.pwrite_interleaved(0.0), 1.0);
        assert!((c.pwrite_interleaved(2.0) - 1.2).abs() < 1e-12);
        assert!((c.pwrite_interleaved(3.0) - 1.4).abs() < 1e-12);
        assert_eq!(c.pwrite_interleaved(64.0), 1.6);
        c.io.pwrite_interleaved.clear();
        assert_eq!(c.pwrite_interleaved(8.0), 1.0);
        c.io.mmap_shared_byte_ns = vec![[2.0, 0.6], [8.0, 1.2]];
        assert_eq!(c.mmap_shared_byte_ns(1.0), Some(0.6));
        assert!((c.mmap_shared_byte_ns(4.0).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(c.mmap_shared_byte_ns(16.0), Some(1.2));
        c.io.mmap_shared_byte_ns = vec![[4.0, 1.0], [2.0, 1.0]];
        let e = Costs::parse(&serde_json::to_string(&c).unwrap(), "x").unwrap_err();
        assert!(e.to_string().contains("io.mmap_shared_byte_ns"), "{e}");
        c.io.mmap_shared_byte_ns = vec![[2.0, 0.0]];
        assert!(Costs::parse(&serde_json::to_string(&c).unwrap(), "x").is_err());
        c.io.mmap_shared_byte_ns.clear();
        assert_eq!(c.mmap_shared_byte_ns(4.0), None);
        // Spins: none for one writer, linear from there, flat beyond the last point; 0 is
        // a measurement, a negative one is not.
        c.io.pwrite_spin = vec![[2.0, 0.4], [4.0, 0.6]];
        assert_eq!(c.pwrite_spin(1.0), 0.0);
        assert!((c.pwrite_spin(1.5) - 0.2).abs() < 1e-12);
        assert!((c.pwrite_spin(3.0) - 0.5).abs() < 1e-12);
        assert_eq!(c.pwrite_spin(8.0), 0.6);
        c.io.mmap_shared_byte_ns = vec![[2.0, 0.5], [4.0, 0.6]];
        c.io.mmap_spin = vec![[2.0, 0.5], [4.0, 0.8]];
        // Core time, whatever they burnt: four writers on two cores had both.
        c.machine.cores = 2;
        assert!((c.mmap_shared_core_byte_ns(4.0).unwrap() - 0.6 * 2.0).abs() < 1e-12);
        c.machine.cores = 8;
        assert!((c.mmap_shared_core_byte_ns(4.0).unwrap() - 0.6 * 4.0).abs() < 1e-12);
        // The call path by bytes per call: flat below the first point and above the last.
        c.lock.client_call_curve = vec![[8.0, 10_000.0], [47_008.0, 20_000.0]];
        assert_eq!(c.client_call_ns(1), 10_000.0);
        assert!((c.client_call_ns(23_508) - 15_000.0).abs() < 1e-6);
        assert_eq!(c.client_call_ns(1 << 20), 20_000.0);
        c.lock.client_call_curve.clear();
        assert_eq!(c.client_call_ns(8), 0.0);
        c.io.mmap_spin = vec![[2.0, 0.0]];
        assert!(Costs::parse(&serde_json::to_string(&c).unwrap(), "x").is_ok());
        c.io.mmap_spin = vec![[2.0, -0.1]];
        let e = Costs::parse(&serde_json::to_string(&c).unwrap(), "x").unwrap_err();
        assert!(e.to_string().contains("io.mmap_spin"), "{e}");
        c.io.pwrite_shared = [1.25, 1.2];
        assert_eq!(c.pwrite_shared(1.0), 1.0);
        assert!((c.pwrite_shared(1.125) - 1.1).abs() < 1e-12);
        assert!((c.pwrite_shared(1.5) - 1.4).abs() < 1e-12);
        c.io.pwrite_shared = [1.0, 1.2];
        let e = Costs::parse(&serde_json::to_string(&c).unwrap(), "x").unwrap_err();
        assert!(e.to_string().contains("io.pwrite_shared"), "{e}");
    }

    #[test]
    fn the_pwrite_curve_interpolates_and_extends() {
        let c = Costs::for_tests();
        assert_eq!(c.pwrite_ns(100), 4_000.0);
        assert_eq!(c.pwrite_ns(4096), 4_000.0);
        let mid = c.pwrite_ns((4096 + 1048576) / 2);
        assert!((mid - 102_000.0).abs() < 1.0, "{mid}");
        assert!(c.pwrite_ns(2 << 20) > 390_000.0);
    }
}
