//! Default parameters: every workload plans at the client counts the harness uses, moves
//! roughly 32–256 MiB, keeps its structure, and is deterministic.

use crate::common::*;
use atomio_layout::Node;
use atomio_workloads::*;

const MIB: u64 = 1 << 20;

#[test]
fn defaults_move_tens_to_hundreds_of_mib() {
    for info in WORKLOADS {
        let w = Workload::from_name::<&str>(info.name, &[]).unwrap();
        let counts: &[u32] = if info.name == "regions" {
            &[1]
        } else {
            &[4, 8, 16]
        };
        for &n in counts {
            let plan = plan(&w, n).unwrap();
            check_cheap(&plan);
            let bytes = plan.write_bytes();
            assert!(
                (28 * MIB..=256 * MIB).contains(&bytes),
                "{} at {n} clients writes {} MiB",
                info.name,
                bytes / MIB
            );
        }
    }
}

#[test]
fn defaults_keep_structure() {
    for info in WORKLOADS {
        let w = Workload::from_name::<&str>(info.name, &[]).unwrap();
        let plan = plan(&w, 8).unwrap();
        for c in &plan.clients {
            for a in c.accesses(CallKind::Write) {
                let nodes = a.pattern().nodes();
                if info.name == "s3asim" {
                    // Genuinely unstructured: one hindexed of byte blocks.
                    assert_eq!(nodes.len(), 2);
                    continue;
                }
                assert!(nodes.len() <= 6, "{}: {} nodes", info.name, nodes.len());
                for n in nodes {
                    match n {
                        Node::Indexed { blocks, .. } => assert_eq!(blocks.len(), 1),
                        Node::Struct { fields } => assert!(fields.len() <= 4),
                        _ => {}
                    }
                }
            }
        }
    }
}

#[test]
fn plans_are_deterministic_and_serialize() {
    let small: Vec<Workload> = vec![
        Workload::from_name("ior-segmented", &["--xfer-bytes", "100", "--segments", "3"]).unwrap(),
        Workload::from_name("ior-hard", &["--segments", "2"]).unwrap(),
        Workload::from_name(
            "tile",
            &[
                "--tile-x",
                "8",
                "--tile-y",
                "6",
                "--overlap-x",
                "2",
                "--overlap-y",
                "1",
                "--element-bytes",
                "4",
            ],
        )
        .unwrap(),
        Workload::from_name(
            "row",
            &["--width", "16", "--height", "4", "--element-bytes", "8"],
        )
        .unwrap(),
        Workload::from_name(
            "s3d",
            &[
                "--grid-x",
                "6",
                "--grid-y",
                "5",
                "--grid-z",
                "4",
                "--single-call",
            ],
        )
        .unwrap(),
        Workload::from_name(
            "s3asim",
            &[
                "--queries",
                "3",
                "--min-results",
                "10",
                "--max-results",
                "30",
            ],
        )
        .unwrap(),
        Workload::from_name("flash", &["--blocks-per-client", "3", "--block-edge", "2"]).unwrap(),
        Workload::from_name(
            "regions",
            &[
                "--regions",
                "16",
                "--bytes-per-client",
                "4096",
                "--read-back",
            ],
        )
        .unwrap(),
        Workload::from_name("vpic", &["--particles", "5", "--iterations", "3", "--sync"]).unwrap(),
        Workload::from_name("vpic", &["--particles", "300000"]).unwrap(),
    ];
    for w in &small {
        for n in [2u32, 6] {
            let a = plan(w, n).unwrap();
            let b = plan(w, n).unwrap();
            assert_eq!(a, b, "{}", w.name());
            check(&a);
            assert_eq!(a.workload, w.name());
            let json = serde_json::to_string(&a).unwrap();
            let back: WorkloadPlan = serde_json::from_str(&json).unwrap();
            assert_eq!(back, a);
            // The params in the plan reproduce it.
            let again: Workload = serde_json::from_value(serde_json::json!({
                "workload": a.workload, "params": a.params
            }))
            .unwrap();
            assert_eq!(plan(&again, n).unwrap(), a);
        }
    }
}
