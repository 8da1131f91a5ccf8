//! Page-cache warming before a timed run.
//!
//! A run's first touch of memory it has not used for a while can cost several times a
//! touch of memory just freed (on virtual machines whose host takes free memory back, a
//! `pwrite` into a fresh file then runs 5–10× slower), and which row of a benchmark paid
//! for that would depend on what ran before it. So before every timed run the coordinator
//! writes and deletes a scratch file of the run's size on the run's file system: the page
//! cache the run then allocates comes from memory just used. Elsewhere it costs one untimed
//! write. `ATOMIO_BENCH_WARM=0` skips it.
//!
//! **Invariant:** the scratch file is gone when `warm` returns, whatever happened.

use atomio_proto::{ErrorCode, WireError};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The buffer each `pwrite` of the warm-up copies (large enough that system calls do not
/// dominate, small enough to stay in cache).
const PIECE: usize = 4 << 20;

/// Writes `bytes` into a scratch file in `dir` and deletes it.
pub fn warm(dir: &Path, bytes: u64) -> Result<(), WireError> {
    let path = dir.join(format!("page-warm-{}", std::process::id()));
    let io = |e: std::io::Error| WireError::new(ErrorCode::Io, format!("{}: {e}", path.display()));
    let result = (|| {
        let f = std::fs::File::create(&path)?;
        let buf = vec![0x5au8; PIECE];
        let mut at = 0u64;
        while at < bytes {
            let n = (bytes - at).min(PIECE as u64) as usize;
            f.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    result.map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warming_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        warm(dir.path(), 10 << 20).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let err = warm(&dir.path().join("absent"), 1 << 20).unwrap_err();
        assert!(err.to_string().contains("absent"), "{err}");
    }
}
