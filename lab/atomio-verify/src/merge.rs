//! K-way merge of many lazily generated range streams into boundary events.
//!
//! **Invariants and why:**
//! * The heap holds at most one entry per stream (its next start or end), so memory is
//!   O(streams) whatever the number of ranges, and each range costs two O(log streams)
//!   heap operations.
//! * Points come out in strictly increasing order, and `pop_at(p)` hands back *every* event
//!   at `p`, so between two consecutive points the set of active streams is constant — that
//!   is exactly what an elementary interval is.
//! * Touching ranges of one stream are joined here (no end/start pair at the same point), so
//!   a stream's own range boundaries never split an interval; ranges that go backwards or
//!   overlap are reported as an error instead of producing a wrong sweep.

use crate::op::RangesIter;
use atomio_layout::ByteRange;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A stream's change of state at a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The stream covers the bytes from here on.
    Start(u32),
    /// The stream stops covering bytes here; `last` when it has no more ranges.
    End { stream: u32, last: bool },
}

struct Stream<'a> {
    iter: RangesIter<'a>,
    current: ByteRange,
    active: bool,
}

pub(crate) struct Merge<'a> {
    streams: Vec<Stream<'a>>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

/// A stream produced a range that does not follow its previous one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Disorder {
    pub stream: u32,
    pub offset: u64,
}

impl<'a> Merge<'a> {
    pub(crate) fn new(iters: impl IntoIterator<Item = RangesIter<'a>>) -> Self {
        let mut streams = Vec::new();
        let mut heap = BinaryHeap::new();
        for (i, mut iter) in iters.into_iter().enumerate() {
            let first = iter.by_ref().find(|r| !r.is_empty());
            let current = first.unwrap_or(ByteRange { start: 0, end: 0 });
            if first.is_some() {
                heap.push(Reverse((current.start, i as u32)));
            }
            streams.push(Stream {
                iter,
                current,
                active: false,
            });
        }
        Self { streams, heap }
    }

    /// The next point with an event, if any.
    pub(crate) fn peek(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((p, _))| *p)
    }

    /// Removes every event at `p` (which must be `peek()`) and appends it to `out`.
    pub(crate) fn pop_at(&mut self, p: u64, out: &mut Vec<Event>) -> Result<(), Disorder> {
        while let Some(&Reverse((q, i))) = self.heap.peek() {
            if q != p {
                break;
            }
            self.heap.pop();
            let s = &mut self.streams[i as usize];
            if !s.active {
                s.active = true;
                self.heap.push(Reverse((s.current.end, i)));
                out.push(Event::Start(i));
                continue;
            }
            // End of the current range: join touching successors, then schedule the next.
            let next = loop {
                match s.iter.next() {
                    Some(r) if r.is_empty() => continue,
                    Some(r) if r.start < s.current.end => {
                        return Err(Disorder {
                            stream: i,
                            offset: r.start,
                        })
                    }
                    Some(r) if r.start == s.current.end => {
                        s.current.end = r.end;
                        break Some(true);
                    }
                    Some(r) => {
                        s.current = r;
                        break Some(false);
                    }
                    None => break None,
                }
            };
            match next {
                Some(true) => self.heap.push(Reverse((s.current.end, i))),
                Some(false) => {
                    s.active = false;
                    self.heap.push(Reverse((s.current.start, i)));
                    out.push(Event::End {
                        stream: i,
                        last: false,
                    });
                }
                None => {
                    s.active = false;
                    out.push(Event::End {
                        stream: i,
                        last: true,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Ranges;
    use atomio_layout::RangeList;

    fn list(v: &[(u64, u64)]) -> Ranges {
        Ranges::List(RangeList::from_ranges(
            v.iter()
                .map(|&(s, e)| ByteRange::new(s, e).unwrap())
                .collect(),
        ))
    }

    #[test]
    fn events_mark_elementary_intervals() {
        let a = list(&[(0, 10), (20, 30)]);
        let b = list(&[(5, 25)]);
        let mut m = Merge::new([a.iter(), b.iter()]);
        let mut points = Vec::new();
        while let Some(p) = m.peek() {
            let mut ev = Vec::new();
            m.pop_at(p, &mut ev).unwrap();
            points.push((p, ev));
        }
        let ps: Vec<u64> = points.iter().map(|(p, _)| *p).collect();
        assert_eq!(ps, vec![0, 5, 10, 20, 25, 30]);
        assert_eq!(
            points[5].1,
            vec![Event::End {
                stream: 0,
                last: true
            }]
        );
    }
}
