//! SeqDLM (Chen et al., SC'22) and the traditional cached DLMs it is measured against: lock
//! modes and their rules (`modes`), and one lock resource as a sans-IO state machine
//! (`resource`). The client cache, the data servers' SN-ordered extent cache and the wire
//! messages build on these; nothing here does I/O.

pub mod modes;
pub mod resource;

pub use modes::{Mode, Need, State};
pub use resource::{Config, Expand, Grant, GrantId, Out, ReqId, Resource, ResourceError};
