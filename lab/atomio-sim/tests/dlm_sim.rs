//! The DLM stack simulation (real client machines, lock servers and data services; see
//! `atomio_sim::dlm`): clean over many seeds for SeqDLM and the traditional DLMs,
//! and both negative controls caught. `atomio-lab sim --dlm --seeds N` runs more.

use atomio_client::dlm::DlmSpec;
use atomio_sim::dlm::{run, DlmSimConfig, Fault};

fn sweep(spec: DlmSpec, seeds: std::ops::Range<u64>) {
    for seed in seeds {
        let cfg = DlmSimConfig {
            spec,
            ..DlmSimConfig::new(seed)
        };
        if let Err(f) = run(&cfg) {
            panic!("{} seed {seed}: {f}", spec.name());
        }
    }
}

#[test]
fn seqdlm_is_atomic_under_every_interleaving() {
    sweep(DlmSpec::seqdlm(), 0..300);
}

#[test]
fn ablations_and_traditional_dlms_are_atomic() {
    for name in [
        "seqdlm:no-er",
        "seqdlm:bw:no-conv",
        "seqdlm:pw",
        "dlm-basic",
        "dlm-lustre",
    ] {
        sweep(DlmSpec::parse(name).unwrap().unwrap(), 1000..1100);
    }
}

fn caught(fault: Fault) -> u64 {
    for seed in 0..2000 {
        let cfg = DlmSimConfig {
            fault,
            ..DlmSimConfig::new(seed)
        };
        if run(&cfg).is_err() {
            return seed;
        }
    }
    panic!("{fault:?} was never caught in 2000 seeds");
}

#[test]
fn nbw_across_stripes_is_caught() {
    eprintln!("caught at seed {}", caught(Fault::NbwAcrossStripes));
}

#[test]
fn sn_blind_data_servers_are_caught() {
    eprintln!("caught at seed {}", caught(Fault::SnBlindServers));
}
