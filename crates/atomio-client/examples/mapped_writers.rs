//! K writers at once through atomio's direct-file path (strategy `none`), as threads of one
//! process (what `atomio-lab sim calibrate` measures) or as processes (what the workload
//! benchmarks run): the same pieces, S3D's shape (384-byte pieces, pairs sharing pages,
//! pairs taking turns by 48-piece spans so every writer touches every large folio).
//!
//! ```sh
//! cargo run --release -p atomio-client --example mapped_writers -- DIR [REPS]
//! ```
//!
//! Prints, per writer count, the median MiB/s of each form, taking turns rep by rep.
use atomio_client::{DirectData, File, Strategy};
use atomio_layout::{Access, Pattern};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const PIECE: u64 = 384;
const SPAN: u64 = 48;
const OF: u64 = 2;
const TOTAL: u64 = 64 << 20;

/// Writer `t` of `k`: its access and bytes.
fn share(t: u64, k: u64) -> (Access, Vec<u8>) {
    let count = (TOTAL / k / PIECE).next_multiple_of(SPAN);
    let groups = k.div_ceil(OF);
    let one = Pattern::bytes(1).expect("byte");
    let run = Pattern::hvector(SPAN, PIECE, OF * PIECE, &one).expect("run");
    let span = SPAN * OF * PIECE;
    let p = Pattern::hvector(count / SPAN, 1, groups * span, &run).expect("pattern");
    let base = t / OF * span + t % OF * PIECE;
    let a = Access::new(base, p).expect("access");
    let n = a.size() as usize;
    (a, vec![0x33 ^ t as u8; n])
}

fn open(path: &Path) -> File {
    let mut f = File::direct(DirectData::open(path, true).expect("open"));
    f.set_atomic(Some(Strategy::none())).expect("none");
    f
}

fn threads(path: &Path, k: u64) -> f64 {
    let _ = std::fs::remove_file(path);
    let mut w: Vec<_> = (0..k)
        .map(|t| {
            let (a, d) = share(t, k);
            (open(path), a, d)
        })
        .collect();
    let start = std::sync::Barrier::new(k as usize + 1);
    let secs = std::thread::scope(|s| {
        let hs: Vec<_> = w
            .iter_mut()
            .map(|(f, a, d)| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    f.write_local(a, d).expect("write");
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        for h in hs {
            h.join().expect("writer");
        }
        t0.elapsed().as_secs_f64()
    });
    drop(w);
    secs
}

fn processes(path: &Path, k: u64) -> f64 {
    let _ = std::fs::remove_file(path);
    let exe = std::env::current_exe().expect("exe");
    let mut kids: Vec<_> = (0..k)
        .map(|t| {
            Command::new(&exe)
                .args([
                    "--child",
                    &path.to_string_lossy(),
                    &t.to_string(),
                    &k.to_string(),
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut outs: Vec<_> = kids
        .iter_mut()
        .map(|c| std::io::BufReader::new(c.stdout.take().expect("stdout")))
        .collect();
    let mut line = String::new();
    for o in &mut outs {
        line.clear();
        o.read_line(&mut line).expect("ready");
    }
    let t0 = Instant::now();
    for c in &mut kids {
        c.stdin
            .as_mut()
            .expect("stdin")
            .write_all(b"go\n")
            .expect("go");
    }
    for o in &mut outs {
        line.clear();
        o.read_line(&mut line).expect("done");
    }
    let secs = t0.elapsed().as_secs_f64();
    for mut c in kids {
        drop(c.stdin.take());
        c.wait().expect("wait");
    }
    secs
}

fn child(path: &str, t: u64, k: u64) {
    let (a, d) = share(t, k);
    let mut f = open(Path::new(path));
    let mut out = std::io::stdout();
    writeln!(out, "ready").expect("ready");
    out.flush().expect("flush");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).expect("go");
    f.write_local(&a, &d).expect("write");
    writeln!(out, "done").expect("done");
    out.flush().expect("flush");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(
            &args[2],
            args[3].parse().expect("t"),
            args[4].parse().expect("k"),
        );
        return;
    }
    let dir = PathBuf::from(args.get(1).expect("usage: mapped_writers DIR [REPS]"));
    let reps: usize = args.get(2).map_or(7, |r| r.parse().expect("reps"));
    let path = dir.join("mapped-writers.dat");
    let mib = |k: u64, s: f64| {
        (k * (TOTAL / k / PIECE).next_multiple_of(SPAN) * PIECE) as f64 / s / f64::from(1 << 20)
    };
    println!("writers  threads MiB/s  processes MiB/s  processes/threads");
    for k in [1u64, 2, 4, 8] {
        let (mut th, mut pr) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            th.push(mib(k, threads(&path, k)));
            pr.push(mib(k, processes(&path, k)));
        }
        let (t, p) = (median(th), median(pr));
        println!("{k:>7}  {t:>13.0}  {p:>15.0}  {:>17.2}", p / t);
    }
    let _ = std::fs::remove_file(&path);
}
