//! Progress bars for anything that runs longer than a few seconds (to stderr).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `total` steps, or a hidden one when `enabled` is false.
pub fn bar(total: u64, enabled: bool) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    b
}
