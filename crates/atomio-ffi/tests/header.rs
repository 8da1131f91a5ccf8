//! The checked-in C header must be what cbindgen generates from the current source.
//! `ATOMIO_BLESS=1 cargo test -p atomio-ffi --test header` rewrites it.

#[test]
fn the_checked_in_header_is_current() {
    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen")
        .write(&mut generated);
    let path = format!("{crate_dir}/../../include/atomio.h");
    if std::env::var("ATOMIO_BLESS").is_ok() {
        std::fs::write(&path, &generated).unwrap();
    }
    let current = std::fs::read(&path).unwrap_or_default();
    assert!(
        current == generated,
        "include/atomio.h is stale: run ATOMIO_BLESS=1 cargo test -p atomio-ffi --test header"
    );
}
