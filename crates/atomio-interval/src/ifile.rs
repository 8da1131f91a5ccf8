//! Interval files (Logan §3.4): a flat file's bytes reorganized by an interval set, so that
//! every rank's intervals are contiguous on disk (one large contention-free transfer per
//! rank) and all metadata is one read after a fixed header.
//!
//! Byte layout (all integers little-endian):
//!
//! ```text
//! 0     header, HEADER_LEN = 128 bytes
//!         0 magic "ATOMIOIV"        8 version u32 (1)       12 header_len u32 (128)
//!        16 ranks u32              20 region_align u32     24 flat_size u64
//!        32 meta_len u64           40 data_start u64       48 data_len u64
//!        56 families u64           64 owner_sets u64       72 owner_ranks u64
//!        80 intervals u64          88 interval_bytes u64   96 meta_checksum u64
//!       104 header_checksum u64 (FNV-1a of bytes 0..104)   112..128 zero
//! 128   metadata, meta_len bytes (one read):
//!         process table   ranks       × { offset u64, len u64, families u64 }        24 B
//!         interval table  families    × { start, len, stride, count u64;
//!                                         home u32, owner u32 }                      40 B
//!         owner-set table owner_sets  × { kind u32 (0 ranks, 1 unresolved), n u32 }  8 B
//!         owner ranks     owner_ranks × u32 (each set's n sorted ranks, in set order)
//! data_start = align_up(128 + meta_len, 4096)
//!       interval data: rank 0's region, rank 1's, … each at an offset aligned to
//!       region_align; a region holds the families homed at that rank in interval-table
//!       order, each family's `count` intervals consecutively (`len` bytes each).
//! file length = data_start + data_len
//! ```
//!
//! The *home* of a family: private → its rank; shared → the lowest rank of its owner set;
//! unresolved → rank 0. `flat_size` is the largest end of any interval (the flat file's
//! logical size), `interval_bytes` the sum of every interval's length.
//!
//! **Invariants:** the layout is a function of (interval set, ranks, region_align) only, so
//! a reader recomputes it from the families and checks every stored offset, length, home
//! and count against it; decoding never panics and never allocates more than the file
//! holds (every count is bounded by `meta_len`, which is bounded by the file's length and by
//! `MAX_METADATA`); the physical ranges of distinct intervals are disjoint and lie inside
//! `[data_start, data_start + data_len)`. The interval table's families are checked one by
//! one (shape, order by start, owner, home); their pairwise disjointness is the writer's
//! analysis's invariant and is not re-verified.

use crate::analysis::{Analysis, AnalysisStats, Entry, Owner, Rank};
use crate::family::Family;
use crate::set::IntervalSet;
use atomio_layout::{ByteRange, MAX_OFFSET};
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::FileExt;

mod disk;

pub use disk::*;

pub const MAGIC: [u8; 8] = *b"ATOMIOIV";
pub const FORMAT_VERSION: u32 = 1;
pub const HEADER_LEN: u64 = 128;
/// Alignment of `data_start`.
pub const DATA_ALIGN: u64 = 4096;
/// Alignment of each rank's region (so two ranks' writes never share a file-system block).
pub const REGION_ALIGN: u32 = 4096;
/// Largest metadata a reader accepts (≈ 100 M families).
pub const MAX_METADATA: u64 = 4 << 30;

const PROC_REC: u64 = 24;
const FAM_REC: u64 = 40;
const OWNER_REC: u64 = 8;
const RANK_REC: u64 = 4;

/// Why an interval file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum IfileError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("not an interval file (bad magic)")]
    NotIntervalFile,
    #[error("interval file format version {0} (this build reads {FORMAT_VERSION})")]
    Version(u32),
    #[error("interval file truncated: {what} needs {need} bytes, the file has {have}")]
    Truncated {
        what: &'static str,
        need: u64,
        have: u64,
    },
    #[error("corrupt interval file: {0}")]
    Corrupt(String),
    #[error("interval layout too large: {0}")]
    TooLarge(&'static str),
}

pub type Result<T, E = IfileError> = std::result::Result<T, E>;

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> IfileError {
    let what = what.into();
    move |source| IfileError::Io { what, source }
}

