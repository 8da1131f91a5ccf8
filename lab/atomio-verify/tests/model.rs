//! Model tests: the verifier against brute force over every serial order.
//!
//! Writes: exactness. A file made by a serial order verifies; a file made by arbitrary
//! interleaving is reported violated exactly when no permutation of whole writes reproduces
//! it (short random intervals make chance matches common here, so this also checks that
//! ambiguity never produces a false violation and is resolved when it matters).
//!
//! Reads: soundness. `Atomic` only when some order of writes and reads reproduces the file
//! and every read; `Violated` only when none does; `Inconclusive` is allowed (view
//! serializability is NP-complete) but must stay rare.

mod common;

use atomio_layout::ByteRange;
use atomio_verify::{verify, Ranges, Read, Verdict, Write};
use common::{list, observe, paint, write};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SPACE: u64 = 256;

fn make_writes(specs: &[Vec<(u64, u64)>]) -> Vec<Write> {
    specs
        .iter()
        .enumerate()
        .map(|(i, rs)| {
            let rs: Vec<(u64, u64)> = rs
                .iter()
                .map(|&(s, len)| (s, (s + len).min(SPACE)))
                .collect();
            write(i as u32 % 3, i as u64, &rs)
        })
        .collect()
}

fn image(writes: &[Write], order: &[usize]) -> Vec<u8> {
    let mut f = vec![0u8; SPACE as usize];
    for &i in order {
        paint(&mut f, &writes[i]);
    }
    f
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    fn go(prefix: &mut Vec<usize>, left: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left.is_empty() {
            out.push(prefix.clone());
        }
        for i in 0..left.len() {
            let x = left.remove(i);
            prefix.push(x);
            go(prefix, left, out);
            prefix.pop();
            left.insert(i, x);
        }
    }
    let mut out = Vec::new();
    go(&mut Vec::new(), &mut (0..n).collect(), &mut out);
    out
}

/// Covering writes of every byte.
fn cover(writes: &[Write]) -> Vec<Vec<usize>> {
    let mut c = vec![Vec::new(); SPACE as usize];
    for (i, w) in writes.iter().enumerate() {
        for r in w.ranges.iter() {
            for o in r.start..r.end {
                c[o as usize].push(i);
            }
        }
    }
    c
}

/// Maximal runs of bytes with the same non-empty covering set.
fn intervals(cov: &[Vec<usize>]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cov.len() {
        let mut j = i + 1;
        while j < cov.len() && cov[j] == cov[i] {
            j += 1;
        }
        if !cov[i].is_empty() {
            out.push((i, j));
        }
        i = j;
    }
    out
}

fn tag(writes: &[Write], w: usize, o: usize) -> u8 {
    let id = writes[w].id;
    atomio_verify::tag_byte(id.writer, id.op, o as u64)
}

/// A file from interleaving the writes: `mode` 0 per interval, 1 per byte, 2 a serial order
/// with a few intervals repainted, 3 a serial order with one byte corrupted.
fn interleave(writes: &[Write], mode: u8, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let cov = cover(writes);
    let mut order: Vec<usize> = (0..writes.len()).collect();
    order.shuffle(rng);
    let mut f = image(writes, &order);
    let ivs = intervals(&cov);
    let repaint = |f: &mut Vec<u8>, (s, e): (usize, usize), rng: &mut ChaCha8Rng| {
        let w = *cov[s].choose(rng).unwrap();
        for (o, b) in f.iter_mut().enumerate().take(e).skip(s) {
            *b = tag(writes, w, o);
        }
    };
    match mode {
        0 => ivs.iter().for_each(|&iv| repaint(&mut f, iv, rng)),
        1 => {
            for o in 0..f.len() {
                if let Some(&w) = cov[o].choose(rng) {
                    f[o] = tag(writes, w, o);
                }
            }
        }
        2 => {
            for _ in 0..rng.gen_range(1..=2) {
                if let Some(&iv) = ivs.choose(rng) {
                    repaint(&mut f, iv, rng);
                }
            }
        }
        _ => {
            let covered: Vec<usize> = (0..f.len()).filter(|&o| !cov[o].is_empty()).collect();
            if let Some(&o) = covered.choose(rng) {
                f[o] = rng.gen();
            }
        }
    }
    f
}

