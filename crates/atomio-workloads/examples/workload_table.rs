//! Prints every workload's default size at a few client counts:
//! `cargo run --release -p atomio-workloads --example workload_table`.

use atomio_workloads::{Workload, WORKLOADS};

fn main() {
    println!(
        "{:<14} {:>7} {:>12} {:>12} {:>8} {:>11}  source",
        "name", "clients", "written MiB", "file MiB", "calls", "overlapping"
    );
    for info in WORKLOADS {
        let w = Workload::from_name::<&str>(info.name, &[]).expect("every name parses");
        for clients in [1u32, 4, 8, 16] {
            match w.plan(clients) {
                Ok(p) => println!(
                    "{:<14} {:>7} {:>12.1} {:>12.1} {:>8} {:>11}  {}",
                    info.name,
                    clients,
                    p.write_bytes() as f64 / (1u64 << 20) as f64,
                    p.file_bytes as f64 / (1u64 << 20) as f64,
                    p.call_count(),
                    p.overlapping,
                    info.source
                ),
                Err(e) => println!("{:<14} {:>7}  {e}", info.name, clients),
            }
        }
    }
}
