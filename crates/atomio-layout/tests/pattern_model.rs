//! Patterns, seek and per-server shares against a naive model that expands everything.

use atomio_layout::*;
use proptest::prelude::*;

/// A pattern tree as a test describes it; `expand` is the reference semantics.
#[derive(Clone, Debug)]
enum T {
    Bytes(u64),
    HVector {
        count: u64,
        blocklen: u64,
        stride: u64,
        elem: Box<T>,
    },
    HIndexed {
        blocks: Vec<(u64, u64)>,
        elem: Box<T>,
    },
    Struct(Vec<(u64, u64, T)>),
    Resized {
        extent: u64,
        elem: Box<T>,
    },
    Subarray {
        sizes: Vec<u64>,
        subsizes: Vec<u64>,
        starts: Vec<u64>,
        fortran: bool,
        elem: Box<T>,
    },
}

fn extent(t: &T) -> u64 {
    match t {
        T::Bytes(n) => *n,
        T::HVector {
            count,
            blocklen,
            stride,
            elem,
        } => {
            if *count == 0 {
                0
            } else {
                (count - 1) * stride + blocklen * extent(elem)
            }
        }
        T::HIndexed { blocks, elem } => blocks
            .iter()
            .map(|(d, b)| d + b * extent(elem))
            .max()
            .unwrap_or(0),
        T::Struct(f) => f
            .iter()
            .map(|(d, b, e)| d + b * extent(e))
            .max()
            .unwrap_or(0),
        T::Resized { extent, .. } => *extent,
        T::Subarray { sizes, elem, .. } => sizes.iter().product::<u64>() * extent(elem),
    }
}

