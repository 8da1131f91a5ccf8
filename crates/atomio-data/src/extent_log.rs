//! SeqDLM's extent log (Chen et al. §IV-B ④, §IV-C2): every update set a data server
//! applies is appended as records (object, range, SN), so a server restarted on its
//! directory rebuilds its extent caches and keeps discarding flushes older than what it
//! had applied — without it, a flush redone after the restart under an older SN would
//! overwrite newer synced bytes. Order on the data path: write the bytes, then append
//! their records; `Sync` makes both durable (bytes first). A record cut by a crash (a torn
//! tail) is dropped at replay, with everything after it.
//!
//! The data service appends each flush's update set (`DataService`, `SeqWrite`) and
//! rewrites the log from its caches when cleaning has made most records stale. At start,
//! the replayed log also gives the highest SN ever applied: the lock service gives SNs
//! above it, so a flush made after the restart is never taken for an older one.
//!
//! **Invariants:** a record is 40 bytes — file (u64), object (u32), start, end, SN (u64
//! each), and a checksum of those 36 bytes (u32), little-endian; replay stops at the first
//! record that is short or fails its checksum and reports how many bytes were whole.

use crate::extent_cache::ExtentCache;
use atomio_layout::ByteRange;
use std::collections::BTreeMap;

pub const RECORD_BYTES: usize = 40;

/// A lock resource's extents: (file id, object).
pub type ObjectKey = (u64, u32);

/// FNV-1a over the record's fields: cheap, and any torn or zeroed tail fails it.
fn checksum(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// One record: `object`'s bytes `range` now hold SN `sn`.
pub fn encode(object: ObjectKey, range: ByteRange, sn: u64) -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    r[0..8].copy_from_slice(&object.0.to_le_bytes());
    r[8..12].copy_from_slice(&object.1.to_le_bytes());
    r[12..20].copy_from_slice(&range.start.to_le_bytes());
    r[20..28].copy_from_slice(&range.end.to_le_bytes());
    r[28..36].copy_from_slice(&sn.to_le_bytes());
    let c = checksum(&r[0..36]);
    r[36..40].copy_from_slice(&c.to_le_bytes());
    r
}

fn decode(r: &[u8]) -> Option<(ObjectKey, ByteRange, u64)> {
    if r.len() < RECORD_BYTES {
        return None;
    }
    let word = |a: usize| u64::from_le_bytes(r[a..a + 8].try_into().expect("8 bytes"));
    let sum = u32::from_le_bytes(r[36..40].try_into().expect("4 bytes"));
    if checksum(&r[0..36]) != sum {
        return None;
    }
    let range = ByteRange::new(word(12), word(20)).ok()?;
    let object = u32::from_le_bytes(r[8..12].try_into().expect("4 bytes"));
    Some(((word(0), object), range, word(28)))
}

/// What a log holds: the extent caches it rebuilds, the bytes of whole records, and the
/// highest SN in it (`None` for an empty log).
#[derive(Debug, Default)]
pub struct Replayed {
    pub caches: BTreeMap<ObjectKey, ExtentCache>,
    pub whole: usize,
    pub max_sn: Option<u64>,
}

/// Rebuilds the extent caches from a log.
pub fn replay(log: &[u8]) -> Replayed {
    let mut out = Replayed::default();
    for chunk in log.chunks(RECORD_BYTES) {
        let Some((object, range, sn)) = decode(chunk) else {
            break;
        };
        // Records are update sets: merging them again in log order rebuilds the newest SN
        // of every byte (a later record is never older for the bytes it names).
        out.caches.entry(object).or_default().merge(range, sn);
        out.max_sn = Some(out.max_sn.map_or(sn, |m| m.max(sn)));
        out.whole += RECORD_BYTES;
    }
    out
}

