//! Writing a command's results: the JSON file every benchmark takes with `--json`.

use anyhow::Context;
use std::path::Path;

/// Writes `value` as pretty JSON to `path`, creating its folder, and says where.
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, value)
        .with_context(|| format!("writing {}", path.display()))?;
    std::io::Write::flush(&mut w).with_context(|| format!("writing {}", path.display()))?;
    println!("JSON: {}", path.display());
    Ok(())
}
