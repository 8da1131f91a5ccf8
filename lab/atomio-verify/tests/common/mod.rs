//! Helpers shared by the integration tests: build writes, paint them into an in-memory file,
//! take a read's observation.
#![allow(dead_code)]

use atomio_layout::{ByteRange, RangeList};
use atomio_verify::{Ranges, TagKey, Write, WriteId};

pub fn list(v: &[(u64, u64)]) -> Ranges {
    Ranges::List(RangeList::from_ranges(
        v.iter()
            .map(|&(s, e)| ByteRange::new(s, e).unwrap())
            .collect(),
    ))
}

pub fn write(writer: u32, op: u64, v: &[(u64, u64)]) -> Write {
    Write::new(writer, op, list(v))
}

/// Applies a whole write to the file image.
pub fn paint(file: &mut [u8], w: &Write) {
    let t = TagKey::DEFAULT.op(w.id.writer, w.id.op);
    for r in w.ranges.iter() {
        t.fill_at(r.start, &mut file[r.start as usize..r.end as usize]);
    }
}

/// Writes the tags of `id` into `file[range]` only.
pub fn paint_range(file: &mut [u8], id: WriteId, start: u64, end: u64) {
    TagKey::DEFAULT
        .op(id.writer, id.op)
        .fill_at(start, &mut file[start as usize..end as usize]);
}

/// What a read of `ranges` returns from `file`, in data order.
pub fn observe(file: &[u8], ranges: &Ranges) -> Vec<u8> {
    ranges
        .iter()
        .flat_map(|r| file[r.start as usize..r.end as usize].iter().copied())
        .collect()
}
