//! atomio's client API: files whose calls are made atomic by a chosen technique
//! (`Strategy`), on the user's own file (`DirectData`, direct placement) or on atomio's
//! data servers. See `technique` for the steps every technique is made of.

pub mod call;
pub mod direct;
pub mod dlm;
pub mod file;
pub mod fs_caches;
pub mod host_locks;
pub mod interval;
pub mod interval_file;
pub(crate) mod mapped;
mod node_logs;
pub mod objects;
pub mod strategy;
pub mod technique;
pub mod techniques;
pub mod versioned;
pub mod write_cache;

pub use direct::{Coherence, DirectData, Mapping};
pub use file::{File, IoStats, Placement};
pub use fs_caches::{Caches, FsInfo};
/// The rule by which a direct-file call goes through a shared mapping (for models).
pub use mapped::{worth as mapped_worth, Way as MappedWay};
pub use strategy::{BlockSize, Strategy};
pub use technique::{IoMethod, LockGeometry, Locks, PlacementKind, Technique};

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
