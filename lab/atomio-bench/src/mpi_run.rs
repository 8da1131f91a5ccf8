//! Running the C MPI programs under `mpi/` from Rust: finding their source folder, building
//! them with `make`, and running one `mpiexec` with a deadline while its stderr is streamed
//! line by line (for progress) and its stdout collected (JSON lines).
//!
//! **Invariants:** a run that exceeds its deadline is killed as a whole process group (the
//! launcher and every rank it started, nothing else) and reported as an error, never waited
//! for; a non-zero exit is an error that carries the tail of stderr; `json_lines` returns
//! exactly the stdout lines that start with `{`, each parsed, in order — anything else
//! (banners, tables) is ignored, a malformed JSON line is an error.

use std::collections::VecDeque;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why an MPI program could not be built or run.
#[derive(Debug)]
pub struct MpiError(pub String);

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MpiError {}

pub type Result<T> = std::result::Result<T, MpiError>;

fn err(msg: impl Into<String>) -> MpiError {
    MpiError(msg.into())
}

/// The folder `mpi/<sub>` holding a `Makefile`: `explicit` if given, else the first match
/// walking up from the current directory, else the source tree this crate was built from.
pub fn find_dir(sub: &str, explicit: Option<&Path>) -> Result<PathBuf> {
    let ok = |d: &Path| d.join("Makefile").is_file();
    if let Some(d) = explicit {
        return if ok(d) {
            Ok(d.to_path_buf())
        } else {
            Err(err(format!("{}: no Makefile there", d.display())))
        };
    }
    if let Ok(cwd) = std::env::current_dir() {
        for a in cwd.ancestors() {
            let d = a.join("mpi").join(sub);
            if ok(&d) {
                return Ok(d);
            }
        }
    }
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../mpi")
        .join(sub);
    if ok(&d) {
        return Ok(d);
    }
    Err(err(format!(
        "cannot find mpi/{sub} (run from the atomio source tree or pass its path)"
    )))
}

