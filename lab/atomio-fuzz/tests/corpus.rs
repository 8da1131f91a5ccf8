//! The fuzz targets over the committed corpus (`fuzz/corpus/<target>/`): every input the
//! fuzzers kept, and the seeds, which must match what `seeds` writes today (regenerate
//! with `ATOMIO_BLESS=1 cargo test -p atomio-fuzz`).

use atomio_fuzz::Control;
use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(corpus(target))
        .expect("the corpus is committed")
        .map(|e| e.expect("readable").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).expect("readable");
            (p, b)
        })
        .collect();
    v.sort();
    v
}

fn check_seeds(target: &str, seeds: Vec<(String, Vec<u8>)>) {
    let dir = corpus(target);
    for (name, bytes) in seeds {
        let path = dir.join(format!("seed-{name}"));
        if std::env::var_os("ATOMIO_BLESS").is_some() {
            std::fs::create_dir_all(&dir).expect("writable");
            std::fs::write(&path, &bytes).expect("writable");
        }
        let committed = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (ATOMIO_BLESS=1 writes it)", path.display()));
        assert!(
            committed == bytes,
            "{} is stale: the protocol changed (ATOMIO_BLESS=1 rewrites it)",
            path.display()
        );
    }
}

#[test]
fn seeds_are_current() {
    check_seeds(
        "serve",
        atomio_fuzz::seeds::scripts()
            .into_iter()
            .map(|(n, s)| (n.to_string(), s.to_bytes()))
            .collect(),
    );
    check_seeds("decode", atomio_fuzz::seeds::frames());
}

#[test]
fn decode_survives_the_corpus() {
    let all = inputs("decode");
    assert!(all.len() >= 5, "the decode corpus is missing");
    for (path, bytes) in all {
        eprintln!("{}", path.display());
        atomio_fuzz::decode(&bytes);
    }
}

#[test]
fn serve_survives_the_corpus() {
    let all = inputs("serve");
    assert!(all.len() >= 5, "the serve corpus is missing");
    for (path, bytes) in all {
        eprintln!("{}", path.display());
        atomio_fuzz::serve(&bytes);
    }
}

fn seed(name: &str) -> Vec<u8> {
    let (_, s) = atomio_fuzz::seeds::scripts()
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a seed of that name");
    s.to_bytes()
}

#[test]
fn controls_run_clean_without_the_bug() {
    atomio_fuzz::serve(&seed("datatype-tiles"));
    atomio_fuzz::serve(&seed("lease-lapse-fence"));
}

/// Negative control: the end-of-run check fails when a client's locks are left behind
/// (client 1 still holds its tile lock).
#[test]
#[should_panic(expected = "locks left behind")]
fn serve_catches_a_leak() {
    atomio_fuzz::serve_with(&seed("datatype-tiles"), Control::SkipDisconnect(1));
}

/// Negative control: a lapsed client released without fencing gets its read served (its
/// writes are refused earlier, at admission).
#[test]
#[should_panic(expected = "fenced client's data request was served")]
fn serve_catches_a_missing_fence() {
    atomio_fuzz::serve_with(&seed("lease-lapse-fence"), Control::NoFence);
}