/// Typemap order, one (offset, len) per leaf copy.
fn expand(t: &T, base: u64, out: &mut Vec<(u64, u64)>) {
    match t {
        T::Bytes(n) => {
            if *n > 0 {
                out.push((base, *n))
            }
        }
        T::HVector {
            count,
            blocklen,
            stride,
            elem,
        } => {
            let e = extent(elem);
            for i in 0..*count {
                for j in 0..*blocklen {
                    expand(elem, base + i * stride + j * e, out);
                }
            }
        }
        T::HIndexed { blocks, elem } => {
            let e = extent(elem);
            for (d, b) in blocks {
                for j in 0..*b {
                    expand(elem, base + d + j * e, out);
                }
            }
        }
        T::Struct(fields) => {
            for (d, b, el) in fields {
                let e = extent(el);
                for j in 0..*b {
                    expand(el, base + d + j * e, out);
                }
            }
        }
        T::Resized { elem, .. } => expand(elem, base, out),
        T::Subarray {
            sizes,
            subsizes,
            starts,
            fortran,
            elem,
        } => {
            let n = sizes.len();
            let e = extent(elem);
            let dims: Vec<usize> = if *fortran {
                (0..n).rev().collect()
            } else {
                (0..n).collect()
            };
            // Enumerate index tuples in storage order (slowest dimension first).
            let mut idx = vec![0u64; n];
            loop {
                let mut lin = 0u64;
                for &d in &dims {
                    lin = lin * sizes[d] + starts[d] + idx[d];
                }
                expand(elem, base + lin * e, out);
                let mut k = n;
                loop {
                    if k == 0 {
                        return;
                    }
                    k -= 1;
                    let d = dims[k];
                    idx[d] += 1;
                    if idx[d] < subsizes[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
        }
    }
}

fn build(t: &T) -> Pattern {
    match t {
        T::Bytes(n) => Pattern::bytes(*n).unwrap(),
        T::HVector {
            count,
            blocklen,
            stride,
            elem,
        } => Pattern::hvector(*count, *blocklen, *stride, &build(elem)).unwrap(),
        T::HIndexed { blocks, elem } => Pattern::hindexed(
            blocks
                .iter()
                .map(|&(disp, blocklen)| Block { disp, blocklen })
                .collect(),
            &build(elem),
        )
        .unwrap(),
        T::Struct(fields) => {
            let built: Vec<(u64, u64, Pattern)> =
                fields.iter().map(|(d, b, e)| (*d, *b, build(e))).collect();
            let refs: Vec<(u64, u64, &Pattern)> =
                built.iter().map(|(d, b, p)| (*d, *b, p)).collect();
            Pattern::structure(&refs).unwrap()
        }
        T::Resized { extent, elem } => Pattern::resized(*extent, &build(elem)).unwrap(),
        T::Subarray {
            sizes,
            subsizes,
            starts,
            fortran,
            elem,
        } => Pattern::subarray(
            sizes,
            subsizes,
            starts,
            if *fortran { Order::Fortran } else { Order::C },
            &build(elem),
        )
        .unwrap(),
    }
}

fn coalesce(mut v: Vec<(u64, u64)>) -> Vec<ByteRange> {
    let mut out: Vec<ByteRange> = Vec::new();
    for (o, l) in v.drain(..) {
        match out.last_mut() {
            Some(p) if p.end == o => p.end = o + l,
            _ => out.push(ByteRange::at(o, l).unwrap()),
        }
    }
    out
}

fn arb_tree() -> impl Strategy<Value = T> {
    let leaf = (0u64..6).prop_map(T::Bytes);
    leaf.prop_recursive(4, 40, 4, |inner| {
        prop_oneof![
            (0u64..5, 0u64..4, 0u64..40, inner.clone()).prop_map(|(count, blocklen, stride, e)| {
                T::HVector {
                    count,
                    blocklen,
                    stride,
                    elem: Box::new(e),
                }
            }),
            (
                prop::collection::vec((0u64..60, 0u64..3), 0..5),
                inner.clone()
            )
                .prop_map(|(mut b, e)| {
                    b.sort();
                    T::HIndexed {
                        blocks: b,
                        elem: Box::new(e),
                    }
                }),
            prop::collection::vec((0u64..50, 0u64..3, inner.clone()), 0..4).prop_map(|mut f| {
                f.sort_by_key(|x| x.0);
                T::Struct(f)
            }),
            (0u64..30, inner.clone()).prop_map(|(extent, e)| T::Resized {
                extent,
                elem: Box::new(e)
            }),
            (
                prop::collection::vec((1u64..5, 0u64..5, 0u64..5), 1..4),
                any::<bool>(),
                inner
            )
                .prop_map(|(dims, fortran, e)| {
                    let sizes: Vec<u64> = dims.iter().map(|d| d.0 + d.1).collect();
                    let subsizes: Vec<u64> = dims
                        .iter()
                        .map(|d| d.0.min(d.0 + d.1 - d.2.min(d.1)).max(1))
                        .collect();
                    let starts: Vec<u64> = sizes
                        .iter()
                        .zip(&subsizes)
                        .zip(&dims)
                        .map(|((s, ss), d)| d.2.min(s - ss))
                        .collect();
                    T::Subarray {
                        sizes,
                        subsizes,
                        starts,
                        fortran,
                        elem: Box::new(e),
                    }
                }),
        ]
    })
}

fn is_monotone(raw: &[(u64, u64)]) -> bool {
    raw.windows(2).all(|w| w[1].0 >= w[0].0 + w[0].1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, max_global_rejects: 1_000_000, ..ProptestConfig::default() })]

    #[test]
    fn runs_match_the_expansion(t in arb_tree(), base in 0u64..1000) {
        let p = build(&t);
        let mut raw = Vec::new();
        expand(&t, base, &mut raw);
        let want = coalesce(raw.clone());
        let got: Vec<ByteRange> = p.runs(base).collect();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(p.size(), raw.iter().map(|r| r.1).sum::<u64>());
        prop_assert_eq!(p.extent(), extent(&t));
        prop_assert!(p.run_count_upper() >= want.len() as u64);
        // The validator's monotone verdict is exact for the expansion's order.
        prop_assert_eq!(p.monotone(), is_monotone(&raw), "tree {:?}", t);
    }

    /// A bound on coalescing changes only how the bytes are cut: the same bytes, in order,
    /// each output run at most `k` raw runs, and runs that touch only at a cut.
    #[test]
    fn bounded_coalescing_covers_the_same_bytes(t in arb_tree(), base in 0u64..1000, k in 1u64..4) {
        let p = build(&t);
        let mut raw = Vec::new();
        expand(&t, base, &mut raw);
        let want = coalesce(raw.clone());
        let got: Vec<ByteRange> = p.runs(base).coalescing_at_most(k).collect();
        prop_assert_eq!(coalesce(got.iter().map(|r| (r.start, r.len())).collect()), want.clone());
        prop_assert!(!p.monotone() || got.windows(2).all(|w| w[0].end <= w[1].start));
        let nonempty = raw.iter().filter(|r| r.1 > 0).count() as u64;
        prop_assert!(got.len() as u64 >= nonempty.div_ceil(k).min(want.len() as u64));
        prop_assert!(got.len() as u64 <= nonempty.max(want.len() as u64));
    }

    #[test]
    fn seek_yields_exactly_the_bytes_at_or_after(t in arb_tree(), base in 0u64..1000, offs in prop::collection::vec(0u64..3000, 1..6)) {
        let p = build(&t);
        prop_assume!(p.monotone());
        let a = Access::new(base, p).unwrap();
        let all: Vec<ByteRange> = a.ranges().collect();
        let mut it = a.ranges();
        for off in offs {
            it.seek(off);
            let got: Vec<ByteRange> = it.clone().collect();
            let want: Vec<ByteRange> = all
                .iter()
                .filter(|r| r.end > off)
                .map(|r| ByteRange { start: r.start.max(off), end: r.end })
                .collect();
            prop_assert_eq!(got, want, "seek {}", off);
        }
    }

    #[test]
    fn shares_partition_the_access(t in arb_tree(), base in 0u64..500, stripe in 1u64..40, count in 1u32..5, servers in 1u32..4, first in 0u32..4) {
        let p = build(&t);
        prop_assume!(p.monotone());
        let a = Access::new(base, p).unwrap();
        let layout = Layout::round_robin(stripe, count, servers, first).unwrap();
        let all: Vec<ByteRange> = a.ranges().collect();
        for s in 0..servers {
            let server = ServerId(s);
            let want: Vec<ByteRange> = all
                .iter()
                .flat_map(|r| layout.pieces(*r).collect::<Vec<_>>())
                .filter(|p| p.server == server)
                .map(|p| p.range)
                .collect();
            let got: Vec<ByteRange> = Share::new(a.ranges(), &layout, server).collect();
            prop_assert_eq!(&got, &want, "server {}", s);
            // Seeking inside a share matches filtering the share.
            if let Some(mid) = want.get(want.len() / 2) {
                let off = mid.start + mid.len() / 2;
                let mut sh = Share::new(a.ranges(), &layout, server);
                sh.seek(off);
                let got: Vec<ByteRange> = sh.collect();
                let want2: Vec<ByteRange> = want.iter().filter(|r| r.end > off)
                    .map(|r| ByteRange { start: r.start.max(off), end: r.end }).collect();
                prop_assert_eq!(got, want2);
            }
        }
    }
}

#[test]
fn a_million_range_vector_needs_no_materialization() {
    // 2^20 one-byte ranges described by a handful of integers; only iterate a few.
    let p = Pattern::hvector(1 << 20, 1, 64, &Pattern::bytes(1).unwrap()).unwrap();
    let a = Access::new(0, p).unwrap();
    let mut it = a.ranges();
    it.seek(64 * 1_000_000 + 3);
    assert_eq!(it.next(), Some(ByteRange::at(64 * 1_000_001, 1).unwrap()));
    let layout = Layout::round_robin(64 * 1024, 4, 4, 0).unwrap();
    let first_on_3 = Share::new(a.ranges(), &layout, ServerId(3)).next();
    assert_eq!(first_on_3, Some(ByteRange::at(3 * 64 * 1024, 1).unwrap()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, max_global_rejects: 1_000_000, ..ProptestConfig::default() })]

    /// A view window equals the naive answer: tile the filetype's runs, number the data
    /// bytes, keep those in [skip, skip + len).
    #[test]
    fn view_windows_select_exactly_the_right_bytes(t in arb_tree(), base in 0u64..100, skip in 0u64..400, len in 1u64..400) {
        let tile = build(&t);
        prop_assume!(tile.size() > 0 && tile.monotone());
        prop_assume!(tile.data_bounds().unwrap().1 <= tile.extent());
        let a = Access::view_window(base, &tile, skip, len).unwrap();
        let mut want: Vec<ByteRange> = Vec::new();
        let mut data = 0u64;
        let mut k = 0u64;
        while data < skip + len {
            for r in tile.runs(base + k * tile.extent()) {
                for b in r.start..r.end {
                    if data >= skip && data < skip + len {
                        want.push(ByteRange::at(b, 1).unwrap());
                    }
                    data += 1;
                }
            }
            k += 1;
        }
        let want = RangeList::from_ranges(want);
        let got = RangeList::from_ranges(a.ranges().collect());
        prop_assert_eq!(got, want);
        prop_assert_eq!(a.size(), len);
        prop_assert!(a.pattern().nodes().len() <= 3 * tile.nodes().len() + 8, "structure lost: {} nodes", a.pattern().nodes().len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, max_global_rejects: 1_000_000, ..ProptestConfig::default() })]

    /// `data_before` and `view_data_before` count exactly the data bytes below an offset.
    #[test]
    fn data_before_counts_the_bytes_below(t in arb_tree(), base in 0u64..100, limits in prop::collection::vec(0u64..4000, 1..6)) {
        let tile = build(&t);
        prop_assume!(tile.monotone());
        for &limit in &limits {
            let want: u64 = tile.runs(0).map(|r| r.end.min(limit).saturating_sub(r.start)).sum();
            prop_assert_eq!(tile.data_before(limit), want, "limit {}", limit);
        }
        prop_assume!(tile.size() > 0 && tile.data_bounds().unwrap().1 <= tile.extent());
        for &limit in &limits {
            let mut want = 0u64;
            let mut k = 0u64;
            while base + k * tile.extent() < limit {
                want += tile.runs(base + k * tile.extent()).map(|r| r.end.min(limit).saturating_sub(r.start)).sum::<u64>();
                k += 1;
            }
            prop_assert_eq!(Access::view_data_before(base, &tile, limit).unwrap(), want, "limit {}", limit);
        }
    }
}