/// Whether `program` can be found on `PATH` (or is a path to an existing file).
pub fn have(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// `make -C dir targets…` (a no-op when up to date); the output is returned on failure.
pub fn make(dir: &Path, targets: &[&str], vars: &[(&str, &str)]) -> Result<()> {
    let mut cmd = Command::new("make");
    cmd.arg("-s").arg("-C").arg(dir).args(targets);
    for (k, v) in vars {
        cmd.arg(format!("{k}={v}"));
    }
    let out = cmd
        .output()
        .map_err(|e| err(format!("running make in {}: {e}", dir.display())))?;
    if !out.status.success() {
        return Err(err(format!(
            "make -C {} {} failed:\n{}{}",
            dir.display(),
            targets.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// Builds `libatomio_mpiio.so` from `mpi/mpiio` with `mpicc` against the `libatomio.so` in
/// `lib_dir`, into `lib_dir/mpiio-<mpicc>/` (a no-op when up to date), and returns its path.
pub fn build_mpiio_lib(mpicc: &str, lib_dir: &Path) -> Result<PathBuf> {
    if !lib_dir.join("libatomio.so").is_file() {
        return Err(err(format!(
            "{}/libatomio.so not found: build it with `cargo build --release -p atomio-ffi` \
             (or pass the library's path)",
            lib_dir.display()
        )));
    }
    let dir = find_dir("mpiio", None)?;
    let build = lib_dir.join(format!("mpiio-{mpicc}"));
    let lib = build.join("libatomio_mpiio.so");
    let (b, l) = (build.display().to_string(), lib_dir.display().to_string());
    let target = lib.display().to_string();
    make(
        &dir,
        &[&target],
        &[("BUILD", &b), ("ATOMIO_LIB_DIR", &l), ("MPICC", mpicc)],
    )?;
    Ok(lib)
}

/// What a finished run printed.
#[derive(Debug)]
pub struct Output {
    pub stdout: String,
    pub seconds: f64,
}

/// Runs `cmd` in its own process group with `deadline`; `on_stderr` sees every stderr line
/// as it arrives. Kills the group and fails if the deadline passes.
pub fn run(
    mut cmd: Command,
    deadline: Duration,
    mut on_stderr: impl FnMut(&str),
) -> Result<Output> {
    let shown = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| err(format!("starting {shown}: {e}")))?;
    let pid = child.id();
    let mut out = child.stdout.take().expect("piped stdout");
    let (out_tx, out_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        let _ = out_tx.send(s);
    });
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let errs = BufReader::new(child.stderr.take().expect("piped stderr"));
    std::thread::spawn(move || {
        for line in errs.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut take = |line: String, tail: &mut VecDeque<String>| {
        on_stderr(&line);
        tail.push_back(line);
        if tail.len() > 40 {
            tail.pop_front();
        }
    };
    let status = loop {
        while let Ok(line) = rx.try_recv() {
            take(line, &mut tail);
        }
        if let Some(s) = child
            .try_wait()
            .map_err(|e| err(format!("waiting for {shown}: {e}")))?
        {
            break s;
        }
        if t0.elapsed() > deadline {
            // Our own child's process group: the launcher and the ranks it started.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            let _ = child.wait();
            return Err(err(format!(
                "{shown} did not finish within {:.0} s (killed)",
                deadline.as_secs_f64()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The pipes close when every process holding them has exited; a straggler (an orphaned
    // rank) gets a few seconds, not forever.
    let drain_until = Instant::now() + Duration::from_secs(5);
    while let Ok(line) = rx.recv_timeout(drain_until.saturating_duration_since(Instant::now())) {
        take(line, &mut tail);
    }
    let stdout = out_rx
        .recv_timeout(drain_until.saturating_duration_since(Instant::now()))
        .unwrap_or_default();
    if !status.success() {
        return Err(err(format!(
            "{shown} failed ({status}); last stderr lines:\n{}\nstdout:\n{}",
            Vec::from(tail).join("\n"),
            stdout.lines().rev().take(10).collect::<Vec<_>>().join("\n")
        )));
    }
    Ok(Output {
        stdout,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The stdout lines that start with `{`, parsed.
pub fn json_lines(stdout: &str) -> Result<Vec<serde_json::Value>> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).map_err(|e| err(format!("bad JSON line ({e}): {l}"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_skips_banners_and_rejects_broken_json() {
        let v = json_lines("# banner\n{\"a\":1}\ntable row\n  {\"b\":2}\n").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1]["b"], 2);
        assert!(json_lines("{\"a\":").is_err());
    }

    #[test]
    fn run_streams_stderr_collects_stdout_and_reports_failure() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo one >&2; echo '{\"x\":3}'; echo two >&2"]);
        let mut seen = Vec::new();
        let out = run(cmd, Duration::from_secs(20), |l| seen.push(l.to_string())).unwrap();
        assert_eq!(seen, ["one", "two"]);
        assert_eq!(json_lines(&out.stdout).unwrap()[0]["x"], 3);

        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo boom >&2; exit 3"]);
        let e = run(cmd, Duration::from_secs(20), |_| {}).unwrap_err();
        assert!(e.0.contains("boom"), "{e}");
    }

    #[test]
    fn run_kills_the_whole_group_at_the_deadline() {
        let mut cmd = Command::new("sh");
        // A grandchild that would outlive a plain kill of the shell.
        cmd.args(["-c", "sleep 30 & sleep 30; wait"]);
        let t0 = Instant::now();
        let e = run(cmd, Duration::from_millis(300), |_| {}).unwrap_err();
        assert!(e.0.contains("did not finish"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn find_dir_locates_this_source_tree() {
        let d = find_dir("rmalock", None).unwrap();
        assert!(d.join("bench_rmalock.c").is_file());
        assert!(find_dir("rmalock", Some(Path::new("/nonexistent"))).is_err());
    }
}
