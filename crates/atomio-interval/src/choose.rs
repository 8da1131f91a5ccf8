//! `auto`: which technique a file should use, read off its interval analysis.
//!
//! | what the views say | choice | why |
//! |---|---|---|
//! | nothing declared | `ching:datatype:one-try` | every call locks anyway |
//! | many small runs (≥ 32 per rank, ≤ 16 KiB on average), dense in each rank's hull (≥ 30 %, or at most 1 KiB of hull a run), at most 4 ranks' hulls over any byte; the user's file | `romio` (an `fcntl` lock on the extent, then data sieving) | such runs moved 1.6–1.9× faster sieved in 4 MiB windows than one by one (`bench s3asim`, `tile-pixels`; at 25 % density it was the other way round, see `SIEVE_DENSITY_PCT`), which pays for serializing up to 4 writers; a kernel `fcntl` costs ~2 µs where a lock server round trip costs 30–60 µs (sieving under atomio's locks, `bounding-extent:sieve`, measured 0.83–0.91× of it) |
//! | no shared interval | `interval` (takes no lock) | no two ranks can touch one byte |
//! | shared bytes, at most 4 ranks' hulls over any byte; the user's file | `posix-fcntl` (an `fcntl` lock on the extent, then the runs) | calls that share bytes lock anyway and wait for each other whatever the lock's shape; the kernel's lock is the cheapest there is (measured: `posix-fcntl` the best or within noise of it on `tile`, `tile-large`, `row`, where `interval`, which pays lock round trips, ran at 0.84–0.97×); the depth bound keeps extent locks from serializing a large job |
//! | shared bytes ≤ half the declared bytes | `interval` | lock only the shared bytes; runs wholly private are written lock-free, outside the locked window |
//! | mostly shared, and every shared byte declared by every rank (e.g. default views) | `ching:datatype:one-try` | the views carry no information |
//! | mostly shared, ≥ 3 ranks per shared byte on average | `versioning` | heavy overlap of many writers serializes any lock technique |
//! | mostly shared, fewer writers | `ching:datatype:one-try` | one structured lock request per server beats long lists of shared pieces |
//!
//! **Invariant:** the choice depends only on the analysis and the placement (every rank of
//! a job chooses the same), and every choice comes with the figures that made it.

use crate::analysis::{AnalysisStats, Owner};
use crate::set::IntervalSet;
use serde::{Deserialize, Serialize};

/// The strategy `auto` picked, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub strategy: String,
    pub reason: String,
    pub shared_fraction: f64,
    pub mean_sharers: f64,
}

/// Above this fraction of shared declared bytes, locking only shared bytes saves little.
pub const MOSTLY_SHARED: f64 = 0.5;
/// Ranks per shared byte from which overlap counts as heavy.
pub const HEAVY_SHARERS: f64 = 3.0;
/// Runs at most this long on average are cheaper sieved than moved one by one.
pub const SMALL_RUN: u64 = 16 << 10;
/// Sieving reads and rewrites a rank's whole hull: its runs must cover at least this
/// percentage of it. Measured here: at 25 % the runs one by one (through the mapping) were
/// 2× faster than sieving (`bench mpi-strided`, B = 384: `interval` 1,562 vs `romio`
/// 782 MiB/s); at 33–50 % sieving was 1.6–1.9× faster (`bench s3asim`, `tile-pixels`).
pub const SIEVE_DENSITY_PCT: u64 = 30;
/// Runs this close together (bytes of each rank's hull per run) are sieved at any density:
/// a run moved by itself costs a system call or a mapped store with its page faults
/// (0.3-2 us), sieving a copy in and out per hull byte (~0.1 ns each). ROMIO noncontig's
/// 4-byte elements, every 4th (16 bytes of hull a run, 25 %): `romio` 2.2x MPICH's atomic
/// mode, the runs lock-free one by one (`interval`) 0.14x. The 384-byte records at 25 % of
/// `SIEVE_DENSITY_PCT` have 1,536 bytes a run and stay with the runs.
pub const TINY_EXTENT_PER_RUN: u64 = 1024;
/// The most writers an extent lock may serialize (sieving, or a kernel lock on the
/// extent) before the lost parallelism outweighs what it saves (see the table).
pub const SIEVE_DEPTH: u32 = 4;
/// Runs per rank (on average) below which there is nothing to sieve: a few runs cost a
/// few system calls.
pub const SIEVE_MIN_RUNS: u64 = 32;

