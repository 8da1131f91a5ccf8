//! Versioning (Tran et al. 2010, on BlobSeer's design): every write stores its bytes as new
//! immutable chunks, then asks the version manager for a version and weaves a segment tree
//! for it that shares every unchanged subtree with the snapshots before it. Writers never
//! wait for each other; only publication is ordered.
//!
//! ```text
//!  writer:  chunks ──► assign(regions) ──► build tree (forward refs) ──► put nodes ──► complete
//!  manager:            v = next++, hints = in-flight (p, v)          publish in version order
//!  reader:  latest/published v ──► descend v's tree ──► chunk pieces ──► bytes
//! ```
//!
//! Everything here is sans-IO: the tree builder and the tree reader ask for nodes by key and
//! are handed them; the manager is messages in, decisions out, time passed in. The client
//! (`atomio-client::versioned`) moves the bytes and the nodes; servers hold the manager and
//! the node store (a DHT: node key → server).
//!
//! **Invariants** (the model test `tests/model.rs` checks them): a published version's tree
//! describes exactly the bytes of every write with a lower or equal version applied in
//! version order; a node, once put, never changes; a version is published only when it and
//! every version below it are complete or aborted; no published tree reaches a node of an
//! aborted version.

pub mod build;
pub mod gc;
pub mod geometry;
pub mod manager;
pub mod node;
pub mod read;
pub mod sim;

pub use build::{BuildStep, TreeBuilder};
pub use geometry::{Geometry, GeometryError, Pos};
pub use manager::{Assigned, FileVersions, GcPlan, ManagerError, VersionRecord, VersionState};
pub use node::{ChunkRef, Extent, Leaf, Node, NodeKey};
pub use read::{ReadStep, Segment, TreeReader};

/// A snapshot's number. Version 0 is the file before any versioned write (no tree: every
/// byte is the file's base — zeros, or the user's file as it was when versioning began).
pub type Version = u64;

/// Which lower version's node a tree position takes: `None` when no version wrote there.
pub type Ref = Option<Version>;
