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

/// Which objects of a layout one server holds, computed once and shared by every `Share`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    mask: Vec<bool>,
    /// Owned object indices, ascending.
    objects: Vec<u32>,
}

impl Owned {
    pub fn new(layout: &Layout, server: ServerId) -> Self {
        let mask = layout.owned_mask(server);
        let objects = mask
            .iter()
            .enumerate()
            .filter(|(_, &o)| o)
            .map(|(i, _)| i as u32)
            .collect();
        Self { mask, objects }
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

pub struct Share<'l, C> {
    cursor: C,
    layout: &'l Layout,
    owned: std::borrow::Cow<'l, Owned>,
    pending: Option<ByteRange>,
    /// Cache of the strip the last range started in.
    strip: u64,
    strip_start: u64,
    strip_end: u64,
    strip_owned: bool,
}

impl<'l, C: RangeCursor> Share<'l, C> {
    pub fn new(cursor: C, layout: &'l Layout, server: ServerId) -> Self {
        Self::with_owned(
            cursor,
            layout,
            std::borrow::Cow::Owned(Owned::new(layout, server)),
        )
    }

    /// Like `new`, with the ownership computed beforehand (no allocation).
    pub fn borrowed(cursor: C, layout: &'l Layout, owned: &'l Owned) -> Self {
        Self::with_owned(cursor, layout, std::borrow::Cow::Borrowed(owned))
    }

    fn with_owned(cursor: C, layout: &'l Layout, owned: std::borrow::Cow<'l, Owned>) -> Self {
        Self {
            cursor,
            layout,
            owned,
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
        let objects = &self.owned.objects;
        let i = objects.partition_point(|&o| o < col);
        let s = match objects.get(i) {
            Some(&o) => row.checked_mul(count)?.checked_add(u64::from(o))?,
            None => (row.checked_add(1)?)
                .checked_mul(count)?
                .checked_add(u64::from(*objects.first()?))?,
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
                self.strip_owned =
                    self.owned.mask[self.layout.object_of_strip(self.strip) as usize];
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
