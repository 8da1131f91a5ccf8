//! Is anyone else using the machine? Calibration and validation measure CPU costs on a
//! machine others share; a build or a benchmark of someone else's running meanwhile makes
//! every figure wrong. This reads the kernel's CPU counters (`/proc/stat`) over a short
//! window and says how many cores were busy, so the commands can wait for a quiet moment
//! and record how quiet it was.
//!
//! **Invariants:** never panics (no `/proc/stat`: reported as unknown, `None`); waiting
//! is bounded.

use std::time::{Duration, Instant};

/// (busy, total) jiffies over all CPUs.
fn counters() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    // user nice system idle iowait irq softirq steal …: idle and iowait are not busy.
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v[4];
    Some((total - idle, total))
}

/// Cores busy on average over `window` (`None` if the counters cannot be read).
pub fn busy_cores(window: Duration) -> Option<f64> {
    let (b0, t0) = counters()?;
    std::thread::sleep(window);
    let (b1, t1) = counters()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let dt = t1.saturating_sub(t0);
    if dt == 0 {
        return Some(0.0);
    }
    Some(b1.saturating_sub(b0) as f64 / dt as f64 * cores)
}

/// Waits (at most `patience`) until the machine is nearly idle (below `threshold` busy
/// cores over half a second); returns the last reading.
pub fn wait_for_quiet(patience: Duration, threshold: f64, mut say: impl FnMut(f64)) -> Option<f64> {
    let start = Instant::now();
    loop {
        let busy = busy_cores(Duration::from_millis(500))?;
        if busy <= threshold || start.elapsed() >= patience {
            return Some(busy);
        }
        say(busy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_cores_is_a_fraction_of_the_machine() {
        if let Some(b) = busy_cores(Duration::from_millis(50)) {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            assert!((0.0..=cores + 0.01).contains(&b), "{b}");
        }
    }
}
