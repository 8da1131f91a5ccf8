//! `auto`: which technique a file should use, read off its interval analysis.
//!
//! | what the views say | choice | why |
//! |---|---|---|
//! | nothing declared | `ching:datatype:one-try` | every call locks anyway |
//! | no shared interval | `interval` (takes no lock) | no two ranks can touch one byte |
//! | shared bytes ≤ half the declared bytes | `interval` | lock only the shared bytes; private ones are written lock-free, outside the locked window |
//! | mostly shared, and every shared byte declared by every rank (e.g. default views) | `ching:datatype:one-try` | the views carry no information |
//! | mostly shared, ≥ 3 ranks per shared byte on average | `versioning` | heavy overlap of many writers serializes any lock technique |
//! | mostly shared, fewer writers | `ching:datatype:one-try` | one structured lock request per server beats long lists of shared pieces |
//!
//! **Invariant:** the choice depends only on the analysis (every rank of a job chooses
//! the same), and every choice comes with the figures that made it.

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

pub fn choose(set: &IntervalSet) -> Choice {
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
    } else if s.shared_bytes == 0 {
        (
            "interval",
            "no byte is shared: no call takes a lock".to_string(),
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

    fn pick(declared: &[(u32, Vec<Family>)]) -> String {
        choose(&IntervalSet::new(
            analyze(4, declared, Limits::default()).unwrap(),
        ))
        .strategy
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
        assert_eq!(pick(&ghosts), "interval");
        let same: Vec<_> = (0..4).map(|r| (r, vec![run(0, 1000)])).collect();
        assert_eq!(pick(&same), "ching:datatype:one-try");
        // Three of four ranks over the same bytes, the fourth elsewhere: heavy overlap.
        let mut heavy: Vec<_> = (0..3).map(|r| (r, vec![run(0, 1000)])).collect();
        heavy.push((3, vec![run(5000, 10)]));
        assert_eq!(pick(&heavy), "versioning");
    }
}
