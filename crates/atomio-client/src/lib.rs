//! atomio's client API: open files on an atomio cluster and read or write noncontiguous
//! accesses with a chosen atomicity strategy (`File`), or do the same on one ordinary POSIX
//! file with `fcntl` locks (`PosixFile`, the baseline).

pub mod file;
pub mod posix;
pub mod strategy;

pub use file::{File, IoStats};
pub use posix::PosixFile;
pub use strategy::{lock_plan, BlockSize, Strategy};

/// A buffer of `have` bytes for ranges covering `want`: equal, or a clear error.
pub(crate) fn check_len(what: &str, have: usize, want: u64) -> Result<(), atomio_proto::WireError> {
    if have as u64 != want {
        return Err(atomio_proto::WireError::new(
            atomio_proto::ErrorCode::InvalidArgument,
            format!("{what} buffer holds {have} bytes but the ranges cover {want}"),
        ));
    }
    Ok(())
}
