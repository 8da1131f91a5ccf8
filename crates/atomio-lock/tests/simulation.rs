//! Seeded simulations of ≥ 32 clients and ≥ 4 servers running every method and protocol on
//! random overlapping noncontiguous requests with randomized delivery order.

use atomio_lock::sim::{run, SimConfig};
use atomio_lock::{Method, Protocol};

fn seeds() -> std::ops::Range<u64> {
    // ATOMIO_SIM_SEEDS=N widens the sweep; the default keeps CI fast.
    let n = std::env::var("ATOMIO_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let first = std::env::var("ATOMIO_SIM_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    first..first + n
}

#[test]
fn all_methods_and_protocols_are_safe_and_deadlock_free() {
    let mut totals = (0, 0, 0);
    for seed in seeds() {
        let cfg = SimConfig::new(seed);
        let r = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
        totals.0 += r.ops;
        totals.1 += r.waits;
        totals.2 += r.truncations;
    }
    // The workload must actually contend, or the test proves nothing.
    assert!(
        totals.1 > 0,
        "no request ever waited: the simulation has no contention"
    );
    assert!(totals.2 > 0, "no out-of-order lock was ever cut back");
    eprintln!(
        "ops {} waits {} truncations {}",
        totals.0, totals.1, totals.2
    );
}

#[test]
fn each_protocol_alone_survives_heavy_contention() {
    for protocol in Protocol::ALL {
        for seed in seeds().take(6) {
            let mut cfg = SimConfig::new(1000 + seed);
            cfg.protocols = vec![protocol];
            cfg.file_bytes = 1024;
            cfg.clients = 40;
            cfg.servers = 5;
            run(&cfg).unwrap_or_else(|f| panic!("{protocol}: {f}"));
        }
    }
}

/// Server-major tiers (interval I/O's plans) under every protocol: safe and live.
#[test]
fn tiers_by_server_are_safe_and_deadlock_free() {
    use atomio_lock::sim::Tiers;
    let mut waits = 0;
    for protocol in Protocol::ALL {
        for seed in seeds().take(8) {
            let mut cfg = SimConfig::new(3000 + seed);
            cfg.tiers = Tiers::ByServer;
            cfg.protocols = vec![protocol];
            cfg.file_bytes = 1024;
            waits += run(&cfg)
                .unwrap_or_else(|f| panic!("{protocol}: {f}"))
                .waits;
        }
    }
    assert!(waits > 0, "no request ever waited: nothing was ordered");
}

#[test]
fn posix_two_phase_with_many_pieces_completes() {
    for seed in seeds().take(4) {
        let mut cfg = SimConfig::new(2000 + seed);
        cfg.methods = vec![Method::Posix];
        cfg.protocols = vec![Protocol::TwoPhase];
        cfg.stripe_size = 16;
        run(&cfg).unwrap_or_else(|f| panic!("{f}"));
    }
}

/// Negative controls: each deliberate bug must be caught by some seed, or the checks above
/// prove nothing.
#[test]
fn the_checks_catch_deliberate_bugs() {
    use atomio_lock::sim::SimFault;
    for (fault, expect) in [
        (SimFault::SkipTruncation, "deadlock"),
        (SimFault::HeldAfterOptimistic, "conflicting"),
        (SimFault::ServerIgnoresConflicts, "conflicting"),
        (SimFault::MixedTiers, "deadlock"),
    ] {
        let caught = (0..200u64).find_map(|seed| {
            let mut cfg = SimConfig::new(seed);
            cfg.fault = fault;
            if fault == SimFault::SkipTruncation {
                cfg.protocols = vec![Protocol::OneTry, Protocol::AltTry];
            }
            if fault == SimFault::MixedTiers {
                // Waits (two-phase rounds) are where the order matters.
                cfg.protocols = vec![Protocol::TwoPhase];
                cfg.file_bytes = 1024;
            }
            run(&cfg).err()
        });
        let f = caught.unwrap_or_else(|| panic!("{fault:?} was never detected in 200 seeds"));
        assert!(f.what.contains(expect), "{fault:?} caught as: {f}");
        eprintln!("{fault:?}: caught with seed {} at step {}", f.seed, f.step);
    }
}

/// Freezes (lease lapses), connection resets, partitions, server crashes and restarts, and
/// abandoned operations, for every protocol: safe in lease time and live. `ATOMIO_SIM_FAULT_SEEDS` widens the sweep (the closing
/// note's 10,000+ seeds per protocol ran that way).
#[test]
fn every_protocol_survives_freezes_resets_and_lapsed_leases() {
    let n: u64 = std::env::var("ATOMIO_SIM_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    for protocol in Protocol::ALL {
        let mut totals = atomio_lock::sim::SimReport::default();
        for seed in 0..n {
            let mut cfg = SimConfig::with_faults(5000 + seed);
            cfg.protocols = vec![protocol];
            let r = run(&cfg).unwrap_or_else(|f| panic!("{protocol}: {f}"));
            totals.ops += r.ops;
            totals.freezes += r.freezes;
            totals.resets += r.resets;
            totals.lapses += r.lapses;
            totals.abandoned += r.abandoned;
            totals.partitions += r.partitions;
            totals.crashes += r.crashes;
        }
        eprintln!(
            "{protocol}: {n} seeds, ops {} freezes {} resets {} partitions {} crashes {} \
             lapses {} abandoned {}",
            totals.ops,
            totals.freezes,
            totals.resets,
            totals.partitions,
            totals.crashes,
            totals.lapses,
            totals.abandoned
        );
        // The faults must actually happen, or the test proves nothing.
        assert!(
            totals.freezes > 0 && totals.resets > 0 && totals.partitions > 0 && totals.crashes > 0,
            "{protocol}: {totals:?}"
        );
        assert!(
            totals.lapses > 0,
            "{protocol}: no lease ever lapsed: {totals:?}"
        );
    }
}

/// Negative controls for the fault mechanisms: expiring leases before the clients' view
/// of them ends, abandoning without freeing the other servers' locks, and a restarted
/// server that serves before its grace period ends, must be caught.
#[test]
fn the_fault_checks_catch_broken_leases_and_missing_cleanup() {
    use atomio_lock::sim::SimFault;
    // A server that lapses a live client may also strand that client's locks elsewhere:
    // the client's releases at the lapsing server are refused while it keeps renewing at
    // the others, so its operation never finishes and its other locks outlive the run.
    for (fault, expect) in [
        (
            SimFault::ServerLeaseTooShort,
            &["conflicting", "still holds"][..],
        ),
        (SimFault::NoCleanup, &["still holds"][..]),
        (SimFault::NoGrace, &["conflicting"][..]),
    ] {
        // Seeds until the first catch (deterministic; NoGrace's needs hundreds).
        let caught = (0..3000u64).find_map(|seed| {
            let mut cfg = SimConfig::with_faults(seed);
            cfg.fault = fault;
            run(&cfg).err()
        });
        let f = caught.unwrap_or_else(|| panic!("{fault:?} was never caught"));
        eprintln!("{fault:?} caught: {f}");
        assert!(
            expect.iter().any(|e| f.what.contains(e))
                || f.what.contains("deadlock")
                || f.what.contains("livelock"),
            "{fault:?} caught for the wrong reason: {f}"
        );
    }
}