/// `auto`'s choice for a file with interval set `set`; `user_file`: the bytes live in the
/// user's file (direct placement), where sieving is possible.
pub fn choose(set: &IntervalSet, user_file: bool) -> Choice {
    let s: &AnalysisStats = set.stats();
    let declared = s.private_bytes + s.shared_bytes;
    let frac = if declared == 0 {
        0.0
    } else {
        s.shared_bytes as f64 / declared as f64
    };
    let (mut w, mut bytes) = (0f64, 0f64);
    for e in set.entries() {
        if let Owner::Ranks(r) = set.owner(e.owner) {
            if r.len() > 1 {
                w += r.len() as f64 * e.family.bytes() as f64;
                bytes += e.family.bytes() as f64;
            }
        } else {
            w += s.ranks as f64 * e.family.bytes() as f64;
            bytes += e.family.bytes() as f64;
        }
    }
    let sharers = if bytes > 0.0 { w / bytes } else { 0.0 };
    let head = format!(
        "{} ranks, {} intervals in {} families ({} private, {} shared), {:.1}% of {} declared bytes shared",
        s.ranks, s.intervals, s.entries, s.private_intervals, s.shared_intervals, 100.0 * frac, declared
    );
    let everyone = set.entries().iter().all(|e| match set.owner(e.owner) {
        Owner::Ranks(r) => r.len() == 1 || r.len() as u32 == s.ranks,
        Owner::Unresolved => true,
    });
    let (strategy, why) = if declared == 0 {
        (
            "ching:datatype:one-try",
            "nothing declared: every call locks all its bytes".to_string(),
        )
    } else if user_file
        && s.declared_runs >= SIEVE_MIN_RUNS * u64::from(s.ranks.max(1))
        && s.declared_bytes / s.declared_runs <= SMALL_RUN
        && (s.declared_bytes.saturating_mul(100) >= s.hull_bytes.saturating_mul(SIEVE_DENSITY_PCT)
            || s.hull_bytes / s.declared_runs <= TINY_EXTENT_PER_RUN)
        && s.hull_depth <= SIEVE_DEPTH
    {
        (
            "romio",
            format!(
                "small runs ({} B on average, {:.0}% of the ranks' hulls, at most {} hulls over a byte): sieving them under one fcntl lock on the extent moves them faster than one by one",
                s.declared_bytes / s.declared_runs,
                100.0 * s.declared_bytes as f64 / s.hull_bytes.max(1) as f64,
                s.hull_depth
            ),
        )
    } else if s.shared_bytes == 0 {
        (
            "interval",
            "no byte is shared: no call takes a lock".to_string(),
        )
    } else if user_file && s.hull_depth <= SIEVE_DEPTH {
        (
            "posix-fcntl",
            format!(
                "shared bytes, and at most {} ranks' hulls over a byte: calls that share bytes wait for each other anyway, and one fcntl lock on the extent is the cheapest lock",
                s.hull_depth
            ),
        )
    } else if frac <= MOSTLY_SHARED {
        (
            "interval",
            format!("shared bytes are at most {:.0}%: lock only them ({sharers:.1} ranks each on average), write private bytes lock-free", 100.0 * MOSTLY_SHARED),
        )
    } else if everyone && s.ranks > 1 {
        (
            "ching:datatype:one-try",
            "every shared byte is declared by every rank: the views tell nothing about who writes where".to_string(),
        )
    } else if sharers >= HEAVY_SHARERS {
        ("versioning", format!("mostly shared by {sharers:.1} ranks on average: heavy overlap serializes locks; versions do not"))
    } else {
        ("ching:datatype:one-try", format!("mostly shared by {sharers:.1} ranks on average: one datatype lock request per server"))
    };
    Choice {
        strategy: strategy.into(),
        reason: format!("{head}; {why}"),
        shared_fraction: frac,
        mean_sharers: sharers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, Limits};
    use crate::family::Family;

    fn pick_on(declared: &[(u32, Vec<Family>)], user_file: bool) -> String {
        choose(
            &IntervalSet::new(analyze(4, declared, Limits::default()).unwrap()),
            user_file,
        )
        .strategy
    }

    fn pick(declared: &[(u32, Vec<Family>)]) -> String {
        pick_on(declared, true)
    }

    #[test]
    fn choices_follow_the_table() {
        let run = |s, l| Family::new(s, l, l, 1).unwrap();
        assert_eq!(pick(&[]), "ching:datatype:one-try");
        let disjoint: Vec<_> = (0..4)
            .map(|r| (r, vec![run(r as u64 * 100, 100)]))
            .collect();
        assert_eq!(pick(&disjoint), "interval");
        let ghosts: Vec<_> = (0..4)
            .map(|r| (r, vec![run(r as u64 * 100, 120)]))
            .collect();
        // Shallow hulls on the user's file: the kernel's extent lock; on servers, or with
        // hulls six deep, only the shared bytes are locked.
        assert_eq!(pick(&ghosts), "posix-fcntl");
        assert_eq!(pick_on(&ghosts, false), "interval");
        let deep: Vec<_> = (0..6)
            .map(|r| {
                let near = run(r as u64 * 100, 120);
                let far = run(100_000 + r as u64 * 100, 100);
                (r, vec![near, far])
            })
            .collect();
        let a = analyze(6, &deep, Limits::default()).unwrap();
        assert_eq!(a.stats.hull_depth, 6);
        assert_eq!(pick(&deep), "interval");
        let same: Vec<_> = (0..4).map(|r| (r, vec![run(0, 1000)])).collect();
        assert_eq!(pick_on(&same, false), "ching:datatype:one-try");
        // Three of four ranks over the same bytes, the fourth elsewhere: heavy overlap.
        let mut heavy: Vec<_> = (0..3).map(|r| (r, vec![run(0, 1000)])).collect();
        heavy.push((3, vec![run(5000, 10)]));
        assert_eq!(pick_on(&heavy, false), "versioning");
    }

    #[test]
    fn many_small_dense_runs_are_sieved_on_the_users_file_only() {
        // Tile rows of 8 KiB, 16 KiB apart, neighbours overlapping by 40 bytes.
        let rows = |r: u64| Family::new(r * (8192 - 40), 8192, 16384, 64).unwrap();
        let tiles: Vec<_> = (0..2).map(|r| (r as u32, vec![rows(r)])).collect();
        assert_eq!(pick(&tiles), "romio");
        assert_eq!(pick_on(&tiles, false), "interval", "no sieving on servers");
        // Large runs: per-run I/O is as fast; the extent lock alone.
        let wide = |r: u64| Family::new(r * (131072 - 40), 131072, 262144, 64).unwrap();
        let wide: Vec<_> = (0..2).map(|r| (r as u32, vec![wide(r)])).collect();
        assert_eq!(pick(&wide), "posix-fcntl");
        // Sparse in the hull: sieving would rewrite 16 bytes for each one written.
        let sparse = |r: u64| Family::new(r * (1024 - 40), 1024, 16384, 64).unwrap();
        let sparse: Vec<_> = (0..2).map(|r| (r as u32, vec![sparse(r)])).collect();
        assert_eq!(pick(&sparse), "posix-fcntl");
        // Five ranks' extents over one byte: an extent lock would serialize too many.
        let deep: Vec<_> = (0..5)
            .map(|r| {
                let f = Family::new(r as u64 * 4000, 8192, 8192 * 4, 64).unwrap();
                (r, vec![f])
            })
            .collect();
        let a = analyze(5, &deep, Limits::default()).unwrap();
        assert_eq!(a.stats.hull_depth, 5);
        let chosen = pick(&deep);
        assert!(
            chosen != "romio" && chosen != "posix-fcntl",
            "no extent lock over five ranks: {chosen}"
        );
        // Interleaved strided records, no byte shared: sieved when each rank's records are
        // half its hull, not when they are a quarter of it.
        let strided = |n: u32| -> Vec<(u32, Vec<Family>)> {
            (0..n)
                .map(|r| {
                    let f = Family::new(r as u64 * 384, 384, 384 * n as u64, 256).unwrap();
                    (r, vec![f])
                })
                .collect()
        };
        assert_eq!(pick(&strided(2)), "romio");
        assert_eq!(pick(&strided(4)), "interval", "a quarter of each hull");
        // ROMIO noncontig's view: 4-byte elements, every 4th, a quarter of each hull but 16
        // bytes of hull a run: sieved; the same at 8 ranks (hulls 8 deep): not.
        let ints = |n: u32| -> Vec<(u32, Vec<Family>)> {
            (0..n)
                .map(|r| {
                    (
                        r,
                        vec![Family::new(r as u64 * 4, 4, 4 * n as u64, 2500).unwrap()],
                    )
                })
                .collect()
        };
        assert_eq!(pick(&ints(4)), "romio");
        assert_eq!(
            pick_on(&ints(4), false),
            "interval",
            "no sieving on servers"
        );
        let a = analyze(8, &ints(8), Limits::default()).unwrap();
        assert_eq!(a.stats.hull_depth, 8);
        assert_eq!(
            choose(&IntervalSet::new(a), true).strategy,
            "interval",
            "eight writers"
        );
    }

    #[test]
    fn declared_statistics_count_runs_hulls_and_depth() {
        let fams = [
            (0, vec![Family::new(0, 100, 100, 10).unwrap()]), // one run of 1,000 bytes
            (1, vec![Family::new(500, 10, 100, 10).unwrap()]), // ten runs, hull 910
            (2, vec![Family::new(2000, 10, 10, 1).unwrap()]), // apart from the others
        ];
        let s = analyze(3, &fams, Limits::default()).unwrap().stats;
        assert_eq!(
            (
                s.declared_bytes,
                s.declared_runs,
                s.hull_bytes,
                s.hull_depth
            ),
            (1110, 12, 1000 + 910 + 10, 2)
        );
    }
}
