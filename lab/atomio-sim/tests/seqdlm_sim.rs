//! The SeqDLM simulation (`atomio_sim::seqdlm`): many seeds clean for SeqDLM (with
//! and without early revocation) and the traditional DLMs, across 2–4 stripes; the negative
//! controls (NBW across stripes; data servers ignoring SNs) are caught by the verifier.

use atomio_lock::seqdlm::Config;
use atomio_sim::seqdlm::{run, Modes, SeqSimConfig};

fn seeds() -> u64 {
    std::env::var("ATOMIO_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

#[test]
fn seqdlm_writes_across_stripes_are_atomic() {
    let (mut early, mut discarded) = (0, 0);
    for seed in 0..seeds() {
        let mut cfg = SeqSimConfig::new(seed);
        cfg.stripes = 2 + (seed % 3) as usize;
        // Early revocation: both rules, the paper's alone, none.
        cfg.dlm.early_revocation = seed % 3 != 2;
        cfg.dlm.contention_revocation = seed % 3 == 0;
        let r = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
        early += r.early_grants;
        discarded += r.bytes_discarded;
    }
    eprintln!("{early} early grants, {discarded} flushed bytes discarded as older");
    assert!(
        early > 0,
        "early grant never happened: the runs do not exercise it"
    );
    assert!(discarded > 0, "no flush ever arrived out of SN order");
}

#[test]
fn traditional_dlms_are_atomic_too() {
    for seed in 0..seeds() / 2 {
        for dlm in [Config::DLM_BASIC, Config::DLM_LUSTRE] {
            let mut cfg = SeqSimConfig::new(seed);
            cfg.dlm = dlm;
            cfg.modes = Modes::AllPw;
            let r = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
            assert_eq!(r.early_grants, 0, "a traditional DLM granted early");
        }
    }
}

/// Negative control (the paper's Fig. 8): NBW across stripes lets early grant interleave
/// two writers' stripes in opposite orders.
#[test]
fn nbw_across_stripes_is_caught() {
    for seed in 0..2000 {
        let mut cfg = SeqSimConfig::new(seed);
        cfg.modes = Modes::AllNbw;
        if let Err(f) = run(&cfg) {
            assert!(f.what.contains("not atomic"), "{f}");
            eprintln!("caught: {f}");
            return;
        }
    }
    panic!("NBW across stripes never broke atomicity in 2,000 seeds: the check cannot fail");
}

/// Negative control: data servers that write flushes as they arrive let an early-granted
/// writer's older flush land over a newer write (caught by the SN-order check: with two
/// writes the verifier alone would accept the other serial order).
#[test]
fn sn_blind_data_servers_are_caught() {
    for seed in 0..2000 {
        let mut cfg = SeqSimConfig::new(seed);
        cfg.sn_blind_servers = true;
        // Few writes, so that no later write hides the older flush's damage.
        cfg.clients = 3;
        cfg.stripes = 1;
        cfg.writes_per_client = 1;
        cfg.max_ranges = 1;
        if let Err(f) = run(&cfg) {
            assert!(f.what.contains("SN order"), "{f}");
            eprintln!("caught: {f}");
            return;
        }
    }
    panic!("SN-blind data servers were never caught in 2,000 seeds: the check cannot fail");
}
