//! The full-stack simulation (locks + data, random delivery, verified by the verifier): many
//! seeds run clean, and the negative controls (no locks; release before the data is
//! acknowledged) are caught on some seed — the check can fail.

use atomio_sim::stack::{run, StackFault, StackSimConfig};

fn seeds() -> u64 {
    std::env::var("ATOMIO_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

#[test]
fn every_seed_is_atomic_and_live() {
    let mut calls = 0;
    for seed in 0..seeds() {
        let r = run(&StackSimConfig::new(seed)).unwrap_or_else(|f| panic!("{f}"));
        calls += r.calls;
    }
    assert!(calls > 0);
}

#[test]
fn more_clients_and_servers() {
    for seed in 1000..1000 + seeds() / 4 + 1 {
        let mut cfg = StackSimConfig::new(seed);
        cfg.clients = 16;
        cfg.servers = 5;
        cfg.calls_per_client = 3;
        run(&cfg).unwrap_or_else(|f| panic!("{f}"));
    }
}

/// The verifier catches `fault` on some seed (servers without mandatory locks, which
/// would refuse some of the faulty writes themselves; see below).
fn caught(fault: StackFault) -> u64 {
    for seed in 0..200 {
        let mut cfg = StackSimConfig::new(seed);
        cfg.fault = fault;
        cfg.read_fraction = 0.0;
        cfg.mandatory_locks = false;
        if let Err(f) = run(&cfg) {
            assert!(f.what.contains("not atomic"), "{f}");
            eprintln!("{fault:?} caught: {f}");
            return seed;
        }
    }
    panic!("{fault:?} was never caught in 200 seeds: the verifier check cannot fail");
}

#[test]
fn calls_without_locks_are_caught() {
    caught(StackFault::NoLocks);
}

#[test]
fn releasing_before_the_data_is_acknowledged_is_caught() {
    caught(StackFault::EarlyRelease);
}

/// Mandatory locks at the servers stop what an early release would tear: a write that
/// arrives after its writer's locks went (and another client got them) is refused
/// `Locked`, on some seeds; no seed ends with a non-atomic file.
#[test]
fn mandatory_locks_refuse_writes_after_an_early_release() {
    let mut refused = 0;
    for seed in 0..200 {
        let mut cfg = StackSimConfig::new(seed);
        cfg.fault = StackFault::EarlyRelease;
        cfg.read_fraction = 0.0;
        if let Err(f) = run(&cfg) {
            assert!(f.what.contains("Locked"), "seed {seed}: {f}");
            refused += 1;
        }
    }
    eprintln!("{refused} of 200 seeds had a late write refused");
    assert!(
        refused > 0,
        "no late write was ever refused: the check cannot fail"
    );
}

/// Clients killed mid-call: every write cut short appears whole or not at all, locks and
/// writes in doubt left by the dead are released or resolved, and the run stays live.
#[test]
fn crashed_writers_leave_whole_writes_or_none() {
    let (mut crashes, mut visible) = (0, 0);
    for seed in 5000..5000 + seeds() {
        let mut cfg = StackSimConfig::new(seed);
        cfg.crashes = true;
        let r = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
        crashes += r.crashes;
        visible += r.crashed_writes_visible;
    }
    eprintln!("{crashes} crashes, {visible} cut-short writes visible (whole)");
    assert!(
        crashes > 0,
        "no client ever crashed: the fault is not exercised"
    );
}

/// Negative control: with plain (unstaged) writes the same crashes tear writes.
#[test]
fn crashes_with_unstaged_writes_are_caught() {
    for seed in 0..400 {
        let mut cfg = StackSimConfig::new(seed);
        cfg.fault = StackFault::NoStaging;
        cfg.crashes = true;
        cfg.read_fraction = 0.0;
        if let Err(f) = run(&cfg) {
            assert!(f.what.contains("not atomic"), "{f}");
            eprintln!("NoStaging caught: {f}");
            return;
        }
    }
    panic!("unstaged writes never tore under crashes in 400 seeds: the check cannot fail");
}
