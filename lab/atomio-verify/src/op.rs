//! The operations of a run: writes and reads, who issued them and which bytes they touch.
//!
//! **Invariants and why:**
//! * A write is named by (writer, op) and that pair seeds its tags, so two writes with the
//!   same pair would be indistinguishable in the file: `verify` rejects duplicates.
//! * `Ranges` yields increasing, disjoint, non-empty ranges (an `Access` has a monotone
//!   pattern, a `RangeList` is normalized), which is what the k-way merge and the data order
//!   of a read's observed bytes both rely on. The merge still re-checks it and returns an
//!   error, never a panic, if a source misbehaves.

use crate::source::ByteSource;
use atomio_layout::{Access, ByteRange, RangeList, RangeListCursor, Runs};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A write: client/rank `writer`, its operation number `op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WriteId {
    pub writer: u32,
    pub op: u64,
}

/// A read: client/rank `reader`, its operation number `op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ReadId {
    pub reader: u32,
    pub op: u64,
}

/// Any participant of the serial order, including the file's initial (zero) content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OpId {
    Write(WriteId),
    Read(ReadId),
    /// The file's content before the run: zeros.
    Initial,
}

impl WriteId {
    pub fn new(writer: u32, op: u64) -> Self {
        Self { writer, op }
    }
}

impl ReadId {
    pub fn new(reader: u32, op: u64) -> Self {
        Self { reader, op }
    }
}

impl fmt::Display for WriteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(w{},op{})", self.writer, self.op)
    }
}

impl fmt::Display for ReadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(r{},op{})", self.reader, self.op)
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpId::Write(w) => write!(f, "write {w}"),
            OpId::Read(r) => write!(f, "read {r}"),
            OpId::Initial => f.write_str("the initial zeros"),
        }
    }
}

impl From<WriteId> for OpId {
    fn from(w: WriteId) -> Self {
        OpId::Write(w)
    }
}

impl From<ReadId> for OpId {
    fn from(r: ReadId) -> Self {
        OpId::Read(r)
    }
}

/// The bytes an operation touches: a compact structured access or an explicit list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ranges {
    Access(Access),
    List(RangeList),
}

impl Ranges {
    /// The ranges in increasing offset order, generated lazily.
    pub fn iter(&self) -> RangesIter<'_> {
        match self {
            Ranges::Access(a) => RangesIter::Runs(a.ranges()),
            Ranges::List(l) => RangesIter::List(l.cursor()),
        }
    }

    /// Total bytes.
    pub fn size(&self) -> u64 {
        match self {
            Ranges::Access(a) => a.size(),
            Ranges::List(l) => l.total_bytes(),
        }
    }

    /// First to last byte, `None` when empty.
    pub fn hull(&self) -> Option<ByteRange> {
        match self {
            Ranges::Access(a) => a.hull(),
            Ranges::List(l) => l.hull(),
        }
    }
}

impl From<Access> for Ranges {
    fn from(a: Access) -> Self {
        Ranges::Access(a)
    }
}

impl From<RangeList> for Ranges {
    fn from(l: RangeList) -> Self {
        Ranges::List(l)
    }
}

/// Iterator over a `Ranges`.
#[derive(Clone, Debug)]
// Short-lived stack values: boxing the pattern cursor would bring back the allocation per
// query that its inline frame stack exists to avoid.
#[allow(clippy::large_enum_variant)]
pub enum RangesIter<'a> {
    Runs(Runs<'a>),
    List(RangeListCursor<'a>),
}

impl Iterator for RangesIter<'_> {
    type Item = ByteRange;
    #[inline]
    fn next(&mut self) -> Option<ByteRange> {
        match self {
            RangesIter::Runs(r) => r.next(),
            RangesIter::List(l) => l.next(),
        }
    }
}

/// One write call of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub id: WriteId,
    pub ranges: Ranges,
}

impl Write {
    pub fn new(writer: u32, op: u64, ranges: impl Into<Ranges>) -> Self {
        Self {
            id: WriteId { writer, op },
            ranges: ranges.into(),
        }
    }
}

/// One read call of the run and the bytes it returned, in data order (increasing file
/// offset): exactly `ranges.size()` bytes.
pub struct Read<'a> {
    pub id: ReadId,
    pub ranges: Ranges,
    pub observed: Box<dyn ByteSource + 'a>,
}

impl<'a> Read<'a> {
    pub fn new(
        reader: u32,
        op: u64,
        ranges: impl Into<Ranges>,
        observed: impl ByteSource + 'a,
    ) -> Self {
        Self {
            id: ReadId { reader, op },
            ranges: ranges.into(),
            observed: Box::new(observed),
        }
    }
}

impl fmt::Debug for Read<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Read")
            .field("id", &self.id)
            .field("ranges", &self.ranges)
            .finish_non_exhaustive()
    }
}
