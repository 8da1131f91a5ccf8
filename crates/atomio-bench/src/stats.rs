//! Small statistics for noisy machines: medians, and the length of a union of intervals.

use std::time::{Duration, Instant};

/// Median of a non-empty sample (mean of the middle two for even sizes).
pub fn median(xs: &[f64]) -> f64 {
    assert!(!xs.is_empty(), "median of nothing");
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Total time covered by the union of `[start, end)` intervals: the time during which at
/// least one client was inside the measured phase.
pub fn union_length(mut spans: Vec<(Instant, Instant)>) -> Duration {
    spans.sort_by_key(|s| s.0);
    let mut total = Duration::ZERO;
    let mut cur: Option<(Instant, Instant)> = None;
    for (s, e) in spans {
        match &mut cur {
            Some((_, ce)) if s <= *ce => *ce = (*ce).max(e),
            _ => {
                if let Some((cs, ce)) = cur {
                    total += ce - cs;
                }
                cur = Some((s, e));
            }
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn union_merges_overlaps_and_keeps_gaps() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let spans = vec![
            (t, t + ms(10)),
            (t + ms(5), t + ms(12)),
            (t + ms(20), t + ms(25)),
        ];
        assert_eq!(union_length(spans), ms(17));
    }
}
