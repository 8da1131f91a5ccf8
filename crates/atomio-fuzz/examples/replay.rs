//! Replays fuzz inputs through a target without AFL's instrumentation and times each:
//! `cargo run --release -p atomio-fuzz --example replay -- serve fuzz/stalls/*`.
fn main() {
    let mut args = std::env::args().skip(1);
    let target = args.next().unwrap_or_default();
    let run: fn(&[u8]) = match target.as_str() {
        "serve" => atomio_fuzz::serve,
        "decode" => atomio_fuzz::decode,
        _ => {
            eprintln!("usage: replay serve|decode FILE...");
            std::process::exit(2);
        }
    };
    for path in args {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let t = std::time::Instant::now();
        run(&bytes);
        println!("{:>10.1} ms  {path}", t.elapsed().as_secs_f64() * 1e3);
    }
}