fn corrupt(s: impl Into<String>) -> IfileError {
    IfileError::Corrupt(s.into())
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn align_up(x: u64, a: u64) -> Option<u64> {
    debug_assert!(a.is_power_of_two());
    x.checked_add(a - 1).map(|y| y & !(a - 1))
}

/// The fixed-size header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Header {
    pub version: u32,
    pub ranks: u32,
    pub region_align: u32,
    pub flat_size: u64,
    pub meta_len: u64,
    pub data_start: u64,
    pub data_len: u64,
    pub families: u64,
    pub owner_sets: u64,
    pub owner_ranks: u64,
    pub intervals: u64,
    pub interval_bytes: u64,
    pub meta_checksum: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut b = [0u8; HEADER_LEN as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        b[16..20].copy_from_slice(&self.ranks.to_le_bytes());
        b[20..24].copy_from_slice(&self.region_align.to_le_bytes());
        let words = [
            self.flat_size,
            self.meta_len,
            self.data_start,
            self.data_len,
            self.families,
            self.owner_sets,
            self.owner_ranks,
            self.intervals,
            self.interval_bytes,
            self.meta_checksum,
        ];
        for (i, w) in words.iter().enumerate() {
            b[24 + 8 * i..32 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        let sum = fnv1a(&b[..104]);
        b[104..112].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes and checks the header on its own: magic, version, checksum, and that the
    /// counts agree with `meta_len` and the data placement (no file length needed yet).
    pub fn decode(b: &[u8]) -> Result<Header> {
        if b.len() < HEADER_LEN as usize {
            return Err(IfileError::Truncated {
                what: "the header",
                need: HEADER_LEN,
                have: b.len() as u64,
            });
        }
        if b[0..8] != MAGIC {
            return Err(IfileError::NotIntervalFile);
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(IfileError::Version(version));
        }
        if u32_at(12) as u64 != HEADER_LEN {
            return Err(corrupt(format!(
                "header length {} (expected {HEADER_LEN})",
                u32_at(12)
            )));
        }
        if u64_at(104) != fnv1a(&b[..104]) {
            return Err(corrupt("header checksum mismatch"));
        }
        if b[112..128].iter().any(|&x| x != 0) {
            return Err(corrupt("reserved header bytes are not zero"));
        }
        let h = Header {
            version,
            ranks: u32_at(16),
            region_align: u32_at(20),
            flat_size: u64_at(24),
            meta_len: u64_at(32),
            data_start: u64_at(40),
            data_len: u64_at(48),
            families: u64_at(56),
            owner_sets: u64_at(64),
            owner_ranks: u64_at(72),
            intervals: u64_at(80),
            interval_bytes: u64_at(88),
            meta_checksum: u64_at(96),
        };
        if !h.region_align.is_power_of_two() || h.region_align > 1 << 30 {
            return Err(corrupt(format!("region alignment {}", h.region_align)));
        }
        let want = meta_len(h.ranks as u64, h.families, h.owner_sets, h.owner_ranks)
            .ok_or_else(|| corrupt("metadata counts overflow"))?;
        if want != h.meta_len {
            return Err(corrupt(format!(
                "metadata length {} does not match its counts ({want})",
                h.meta_len
            )));
        }
        if h.meta_len > MAX_METADATA {
            return Err(corrupt(format!(
                "metadata length {} over the limit {MAX_METADATA}",
                h.meta_len
            )));
        }
        if Some(h.data_start) != align_up(HEADER_LEN + h.meta_len, DATA_ALIGN) {
            return Err(corrupt(format!("data start {}", h.data_start)));
        }
        match h.data_start.checked_add(h.data_len) {
            Some(end) if end <= MAX_OFFSET => {}
            _ => return Err(corrupt("data end beyond the largest offset")),
        }
        if h.flat_size > MAX_OFFSET || h.interval_bytes > h.data_len {
            return Err(corrupt("sizes out of range"));
        }
        Ok(h)
    }

    /// The file's length: end of the last rank's region.
    pub fn file_len(&self) -> u64 {
        self.data_start + self.data_len
    }
}

fn meta_len(ranks: u64, families: u64, owner_sets: u64, owner_ranks: u64) -> Option<u64> {
    ranks
        .checked_mul(PROC_REC)?
        .checked_add(families.checked_mul(FAM_REC)?)?
        .checked_add(owner_sets.checked_mul(OWNER_REC)?)?
        .checked_add(owner_ranks.checked_mul(RANK_REC)?)
}

/// One rank's stretch of interval data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    /// Absolute offset in the interval file.
    pub offset: u64,
    /// Bytes of the intervals homed at the rank.
    pub len: u64,
    /// Families homed at the rank.
    pub families: u64,
}

/// One interval (or part of one) of a rank's region: logical range, physical offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub logical: ByteRange,
    pub physical: u64,
}

/// Where every interval of a set lives in an interval file.
#[derive(Clone, Debug)]
pub struct IntervalLayout {
    set: IntervalSet,
    header: Header,
    /// Per entry: home rank.
    home: Vec<Rank>,
    /// Per entry: physical offset of its first interval.
    offset: Vec<u64>,
    regions: Vec<Region>,
    /// Entry indices grouped by home rank (entry order inside a rank).
    order: Vec<u32>,
    /// Rank r's entries are `order[first[r]..first[r + 1]]`.
    first: Vec<usize>,
}

/// Where each rank's region starts (aligned to `region_align`, the first at or after
/// `data_start`) and each entry's intervals within its home rank's region, rank by rank
/// (`order[first[r]..first[r + 1]]` are rank r's entries): per entry its offset, per rank
/// its region, and the end of the data.
fn place_regions(
    set: &IntervalSet,
    (order, first): (&[u32], &[usize]),
    region_align: u32,
    data_start: u64,
) -> Result<(Vec<u64>, Vec<Region>, u64)> {
    let ranks = first.len() - 1;
    let mut offset = vec![0u64; order.len()];
    let mut regions = Vec::with_capacity(ranks);
    let mut cursor = data_start;
    for r in 0..ranks {
        let start = align_up(cursor, region_align as u64).ok_or(IfileError::TooLarge("data"))?;
        let mut at = start;
        for &i in &order[first[r]..first[r + 1]] {
            offset[i as usize] = at;
            at = at
                .checked_add(set.entries()[i as usize].family.bytes())
                .filter(|&x| x <= MAX_OFFSET)
                .ok_or(IfileError::TooLarge("data beyond the largest offset"))?;
        }
        regions.push(Region {
            offset: start,
            len: at - start,
            families: (first[r + 1] - first[r]) as u64,
        });
        cursor = at;
    }
    let data_end = if ranks == 0 { data_start } else { cursor };
    Ok((offset, regions, data_end))
}

/// The owner sets of `meta` (records at `fam_end`, their rank lists from `own_end` to the
/// end), each checked: a non-empty increasing list of ranks below the header's, or
/// unresolved.
fn decode_owners(
    h: &Header,
    meta: &[u8],
    (fam_end, own_end): (usize, usize),
) -> Result<Vec<Owner>> {
    let u32_at = |o: usize| u32::from_le_bytes(meta[o..o + 4].try_into().expect("4 bytes"));
    let mut owners = Vec::with_capacity(h.owner_sets as usize);
    let mut next_rank = own_end;
    for s in 0..h.owner_sets as usize {
        let o = fam_end + s * OWNER_REC as usize;
        let (kind, n) = (u32_at(o), u32_at(o + 4) as usize);
        match kind {
            0 => {
                if n == 0 {
                    return Err(corrupt(format!("owner set {s} is empty")));
                }
                if n as u64 > (meta.len() - next_rank) as u64 / RANK_REC {
                    return Err(corrupt("owner sets list more ranks than stored"));
                }
                let rs: Vec<Rank> = (0..n).map(|j| u32_at(next_rank + 4 * j)).collect();
                next_rank += 4 * n;
                if rs.windows(2).any(|w| w[0] >= w[1]) || rs[n - 1] >= h.ranks {
                    return Err(corrupt(format!("owner set {s}: ranks {rs:?}")));
                }
                owners.push(Owner::Ranks(rs));
            }
            1 if n == 0 => owners.push(Owner::Unresolved),
            _ => return Err(corrupt(format!("owner set {s}: kind {kind}, {n} ranks"))),
        }
    }
    if next_rank != meta.len() {
        return Err(corrupt(
            "owner rank list length does not match the owner sets",
        ));
    }
    Ok(owners)
}

/// The families of `meta` (records at `proc_end`) with their stored home ranks, each
/// checked: a valid shape within the largest offset, in start order, with an owner set
/// below `owners`.
fn decode_families(
    h: &Header,
    meta: &[u8],
    proc_end: usize,
    owners: usize,
) -> Result<(Vec<Entry>, Vec<Rank>)> {
    let u64_at = |o: usize| u64::from_le_bytes(meta[o..o + 8].try_into().expect("8 bytes"));
    let u32_at = |o: usize| u32::from_le_bytes(meta[o..o + 4].try_into().expect("4 bytes"));
    let mut entries = Vec::with_capacity(h.families as usize);
    let mut homes = Vec::with_capacity(h.families as usize);
    let mut prev_start = 0u64;
    for i in 0..h.families as usize {
        let o = proc_end + i * FAM_REC as usize;
        let (start, len, stride, count) =
            (u64_at(o), u64_at(o + 8), u64_at(o + 16), u64_at(o + 24));
        let (home, owner) = (u32_at(o + 32), u32_at(o + 36));
        let end = (count.max(1) - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(len))
            .and_then(|x| x.checked_add(start));
        let shape_ok = len >= 1
            && count >= 1
            && (count == 1 || stride > len)
            && matches!(end, Some(e) if e <= MAX_OFFSET);
        if !shape_ok {
            return Err(corrupt(format!(
                "family {i}: start {start} len {len} stride {stride} count {count}"
            )));
        }
        if start < prev_start {
            return Err(corrupt(format!("family {i} is out of order")));
        }
        prev_start = start;
        if owner as usize >= owners {
            return Err(corrupt(format!(
                "family {i}: owner set {owner} out of range"
            )));
        }
        entries.push(Entry {
            family: Family {
                start,
                len,
                stride: if count == 1 { len } else { stride },
                count,
            },
            owner,
        });
        homes.push(home);
    }
    Ok((entries, homes))
}

/// The home rank of an owner set.
pub fn home_of(owner: &Owner) -> Rank {
    match owner {
        Owner::Ranks(rs) => rs.iter().copied().min().unwrap_or(0),
        Owner::Unresolved => 0,
    }
}

impl IntervalLayout {
    /// The layout of `set` over `max(set.ranks(), highest home + 1)` ranks.
    pub fn new(set: &IntervalSet) -> Result<Self> {
        let homes = set.owners().iter().map(home_of).max().map_or(0, |h| h + 1);
        Self::build(set.clone(), set.ranks().max(homes), REGION_ALIGN)
    }

    /// The layout of `set` (owned) over `ranks` ranks, regions aligned to `region_align`.
    pub fn build(set: IntervalSet, ranks: u32, region_align: u32) -> Result<Self> {
        if !region_align.is_power_of_two() {
            return Err(corrupt(format!("region alignment {region_align}")));
        }
        let n = set.entries().len();
        if n > u32::MAX as usize {
            return Err(IfileError::TooLarge("more than 2^32 families"));
        }
        let mut home = Vec::with_capacity(n);
        let mut per_rank = vec![0usize; ranks as usize + 1];
        let mut intervals = 0u64;
        let mut interval_bytes = 0u64;
        let mut flat_size = 0u64;
        for e in set.entries() {
            let o = set
                .owners()
                .get(e.owner as usize)
                .ok_or_else(|| corrupt(format!("owner id {} out of range", e.owner)))?;
            let h = home_of(o);
            if h >= ranks {
                return Err(corrupt(format!("home rank {h} not below {ranks} ranks")));
            }
            home.push(h);
            per_rank[h as usize + 1] += 1;
            intervals = intervals
                .checked_add(e.family.count)
                .ok_or(IfileError::TooLarge("interval count"))?;
            interval_bytes = e
                .family
                .len
                .checked_mul(e.family.count)
                .and_then(|b| interval_bytes.checked_add(b))
                .ok_or(IfileError::TooLarge("interval bytes"))?;
            flat_size = flat_size.max(e.family.end());
        }
        for r in 0..ranks as usize {
            per_rank[r + 1] += per_rank[r];
        }
        let first = per_rank;
        let mut fill = first.clone();
        let mut order = vec![0u32; n];
        for (i, h) in home.iter().enumerate() {
            order[fill[*h as usize]] = i as u32;
            fill[*h as usize] += 1;
        }
        let owner_ranks: u64 = set
            .owners()
            .iter()
            .map(|o| match o {
                Owner::Ranks(rs) => rs.len() as u64,
                Owner::Unresolved => 0,
            })
            .sum();
        let meta = meta_len(
            ranks as u64,
            n as u64,
            set.owners().len() as u64,
            owner_ranks,
        )
        .ok_or(IfileError::TooLarge("metadata"))?;
        let data_start =
            align_up(HEADER_LEN + meta, DATA_ALIGN).ok_or(IfileError::TooLarge("metadata"))?;
        let (offset, regions, data_end) =
            place_regions(&set, (&order, &first), region_align, data_start)?;
        let header = Header {
            version: FORMAT_VERSION,
            ranks,
            region_align,
            flat_size,
            meta_len: meta,
            data_start,
            data_len: data_end - data_start,
            families: n as u64,
            owner_sets: set.owners().len() as u64,
            owner_ranks,
            intervals,
            interval_bytes,
            meta_checksum: 0,
        };
        Ok(IntervalLayout {
            set,
            header,
            home,
            offset,
            regions,
            order,
            first,
        })
    }

    pub fn set(&self) -> &IntervalSet {
        &self.set
    }

    /// The header this layout is written with (`meta_checksum` filled by `encode`).
    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn ranks(&self) -> u32 {
        self.header.ranks
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    pub fn region(&self, rank: Rank) -> Region {
        self.regions[rank as usize]
    }

    /// Home rank of entry `i`.
    pub fn home(&self, i: usize) -> Rank {
        self.home[i]
    }

    /// Physical offset of entry `i`'s first interval.
    pub fn entry_offset(&self, i: usize) -> u64 {
        self.offset[i]
    }

    /// Entry indices homed at `rank`, in their physical order.
    pub fn homed(&self, rank: Rank) -> &[u32] {
        &self.order[self.first[rank as usize]..self.first[rank as usize + 1]]
    }

    /// The interval file's length.
    pub fn file_len(&self) -> u64 {
        self.header.file_len()
    }

    /// `[x, y)` cut by the set's intervals: `(logical piece, physical offset)`, sorted by
    /// logical offset; bytes in no interval are left out.
    pub fn map(&self, x: u64, y: u64) -> Vec<(ByteRange, u64)> {
        let mut out = vec![];
        self.map_into(x, y, &mut vec![], &mut out);
        out
    }

    /// `map` with caller-provided scratch (`idx`) and output.
    pub fn map_into(&self, x: u64, y: u64, idx: &mut Vec<usize>, out: &mut Vec<(ByteRange, u64)>) {
        out.clear();
        if x >= y {
            return;
        }
        self.set.overlapping(x, y, idx);
        for &i in idx.iter() {
            let f = &self.set.entries()[i].family;
            for k in f.touching(x, y) {
                let iv = f.nth(k);
                let (s, e) = (iv.start.max(x), iv.end.min(y));
                out.push((
                    ByteRange { start: s, end: e },
                    self.offset[i] + k * f.len + (s - iv.start),
                ));
            }
        }
        out.sort_unstable_by_key(|(r, _)| r.start);
    }

    /// Every interval homed at `rank`, in physical order (consecutive physical offsets).
    pub fn segments(&self, rank: Rank) -> RegionIter<'_> {
        RegionIter {
            layout: self,
            entries: self.homed(rank),
            pos: 0,
            k: 0,
        }
    }

    /// Header and metadata, ready to be written at offset 0.
    pub fn encode(&self) -> Vec<u8> {
        let h = &self.header;
        let mut m = Vec::with_capacity(h.meta_len as usize);
        for r in &self.regions {
            m.extend_from_slice(&r.offset.to_le_bytes());
            m.extend_from_slice(&r.len.to_le_bytes());
            m.extend_from_slice(&r.families.to_le_bytes());
        }
        for (i, e) in self.set.entries().iter().enumerate() {
            let f = &e.family;
            for w in [f.start, f.len, f.stride, f.count] {
                m.extend_from_slice(&w.to_le_bytes());
            }
            m.extend_from_slice(&self.home[i].to_le_bytes());
            m.extend_from_slice(&e.owner.to_le_bytes());
        }
        for o in self.set.owners() {
            let (kind, n) = match o {
                Owner::Ranks(rs) => (0u32, rs.len() as u32),
                Owner::Unresolved => (1u32, 0),
            };
            m.extend_from_slice(&kind.to_le_bytes());
            m.extend_from_slice(&n.to_le_bytes());
        }
        for o in self.set.owners() {
            if let Owner::Ranks(rs) = o {
                for r in rs {
                    m.extend_from_slice(&r.to_le_bytes());
                }
            }
        }
        debug_assert_eq!(m.len() as u64, h.meta_len);
        let header = Header {
            meta_checksum: fnv1a(&m),
            ..h.clone()
        };
        let mut out = header.encode().to_vec();
        out.extend_from_slice(&m);
        out
    }

    /// Rebuilds the layout from a header and its metadata bytes, checking everything
    /// against the recomputed layout.
    pub fn decode(h: &Header, meta: &[u8]) -> Result<Self> {
        if meta.len() as u64 != h.meta_len {
            return Err(IfileError::Truncated {
                what: "the metadata",
                need: h.meta_len,
                have: meta.len() as u64,
            });
        }
        if fnv1a(meta) != h.meta_checksum {
            return Err(corrupt("metadata checksum mismatch"));
        }
        let ranks = h.ranks as usize;
        // Lengths agree with the counts (checked by `Header::decode`), so every slice below
        // is in bounds and every count ≤ meta_len / record size.
        let proc_end = ranks * PROC_REC as usize;
        let fam_end = proc_end + h.families as usize * FAM_REC as usize;
        let own_end = fam_end + h.owner_sets as usize * OWNER_REC as usize;
        let u64_at = |o: usize| u64::from_le_bytes(meta[o..o + 8].try_into().expect("8 bytes"));

        let owners = decode_owners(h, meta, (fam_end, own_end))?;
        let (entries, homes) = decode_families(h, meta, proc_end, owners.len())?;
        let set = IntervalSet::new(Analysis {
            entries,
            owners,
            stats: AnalysisStats {
                ranks: h.ranks,
                ..Default::default()
            },
        });
        let layout = IntervalLayout::build(set, h.ranks, h.region_align)?;
        if layout.home != homes {
            return Err(corrupt("stored home ranks differ from the owner sets"));
        }
        for (r, want) in layout.regions.iter().enumerate() {
            let o = r * PROC_REC as usize;
            let got = Region {
                offset: u64_at(o),
                len: u64_at(o + 8),
                families: u64_at(o + 16),
            };
            if got != *want {
                return Err(corrupt(format!(
                    "rank {r}'s region {got:?} differs from the layout's {want:?}"
                )));
            }
        }
        let lh = &layout.header;
        if (lh.flat_size, lh.data_len, lh.intervals, lh.interval_bytes)
            != (h.flat_size, h.data_len, h.intervals, h.interval_bytes)
        {
            return Err(corrupt("header sizes differ from the families"));
        }
        let mut layout = layout;
        layout.header.meta_checksum = h.meta_checksum;
        Ok(layout)
    }

    /// Private and shared (incl. unresolved) interval bytes.
    pub fn private_shared_bytes(&self) -> (u64, u64) {
        let mut p = (0u64, 0u64);
        for (f, o) in self.set.families() {
            if o.is_shared() {
                p.1 += f.bytes();
            } else {
                p.0 += f.bytes();
            }
        }
        p
    }
}

/// Decodes a whole interval file's header and metadata from bytes (`bytes` may hold just
/// the first `data_start` bytes; the data itself is not needed).
pub fn decode(bytes: &[u8]) -> Result<IntervalLayout> {
    let h = Header::decode(bytes)?;
    let end = HEADER_LEN + h.meta_len;
    if (bytes.len() as u64) < end {
        return Err(IfileError::Truncated {
            what: "the metadata",
            need: end,
            have: bytes.len() as u64,
        });
    }
    IntervalLayout::decode(&h, &bytes[HEADER_LEN as usize..end as usize])
}

/// The intervals of one rank's region in physical order.
pub struct RegionIter<'a> {
    layout: &'a IntervalLayout,
    entries: &'a [u32],
    pos: usize,
    k: u64,
}

impl Iterator for RegionIter<'_> {
    type Item = Segment;
    fn next(&mut self) -> Option<Segment> {
        let &i = self.entries.get(self.pos)?;
        let f = &self.layout.set.entries()[i as usize].family;
        let s = Segment {
            logical: f.nth(self.k),
            physical: self.layout.offset[i as usize] + self.k * f.len,
        };
        self.k += 1;
        if self.k == f.count {
            self.k = 0;
            self.pos += 1;
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests;
