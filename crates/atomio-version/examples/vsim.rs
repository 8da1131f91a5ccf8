//! Runs the versioning simulation over a range of seeds and prints totals (for exploring
//! configurations by hand; the CLI's `atomio sim --versioning` is the supported front).
use atomio_version::sim::{run, SimConfig};
fn main() {
    let a: Vec<u64> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let cfg = SimConfig {
        writers: a[0] as usize,
        stalls: a[1] == 1,
        gc_keep: Some(a[2]).filter(|&k| k > 0),
        chunk: a[3],
        ..SimConfig::default()
    };
    let (mut bad, mut published, mut aborted, mut collected) = (0, 0, 0, 0);
    for seed in 0..200 {
        match run(seed, &cfg) {
            Ok(r) => {
                published += r.published;
                aborted += r.aborted;
                collected += r.collected;
            }
            Err(e) => {
                if bad < 3 {
                    println!("seed {seed}: {e}");
                }
                bad += 1;
            }
        }
    }
    println!("bad {bad} published {published} aborted {aborted} collected {collected}");
}
