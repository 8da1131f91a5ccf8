//! `atomio interval` end to end: a flat file becomes the interval file of a 4-client tile
//! workload, `info --json` describes it, it translates to the interval file of a 2-client
//! tiling and both translate back to flat files equal to the original bytes (bytes nobody
//! declared — the header — come back as zeros); a file that is not an interval file, or is
//! truncated, is refused with a clear message.

use std::path::Path;
use std::process::Command;

fn atomio(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_atomio"))
        .args(args)
        .output()
        .expect("run atomio");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn ok(args: &[&str]) -> String {
    let (success, text) = atomio(args);
    assert!(success, "atomio {args:?} failed:\n{text}");
    text
}

const TILE: [&str; 10] = [
    "--tile-x",
    "32",
    "--tile-y",
    "24",
    "--element-bytes",
    "8",
    "--overlap-x",
    "3",
    "--header-bytes",
    "100",
];

#[test]
fn interval_files_round_trip_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("atomio-interval-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let orig: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1)
        .collect();
    std::fs::write(p("orig"), &orig).unwrap();

    let mut args = vec![
        "interval",
        "translate",
        "--from",
        "flat",
        "--workload",
        "tile",
        "--clients",
        "4",
        "--chunk-mib",
        "1",
    ];
    let (o, a) = (p("orig"), p("a.iv"));
    args.extend([o.as_str(), a.as_str(), "--"]);
    args.extend(TILE);
    ok(&args);

    let info: serde_json::Value =
        serde_json::from_str(&ok(&["interval", "info", &a, "--json"])).unwrap();
    assert_eq!(info["header"]["ranks"], 4);
    assert_eq!(info["ranks"].as_array().unwrap().len(), 4);
    let flat_size = info["header"]["flat_size"].as_u64().unwrap() as usize;
    assert!(flat_size > 100 && flat_size <= orig.len());
    assert!(info["shared_bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        info["private_bytes"].as_u64().unwrap() + info["shared_bytes"].as_u64().unwrap(),
        (flat_size - 100) as u64
    );
    let text = ok(&["interval", "info", &a]);
    assert!(
        text.contains("4 ranks") && text.contains("shared:"),
        "{text}"
    );

    // To flat: the declared bytes come back, the header (declared by nobody) is zero.
    let f1 = p("a.flat");
    ok(&["interval", "translate", &a, &f1, "--to", "flat"]);
    let got = std::fs::read(&f1).unwrap();
    assert_eq!(got.len(), flat_size);
    assert!(got[..100].iter().all(|&b| b == 0));
    assert_eq!(got[100..], orig[100..flat_size]);

    // To another tiling (2 clients), then to flat.
    let b = p("b.iv");
    let mut args = vec!["interval", "translate", &a, &b, "--workload", "tile"];
    args.extend(["--clients", "2", "--calls", "write", "--json"]);
    let report = p("report.json");
    args.extend([report.as_str(), "--"]);
    args.extend(TILE);
    ok(&args);
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(rep["target_ranks"], 2);
    assert_eq!(rep["hole_bytes"], 0);
    let f2 = p("b.flat");
    ok(&["interval", "translate", &b, &f2, "--to", "flat"]);
    let got2 = std::fs::read(&f2).unwrap();
    assert!(got2.len() > 100 && got2.len() <= flat_size);
    assert!(got2[..100].iter().all(|&x| x == 0));
    assert_eq!(got2[100..], got[100..got2.len()]);

    // Not an interval file; truncated; no target.
    let (success, text) = atomio(&["interval", "info", &o]);
    assert!(!success && text.contains("not an interval file"), "{text}");
    let cut = p("cut.iv");
    std::fs::write(&cut, &std::fs::read(&a).unwrap()[..3000]).unwrap();
    let (success, text) = atomio(&["interval", "translate", &cut, &p("x"), "--to", "flat"]);
    assert!(!success && text.contains("truncated"), "{text}");
    let (success, text) = atomio(&["interval", "translate", &a, &p("x")]);
    assert!(!success && text.contains("--to flat"), "{text}");
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}
