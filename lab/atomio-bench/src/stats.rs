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

/// CPU seconds (user + system) this process has used so far (Linux `/proc/self/stat`;
/// 0 elsewhere): a benchmark's CPU time per operation shows when the machine's cores, not
/// waiting, bound a figure.
pub fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) in parentheses.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based), 12 and 13 after the name.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let hz = 100.0; // USER_HZ on Linux
    (ticks(11) + ticks(12)) / hz
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
