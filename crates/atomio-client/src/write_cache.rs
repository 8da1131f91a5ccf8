//! A client's write-back cache for one stripe under cached locks (Chen et al. §IV-A): dirty
//! bytes tagged with the sequence number of the lock they were written under. A write
//! replaces cached bytes with a smaller SN and keeps those with a larger one (they were
//! written under a later lock, so they are newer); when a lock is canceled, the bytes still
//! tagged with its SN are flushed, carrying that SN to the data server (whose extent cache
//! applies them in SN order). Bytes a later lock overwrote are flushed with the later lock.
//!
//! Issue 9's client piece, **not wired yet** (the cached-lock client and its messages come
//! next).
//!
//! **Invariants:** extents are disjoint and sorted, each with its SN and exactly its bytes;
//! a byte's SN never decreases while it is cached.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Extent {
    sn: u64,
    data: Vec<u8>,
}

/// A block to flush: its first byte, the SN it was written under, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirty {
    pub start: u64,
    pub sn: u64,
    pub data: Vec<u8>,
}

#[derive(Debug, Default, Clone)]
pub struct WriteCache {
    /// start → extent
    map: BTreeMap<u64, Extent>,
}

impl WriteCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn dirty_bytes(&self) -> u64 {
        self.map.values().map(|e| e.data.len() as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Caches `data` at `start`, written under a lock with SN `sn`: replaces cached bytes
    /// whose SN is at most `sn`, keeps newer ones.
    pub fn write(&mut self, start: u64, data: &[u8], sn: u64) {
        let end = start + data.len() as u64;
        if data.is_empty() {
            return;
        }
        // Split the extents straddling `start` and `end` so every overlap is whole.
        self.split_at(start);
        self.split_at(end);
        let inside: Vec<u64> = self.map.range(start..end).map(|(&s, _)| s).collect();
        // Newer cached bytes inside stay; everything else in [start, end) becomes ours.
        let mut keep = Vec::new();
        for s in inside {
            let e = self.map.remove(&s).expect("listed");
            if e.sn > sn {
                keep.push((s, e));
            }
        }
        let mut at = start;
        for (s, e) in keep {
            if s > at {
                let lo = (at - start) as usize;
                let hi = (s - start) as usize;
                self.map.insert(
                    at,
                    Extent {
                        sn,
                        data: data[lo..hi].to_vec(),
                    },
                );
            }
            at = s + e.data.len() as u64;
            self.map.insert(s, e);
        }
        if at < end {
            self.map.insert(
                at,
                Extent {
                    sn,
                    data: data[(at - start) as usize..].to_vec(),
                },
            );
        }
    }

    fn split_at(&mut self, x: u64) {
        let Some((&s, e)) = self.map.range(..x).next_back() else {
            return;
        };
        let end = s + e.data.len() as u64;
        if end > x {
            let mut e = self.map.remove(&s).expect("found");
            let tail = e.data.split_off((x - s) as usize);
            let sn = e.sn;
            self.map.insert(s, e);
            self.map.insert(x, Extent { sn, data: tail });
        }
    }

    /// Takes the bytes still tagged `sn` out of the cache (to flush when that lock is
    /// canceled), as blocks in offset order with touching ones joined.
    pub fn take(&mut self, sn: u64) -> Vec<Dirty> {
        let starts: Vec<u64> = self
            .map
            .iter()
            .filter(|(_, e)| e.sn == sn)
            .map(|(&s, _)| s)
            .collect();
        let mut out: Vec<Dirty> = Vec::new();
        for s in starts {
            let e = self.map.remove(&s).expect("listed");
            match out.last_mut() {
                Some(last) if last.start + last.data.len() as u64 == s => {
                    last.data.extend_from_slice(&e.data)
                }
                _ => out.push(Dirty {
                    start: s,
                    sn,
                    data: e.data,
                }),
            }
        }
        out
    }

    /// The cached byte at `x` and its SN (reads under a lock that covers it see it).
    pub fn byte_at(&self, x: u64) -> Option<(u8, u64)> {
        let (&s, e) = self.map.range(..=x).next_back()?;
        e.data.get((x - s) as usize).map(|&b| (b, e.sn))
    }

    pub fn check(&self) -> Result<(), String> {
        let mut prev_end = 0u64;
        for (&s, e) in &self.map {
            if e.data.is_empty() {
                return Err(format!("empty extent at {s}"));
            }
            if s < prev_end {
                return Err(format!("extents overlap at {s}"));
            }
            prev_end = s + e.data.len() as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fig. 14: [0, 4K) under lock A (SN 8), then [2K, 8K) under lock B (SN 9): B's flush
    /// is D[2K, 8K, 9], A's is D[0, 2K, 8].
    #[test]
    fn the_papers_example() {
        let k = 1024;
        let mut c = WriteCache::new();
        c.write(0, &vec![1; 4 * k], 8);
        c.write(2 * k as u64, &vec![2; 6 * k], 9);
        c.check().unwrap();
        let b = c.take(9);
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].start, b[0].data.len()), (2 * k as u64, 6 * k));
        let a = c.take(8);
        assert_eq!((a[0].start, a[0].data.len()), (0, 2 * k));
        assert!(c.is_empty());
    }

    /// A write under an older lock (a CANCELING lock used once more) does not overwrite
    /// bytes a newer lock already wrote.
    #[test]
    fn newer_cached_bytes_survive_an_older_write() {
        let mut c = WriteCache::new();
        c.write(10, &[9; 10], 5);
        c.write(0, &[1; 30], 3);
        c.check().unwrap();
        assert_eq!(c.byte_at(15), Some((9, 5)));
        assert_eq!(c.byte_at(5), Some((1, 3)));
        assert_eq!(c.byte_at(25), Some((1, 3)));
        assert_eq!(c.take(3).len(), 2, "split around the newer bytes");
        assert_eq!(c.dirty_bytes(), 10);
    }
}
