//! The part of an in-order range source that one server owns under a layout.
//!
//! Ching et al.'s servers each scanned the whole datatype to find their own bytes, so the
//! work per server did not shrink as servers were added. `Share` instead jumps: when a range
//! falls in a strip the server does not own, it computes the next owned strip arithmetically
//! and seeks the source there. Work is O(pieces owned + owned strips touched), each step
//! O(pattern depth).
//!
//! **Invariant:** pieces come out in increasing offset order, each within one owned strip,
//! and their union is exactly (source bytes) ∩ (strips of owned objects).

use crate::layout::{Layout, ServerId};
use crate::range::{ByteRange, MAX_OFFSET};
use crate::range_list::RangeCursor;

pub struct Share<'l, C> {
    cursor: C,
    layout: &'l Layout,
    owned: Vec<bool>,
    /// Owned object indices, ascending.
    owned_objects: Vec<u32>,
    pending: Option<ByteRange>,
    /// Cache of the strip the last range started in.
    strip: u64,
    strip_start: u64,
    strip_end: u64,
    strip_owned: bool,
}

impl<'l, C: RangeCursor> Share<'l, C> {
    pub fn new(cursor: C, layout: &'l Layout, server: ServerId) -> Self {
        let owned = layout.owned_mask(server);
        let owned_objects = owned
            .iter()
            .enumerate()
            .filter(|(_, &o)| o)
            .map(|(i, _)| i as u32)
            .collect();
        Self {
            cursor,
            layout,
            owned,
            owned_objects,
            pending: None,
            strip: 0,
            strip_start: 1,
            strip_end: 0,
            strip_owned: false,
        }
    }

    /// First strip at or after `strip` whose object this server owns.
    fn next_owned_strip(&self, strip: u64) -> Option<u64> {
        let count = u64::from(self.layout.stripe_count());
        let row = strip / count;
        let col = (strip % count) as u32;
        let i = self.owned_objects.partition_point(|&o| o < col);
        let s = match self.owned_objects.get(i) {
            Some(&o) => row.checked_mul(count)?.checked_add(u64::from(o))?,
            None => (row.checked_add(1)?)
                .checked_mul(count)?
                .checked_add(u64::from(*self.owned_objects.first()?))?,
        };
        (s.checked_mul(self.layout.stripe_size())? < MAX_OFFSET).then_some(s)
    }
}

impl<C: RangeCursor> RangeCursor for Share<'_, C> {
    fn next_range(&mut self) -> Option<ByteRange> {
        loop {
            let r = match self.pending.take() {
                Some(r) => r,
                None => self.cursor.next_range()?,
            };
            if !(self.strip_start <= r.start && r.start < self.strip_end) {
                self.strip = self.layout.strip_of(r.start);
                let sr = self.layout.strip_range(self.strip);
                self.strip_start = sr.start;
                self.strip_end = sr.end;
                self.strip_owned = self.owned[self.layout.object_of_strip(self.strip) as usize];
            }
            if self.strip_owned {
                if r.end > self.strip_end {
                    self.pending = Some(ByteRange {
                        start: self.strip_end,
                        end: r.end,
                    });
                    return Some(ByteRange {
                        start: r.start,
                        end: self.strip_end,
                    });
                }
                return Some(r);
            }
            let next = self.next_owned_strip(self.strip + 1)?;
            let off = next * self.layout.stripe_size();
            if r.end > off {
                self.pending = Some(ByteRange {
                    start: off,
                    end: r.end,
                });
            } else {
                self.cursor.seek(off);
            }
        }
    }

    fn seek(&mut self, offset: u64) {
        self.pending = None;
        self.cursor.seek(offset);
    }
}

impl<C: RangeCursor> Iterator for Share<'_, C> {
    type Item = ByteRange;
    fn next(&mut self) -> Option<ByteRange> {
        self.next_range()
    }
}
