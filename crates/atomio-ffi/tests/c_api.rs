//! Compiles a C program against `include/atomio.h` and the built `libatomio.so`, and runs
//! it: the ABI works from C, exactly as a C or MPI program would use it.

use std::path::PathBuf;
use std::process::Command;

fn lib_dir() -> PathBuf {
    // target/<profile>/deps/c_api-… → target/<profile>
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Compiles `tests/c/<name>.c` into a fresh temporary folder; returns (folder, executable).
fn compile(name: &str) -> (PathBuf, PathBuf) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = lib_dir();
    assert!(
        lib.join("libatomio.so").exists(),
        "build the cdylib first: {}",
        lib.display()
    );
    let tmp = std::env::temp_dir().join(format!("atomio-capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let exe = tmp.join(name);
    let status = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&exe)
        .arg(root.join(format!("crates/atomio-ffi/tests/c/{name}.c")))
        .arg("-I")
        .arg(root.join("include"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-latomio")
        .status()
        .expect("a C compiler");
    assert!(status.success(), "compiling the C test {name}.c failed");
    (tmp, exe)
}

fn run(exe: &std::path::Path, args: &[PathBuf]) {
    let out = Command::new(exe).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_c_program_uses_the_library() {
    let (tmp, exe) = compile("smoke");
    let export = tmp.join("export.dat");
    run(&exe, &[tmp.join("data"), export.clone()]);
    let bytes = std::fs::read(&export).unwrap();
    assert_eq!(bytes.len(), 3000);
    // Element (2, 5) of the 10x20 array holds the first 8 bytes written.
    assert_eq!(
        &bytes[(2 * 20 + 5) * 8..(2 * 20 + 5) * 8 + 8],
        &[1, 2, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(&bytes[2000..2004], b"abcd");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Strategy versioning from C: snapshots read by number, the latest version, materialize
/// into the user's file (direct) and the server file (servers), export, bad input.
#[test]
fn a_c_program_reads_versions_and_materializes() {
    let (tmp, exe) = compile("versions");
    run(
        &exe,
        &[
            tmp.join("data"),
            tmp.join("user.dat"),
            tmp.join("export.dat"),
        ],
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Interval I/O from C: filetypes encoded/decoded, the interval set of strided views, a
/// direct file with strategy `interval` (own view: 0 lock requests; another rank's private
/// bytes refused; only shared bytes locked), `auto`'s explanation, bad input.
#[test]
fn a_c_program_writes_private_intervals_without_locks() {
    let (tmp, exe) = compile("intervals");
    run(&exe, &[tmp.join("data"), tmp.join("user.dat")]);
    let _ = std::fs::remove_dir_all(&tmp);
}