/// A log holding exactly `caches` (compaction).
pub fn snapshot<'a>(caches: impl Iterator<Item = (&'a ObjectKey, &'a ExtentCache)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (&k, c) in caches {
        for (range, sn) in c.extents() {
            out.extend_from_slice(&encode(k, range, sn));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn a_torn_tail_is_dropped() {
        let mut log = Vec::new();
        log.extend_from_slice(&encode((7, 1), r(0, 10), 4));
        log.extend_from_slice(&encode((7, 1), r(5, 20), 6));
        let mut torn = encode((7, 2), r(0, 1), 9);
        torn[30] ^= 0xff;
        log.extend_from_slice(&torn);
        log.extend_from_slice(&encode((7, 2), r(0, 1), 10)[..7]);
        let got = replay(&log);
        assert_eq!(got.whole, 2 * RECORD_BYTES);
        assert_eq!(got.caches[&(7, 1)].sn_at(3), Some(4));
        assert_eq!(got.caches[&(7, 1)].sn_at(7), Some(6));
        assert!(!got.caches.contains_key(&(7, 2)));
        assert_eq!(got.max_sn, Some(6));
        // A snapshot of the caches replays to the same caches.
        let again = replay(&snapshot(got.caches.iter()));
        assert_eq!(again.caches[&(7, 1)].sn_at(3), Some(4));
        assert_eq!(again.caches[&(7, 1)].sn_at(7), Some(6));
    }

    #[derive(Clone, Debug)]
    struct Block {
        start: u64,
        len: u64,
        sn: u64,
    }

    /// Blocks arrive in `order`; after `synced` of them the server syncs (data and log
    /// durable), then crashes: the data and the log are as of the sync (plus `torn` bytes
    /// of a half-written record). Restarted — its caches rebuilt from the log, or, as the
    /// negative control, empty — it takes every block again that was not durable before
    /// the crash, in the same order (clients redo unacknowledged flushes). The stripe must
    /// hold each byte's newest SN.
    fn crash_and_redo(
        blocks: &[Block],
        order: &[usize],
        synced: usize,
        torn: usize,
        use_log: bool,
    ) -> (Vec<u64>, Vec<u64>) {
        let mut stripe = vec![u64::MAX; 200];
        let mut cache = ExtentCache::new();
        let mut log = Vec::new();
        let apply =
            |b: &Block, cache: &mut ExtentCache, stripe: &mut Vec<u64>, log: &mut Vec<u8>| {
                for u in cache.merge(r(b.start, b.start + b.len), b.sn) {
                    for x in u.start..u.end {
                        stripe[x as usize] = b.sn;
                    }
                    log.extend_from_slice(&encode((0, 0), u, b.sn));
                }
            };
        for &i in &order[..synced] {
            apply(&blocks[i], &mut cache, &mut stripe, &mut log);
        }
        // The crash: what was synced survives, plus a torn record.
        log.extend_from_slice(&encode((0, 0), r(0, 1), 99)[..torn]);
        let mut replayed = replay(&log);
        log.truncate(replayed.whole);
        let mut cache = if use_log {
            replayed.caches.remove(&(0, 0)).unwrap_or_default()
        } else {
            ExtentCache::new()
        };
        for &i in &order[synced..] {
            apply(&blocks[i], &mut cache, &mut stripe, &mut log);
        }
        let mut newest = vec![u64::MAX; 200];
        for b in blocks {
            for x in b.start..b.start + b.len {
                let cur = &mut newest[x as usize];
                if *cur == u64::MAX || b.sn > *cur {
                    *cur = b.sn;
                }
            }
        }
        (stripe, newest)
    }

    fn case() -> impl Strategy<Value = (Vec<Block>, Vec<usize>, usize, usize)> {
        prop::collection::vec(
            (0u64..150, 1u64..50, 0u64..10).prop_map(|(start, len, sn)| Block { start, len, sn }),
            1..20,
        )
        .prop_flat_map(|bs| {
            let n = bs.len();
            (
                Just(bs),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                0..=n,
                0..RECORD_BYTES,
            )
        })
    }

    proptest! {
        #[test]
        fn a_restart_replays_the_log_and_keeps_sn_order((bs, order, synced, torn) in case()) {
            let (got, want) = crash_and_redo(&bs, &order, synced, torn, true);
            prop_assert_eq!(got, want);
        }
    }

    /// Negative control: restarted without the log, a redone older flush overwrites newer
    /// synced bytes.
    #[test]
    fn without_the_log_an_older_redo_wins() {
        let bs = [
            Block {
                start: 0,
                len: 10,
                sn: 5,
            },
            Block {
                start: 0,
                len: 10,
                sn: 3,
            },
        ];
        let (got, want) = crash_and_redo(&bs, &[0, 1], 1, 0, false);
        assert_ne!(got, want);
        let (got, want) = crash_and_redo(&bs, &[0, 1], 1, 0, true);
        assert_eq!(got, want);
    }
}
