use super::*;
use crate::analysis::{analyze, Limits};
use proptest::prelude::*;

fn set(declared: &[(Rank, Vec<Family>)], ranks: u32) -> IntervalSet {
    IntervalSet::new(analyze(ranks, declared, Limits::default()).unwrap())
}

fn tiles() -> IntervalSet {
    set(
        &[
            (0, vec![Family::new(0, 60, 100, 50).unwrap()]),
            (1, vec![Family::new(40, 60, 100, 50).unwrap()]),
            (2, vec![Family::new(6000, 10, 10, 1).unwrap()]),
        ],
        4,
    )
}

#[test]
fn layout_places_regions_and_homes() {
    let s = tiles();
    let l = IntervalLayout::new(&s).unwrap();
    assert_eq!(l.ranks(), 4);
    assert_eq!(l.header().flat_size, 6010);
    assert_eq!(l.header().interval_bytes, 5000 + 10);
    // Rank 0 holds its private 40 bytes and the shared 20 bytes of each row.
    assert_eq!(l.region(0).len, 60 * 50);
    assert_eq!(l.region(1).len, 40 * 50);
    assert_eq!(l.region(2).len, 10);
    assert_eq!(l.region(3).len, 0);
    assert_eq!(l.region(0).offset, l.header().data_start);
    for r in l.regions() {
        assert_eq!(r.offset % REGION_ALIGN as u64, 0);
    }
    // The region's segments are physically consecutive.
    let segs: Vec<Segment> = l.segments(0).collect();
    assert_eq!(segs.len(), 100);
    let mut at = l.region(0).offset;
    for s in &segs {
        assert_eq!(s.physical, at);
        at += s.logical.len();
    }
    // map: row 3 bytes 30..70 → private 30..40 (rank 0), shared 40..60, private 60..70.
    let m = l.map(330, 370);
    let logical: Vec<(u64, u64)> = m.iter().map(|(r, _)| (r.start, r.end)).collect();
    assert_eq!(logical, vec![(330, 340), (340, 360), (360, 370)]);
    assert!(m[2].1 >= l.region(1).offset);
    // Decoding the encoding gives the same layout.
    let d = decode(&l.encode()).unwrap();
    assert_eq!(d.regions(), l.regions());
    assert_eq!(d.set().entries(), s.entries());
    assert_eq!(d.set().owners(), s.owners());
}

#[test]
fn truncated_and_corrupt_headers_are_errors() {
    let l = IntervalLayout::new(&tiles()).unwrap();
    let b = l.encode();
    for n in [0, 7, 100, 127, 128, b.len() - 1] {
        assert!(decode(&b[..n]).is_err(), "truncated at {n}");
    }
    let mut bad = b.clone();
    bad[0] = b'X';
    assert!(matches!(decode(&bad), Err(IfileError::NotIntervalFile)));
    let mut bad = b.clone();
    bad[200] ^= 1;
    assert!(matches!(decode(&bad), Err(IfileError::Corrupt(_))));
    let mut bad = b.clone();
    bad[20] ^= 1;
    assert!(matches!(decode(&bad), Err(IfileError::Corrupt(_))));
    // Structural damage behind valid checksums: a family's home rank, its length, a
    // region's offset, an owner set's rank.
    let fam0 = HEADER_LEN as usize + 4 * PROC_REC as usize;
    for (at, v) in [(fam0 + 32, 3u8), (fam0 + 8, 0), (HEADER_LEN as usize, 1)] {
        let mut bad = b.clone();
        bad[at] = v;
        reseal(&mut bad);
        let e = decode(&bad).unwrap_err();
        assert!(matches!(e, IfileError::Corrupt(_)), "byte {at}: {e}");
    }
    let mut bad = b.clone();
    let last = bad.len() - 4;
    bad[last] = 9;
    reseal(&mut bad);
    assert!(matches!(decode(&bad), Err(IfileError::Corrupt(_))));
}

/// Rewrites the checksums so that corruption reaches the structural checks.
fn reseal(b: &mut [u8]) {
    if b.len() < HEADER_LEN as usize {
        return;
    }
    let meta_len = u64::from_le_bytes(b[32..40].try_into().unwrap());
    let end = (HEADER_LEN as usize).saturating_add(meta_len.min(b.len() as u64) as usize);
    let sum = fnv1a(&b[HEADER_LEN as usize..end.min(b.len())]);
    b[96..104].copy_from_slice(&sum.to_le_bytes());
    let sum = fnv1a(&b[..104]);
    b[104..112].copy_from_slice(&sum.to_le_bytes());
}

fn arb_set() -> impl Strategy<Value = IntervalSet> {
    prop::collection::vec((0u32..4, 0u64..400, 1u64..30, 0u64..40, 1u64..8), 1..8).prop_map(
        |fams| {
            let declared: Vec<(Rank, Vec<Family>)> = fams
                .iter()
                .map(|&(r, s, l, g, c)| (r, vec![Family::new(s, l, l + g, c).unwrap()]))
                .collect();
            set(&declared, 4)
        },
    )
}

proptest! {
    /// Random bytes, or a valid encoding with bytes changed (checksums fixed up or not)
    /// or cut short: decoding returns, never panics; a result that decodes is
    /// self-consistent.
    #[test]
    fn decode_never_panics(
        s in arb_set(),
        edits in prop::collection::vec((0usize..2000, any::<u8>()), 0..6),
        cut in 0usize..3000,
        fix in any::<bool>(),
        noise in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let _ = decode(&noise);
        let mut b = IntervalLayout::new(&s).unwrap().encode();
        for (at, v) in edits {
            let n = b.len();
            b[at % n] = v;
        }
        if fix {
            reseal(&mut b);
        }
        b.truncate(cut.max(1).min(b.len()));
        if let Ok(l) = decode(&b) {
            let total: u64 = l.regions().iter().map(|r| r.len).sum();
            prop_assert_eq!(total, l.header().interval_bytes);
        }
    }

    /// map's pieces partition the in-interval bytes of the query, and the physical
    /// places of distinct bytes are distinct and inside the data.
    #[test]
    fn map_is_injective_into_the_data(s in arb_set(), x in 0u64..700, len in 1u64..300) {
        let l = IntervalLayout::new(&s).unwrap();
        let m = l.map(x, x + len);
        let want: u64 = s.intervals().map(|(r, _)| r.end.min(x + len).saturating_sub(r.start.max(x))).sum();
        prop_assert_eq!(m.iter().map(|(r, _)| r.len()).sum::<u64>(), want);
        let mut phys: Vec<(u64, u64)> = m.iter().map(|(r, p)| (*p, *p + r.len())).collect();
        phys.sort();
        for w in phys.windows(2) {
            prop_assert!(w[0].1 <= w[1].0);
        }
        let h = l.header();
        for (p, e) in phys {
            prop_assert!(p >= h.data_start && e <= h.file_len());
        }
    }
}
