//! Platforms: where the model's clients and servers run and what connects them.
//!
//! `here` is this machine as the benchmarks use it: every client and server process on one
//! host, sharing its cores, over loopback (the calibrated `wire_ns`), writing one file in
//! one page cache. The others are the papers' clusters, for projections: one host per
//! client process and per server, a network of the paper's round trip and bandwidth. CPU
//! costs stay this machine's (atomio's own code, measured here); only the hardware around
//! them changes.
//!
//! **Invariants:** a platform's one-way latency is ≥ 0 and its ping round trip is never
//! below atomio's own CPU per round trip (the wire adds what the paper's RTT leaves).

use crate::costs::Costs;
use crate::engine::{Ns, Placement};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Platform {
    pub name: String,
    pub summary: String,
    /// `Some(cores)`: every actor on one host of that many cores; `None`: a host per
    /// client and per server.
    pub shared_cores: Option<u32>,
    pub client_cores: u32,
    pub server_cores: u32,
    /// One-way network latency between hosts.
    pub latency_ns: Ns,
    /// Time an idle core takes to start a job (`NetCosts::wake_ns`: the calibrated
    /// machine's; the papers' bare-metal nodes: 0).
    pub wake_ns: Ns,
    /// The spread of job costs and the call time it was measured on
    /// (`IoCosts::cost_spread`, `cost_spread_ns`; atomio's own code, so every platform's).
    pub jitter: f64,
    pub jitter_ns: f64,
    /// Each host's NIC, bytes/s each way (`None`: not a limit).
    pub nic_bytes_per_s: Option<f64>,
    /// A data server's storage, bytes/s (`None`: its page cache, `pwrite` costs).
    pub server_disk_bytes_per_s: Option<f64>,
    /// Clients' writes into the user's file go through one inode lock (one page cache).
    pub shared_file_lock: bool,
    /// How a host's cores take ready processes (`here`: per-core run queues as this
    /// machine's kernel keeps them, when the cost file has its tick).
    pub placement: Placement,
}

/// The papers' clusters and this machine, by name.
pub const NAMES: &[&str] = &["here", "ching07", "seqdlm22"];

impl Platform {
    pub fn by_name(name: &str, costs: &Costs) -> Option<Self> {
        match name {
            "here" => Some(Self::here(costs)),
            "ching07" => Some(Self::ching07(costs)),
            "seqdlm22" => Some(Self::seqdlm22(costs)),
            _ => None,
        }
    }

    /// This machine, loopback, as every benchmark here runs.
    pub fn here(costs: &Costs) -> Self {
        Platform {
            name: "here".into(),
            summary: format!(
                "this machine: {} cores shared by every client and server, loopback TCP",
                costs.machine.cores
            ),
            shared_cores: Some(costs.machine.cores),
            client_cores: 1,
            server_cores: 1,
            latency_ns: costs.net.wire_ns.round() as Ns,
            wake_ns: costs.net.wake_ns.round() as Ns,
            jitter: costs.io.cost_spread,
            jitter_ns: costs.io.cost_spread_ns,
            nic_bytes_per_s: None,
            server_disk_bytes_per_s: None,
            shared_file_lock: costs.io.pwrite_serialized,
            placement: costs.machine.placement(),
        }
    }

    /// Ching et al. §6: Feynman's Ganymede nodes, Myrinet-2000 (IP, ~50 µs round trip,
    /// 2 Gb/s), one core per process, PVFS servers on their own nodes.
    pub fn ching07(costs: &Costs) -> Self {
        Platform {
            name: "ching07".into(),
            summary: "Ching et al. 2007: a node per process and per server, 50 µs ping RTT, 2 Gb/s"
                .into(),
            shared_cores: None,
            client_cores: 1,
            server_cores: 1,
            latency_ns: wire_for_rtt(costs, 50_000.0),
            wake_ns: 0,
            jitter: costs.io.cost_spread,
            jitter_ns: costs.io.cost_spread_ns,
            nic_bytes_per_s: Some(250e6),
            server_disk_bytes_per_s: None,
            shared_file_lock: false,
            placement: Placement::Shared,
        }
    }

    /// Chen et al. 2022 §V-A and Table I: 96 nodes on HDR InfiniBand (100 Gb/s, 1 µs),
    /// an NVMe SSD per data server (3 GB/s), a node per client and per server.
    pub fn seqdlm22(costs: &Costs) -> Self {
        Platform {
            name: "seqdlm22".into(),
            summary:
                "Chen et al. 2022: a node per client and per server, 1 µs wire, 12.5 GB/s NIC, 3 GB/s NVMe"
                    .into(),
            shared_cores: None,
            client_cores: 2,
            server_cores: 2,
            latency_ns: wire_for_rtt(costs, 0.0).max(500),
            wake_ns: 0,
            jitter: costs.io.cost_spread,
            jitter_ns: costs.io.cost_spread_ns,
            nic_bytes_per_s: Some(12.5e9),
            server_disk_bytes_per_s: Some(3e9),
            shared_file_lock: false,
            placement: Placement::Shared,
        }
    }
}

/// atomio's own CPU per ping round trip (client and server, both ways, both pick-ups).
pub fn cpu_per_round_trip(costs: &Costs) -> f64 {
    let n = &costs.net;
    2.0 * (n.client_msg_ns + n.server_msg_ns) + n.client_batch_ns + n.server_batch_ns
}

/// The one-way wire latency that makes a ping take `rtt_ns` on top of atomio's own CPU.
fn wire_for_rtt(costs: &Costs, rtt_ns: f64) -> Ns {
    ((rtt_ns - cpu_per_round_trip(costs)).max(0.0) / 2.0).round() as Ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_adds_only_what_the_cpu_leaves_of_the_rtt() {
        let c = Costs::for_tests();
        let cpu = cpu_per_round_trip(&c);
        let p = Platform::ching07(&c);
        assert_eq!(p.latency_ns as f64, ((50_000.0 - cpu) / 2.0).round());
        let mut slow = c.clone();
        slow.net.server_batch_ns = 60_000.0;
        assert_eq!(Platform::ching07(&slow).latency_ns, 0);
        for n in NAMES {
            assert!(Platform::by_name(n, &c).is_some(), "{n}");
        }
        assert!(Platform::by_name("nowhere", &c).is_none());
    }
}
