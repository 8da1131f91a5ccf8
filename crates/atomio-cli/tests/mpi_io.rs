//! The MPI-IO front under `mpiexec`: builds `libatomio_mpiio.so` and the test programs of
//! `mpi/mpiio` against this profile's `libatomio.so` and runs `mpi/mpiio/tests/run.sh`
//! (readers see all or nothing, overlapping writers verified for every strategy and `rma`,
//! the `none` negative control, views and memory types byte-equal to ROMIO, untaken files
//! untouched, external `atomio server`s). Needs MPICH (`scripts/setup` installs it); set
//! `ATOMIO_SKIP_MPI=1` to skip on a machine without MPI.

use std::path::PathBuf;
use std::process::Command;

fn have(p: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
}

#[test]
fn mpi_io_front_passes_its_mpiexec_suite() {
    if !(have("mpiexec") && have("mpicc")) {
        assert!(
            std::env::var_os("ATOMIO_SKIP_MPI").is_some(),
            "mpiexec/mpicc not on PATH: run scripts/setup (installs mpich libmpich-dev) \
             or set ATOMIO_SKIP_MPI=1"
        );
        eprintln!("skipping: ATOMIO_SKIP_MPI is set and there is no MPI");
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    // target/<profile>/deps/mpi_io-… → target/<profile>, where libatomio.so is built.
    let exe = std::env::current_exe().unwrap();
    let lib_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    assert!(
        lib_dir.join("libatomio.so").is_file(),
        "build the cdylib first (cargo build -p atomio-ffi, same profile): {}",
        lib_dir.display()
    );
    let out = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(root.join("mpi/mpiio"))
        .arg("test")
        .arg(format!("BUILD={}", lib_dir.join("mpiio-test").display()))
        .arg(format!("ATOMIO_LIB_DIR={}", lib_dir.display()))
        .arg(format!("ATOMIO_BIN={}", env!("CARGO_BIN_EXE_atomio")))
        .output()
        .expect("run make");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all MPI-IO tests passed"),
        "mpi/mpiio tests failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Every step ran (none silently filtered out).
    for step in [
        "== 1.", "== 2f.", "== 2g.", "== 2h.", "== 3d.", "== 4b.", "== 5d.", "== 6b.", "== 7.",
        "== 8.", "== 9.", "== 10.", "== 11.",
    ] {
        assert!(stdout.contains(step), "step {step} missing:\n{stdout}");
    }
}
