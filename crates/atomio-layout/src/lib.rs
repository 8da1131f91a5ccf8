//! Byte ranges, structured access patterns and striping layouts for atomio.
//!
//! Everything here is pure computation: no I/O, no clocks, no allocation proportional to
//! the number of ranges a pattern describes. The lock service, the data path and the MPI-IO
//! front all describe accesses with these types, so they agree on what bytes a call touches
//! and which server owns them.

pub mod access;
pub mod copy;
pub mod error;
pub mod grid_box;
pub mod layout;
pub mod pattern;
pub mod range;
pub mod range_list;
pub mod runs;
pub mod share;

pub use access::Access;
pub use error::LayoutError;
pub use grid_box::{provably_disjoint, GridBox};
pub use layout::{Layout, Piece, ServerId, DEFAULT_STRIPE_SIZE, MAX_STRIPE_COUNT};
pub use pattern::{Block, Field, Node, Order, Pattern, MAX_PATTERN_DEPTH, MAX_PATTERN_ITEMS};
pub use range::{ByteRange, MAX_OFFSET};
pub use range_list::{RangeCursor, RangeList, RangeListCursor};
pub use runs::{Group, Runs};
pub use share::{Owned, Share};