fn specs() -> impl Strategy<Value = Vec<Vec<(u64, u64)>>> {
    prop::collection::vec(prop::collection::vec((0..SPACE, 1u64..=48), 1..=4), 1..=6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn serial_orders_verify(specs in specs(), seed in any::<u64>()) {
        let writes = make_writes(&specs);
        let mut order: Vec<usize> = (0..writes.len()).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let file = image(&writes, &order);
        let rep = verify(&file[..], &writes, &[]).unwrap();
        prop_assert!(rep.ok(), "{}", rep);
        // The witness reproduces the file.
        let witness: Vec<usize> = rep.order.iter()
            .map(|o| writes.iter().position(|w| atomio_verify::OpId::Write(w.id) == *o).unwrap())
            .collect();
        prop_assert_eq!(image(&writes, &witness), file);
    }

    #[test]
    fn interleavings_are_violated_exactly_when_no_permutation_explains_them(
        specs in specs(), seed in any::<u64>(), mode in 0u8..4,
    ) {
        let writes = make_writes(&specs);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let file = interleave(&writes, mode, &mut rng);
        let explained = permutations(writes.len()).iter().any(|p| image(&writes, p) == file);
        let rep = verify(&file[..], &writes, &[]).unwrap();
        let want = if explained { Verdict::Atomic } else { Verdict::Violated };
        prop_assert_eq!(rep.verdict, want, "{}", rep);
        if explained {
            let witness: Vec<usize> = rep.order.iter()
                .map(|o| writes.iter().position(|w| atomio_verify::OpId::Write(w.id) == *o).unwrap())
                .collect();
            prop_assert_eq!(image(&writes, &witness), file);
        }
    }
}

struct ReadCase {
    writes: Vec<Write>,
    read_ranges: Vec<Ranges>,
    seen: Vec<Vec<u8>>,
    file: Vec<u8>,
}

fn random_ranges(rng: &mut ChaCha8Rng, space: u64, max_len: u64) -> Vec<(u64, u64)> {
    (0..rng.gen_range(1..=3))
        .map(|_| {
            let s = rng.gen_range(0..space);
            (s, (s + rng.gen_range(1..=max_len)).min(space))
        })
        .collect()
}

/// A serial schedule of writes and reads, optionally with one read's view torn between two
/// points in time (per interval of the writes), and the file itself repainted per interval
/// now and then. Small spaces make heavy overlap and chance matches common.
fn read_case(seed: u64, tear: bool) -> ReadCase {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let space = [32, 128, 256][rng.gen_range(0..3)];
    let nw = rng.gen_range(1..=5);
    let nr = rng.gen_range(1..=3);
    let writes: Vec<Write> = (0..nw)
        .map(|i| write(i as u32, 0, &random_ranges(&mut rng, space, 64)))
        .collect();
    let read_ranges: Vec<Ranges> = (0..nr)
        .map(|_| list(&random_ranges(&mut rng, space, 96)))
        .collect();
    // Schedule: node < nw is a write, else a read.
    let mut sched: Vec<usize> = (0..nw + nr).collect();
    sched.shuffle(&mut rng);
    let mut file = vec![0u8; SPACE as usize];
    let mut states = vec![file.clone()];
    let mut seen = vec![Vec::new(); nr];
    for &x in &sched {
        if x < nw {
            paint(&mut file, &writes[x]);
            states.push(file.clone());
        } else {
            seen[x - nw] = observe(&file, &read_ranges[x - nw]);
        }
    }
    if tear {
        // One read takes each interval from one of two random points in time.
        let r = rng.gen_range(0..nr);
        let (t1, t2) = (
            rng.gen_range(0..states.len()),
            rng.gen_range(0..states.len()),
        );
        let cov = cover(&writes);
        let mut mixed = states[t1].clone();
        for (s, e) in intervals(&cov) {
            if rng.gen_bool(0.5) {
                mixed[s..e].copy_from_slice(&states[t2][s..e]);
            }
        }
        seen[r] = observe(&mixed, &read_ranges[r]);
        if rng.gen_bool(0.2) {
            file = interleave(&writes, 0, &mut rng);
        }
    }
    ReadCase {
        writes,
        read_ranges,
        seen,
        file,
    }
}

/// Brute force: some write order reproduces the file, and each read equals the file after
/// some prefix of that order.
fn model(c: &ReadCase) -> bool {
    permutations(c.writes.len()).iter().any(|p| {
        if image(&c.writes, p) != c.file {
            return false;
        }
        let states: Vec<Vec<u8>> = (0..=p.len()).map(|k| image(&c.writes, &p[..k])).collect();
        c.read_ranges
            .iter()
            .zip(&c.seen)
            .all(|(rr, s)| states.iter().any(|st| observe(st, rr) == *s))
    })
}

#[test]
fn write_interleavings_cover_both_outcomes() {
    // Guards the property test above against a generator that only makes one kind of file.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut explained = [0usize; 2];
    for i in 0..400u64 {
        let specs: Vec<Vec<(u64, u64)>> = (0..rng.gen_range(1..=6))
            .map(|_| random_ranges(&mut rng, SPACE, 48))
            .map(|v| v.into_iter().map(|(s, e)| (s, e - s)).collect())
            .collect();
        let writes = make_writes(&specs);
        let file = interleave(&writes, (i % 4) as u8, &mut rng);
        let truth = permutations(writes.len())
            .iter()
            .any(|p| image(&writes, p) == file);
        let rep = verify(&file[..], &writes, &[]).unwrap();
        assert_eq!(rep.ok(), truth, "{rep}");
        explained[truth as usize] += 1;
    }
    assert!(explained[0] >= 80 && explained[1] >= 80, "{explained:?}");
}

#[test]
fn reads_are_judged_soundly_against_brute_force() {
    let mut counts = [[0usize; 3]; 2]; // [model false/true][atomic, violated, inconclusive]
    let n: u64 = std::env::var("ATOMIO_MODEL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    for seed in 0..n {
        let c = read_case(seed, seed % 2 == 1);
        let reads: Vec<Read> = c
            .read_ranges
            .iter()
            .zip(&c.seen)
            .enumerate()
            .map(|(i, (rr, s))| Read::new(100 + i as u32, 0, rr.clone(), s.clone()))
            .collect();
        let rep = verify(&c.file[..], &c.writes, &reads).unwrap();
        let truth = model(&c);
        let k = match rep.verdict {
            Verdict::Atomic => 0,
            Verdict::Violated => 1,
            Verdict::Inconclusive => 2,
        };
        counts[truth as usize][k] += 1;
        match rep.verdict {
            Verdict::Atomic => assert!(truth, "seed {seed}: false ATOMIC\n{rep}"),
            Verdict::Violated => assert!(!truth, "seed {seed}: false violation\n{rep}"),
            Verdict::Inconclusive => {}
        }
        if seed % 2 == 0 {
            assert!(rep.ok(), "seed {seed}: serial schedule not verified\n{rep}");
        }
    }
    eprintln!("reads model: [violated truth, serializable truth] x [atomic, violated, inconclusive] = {counts:?}");
    let inconclusive = counts[0][2] + counts[1][2];
    assert!(
        inconclusive as u64 * 100 <= n,
        "too many inconclusive: {counts:?}"
    );
}

#[test]
fn a_witness_order_explains_every_read() {
    // Re-derive each read's view from the witness order: the witness is a real proof.
    for seed in 0..300u64 {
        let c = read_case(seed, false);
        let nw = c.writes.len();
        let reads: Vec<Read> = c
            .read_ranges
            .iter()
            .zip(&c.seen)
            .enumerate()
            .map(|(i, (rr, s))| Read::new(100 + i as u32, 0, rr.clone(), s.clone()))
            .collect();
        let rep = verify(&c.file[..], &c.writes, &reads).unwrap();
        assert!(rep.ok(), "seed {seed}\n{rep}");
        let mut f = vec![0u8; c.file.len()];
        for op in &rep.order {
            match op {
                atomio_verify::OpId::Write(id) => {
                    let i = c.writes.iter().position(|w| w.id == *id).unwrap();
                    paint(&mut f, &c.writes[i]);
                }
                atomio_verify::OpId::Read(id) => {
                    let i = (id.reader - 100) as usize;
                    assert_eq!(observe(&f, &c.read_ranges[i]), c.seen[i], "seed {seed}");
                }
                atomio_verify::OpId::Initial => unreachable!(),
            }
        }
        assert_eq!(f, c.file);
        assert_eq!(rep.order.len(), nw + reads.len());
        let _ = ByteRange::new(0, 0);
    }
}
