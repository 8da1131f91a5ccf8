//! The MPI-IO front under `mpiexec`: builds `libatomio_mpiio.so` and the test programs of
//! `mpi/mpiio` against this profile's `libatomio.so` and runs `mpi/mpiio/tests/run.sh`
//! (readers see all or nothing, overlapping writers verified for every strategy, `rma` and
//! `versioning` (lock-free snapshots materialized into the user's file at close),
//! the `none` negative control, views and memory types byte-equal to ROMIO, untaken files
//! untouched, external `atomio server`s). Needs MPICH (`scripts/setup` installs it); set
//! `ATOMIO_SKIP_MPI=1` to skip on a machine without MPI.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// One suite at a time: each oversubscribes the machine's cores with 4 ranks, and two side
/// by side make their watchdogs fire.
static ONE_SUITE: Mutex<()> = Mutex::new(());

fn have(p: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
}

/// `make -C mpi/mpiio test` with this profile's library and binary, plus `env`.
fn run_suite(env: &[(&str, &str)]) -> (bool, String, String) {
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
        .envs(env.iter().copied())
        .output()
        .expect("run make");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.success() && stdout.contains("all MPI-IO tests passed"),
        stdout,
        stderr,
    )
}

/// Emulated hosts (`scripts/hosts`) for one test, removed when dropped.
struct Hosts {
    script: PathBuf,
}

impl Hosts {
    /// `None` (with the reason printed) where network namespaces cannot be made.
    fn up(n: u32) -> Option<Self> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/hosts");
        let out = Command::new(&script).arg("up").arg(n.to_string()).output();
        match out {
            Ok(o) if o.status.success() => Some(Self { script }),
            Ok(o) => {
                common::missing(&format!(
                    "cannot make emulated hosts here (scripts/hosts up: {})",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                None
            }
            Err(e) => {
                common::missing(&format!("cannot run scripts/hosts ({e})"));
                None
            }
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = Command::new(&self.script).arg("down").output();
    }
}

/// The suite's steps 1–5 across four emulated hosts (network namespaces on a bridge): ranks
/// placed round robin on the hosts, in-job servers listening on host addresses with the
/// job's token, overlapping writers verified for every strategy, `rma`, the cached-lock
/// DLMs, `versioning`, the negative control, views. Skipped with a message where namespaces
/// cannot be made (not root, no iproute2). Steps 6 on start external servers on this
/// namespace's loopback, which the hosts cannot reach.
#[test]
fn mpi_io_suite_runs_across_four_emulated_hosts() {
    if !(have("mpiexec") && have("mpicc") && have("ip")) {
        assert!(
            std::env::var_os("ATOMIO_SKIP_MPI").is_some(),
            "needs mpiexec, mpicc and ip (scripts/setup installs them), or set ATOMIO_SKIP_MPI=1"
        );
        eprintln!("skipping: ATOMIO_SKIP_MPI is set and there is no MPI");
        return;
    }
    let _one = ONE_SUITE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(hosts) = Hosts::up(4) else { return };
    let mpiexec = hosts.script.with_file_name("hosts-mpiexec");
    let started = std::time::Instant::now();
    let (ok, stdout, stderr) =
        run_suite(&[("MPIEXEC", mpiexec.to_str().unwrap()), ("UNTIL", "5d")]);
    assert!(
        ok,
        "mpi/mpiio tests across 4 hosts failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for step in [
        "== 1.", "== 2b.", "== 2c.", "== 2f.", "== 2i.", "== 2j.", "== 3a.", "== 5d.",
    ] {
        assert!(stdout.contains(step), "step {step} missing:\n{stdout}");
    }
    assert!(!stdout.contains("== 6"), "steps past 5d ran:\n{stdout}");
    eprintln!(
        "mpi/mpiio steps 1–5d across 4 emulated hosts: passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    drop(hosts);
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
    let _one = ONE_SUITE.lock().unwrap_or_else(|p| p.into_inner());
    let (ok, stdout, stderr) = run_suite(&[]);
    assert!(
        ok,
        "mpi/mpiio tests failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Every step ran (none silently filtered out).
    for step in [
        "== 1.", "== 2f.", "== 2g.", "== 2h.", "== 2j.", "== 3d.", "== 4b.", "== 5d.", "== 5e.",
        "== 6b.", "== 7.", "== 8.", "== 9.", "== 10.", "== 11.", "== 14a.", "== 14b.", "== 15.",
    ] {
        assert!(stdout.contains(step), "step {step} missing:\n{stdout}");
    }
}

/// atomio on file systems with several clients (`mpi/mpiio/tests/sharedfs.sh`): a GlusterFS
/// volume mounted by two FUSE clients and a third that only reads (`scripts/sharedfs`), and
/// bindfs clients whose `fcntl` locks stay inside each client. Ranks run over two clients;
/// every result is read through a client that did not write it: the MPI suite, interleaved
/// writes for every strategy at three block sizes (with ROMIO's own atomic mode caught
/// writing stale bytes, the checker's negative control), and node-local locks (ROMIO caught,
/// atomio correct). Needs root, MPICH, GlusterFS and bindfs (`scripts/setup`); without them
/// it fails unless `ATOMIO_SKIP_SHAREDFS=1` says this machine cannot have them.
#[test]
fn mpi_io_is_correct_on_file_systems_with_several_clients() {
    // glusterd lives in sbin, which a non-login shell's PATH may lack (scripts/sharedfs adds it).
    let glusterd = have("glusterd") || std::path::Path::new("/usr/sbin/glusterd").is_file();
    let ready = have("mpiexec") && glusterd && have("bindfs") && have("unshare");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !(ready && root) {
        assert!(
            std::env::var_os("ATOMIO_SKIP_SHAREDFS").is_some(),
            "the shared file system bed needs root, mpiexec, glusterd, bindfs and unshare \
             (scripts/setup installs them; root: {root}); ATOMIO_SKIP_SHAREDFS=1 skips it"
        );
        eprintln!("skipping: ATOMIO_SKIP_SHAREDFS is set and this machine cannot run the bed");
        return;
    }
    let _one = ONE_SUITE.lock().unwrap_or_else(|p| p.into_inner());
    let root_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = std::env::current_exe().unwrap();
    let lib_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let started = std::time::Instant::now();
    let out = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(root_dir.join("mpi/mpiio"))
        .arg("test-sharedfs")
        .arg(format!(
            "BUILD={}",
            lib_dir.join("mpiio-sharedfs").display()
        ))
        .arg(format!("ATOMIO_LIB_DIR={}", lib_dir.display()))
        .arg(format!("ATOMIO_BIN={}", env!("CARGO_BIN_EXE_atomio")))
        .output()
        .expect("run make");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all shared file system tests passed"),
        "the shared file system tests failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for part in [
        "== sharedfs suite",
        "== 2b.",
        "== 2j.",
        "== sharedfs strided",
        "the check caught MPICH's atomic mode",
        "== sharedfs localflock",
    ] {
        assert!(stdout.contains(part), "{part} missing:\n{stdout}");
    }
    eprintln!(
        "shared file system tests: passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
