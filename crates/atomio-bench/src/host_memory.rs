//! Does this machine hand freed memory back to its host at once? Benchmarks say so in their
//! output, because it decides what a first touch of memory costs.
//!
//! A VM with a virtio balloon and *free page reporting* tells its host which free blocks
//! (2 MiB and up, `page_reporting_order` 9) it does not use, and the host takes them back.
//! The guest's next touch of such a block costs a host fault: on this project's VMs a new
//! 2 MiB folio is zeroed at ~0.4–2 GB/s instead of ~14–33 GB/s. Every page-cache folio a
//! benchmark allocates (a fresh file, a new chunk object) draws from free memory, so each
//! run lands on one of two speeds depending on whether its blocks were reported yet
//! (`results/issue8/stop38`: a first `memset` of 256 MiB `MADV_HUGEPAGE` memory, ten
//! times in a row, alternated between ~700 and ~14,000 MiB/s).
//!
//! Some kernels (this Firecracker build) have a `min_free_ms` parameter: a block is
//! reported only after it stayed free that long. At 0 the warm-up of `page_warm` is undone
//! as soon as its scratch file is deleted; at 60,000 the same ten passes all ran at
//! ~14,000 MiB/s after the first. `scripts/hold-freed-memory` sets the largest hold the
//! kernel accepts (300,000 here) and touches the free memory once. A physical node has
//! no balloon: its figures are the held ones.
//!
//! **Invariant:** reading is all this module does; a machine without the parameters (no
//! balloon, another kernel) is `None`, never an error.

use std::path::Path;

/// Where the kernel exposes free page reporting's parameters.
pub const PARAMETERS: &str = "/sys/module/page_reporting/parameters";

/// Below this hold, blocks freed by one run are (likely) reported before the next one
/// allocates: seconds pass between runs.
const SHORT_HOLD_MS: u64 = 10_000;

/// Free page reporting as this machine has it set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreePageReporting {
    /// Blocks of 2^order pages and larger are reported.
    pub order: u32,
    /// How long a block must stay free before it is reported; `None`: the kernel has no
    /// such parameter (upstream Linux reports after a fixed ~2 s).
    pub min_free_ms: Option<u64>,
}

impl FreePageReporting {
    /// Reads the parameters under `dir`; `None` when free page reporting is not there.
    pub fn read_from(dir: &Path) -> Option<Self> {
        let read = |name: &str| -> Option<u64> {
            std::fs::read_to_string(dir.join(name))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        Some(Self {
            order: u32::try_from(read("page_reporting_order")?).ok()?,
            min_free_ms: read("min_free_ms"),
        })
    }

    /// This machine's, if it has any.
    pub fn of_this_machine() -> Option<Self> {
        Self::read_from(Path::new(PARAMETERS))
    }

    /// Whether memory a run frees is likely gone to the host before the next run touches
    /// it: no hold, or one shorter than the pauses between runs.
    pub fn returns_freed_memory_quickly(&self) -> bool {
        self.min_free_ms.is_none_or(|ms| ms < SHORT_HOLD_MS)
    }

    /// One line for a benchmark's output: what the figures below were measured under.
    pub fn describe(&self) -> String {
        let blocks = format!(" blocks of {} KiB and up", 4u64 << self.order);
        let hold = match self.min_free_ms {
            Some(ms) => format!("after {ms} ms free"),
            None => "after ~2 s free".to_string(),
        };
        if self.returns_freed_memory_quickly() {
            format!(
                "machine: free page reporting hands freed{blocks} back to the host {hold}; \
                 first touches of memory run slow or fast by luck, so figures that allocate \
                 (fresh files, new folios) are bimodal; `scripts/hold-freed-memory` holds \
                 freed memory as long as the kernel allows and warms it (root)"
            )
        } else {
            format!(
                "machine: free page reporting hands freed{blocks} back to the host only \
                 {hold} (held: runs reuse memory the previous ones warmed)"
            )
        }
    }
}

/// The line benchmarks print before their tables, or `None` on a machine without free
/// page reporting (nothing about it to say).
pub fn machine_note() -> Option<String> {
    FreePageReporting::of_this_machine().map(|r| r.describe())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, value) in files {
            std::fs::write(dir.path().join(name), format!("{value}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn no_parameters_means_no_reporting() {
        let dir = params(&[]);
        assert_eq!(FreePageReporting::read_from(dir.path()), None);
        assert_eq!(
            FreePageReporting::read_from(&dir.path().join("absent")),
            None
        );
    }

    #[test]
    fn an_unheld_balloon_is_called_out_and_a_held_one_is_not() {
        let quick = params(&[
            ("page_reporting_order", "9"),
            ("min_free_ms", "0"),
            ("reported_kib", "220291024"),
        ]);
        let r = FreePageReporting::read_from(quick.path()).unwrap();
        assert_eq!(r.order, 9);
        assert_eq!(r.min_free_ms, Some(0));
        assert!(r.returns_freed_memory_quickly());
        let line = r.describe();
        assert!(
            line.contains("2048 KiB") && line.contains("after 0 ms"),
            "{line}"
        );
        assert!(
            line.contains("bimodal") && line.contains("hold-freed-memory"),
            "{line}"
        );

        let held = params(&[("page_reporting_order", "9"), ("min_free_ms", "60000")]);
        let r = FreePageReporting::read_from(held.path()).unwrap();
        assert!(!r.returns_freed_memory_quickly());
        let line = r.describe();
        assert!(
            line.contains("after 60000 ms") && !line.contains("bimodal"),
            "{line}"
        );
    }

    #[test]
    fn upstream_kernels_without_a_hold_report_after_their_fixed_delay() {
        let dir = params(&[("page_reporting_order", "9")]);
        let r = FreePageReporting::read_from(dir.path()).unwrap();
        assert_eq!(r.min_free_ms, None);
        assert!(r.returns_freed_memory_quickly());
        assert!(r.describe().contains("~2 s"), "{}", r.describe());
    }

    #[test]
    fn garbage_in_a_parameter_reads_as_absent_not_as_a_panic() {
        let dir = params(&[("page_reporting_order", "nine"), ("min_free_ms", "-1")]);
        assert_eq!(FreePageReporting::read_from(dir.path()), None);
        let dir = params(&[("page_reporting_order", "9"), ("min_free_ms", "soon")]);
        assert_eq!(
            FreePageReporting::read_from(dir.path())
                .unwrap()
                .min_free_ms,
            None
        );
    }
}
