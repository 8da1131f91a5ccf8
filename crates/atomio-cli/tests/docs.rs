//! The documentation's own rules, checked over the repository as git tracks it:
//!
//! * README.md is at most 120 lines, ARCHITECTURE.md at most 500;
//! * no tracked file speaks of the project's history by its work items: no word "stop" or
//!   "issue" (any case) followed by a space and a number (the pattern is assembled at run
//!   time, so this file does not match itself);
//! * no tracked `results/` folder: measurements live on the `results` branch;
//! * every relative link of README.md, ARCHITECTURE.md, BENCHMARKS.md and docs/*.md points
//!   to a file or folder that exists;
//! * those documents say nothing about "this VM".
//!
//! Each checker is a plain function with a unit test on sample text (the negative
//! controls), so a checker that finds nothing is known to be able to find something.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The files git tracks (relative paths), without those deleted from the working tree.
fn tracked() -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo())
        .output()
        .expect("git is needed to list the tracked files");
    assert!(out.status.success(), "git ls-files failed: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|p| !p.is_empty() && repo().join(p).is_file())
        .map(str::to_string)
        .collect()
}

/// The history words, lower case, assembled so that this source holds no match.
fn history_words() -> [String; 2] {
    [["st", "op"].concat(), ["is", "sue"].concat()]
}

/// Byte offsets in `text` where a history word (any case) is followed by one space and a
/// digit: what `git grep -iE "stop [0-9]+|issue [0-9]+"` would find.
fn history_matches(text: &[u8]) -> Vec<usize> {
    let mut hits = Vec::new();
    for word in history_words() {
        let w = word.as_bytes();
        if text.len() < w.len() + 2 {
            continue;
        }
        for i in 0..=text.len() - w.len() - 2 {
            if text[i..i + w.len()].eq_ignore_ascii_case(w)
                && text[i + w.len()] == b' '
                && text[i + w.len() + 1].is_ascii_digit()
            {
                hits.push(i);
            }
        }
    }
    hits.sort_unstable();
    hits
}

/// Whether a tracked path lies inside a folder named `results`.
fn in_results_folder(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    parts.pop();
    parts.contains(&"results")
}

/// Text with fenced code blocks and inline code spans blanked out (links inside code are
/// not links).
fn without_code(md: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if fenced {
            out.push('\n');
            continue;
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
                out.push(' ');
            } else {
                out.push(if in_code { ' ' } else { c });
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of the inline links `[text](target)` of a Markdown text, outside code.
fn link_targets(md: &str) -> Vec<String> {
    let text = without_code(md);
    let mut targets = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            let t = rest[..end].trim();
            let t = t.split_whitespace().next().unwrap_or("");
            targets.push(t.to_string());
            rest = &rest[end..];
        }
    }
    targets
}

/// The relative link targets of `md` (a document at `dir`) that name no existing path.
fn broken_links(md: &str, dir: &Path) -> Vec<String> {
    link_targets(md)
        .into_iter()
        .filter(|t| !t.is_empty() && !t.starts_with('#') && !t.contains("://"))
        .filter(|t| !t.starts_with("mailto:"))
        .filter(|t| {
            let path = t.split('#').next().unwrap_or("");
            !dir.join(path).exists()
        })
        .collect()
}

/// The documents whose links and wording are checked.
fn documents() -> Vec<PathBuf> {
    let root = repo();
    let mut docs: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("the docs/ folder")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    in_docs.sort();
    docs.extend(in_docs);
    docs
}

fn lines(path: &str) -> usize {
    std::fs::read_to_string(repo().join(path))
        .unwrap()
        .lines()
        .count()
}

#[test]
fn readme_and_architecture_fit_in_an_afternoon() {
    assert!(
        lines("README.md") <= 120,
        "README.md: {} lines",
        lines("README.md")
    );
    assert!(
        lines("ARCHITECTURE.md") <= 500,
        "ARCHITECTURE.md: {} lines",
        lines("ARCHITECTURE.md")
    );
}

#[test]
fn no_tracked_file_speaks_of_work_items() {
    let mut found = Vec::new();
    for path in tracked() {
        let bytes = std::fs::read(repo().join(&path)).unwrap();
        if bytes.contains(&0) {
            continue; // binary
        }
        for at in history_matches(&bytes) {
            let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            let end = (at + 24).min(bytes.len());
            found.push(format!(
                "{path}:{line}: {}",
                String::from_utf8_lossy(&bytes[at..end])
            ));
        }
    }
    assert!(
        found.is_empty(),
        "history in tracked files (say what is, not when):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_results_folder_is_tracked() {
    let found: Vec<String> = tracked()
        .into_iter()
        .filter(|p| in_results_folder(p))
        .collect();
    assert!(
        found.is_empty(),
        "measurements belong on the results branch: {found:?}"
    );
}

#[test]
fn every_relative_link_of_the_docs_points_to_a_file() {
    let mut broken = Vec::new();
    for doc in documents() {
        let md = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{doc:?}: {e}"));
        for t in broken_links(&md, doc.parent().unwrap()) {
            broken.push(format!("{}: {t}", doc.display()));
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_docs_describe_the_product_not_one_machine() {
    for doc in documents() {
        let md = std::fs::read_to_string(&doc).unwrap().to_lowercase();
        assert!(
            !md.contains("this vm"),
            "{}: says \"this VM\"",
            doc.display()
        );
    }
}

// The negative controls: each checker finds what it is for.

#[test]
fn the_history_checker_finds_work_items_in_any_case_and_nothing_else() {
    let [s, i] = history_words();
    let sample = format!(
        "as in {s} 38 and {} 10's note; {i}s 3, {s}s 4, {i}-5",
        s.to_uppercase()
    );
    assert_eq!(history_matches(sample.as_bytes()).len(), 2, "{sample}");
    let caps = format!("{}{} 8", &i[..1].to_uppercase(), &i[1..]);
    assert_eq!(history_matches(caps.as_bytes()), [0], "{caps}");
    assert!(history_matches(format!("{s} now; {i}: none").as_bytes()).is_empty());
    assert!(history_matches(format!("{s} ").as_bytes()).is_empty());
}

#[test]
fn the_results_checker_finds_results_folders_at_any_depth() {
    assert!(in_results_folder("results/issue/x.txt"));
    assert!(in_results_folder("mpi/bench/results/rma_run1.json"));
    assert!(!in_results_folder("crates/x/src/results.rs"));
    assert!(!in_results_folder("results"));
}

#[test]
fn the_link_checker_finds_missing_files_and_ignores_code_anchors_and_urls() {
    let dir = std::env::temp_dir().join(format!("atomio-docs-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("there.md"), "").unwrap();
    let md = "see [a](there.md), [b](missing.md#part), [c](sub/), [d](#top),\n\
              [e](https://example.org/x), `[f](in-code.md)`\n\
              ```\n[g](fenced.md)\n```\n[h](gone/x.md \"title\")\n";
    assert_eq!(broken_links(md, &dir), ["missing.md#part", "gone/x.md"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn line_counts_count_lines() {
    assert!(lines("README.md") > 10);
}