#[test]
fn data_before_needs_no_iteration() {
    // 2^40 one-byte runs: counting below an offset near the end is arithmetic.
    let p = Pattern::hvector(1 << 40, 1, 4, &Pattern::bytes(1).unwrap()).unwrap();
    assert_eq!(p.data_before(4 * ((1 << 40) - 1)), (1 << 40) - 1);
    assert_eq!(p.data_before(4 * ((1 << 40) - 1) + 1), 1 << 40);
    let tile = Pattern::resized(8, &Pattern::bytes(2).unwrap()).unwrap();
    assert_eq!(
        Access::view_data_before(100, &tile, 100 + 8 * 1000 + 1).unwrap(),
        2001
    );
    assert_eq!(Access::view_data_before(100, &tile, 50).unwrap(), 0);
}

/// Every group of `it`, expanded run by run.
fn expand_groups(mut it: Runs<'_>) -> (Vec<(u64, u64)>, usize) {
    let mut out = Vec::new();
    let mut groups = 0;
    while let Some(g) = it.next_group() {
        assert!(g.count >= 1 && g.len >= 1, "{g:?}");
        assert!(
            g.count == 1 || g.stride != g.len,
            "touching runs not made one: {g:?}"
        );
        groups += 1;
        out.extend(g.runs().map(|r| (r.start, r.len())));
    }
    (out, groups)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, max_global_rejects: 1_000_000, ..ProptestConfig::default() })]

    /// Groups hold exactly the runs' bytes in typemap order (non-monotone patterns too,
    /// whose runs may overlap), never more groups than runs.
    #[test]
    fn groups_expand_to_the_runs(t in arb_tree(), base in 0u64..1000) {
        let p = build(&t);
        let mut raw = Vec::new();
        expand(&t, base, &mut raw);
        let want = coalesce(raw.clone());
        let (got, groups) = expand_groups(p.runs(base));
        prop_assert_eq!(coalesce(got), want.clone());
        let nonempty = raw.iter().filter(|r| r.1 > 0).count();
        prop_assert!(groups <= nonempty.max(want.len()), "{} groups for {} raw runs", groups, nonempty);
    }

    /// After a seek, groups hold exactly the bytes at or after the offset, like the runs.
    #[test]
    fn groups_after_seek_are_clipped_like_runs(t in arb_tree(), base in 0u64..1000, offs in prop::collection::vec(0u64..3000, 1..6)) {
        let p = build(&t);
        prop_assume!(p.monotone());
        let a = Access::new(base, p).unwrap();
        let mut it = a.ranges();
        for off in offs {
            it.seek(off);
            let want: Vec<ByteRange> = it.clone().collect();
            let (got, _) = expand_groups(it.clone());
            prop_assert_eq!(coalesce(got.clone()), want, "seek {}", off);
            prop_assert!(got.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
        }
    }
}

