//! A read request's lock chain (Ching et al.'s per-request list of granted read ranges),
//! kept in fixed-size chunks.
//!
//! Why chunks: a pattern request can hold millions of ranges, granted a slice at a time.
//! In one `Vec` the push that crosses a power of two reallocates and copies the whole chain
//! (128 MiB at 2²³ ranges) inside one slice: a ~100 ms stall the slice budget cannot bound.
//! Chunks of `CHUNK` ranges make every push O(1) worst case.
//!
//! **Invariants:** ranges ascending and disjoint (the caller's duty, checked by the lock
//! table's invariant check); every chunk but the last is full and no chunk is empty, so
//! the i-th range is at `chunks[i / CHUNK][i % CHUNK]`.

use atomio_layout::ByteRange;

/// Ranges per chunk (64 KiB of ranges).
const CHUNK: usize = 4096;

#[derive(Debug, Default)]
pub struct Chain {
    chunks: Vec<Vec<ByteRange>>,
    len: usize,
}

impl Chain {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `r` (above every range already in the chain).
    pub fn push(&mut self, r: ByteRange) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(r),
            // Grown by doubling, so a chain of a few ranges stays small; a doubling copies
            // at most one chunk.
            _ => self.chunks.push(vec![r]),
        }
        self.len += 1;
    }

    pub fn last(&self) -> Option<ByteRange> {
        self.chunks.last().and_then(|c| c.last()).copied()
    }

    pub fn get(&self, i: usize) -> Option<ByteRange> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK).copied()
    }

    /// The number of leading ranges for which `pred` holds (`pred` true then false along
    /// the chain, as for `slice::partition_point`).
    pub fn partition_point(&self, pred: impl Fn(&ByteRange) -> bool) -> usize {
        // Chunks whose every range satisfies `pred`: their last one does.
        let full = self.chunks.partition_point(|c| c.last().is_some_and(&pred));
        match self.chunks.get(full) {
            Some(c) => full * CHUNK + c.partition_point(pred),
            None => self.len,
        }
    }

    /// Removes and returns the ranges from index `at` on, in order.
    pub fn split_off(&mut self, at: usize) -> Vec<ByteRange> {
        if at >= self.len {
            return Vec::new();
        }
        let (ci, off) = (at / CHUNK, at % CHUNK);
        let mut tail = Vec::with_capacity(self.len - at);
        for (i, mut c) in self.chunks.split_off(ci).into_iter().enumerate() {
            if i == 0 && off > 0 {
                // The cut falls inside this chunk: its head stays, as the last chunk.
                tail.extend_from_slice(&c[off..]);
                c.truncate(off);
                self.chunks.push(c);
            } else {
                tail.extend(c);
            }
        }
        self.len = at;
        tail
    }

    /// Removes and returns every range, in order.
    pub fn take_all(&mut self) -> Vec<ByteRange> {
        self.split_off(0)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ByteRange> + '_ {
        self.chunks.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Push(u64),
        SplitOff(usize),
        Partition(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (1u64..4).prop_map(Op::Push),
            1 => any::<usize>().prop_map(Op::SplitOff),
            1 => any::<u64>().prop_map(Op::Partition),
        ]
    }

    proptest! {
        /// The chain behaves as one `Vec` (the model) under pushes, cuts and searches,
        /// across chunk boundaries (runs of pushes are long enough to fill several chunks).
        #[test]
        fn chain_is_a_vec(ops in proptest::collection::vec((op(), 1usize..3000), 1..40)) {
            let mut chain = Chain::new();
            let mut model: Vec<ByteRange> = Vec::new();
            for (op, times) in ops {
                match op {
                    Op::Push(len) => for _ in 0..times {
                        let start = model.last().map_or(0, |r| r.end + 1);
                        let r = ByteRange { start, end: start + len };
                        chain.push(r);
                        model.push(r);
                    },
                    Op::SplitOff(at) => {
                        let at = if model.is_empty() { 0 } else { at % (model.len() + 1) };
                        let want = model.split_off(at);
                        prop_assert_eq!(chain.split_off(at), want);
                    }
                    Op::Partition(x) => {
                        let x = if let Some(l) = model.last() { x % (l.end + 2) } else { x };
                        prop_assert_eq!(
                            chain.partition_point(|r| r.end <= x),
                            model.partition_point(|r| r.end <= x)
                        );
                    }
                }
                prop_assert_eq!(chain.len(), model.len());
                prop_assert_eq!(chain.last(), model.last().copied());
                prop_assert!(chain.chunks.iter().all(|c| !c.is_empty()));
                prop_assert!(chain.chunks.iter().rev().skip(1).all(|c| c.len() == CHUNK));
                if !model.is_empty() {
                    let i = model.len() / 2;
                    prop_assert_eq!(chain.get(i), Some(model[i]));
                }
            }
            prop_assert!(chain.iter().copied().eq(model.iter().copied()));
            prop_assert_eq!(chain.take_all(), model);
            prop_assert!(chain.is_empty());
        }
    }
}
