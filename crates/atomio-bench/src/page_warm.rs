//! Page-cache warming before a timed run.
//!
//! On this class of VM (virtio-balloon with free page reporting) free memory is handed back
//! to the host, and the guest's next touch of it costs a host fault: a 256 MiB `pwrite` into
//! a fresh file runs at ~400 MiB/s after a pause and at ~4,000 MiB/s right after another
//! file of that size was deleted (measured with one process writing 4 MiB pieces;
//! results/issue8/stop36). Which row of a benchmark paid depended on what ran before it,
//! and the `limit` rows swung 360–4,900 MiB/s within one invocation. So before every timed
//! run the coordinator writes and deletes a scratch file of the run's size on the run's file
//! system: the page cache the run then allocates can come from memory the guest just used.
//! On a machine without reporting it costs one untimed write.
//!
//! It is not enough where the kernel reports a block as soon as it is free
//! (`min_free_ms` 0, see `host_memory`): the scratch file's memory may be gone again
//! before the run allocates, and runs stay bimodal. `scripts/hold-freed-memory` makes the
//! warm-up hold (stop 38).
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