/// ROMIO noncontig's view for 4 ranks (a vector of 2,500 four-byte elements, every 4th, in a
/// resized struct) is ONE group per tile, and a window of several tiles one per tile.
#[test]
fn a_noncontig_view_is_one_group_per_tile() {
    let elem = Pattern::bytes(4).unwrap();
    let vec = Pattern::hvector(2500, 1, 16, &elem).unwrap();
    let tile = Pattern::resized(40_000, &Pattern::structure(&[(4, 1, &vec)]).unwrap()).unwrap();
    let a = Access::view_window(0, &tile, 0, 10_000).unwrap();
    let mut it = a.ranges();
    let g = it.next_group().unwrap();
    assert_eq!(
        (g.start, g.len, g.stride, g.count),
        (4, 4, 16, 2500),
        "{g:?}"
    );
    assert_eq!(it.next_group(), None);
    let a = Access::view_window(0, &tile, 4000, 3 * 10_000).unwrap();
    let (runs, groups) = expand_groups(a.ranges());
    assert_eq!(runs.len(), 7500);
    assert!(groups <= 4, "{groups} groups");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, max_global_rejects: 1_000_000, ..ProptestConfig::default() })]

    /// Packing and unpacking by groups move exactly the bytes of copying run by run, in
    /// typemap order (overlapping runs of non-monotone patterns included: the later copy
    /// wins, as run by run).
    #[test]
    fn group_copies_equal_run_by_run_copies(t in arb_tree(), seed in any::<u64>()) {
        let p = build(&t);
        let span = p.data_bounds().map_or(0, |(_, ub)| ub) as usize;
        let size = p.size() as usize;
        let mem: Vec<u8> = (0..span).map(|i| (seed.wrapping_mul(i as u64 + 1) >> 7) as u8).collect();
        let packed: Vec<u8> = (0..size).map(|i| (seed.wrapping_add(i as u64 * 31) >> 3) as u8).collect();
        let (mut want_packed, mut want_mem) = (vec![0u8; size], mem.clone());
        let mut at = 0;
        for r in p.runs(0) {
            let n = r.len() as usize;
            want_packed[at..at + n].copy_from_slice(&mem[r.start as usize..r.end as usize]);
            want_mem[r.start as usize..r.end as usize].copy_from_slice(&packed[at..at + n]);
            at += n;
        }
        let mut got_packed = vec![0u8; size];
        copy::gather(&p, &mem, &mut got_packed).unwrap();
        prop_assert_eq!(got_packed, want_packed);
        let mut got_mem = mem.clone();
        copy::scatter(&p, &packed, &mut got_mem).unwrap();
        prop_assert_eq!(got_mem, want_mem);
        // Buffers too short are refused, not a panic.
        if size > 0 {
            prop_assert!(copy::gather(&p, &mem, &mut vec![0u8; size - 1]).is_err());
            prop_assert!(copy::gather(&p, &mem[..span - 1], &mut vec![0u8; size]).is_err());
        }
    }
}
