//! Self-describing data: every byte a test write puts in the file names the write and the
//! offset it was meant for.
//!
//! **Format (version 1, stable; test programs in other languages must reproduce it):**
//! ```text
//! mix(z)   = z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27; z *= 0x94d049bb133111eb;
//!            z ^= z >> 31                              (SplitMix64 finalizer, wrapping u64)
//! stream   = mix(mix(mix(key ^ 0x61746f6d696f7631) ^ writer) ^ op)       ("atomiov1")
//! word(w)  = mix(stream ^ (w * 0x9e3779b97f4a7c15))
//! tag_byte(writer, op, o) = byte (o mod 8) of word(o / 8) in little-endian order
//! ```
//! `writer` is widened from u32 to u64, `key` is the run's `TagKey` (0 unless the manifest
//! says otherwise).
//!
//! **Invariants and why:**
//! * One hash per 8-byte-aligned word, so `fill` writes whole words (≥ 1 GB/s on one core)
//!   and `matches` compares whole words.
//! * The offset is an input: data written at the wrong offset does not match, and neither
//!   does data copied from another write (a collision needs a 64-bit coincidence per word).
//! * `word` XORs the scaled word index into the stream instead of adding it (SplitMix's own
//!   stream form): with `stream + w·φ`, two writes whose streams differ by `k·φ` would have
//!   tag sequences that are shifts of each other, so one write's data moved by `8k` bytes
//!   would pass as the other's. With XOR, `(w+k)·φ ^ w·φ` is not constant in `w`.
//! * One multiply-mix per word keeps filling and matching at several GB/s.
//! * A single byte of two different writes agrees with probability 1/256 (and equals the
//!   zero of an unwritten file with probability 1/256): callers treat short matches as
//!   ambiguous evidence, never as proof.
//! * Nothing here panics: offset arithmetic wraps (offsets near `u64::MAX` never reach here
//!   through validated ranges, but a caller's bad buffer must not abort a verifier).

use crate::error::Error;
use atomio_layout::ByteRange;

const DOMAIN: u64 = 0x6174_6f6d_696f_7631;
/// Odd, so `w ↦ w·WORD_SCALE` is a bijection: one write's words never repeat.
const WORD_SCALE: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 finalizer: a bijection on u64 with full avalanche.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The key of a run's tags. Runs that reuse a file without truncating it should use a fresh
/// key each time so stale bytes from an earlier run can never pass as this run's data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TagKey(pub u64);

impl TagKey {
    pub const DEFAULT: TagKey = TagKey(0);

    /// The tag stream of one write.
    pub fn op(self, writer: u32, op: u64) -> OpTag {
        OpTag {
            stream: mix64(mix64(mix64(self.0 ^ DOMAIN) ^ u64::from(writer)) ^ op),
        }
    }
}

/// The tags of one write (writer, op): a pure function of the file offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpTag {
    stream: u64,
}

impl OpTag {
    /// The 8 tag bytes of aligned word `w` (file bytes `8w .. 8w+8`), little-endian.
    #[inline]
    pub fn word(&self, w: u64) -> u64 {
        mix64(self.stream ^ w.wrapping_mul(WORD_SCALE))
    }

    /// The tag byte for file offset `offset`.
    #[inline]
    pub fn byte(&self, offset: u64) -> u8 {
        (self.word(offset >> 3) >> ((offset & 7) * 8)) as u8
    }

    /// Fills `buf` with the tags of the contiguous file bytes starting at `offset`.
    pub fn fill_at(&self, offset: u64, buf: &mut [u8]) {
        let head = (offset.wrapping_neg() & 7) as usize;
        let head = head.min(buf.len());
        let (first, rest) = buf.split_at_mut(head);
        for (i, b) in first.iter_mut().enumerate() {
            *b = self.byte(offset.wrapping_add(i as u64));
        }
        let mut w = offset.wrapping_add(head as u64) >> 3;
        let mut words = rest.chunks_exact_mut(8);
        for chunk in &mut words {
            chunk.copy_from_slice(&self.word(w).to_le_bytes());
            w = w.wrapping_add(1);
        }
        let tail = words.into_remainder();
        let tag = self.word(w).to_le_bytes();
        tail.copy_from_slice(&tag[..tail.len()]);
    }

    /// True when `data` equals the tags of the file bytes starting at `offset`.
    #[inline]
    pub fn matches(&self, offset: u64, data: &[u8]) -> bool {
        let head = ((offset.wrapping_neg() & 7) as usize).min(data.len());
        let (first, rest) = data.split_at(head);
        for (i, &b) in first.iter().enumerate() {
            if self.byte(offset.wrapping_add(i as u64)) != b {
                return false;
            }
        }
        let mut w = offset.wrapping_add(head as u64) >> 3;
        let mut words = rest.chunks_exact(8);
        for chunk in &mut words {
            let mut a = [0u8; 8];
            a.copy_from_slice(chunk);
            if u64::from_le_bytes(a) != self.word(w) {
                return false;
            }
            w = w.wrapping_add(1);
        }
        let tail = words.remainder();
        tail == &self.word(w).to_le_bytes()[..tail.len()]
    }

