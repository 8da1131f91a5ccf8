//! Replays fuzz inputs through a target without AFL's instrumentation and times each (for
//! `serve` also its longest single step, the worst stall one message caused):
//! `cargo run --release -p atomio-fuzz --example replay -- serve fuzz/stalls/*`
//! (`serve` with the server's real work slice; `serve-fuzz` as the fuzzer runs it).
fn main() {
    let mut args = std::env::args().skip(1);
    let target = args.next().unwrap_or_default();
    let run: fn(&[u8]) -> std::time::Duration = match target.as_str() {
        "serve" => atomio_fuzz::serve_timed,
        // As the fuzzer runs it: tiny work slices.
        "serve-fuzz" => |b| {
            atomio_fuzz::serve(b);
            std::time::Duration::ZERO
        },
        "decode" => |b| {
            atomio_fuzz::decode(b);
            std::time::Duration::ZERO
        },
        _ => {
            eprintln!("usage: replay serve|serve-fuzz|decode FILE...");
            std::process::exit(2);
        }
    };
    for path in args {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let t = std::time::Instant::now();
        let step = run(&bytes);
        println!(
            "{:>10.1} ms in all, {:>10.1} ms longest step  {path}",
            t.elapsed().as_secs_f64() * 1e3,
            step.as_secs_f64() * 1e3
        );
    }
}
