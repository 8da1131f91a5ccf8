//! The projection (`atomio-lab sim --scale`): the papers' workloads on the papers' clusters,
//! from one client to 4,096 clients × 64 servers, every run safety-checked, and the
//! projections at the papers' own sizes set beside the papers' figures.
//!
//! Studies:
//! * `ching-locks` — Ching §6.1 (Fig. 4): clients = servers (then 64 servers), 128 Ki
//!   one-byte locks 64 bytes apart per client, acquire rate per method × protocol;
//!   `ching07`. POSIX and list runs take fewer locks per client past a message budget
//!   (their rate is per message, not per run; the table says how many).
//! * `s3d` — Ching §6.2: the S3D checkpoint on atomio's data servers (PVFS's place in the
//!   paper), none / POSIX / list / datatype one-try; `ching07`.
//! * `ior-hard` — Chen §V-C2: IOR N-1 strided, 47,008-byte writes, 4 stripes of 1 MiB;
//!   SeqDLM and DLM-Lustre (PIO bandwidth), atomio's lock strategies on its data servers;
//!   `seqdlm22`; at 96 clients also 752,128-byte writes and 8 stripes (the paper's cases).
//! * `tile` — Chen §V-D: mpi-tile-io with 4-byte pixels and 100-pixel overlaps; SeqDLM,
//!   datatype locking (its DLM-datatype), versioning and none; `seqdlm22`; at 96 clients
//!   1, 4 and 16 stripes (the paper's range).
//!
//! **Invariants:** every row comes from a run whose safety checks passed (a failure stops
//! the projection with the error); sizes, seeds and budgets are fixed, so the projection
//! is deterministic.

use crate::costs::Costs;
use crate::dlm::{self, Dlm, DlmFault};
use crate::lockbench::{self, Fault, LockBenchSpec};
use crate::platform::Platform;
use crate::workload::{self, DataPath};
use atomio_client::Strategy;
use atomio_lock::{Method, Protocol};
use atomio_workloads::{Workload, WorkloadPlan};
use serde::Serialize;
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct ProjectConfig {
    pub max_clients: u32,
    pub max_servers: u32,
    /// Small sizes and few points (tests, trying things out).
    pub quick: bool,
    pub studies: Vec<String>,
}

pub const STUDIES: &[&str] = &["ching-locks", "s3d", "ior-hard", "tile"];