    /// Fills `buf`, the data of a write in data order (increasing file offset), with the
    /// tags of `ranges`. The ranges must hold exactly `buf.len()` bytes.
    pub fn fill<I>(&self, ranges: I, buf: &mut [u8]) -> Result<(), Error>
    where
        I: IntoIterator<Item = ByteRange>,
    {
        let mut at = 0usize;
        let mut ranges = ranges.into_iter();
        for r in ranges.by_ref() {
            let len = usize::try_from(r.len()).unwrap_or(usize::MAX);
            let Some(dst) = at.checked_add(len).and_then(|end| buf.get_mut(at..end)) else {
                let rest: u64 = ranges.map(|r| r.len()).sum();
                return Err(Error::FillSize {
                    buffer: buf.len() as u64,
                    ranges: (at as u64).saturating_add(r.len()).saturating_add(rest),
                });
            };
            self.fill_at(r.start, dst);
            at += len;
        }
        if at != buf.len() {
            return Err(Error::FillSize {
                buffer: buf.len() as u64,
                ranges: at as u64,
            });
        }
        Ok(())
    }
}

/// The tag byte written at file offset `offset` by (writer, op) under the default key.
pub fn tag_byte(writer: u32, op: u64, offset: u64) -> u8 {
    TagKey::DEFAULT.op(writer, op).byte(offset)
}

/// Fills `buf` (a write's data, in increasing file offset order) with the tags of `ranges`
/// for (writer, op) under the default key. `buf.len()` must equal the ranges' total length.
pub fn fill<I>(writer: u32, op: u64, ranges: I, buf: &mut [u8]) -> Result<(), Error>
where
    I: IntoIterator<Item = ByteRange>,
{
    TagKey::DEFAULT.op(writer, op).fill(ranges, buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: u64, e: u64) -> ByteRange {
        ByteRange::new(s, e).unwrap()
    }

    #[test]
    fn fill_agrees_with_tag_byte_at_every_alignment() {
        let t = TagKey::DEFAULT.op(3, 7);
        for start in 0..17u64 {
            for len in 0..40usize {
                let mut buf = vec![0u8; len];
                t.fill_at(start, &mut buf);
                for (i, &b) in buf.iter().enumerate() {
                    assert_eq!(b, tag_byte(3, 7, start + i as u64));
                }
                assert!(t.matches(start, &buf));
                if len > 0 {
                    buf[len / 2] ^= 1;
                    assert!(!t.matches(start, &buf));
                }
            }
        }
    }

    #[test]
    fn fill_follows_ranges_in_data_order_and_checks_size() {
        let ranges = [r(5, 9), r(100, 103)];
        let mut buf = [0u8; 7];
        fill(1, 2, ranges, &mut buf).unwrap();
        let want: Vec<u8> = (5..9).chain(100..103).map(|o| tag_byte(1, 2, o)).collect();
        assert_eq!(&buf[..], &want[..]);
        let mut short = [0u8; 6];
        assert!(matches!(
            fill(1, 2, ranges, &mut short),
            Err(Error::FillSize {
                buffer: 6,
                ranges: 7
            })
        ));
        let mut long = [0u8; 8];
        assert!(fill(1, 2, ranges, &mut long).is_err());
    }

    #[test]
    fn tags_depend_on_writer_op_key_and_offset() {
        let a = TagKey::DEFAULT.op(1, 1);
        let words = |t: OpTag| (0..64).map(|w| t.word(w)).collect::<Vec<_>>();
        assert_ne!(words(a), words(TagKey::DEFAULT.op(2, 1)));
        assert_ne!(words(a), words(TagKey::DEFAULT.op(1, 2)));
        assert_ne!(words(a), words(TagKey(9).op(1, 1)));
        // Shifted data does not match: one write's words are not another position's words.
        let w: Vec<u64> = words(a);
        assert!(w.windows(2).all(|p| p[0] != p[1]));
    }

    #[test]
    fn format_is_pinned() {
        // Format version 1 is an interface to test programs in other languages: changing
        // the hash must be a deliberate, visible break.
        assert_eq!(mix64(0), 0);
        assert_eq!(TagKey::DEFAULT.op(0, 0).word(0), 0x1df3_410e_b6f4_8c25);
        let t = TagKey(7).op(3, 9);
        assert_eq!(t.word(0), 0x02b2_7266_87a9_4829);
        assert_eq!(t.word(512), 0xd1f4_7a5b_b46b_a586);
        let bytes: Vec<u8> = (4096..4104).map(|o| tag_byte(1, 3, o)).collect();
        assert_eq!(bytes, [254, 209, 34, 117, 37, 204, 29, 255]);
    }
}
