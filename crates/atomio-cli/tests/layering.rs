//! The wall between product and lab, from the workspace's own dependency graph
//! (`cargo metadata`): a crate under `crates/` is product (what a user links or runs), a
//! crate under `lab/` is lab (benchmarks, workloads, simulators, the scale model, fuzzing,
//! the verifier as an oracle). The product never depends on the lab — not as a normal and
//! not as a build dependency; a product crate's tests may use lab crates (dev-dependencies),
//! the verifier above all. The operator's `atomio` binary is product; the lab's commands are
//! the `atomio-lab` binary (`lab/atomio-lab`).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Side {
    Product,
    Lab,
}

fn side(manifest: &str, root: &Path) -> Option<Side> {
    let rel = Path::new(manifest).strip_prefix(root).ok()?;
    match rel.components().next()?.as_os_str().to_str()? {
        "crates" => Some(Side::Product),
        "lab" => Some(Side::Lab),
        _ => None,
    }
}

/// (from, to) for every normal or build dependency from a product crate to a lab crate.
fn product_to_lab(meta: &serde_json::Value, root: &Path) -> BTreeSet<(String, String)> {
    let pkgs = meta["packages"].as_array().expect("packages");
    let side_of = |name: &str| {
        pkgs.iter()
            .find(|p| p["name"] == name)
            .and_then(|p| side(p["manifest_path"].as_str()?, root))
    };
    let mut edges = BTreeSet::new();
    for p in pkgs {
        let name = p["name"].as_str().unwrap();
        if side(p["manifest_path"].as_str().unwrap(), root) != Some(Side::Product) {
            continue;
        }
        for d in p["dependencies"].as_array().unwrap() {
            let dev = d["kind"].as_str() == Some("dev");
            let to = d["name"].as_str().unwrap();
            if !dev && side_of(to) == Some(Side::Lab) {
                edges.insert((name.to_string(), to.to_string()));
            }
        }
    }
    edges
}

#[test]
fn the_product_never_depends_on_the_lab() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(&root)
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata: {out:?}");
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = product_to_lab(&meta, &root);
    assert!(
        found.is_empty(),
        "product crates depend on lab crates: {found:?}"
    );
    // Both sides exist: a layout change that emptied one would pass vacuously.
    let sides: BTreeSet<_> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| side(p["manifest_path"].as_str()?, &root))
        .map(|s| s == Side::Lab)
        .collect();
    assert_eq!(sides.len(), 2, "no product or no lab crates found");
}

/// The checker itself finds an edge (negative control) and ignores dev-dependencies.
#[test]
fn the_checker_finds_a_product_crate_that_depends_on_the_lab() {
    let root = Path::new("/r");
    let meta = serde_json::json!({"packages": [
        {"name": "p", "manifest_path": "/r/crates/p/Cargo.toml", "dependencies": [
            {"name": "l", "kind": null}, {"name": "t", "kind": "dev"}]},
        {"name": "l", "manifest_path": "/r/lab/l/Cargo.toml", "dependencies": []},
        {"name": "t", "manifest_path": "/r/lab/t/Cargo.toml", "dependencies": []},
        {"name": "l2", "manifest_path": "/r/lab/l2/Cargo.toml", "dependencies": [
            {"name": "p", "kind": null}]},
    ]});
    let edges = product_to_lab(&meta, root);
    assert_eq!(
        edges.into_iter().collect::<Vec<_>>(),
        vec![("p".to_string(), "l".to_string())]
    );
}
