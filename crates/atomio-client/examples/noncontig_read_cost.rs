//! What one noncontig-style read call costs in one process (ROMIO test/noncontig's view for
//! 4 ranks: 2,500 elements of 4 bytes, every 4th, in a 40 KB extent), by way of reading:
//! `cargo run --release -p atomio-client --example noncontig_read_cost`.
use atomio_client::{DirectData, File, Strategy};
use atomio_layout::{Access, Pattern};
use std::os::unix::fs::FileExt;
use std::time::Instant;

fn main() {
    let (k, p, e) = (2_500u64, 4u64, 4u64);
    let calls = 2_000u64;
    let dir = std::env::temp_dir().join(format!("atomio-nc-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let path = dir.join("file");
    let extent = k * p * e;
    std::fs::write(&path, vec![7u8; (extent * calls) as usize]).expect("file");
    let tile = Pattern::resized(
        extent,
        &Pattern::structure(&[(
            e,
            1,
            &Pattern::hvector(k, 1, p * e, &Pattern::bytes(e).unwrap()).unwrap(),
        )])
        .unwrap(),
    )
    .unwrap();
    let mut out = vec![0u8; (k * e) as usize];
    for round in 0..3 {
        let t0 = Instant::now();
        let mut window = vec![0u8; extent as usize];
        let f = std::fs::File::open(&path).unwrap();
        for c in 0..calls {
            f.read_exact_at(&mut window, c * extent).unwrap();
            for j in 0..k as usize {
                let s = (j * p as usize + 1) * e as usize;
                out[j * 4..j * 4 + 4].copy_from_slice(&window[s..s + 4]);
            }
        }
        let limit = t0.elapsed().as_secs_f64() * 1e6 / calls as f64;
        let d = DirectData::open(&path, false).unwrap();
        let t0 = Instant::now();
        for c in 0..calls {
            let a = Access::view_window(0, &tile, c * k * e, k * e).unwrap();
            d.read_pieces(&a, &mut out, false).unwrap();
        }
        let pieces = t0.elapsed().as_secs_f64() * 1e6 / calls as f64;
        let t0 = Instant::now();
        for c in 0..calls {
            let a = Access::view_window(0, &tile, c * k * e, k * e).unwrap();
            d.read_sieved(&a, &mut out, 4 << 20, false).unwrap();
        }
        let sieved = t0.elapsed().as_secs_f64() * 1e6 / calls as f64;
        let t0 = Instant::now();
        let mut n = 0u64;
        for c in 0..calls {
            let a = Access::view_window(0, &tile, c * k * e, k * e).unwrap();
            n += a.ranges().count() as u64;
        }
        let walk = t0.elapsed().as_secs_f64() * 1e6 / calls as f64;
        print!("round {round}: µs per call: pread+extract {limit:.1}, read_pieces {pieces:.1}, read_sieved {sieved:.1}, walk {walk:.1} ({n} runs)");
        for name in [
            "none",
            "bounding-extent",
            "ching:datatype:one-try",
            "ching:posix:two-phase",
        ] {
            let mut f = File::direct(DirectData::open(&path, false).expect("file"));
            let s: Strategy = name.parse().expect("strategy");
            f.set_atomic(Some(s.clone())).expect("strategy");
            if s.uses_lock_service() {
                f.use_host_locks().expect("host locks");
            }
            let t0 = Instant::now();
            for c in 0..calls {
                let a = Access::view_window(0, &tile, c * k * e, k * e).unwrap();
                f.read_local(&a, &mut out).expect("read");
            }
            print!(
                ", {name}+host {:.1}",
                t0.elapsed().as_secs_f64() * 1e6 / calls as f64
            );
        }
        println!();
        // Writes of the same pieces into a file that grows call by call (each call's
        // pieces only: a writer touches no neighbour's byte).
        let data = vec![5u8; (k * e) as usize];
        let ways: &[(&str, atomio_client::Mapping)] =
            if std::env::var_os("NC_MAPPED_ONLY").is_some() {
                &[("mapped", atomio_client::Mapping::Auto)]
            } else {
                &[
                    ("mapped", atomio_client::Mapping::Auto),
                    ("pwrite", atomio_client::Mapping::Off),
                ]
            };
        for &(name, mapping) in ways {
            let wpath = dir.join(format!("w-{round}-{name}"));
            let mut d = DirectData::open(&wpath, true).unwrap();
            d.mapping = mapping;
            let t0 = Instant::now();
            for c in 0..calls {
                let a = Access::view_window(0, &tile, c * k * e, k * e).unwrap();
                d.write_pieces(&a, &data).unwrap();
            }
            print!(
                "  write {name} {:.1}",
                t0.elapsed().as_secs_f64() * 1e6 / calls as f64
            );
            let t0 = Instant::now();
            for c in 0..calls {
                let a = Access::view_window(0, &tile, c * k * e, k * e).unwrap();
                d.write_pieces(&a, &data).unwrap();
            }
            print!(
                " (rewrite {:.1})",
                t0.elapsed().as_secs_f64() * 1e6 / calls as f64
            );
        }
        println!();
    }
    let _ = std::fs::remove_dir_all(dir);
}