impl Default for ProjectConfig {
    fn default() -> Self {
        Self {
            max_clients: 4096,
            max_servers: 64,
            quick: false,
            studies: STUDIES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// One point of a curve.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub study: &'static str,
    pub platform: String,
    pub strategy: String,
    pub clients: u32,
    pub servers: u32,
    pub unit: &'static str,
    pub value: f64,
    /// What else the row needs to be read right (locks per client, stripes, …).
    pub detail: String,
    pub sim_seconds: f64,
    pub wall_seconds: f64,
    /// Safety checks the run passed.
    pub checks: u64,
}

/// A projection at a paper's own size beside the paper's figure.
#[derive(Clone, Debug, Serialize)]
pub struct PaperPoint {
    pub what: String,
    pub source: &'static str,
    pub unit: &'static str,
    pub paper: f64,
    pub projected: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Projection {
    pub platforms: Vec<Platform>,
    pub rows: Vec<Row>,
    pub papers: Vec<PaperPoint>,
    pub wall_seconds: f64,
}

/// 1, 2, 4, … up to `max` (and `max` itself).
fn powers(max: u32, from: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut n = from.max(1);
    while n < max {
        v.push(n);
        n *= 2;
    }
    v.push(max);
    v
}

fn plan(name: &str, args: &[String], clients: u32) -> Result<WorkloadPlan, String> {
    Workload::from_name(name, args)
        .map_err(|e| e.to_string())?
        .plan(clients)
        .map_err(|e| e.to_string())
}

/// Runs the studies; `say` gets a line per run (progress).
pub fn run(
    costs: &Costs,
    cfg: &ProjectConfig,
    say: &mut dyn FnMut(&str),
) -> Result<Projection, String> {
    let started = Instant::now();
    let mut p = Projection {
        platforms: vec![Platform::ching07(costs), Platform::seqdlm22(costs)],
        rows: Vec::new(),
        papers: Vec::new(),
        wall_seconds: 0.0,
    };
    let wants = |s: &str| cfg.studies.iter().any(|x| x == s);
    if wants("ching-locks") {
        ching_locks(costs, cfg, &mut p, say)?;
    }
    if wants("s3d") {
        s3d(costs, cfg, &mut p, say)?;
    }
    if wants("ior-hard") {
        ior_hard(costs, cfg, &mut p, say)?;
    }
    if wants("tile") {
        tile(costs, cfg, &mut p, say)?;
    }
    p.wall_seconds = started.elapsed().as_secs_f64();
    Ok(p)
}

/// Runs one model run named `what` with progress lines (`ticker`); returns its result and
/// the wall seconds it took.
fn timed<R>(
    say: &mut dyn FnMut(&str),
    what: &str,
    run: impl FnOnce(&mut dyn FnMut(crate::engine::EngineStats)) -> Result<R, String>,
) -> Result<(R, f64), String> {
    let t0 = Instant::now();
    let r = run(&mut ticker(say, what)).map_err(|e| format!("{what}: {e}"))?;
    Ok((r, t0.elapsed().as_secs_f64()))
}

/// `plan` under `strategy` on `servers` of atomio's data servers striped in `stripe` bytes,
/// timed with progress; says its rate.
fn on_servers(
    say: &mut dyn FnMut(&str),
    what: &str,
    plan: &WorkloadPlan,
    strategy: &str,
    (servers, stripe): (u32, u64),
    costs: &Costs,
    platform: &Platform,
) -> Result<(workload::WorkloadResult, f64), String> {
    let strategy: Strategy = strategy.parse()?;
    let (r, wall) = timed(say, what, |tick| {
        workload::run(
            plan,
            &strategy,
            servers,
            DataPath::Servers {
                stripe_size: stripe,
            },
            costs,
            platform,
            Fault::None,
            tick,
        )
    })?;
    say(&format!("  {what}: {:.1} MiB/s ({wall:.1} s)", r.mib_per_s));
    Ok((r, wall))
}

/// Progress for long runs: a line every 2^20 events.
fn ticker<'a>(
    say: &'a mut dyn FnMut(&str),
    what: &'a str,
) -> impl FnMut(crate::engine::EngineStats) + 'a {
    move |s| {
        say(&format!(
            "    … {what}: {} M events, {:.3} virtual s",
            s.events >> 20,
            s.now as f64 / 1e9
        ))
    }
}

fn ching_locks(
    costs: &Costs,
    cfg: &ProjectConfig,
    p: &mut Projection,
    say: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let platform = Platform::ching07(costs);
    let cases = [
        (Method::Posix, Protocol::TwoPhase),
        (Method::Posix, Protocol::OneTry),
        (
            Method::List {
                max_ranges: atomio_lock::DEFAULT_LIST_RANGES,
            },
            Protocol::TwoPhase,
        ),
        (
            Method::List {
                max_ranges: atomio_lock::DEFAULT_LIST_RANGES,
            },
            Protocol::OneTry,
        ),
        (Method::Datatype, Protocol::TwoPhase),
        (Method::Datatype, Protocol::OneTry),
    ];
    let full: u64 = if cfg.quick { 4_096 } else { 131_072 };
    // Messages per run past which POSIX and list take fewer locks per client (their rate
    // is per message; a run of 2^19 messages is minutes of the projection's time at 4,096
    // clients otherwise).
    let budget: u64 = if cfg.quick { 1 << 16 } else { 1 << 19 };
    for clients in powers(cfg.max_clients, 1) {
        let servers = clients.min(cfg.max_servers);
        for &(method, protocol) in &cases {
            let per_msg = match method {
                Method::Posix => 1,
                Method::List { max_ranges } => max_ranges as u64,
                Method::Datatype => u64::MAX,
            };
            let locks = if per_msg == u64::MAX {
                full
            } else {
                full.min((budget * per_msg / u64::from(clients)).max(64))
            };
            let spec = LockBenchSpec {
                clients,
                servers,
                locks,
                spacing: 64,
                overlap_pct: None,
                method,
                protocol,
                stripe_size: atomio_layout::DEFAULT_STRIPE_SIZE,
                odd_clients_read: false,
                fault: Fault::None,
            };
            let label = spec.label();
            let what = format!("ching-locks {label} {clients}x{servers}");
            let (r, wall) = timed(say, &what, |tick| {
                lockbench::run(&spec, costs, &platform, tick)
            })?;
            say(&format!(
                "  {what}: {:.0} locks/s ({:.1} s)",
                r.acquire_locks_per_s, wall
            ));
            let row = |unit, value| Row {
                study: "ching-locks",
                platform: platform.name.clone(),
                strategy: label.clone(),
                clients,
                servers,
                unit,
                value,
                detail: format!("{locks} locks/client, 64 B apart"),
                sim_seconds: r.sim_seconds,
                wall_seconds: wall,
                checks: r.safety_checks,
            };
            p.rows.push(row("acquire locks/s", r.acquire_locks_per_s));
            p.rows.push(row("release locks/s", r.release_locks_per_s));
            if clients == 32 {
                let paper = |label: &str, unit: &'static str, fig: &str, x: f64| PaperPoint {
                    what: format!("{label} at 32 clients × 32 servers ({fig})"),
                    source: "Ching et al. 2007 §6.1",
                    unit,
                    paper: x,
                    projected: if unit == "release locks/s" {
                        r.release_locks_per_s
                    } else {
                        r.acquire_locks_per_s
                    },
                };
                match label.as_str() {
                    "datatype-one-try" => {
                        p.papers.push(paper(
                            "datatype-one-try acquire",
                            "acquire locks/s",
                            "Fig. 4a",
                            2_059_165.0,
                        ));
                        p.papers.push(paper(
                            "datatype unlock",
                            "release locks/s",
                            "Fig. 4b",
                            55_721_183.0,
                        ));
                    }
                    "list-one-try" => p.papers.push(paper(
                        "list-one-try acquire",
                        "acquire locks/s",
                        "Fig. 4a",
                        1_123_928.0,
                    )),
                    "posix-one-try" => p.papers.push(paper(
                        "posix-one-try acquire",
                        "acquire locks/s",
                        "Fig. 4a",
                        40_532.0,
                    )),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

fn s3d(
    costs: &Costs,
    cfg: &ProjectConfig,
    p: &mut Projection,
    say: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let platform = Platform::ching07(costs);
    let args: Vec<String> = if cfg.quick {
        ["--grid-x", "32", "--grid-y", "32", "--grid-z", "32"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let strategies = [
        "none",
        "ching:posix:one-try",
        "ching:list:one-try",
        "ching:datatype:one-try",
    ];
    for clients in powers(cfg.max_clients, 8) {
        let servers = clients.min(cfg.max_servers);
        let plan = plan("s3d", &args, clients)?;
        let mut none = None;
        for st in strategies {
            let what = format!("s3d {st} {clients}x{servers}");
            let stripe = atomio_layout::DEFAULT_STRIPE_SIZE;
            let (r, wall) = on_servers(say, &what, &plan, st, (servers, stripe), costs, &platform)?;
            if st == "none" {
                none = Some(r.mib_per_s);
            }
            let pct = none.map_or(0.0, |n| r.mib_per_s / n * 100.0);
            p.rows.push(Row {
                study: "s3d",
                platform: platform.name.clone(),
                strategy: st.into(),
                clients,
                servers,
                unit: "MiB/s",
                value: r.mib_per_s,
                detail: format!("{:.0}% of none, {} MiB", pct, r.bytes >> 20),
                sim_seconds: r.seconds,
                wall_seconds: wall,
                checks: r.safety_checks,
            });
            if (8..=64).contains(&clients) && st != "none" {
                let (paper, what) = match st {
                    "ching:datatype:one-try" => (
                        76.0,
                        "datatype-one-try % of no-lock (paper: 76–100 % from 8 to 64)",
                    ),
                    "ching:list:one-try" => (
                        73.0,
                        "list-one-try % of no-lock (paper: 73–100 % from 8 to 64)",
                    ),
                    _ => (35.0, "posix-one-try % of no-lock (paper: at best ~35 %)"),
                };
                p.papers.push(PaperPoint {
                    what: format!("S3D {what}, {clients} processes"),
                    source: "Ching et al. 2007 §6.2, Fig. 9",
                    unit: "% of none",
                    paper,
                    projected: pct,
                });
            }
        }
    }
    Ok(())
}

fn ior_args(xfer: u64, segments: u64) -> Vec<String> {
    vec![
        "--xfer-bytes".into(),
        xfer.to_string(),
        "--segments".into(),
        segments.to_string(),
    ]
}

fn ior_hard(
    costs: &Costs,
    cfg: &ProjectConfig,
    p: &mut Projection,
    say: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let platform = Platform::seqdlm22(costs);
    // Writes per client: 32, fewer past 128 clients (at least 2): SeqDLM's resources keep
    // every deferred NBW lock granted until it is hurried or flushed, and each request
    // scans them, so a stripe's work grows with the writes in flight; the PIO bandwidth
    // is a steady-state figure either way.
    let segments_for = |clients: u32| -> u64 {
        if cfg.quick {
            4
        } else {
            (4096 / u64::from(clients)).clamp(2, 32)
        }
    };
    let stripe = 1u64 << 20;
    let mut sizes = powers(cfg.max_clients, 1);
    if cfg.max_clients >= 96 && !sizes.contains(&96) {
        sizes.push(96);
        sizes.sort_unstable();
    }
    for clients in sizes {
        let segments = segments_for(clients);
        let plan = plan("ior-strided", &ior_args(47_008, segments), clients)?;
        for d in [Dlm::SeqDlm, Dlm::DlmLustre] {
            let what = format!("ior-hard {} {clients} clients, 4 stripes", d.name());
            let (r, wall) = timed(say, &what, |tick| {
                dlm::run(
                    &plan,
                    d,
                    4,
                    4,
                    stripe,
                    costs,
                    &platform,
                    DlmFault::None,
                    tick,
                )
            })?;
            say(&format!(
                "  {what}: PIO {:.1} MiB/s ({wall:.1} s)",
                r.pio_mib_per_s
            ));
            p.rows.push(Row {
                study: "ior-hard",
                platform: platform.name.clone(),
                strategy: d.name().into(),
                clients,
                servers: 4,
                unit: "PIO MiB/s",
                value: r.pio_mib_per_s,
                detail: format!(
                    "4 stripes of 1 MiB; with the flush {:.1} MiB/s",
                    r.total_mib_per_s
                ),
                sim_seconds: r.pio_seconds,
                wall_seconds: wall,
                checks: r.resource_checks + r.order_checks,
            });
        }
        for st in ["none", "bounding-extent", "ching:datatype:one-try"] {
            let what = format!("ior-hard {st} {clients} clients, 4 servers");
            let (r, wall) = on_servers(say, &what, &plan, st, (4, stripe), costs, &platform)?;
            p.rows.push(Row {
                study: "ior-hard",
                platform: platform.name.clone(),
                strategy: st.into(),
                clients,
                servers: 4,
                unit: "PIO MiB/s",
                value: r.mib_per_s,
                detail: "4 stripes of 1 MiB, staged writes".into(),
                sim_seconds: r.seconds,
                wall_seconds: wall,
                checks: r.safety_checks,
            });
        }
        if clients == 96 {
            // The paper's cases at 96 clients: SeqDLM over DLM-Lustre.
            for (stripes, xfer, paper) in [
                (4u32, 47_008u64, 3.6),
                (4, 752_128, 10.3),
                (8, 47_008, 2.0),
                (8, 752_128, 6.2),
            ] {
                let segs = if xfer > 100_000 {
                    (segments / 4).max(2)
                } else {
                    segments
                };
                let plan = plan_ior(xfer, segs, clients)?;
                let mut pio = Vec::new();
                for d in [Dlm::SeqDlm, Dlm::DlmLustre] {
                    let what = format!("ior {} 96 clients, {stripes} stripes, {xfer} B", d.name());
                    let r = dlm::run(
                        &plan,
                        d,
                        stripes,
                        stripes,
                        stripe,
                        costs,
                        &platform,
                        DlmFault::None,
                        ticker(say, &what),
                    )
                    .map_err(|e| format!("{what}: {e}"))?;
                    say(&format!("  {what}: PIO {:.1} MiB/s", r.pio_mib_per_s));
                    pio.push(r.pio_mib_per_s);
                }
                p.papers.push(PaperPoint {
                    what: format!(
                        "IOR N-1 strided, 96 clients, {stripes} stripes, {xfer} B writes: SeqDLM / DLM-Lustre PIO bandwidth ({:.0} / {:.0} MiB/s projected)",
                        pio[0], pio[1]
                    ),
                    source: "Chen et al. 2022 §V-C2, Fig. 21",
                    unit: "x",
                    paper,
                    projected: pio[0] / pio[1].max(1e-9),
                });
            }
        }
    }
    Ok(())
}

fn plan_ior(xfer: u64, segments: u64, clients: u32) -> Result<WorkloadPlan, String> {
    plan("ior-strided", &ior_args(xfer, segments), clients)
}

fn tile_args(quick: bool, tiles: Option<(u32, u32)>) -> Vec<String> {
    let (px, ov) = if quick { (128, 8) } else { (2048, 100) };
    let mut a: Vec<String> = vec![
        "--tile-x".into(),
        px.to_string(),
        "--tile-y".into(),
        px.to_string(),
        "--element-bytes".into(),
        "4".into(),
        "--overlap-x".into(),
        ov.to_string(),
        "--overlap-y".into(),
        ov.to_string(),
    ];
    if let Some((x, y)) = tiles {
        a.extend([
            "--tiles-x".into(),
            x.to_string(),
            "--tiles-y".into(),
            y.to_string(),
        ]);
    }
    a
}

fn tile(
    costs: &Costs,
    cfg: &ProjectConfig,
    p: &mut Projection,
    say: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let platform = Platform::seqdlm22(costs);
    let stripe = 1u64 << 20;
    let mut sizes = powers(cfg.max_clients, 1);
    if cfg.max_clients >= 96 && !sizes.contains(&96) {
        sizes.push(96);
        sizes.sort_unstable();
    }
    for clients in sizes {
        let tiles = (clients == 96).then_some((12, 8));
        let plan = plan("tile", &tile_args(cfg.quick, tiles), clients)?;
        let servers = clients.clamp(1, 16).min(cfg.max_servers);
        let push =
            |strategy: &str, value: f64, sim: f64, wall: f64, checks: u64, p: &mut Projection| {
                p.rows.push(Row {
                    study: "tile",
                    platform: platform.name.clone(),
                    strategy: strategy.into(),
                    clients,
                    servers,
                    unit: "PIO MiB/s",
                    value,
                    detail: format!("{servers} stripes of 1 MiB, 4-byte pixels"),
                    sim_seconds: sim,
                    wall_seconds: wall,
                    checks,
                })
            };
        let what = format!("tile seqdlm {clients} clients, {servers} stripes");
        let (r, wall) = timed(say, &what, |tick| {
            dlm::run(
                &plan,
                Dlm::SeqDlm,
                servers,
                servers,
                stripe,
                costs,
                &platform,
                DlmFault::None,
                tick,
            )
        })?;
        say(&format!(
            "  {what}: PIO {:.1} MiB/s ({:.1} s)",
            r.pio_mib_per_s, wall
        ));
        push(
            "seqdlm",
            r.pio_mib_per_s,
            r.pio_seconds,
            wall,
            r.resource_checks + r.order_checks,
            p,
        );
        for st in ["none", "ching:datatype:one-try"] {
            let what = format!("tile {st} {clients} clients, {servers} servers");
            let (r, wall) = on_servers(say, &what, &plan, st, (servers, stripe), costs, &platform)?;
            push(st, r.mib_per_s, r.seconds, wall, r.safety_checks, p);
        }
        let what = format!("tile versioning {clients} clients, {servers} servers");
        let (r, wall) = timed(say, &what, |tick| {
            crate::versioning::run(&plan, servers, costs, &platform, false, tick)
        })?;
        say(&format!(
            "  {what}: {:.1} MiB/s ({:.1} s)",
            r.mib_per_s, wall
        ));
        push("versioning", r.mib_per_s, r.seconds, wall, r.published, p);
        if clients == 96 {
            for (stripes, paper) in [(1u32, 51.0), (4, 0.0), (16, 4.1)] {
                let what = format!("tile 96 clients, {stripes} stripes");
                let seq = dlm::run(
                    &plan,
                    Dlm::SeqDlm,
                    stripes,
                    stripes,
                    stripe,
                    costs,
                    &platform,
                    DlmFault::None,
                    ticker(say, &what),
                )
                .map_err(|e| format!("{what}: {e}"))?;
                let dt: Strategy = "ching:datatype:one-try".parse()?;
                let dtr = workload::run(
                    &plan,
                    &dt,
                    stripes,
                    DataPath::Servers {
                        stripe_size: stripe,
                    },
                    costs,
                    &platform,
                    Fault::None,
                    ticker(say, &what),
                )
                .map_err(|e| format!("{what}: {e}"))?;
                say(&format!(
                    "  {what}: seqdlm PIO {:.1} MiB/s, datatype {:.1} MiB/s",
                    seq.pio_mib_per_s, dtr.mib_per_s
                ));
                if paper > 0.0 {
                    p.papers.push(PaperPoint {
                        what: format!(
                            "tile-io 96 clients (8×12 tiles), {stripes} stripe(s): SeqDLM / DLM-datatype write bandwidth ({:.0} / {:.0} MiB/s projected)",
                            seq.pio_mib_per_s, dtr.mib_per_s
                        ),
                        source: "Chen et al. 2022 §V-D, Fig. 23",
                        unit: "x",
                        paper,
                        projected: seq.pio_mib_per_s / dtr.mib_per_s.max(1e-9),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quick_projection_runs_every_study_with_checks() {
        let c = Costs::for_tests();
        let cfg = ProjectConfig {
            max_clients: 16,
            max_servers: 8,
            quick: true,
            ..ProjectConfig::default()
        };
        let mut lines = 0;
        let p = run(&c, &cfg, &mut |_| lines += 1).unwrap();
        for s in STUDIES {
            assert!(p.rows.iter().any(|r| r.study == *s), "{s}");
        }
        assert!(p.rows.iter().all(|r| r.value > 0.0 && r.value.is_finite()));
        // Lock studies checked every client's hold.
        assert!(p
            .rows
            .iter()
            .filter(|r| r.study == "ching-locks")
            .all(|r| r.checks == u64::from(r.clients)));
        assert!(lines > 0);
        assert_eq!(powers(16, 1), vec![1, 2, 4, 8, 16]);
        assert_eq!(powers(12, 8), vec![8, 12]);
    }
}
