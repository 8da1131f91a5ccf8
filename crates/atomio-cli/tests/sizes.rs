//! Size limits of the product's sources (every `.rs` file under `crates/*/src`): no file
//! over [`MAX_FILE_LINES`] lines and no function over [`MAX_FN_LINES`] lines. A file counts
//! its lines; a function counts the lines of its body, from the line of its opening brace to
//! the line of its closing brace. Functions are free fns, methods in inherent and trait
//! impls, trait methods with a default body, and fns nested in other fns or in modules.
//! Closures are not functions here (they belong to the fn that holds them), and fns written
//! inside a macro's input are not seen (the parser does not expand macros).
//!
//! Test code counts like the rest: fns inside `#[cfg(test)]` modules and `#[test]` fns are
//! measured and held to the same limits, because they are read, reviewed and changed like
//! the code they test, and a test of one concern is as easy to split as a function.
//!
//! The product has offenders that predate the limits; they are listed in [`KNOWN_FILES`]
//! and [`KNOWN_FNS`]. The test fails for an offender that is not listed, and for a listed
//! one that is no longer over its limit (or no longer exists), so the lists can only
//! shrink and always say what is true.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::visit::{self, Visit};

/// The most lines a product source file may have.
const MAX_FILE_LINES: usize = 800;
/// The most lines a product function's body may span.
const MAX_FN_LINES: usize = 100;

/// Files over [`MAX_FILE_LINES`], tolerated until they are split (paths from the workspace root).
const KNOWN_FILES: &[&str] = &[
    "crates/atomio-client/src/direct.rs",
    "crates/atomio-client/src/dlm/machine.rs",
    "crates/atomio-client/src/file.rs",
    "crates/atomio-client/src/host_locks.rs",
    "crates/atomio-client/src/versioned.rs",
    "crates/atomio-ffi/src/lib.rs",
];

/// Functions over [`MAX_FN_LINES`], tolerated until they are split: (path, qualified name),
/// the name as [`offenders`] spells it (`mod::Type::method`, `outer::inner`).
const KNOWN_FNS: &[(&str, &str)] = &[
    ("crates/atomio-client/src/dlm/agent.rs", "run"),
    (
        "crates/atomio-client/src/dlm/machine.rs",
        "DlmClient::step_op",
    ),
];

/// One thing over its limit: a file (`name` empty) or a function in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Offender {
    path: String,
    name: String,
    lines: usize,
}

/// Walks a file's syntax tree, keeping the names of the items around the current one.
struct FnSizes<'a> {
    path: &'a str,
    scope: Vec<String>,
    found: Vec<Offender>,
}

impl FnSizes<'_> {
    fn measure(&mut self, name: &syn::Ident, body: &syn::Block) {
        let span = body.brace_token.span.join();
        let lines = span.end().line - span.start().line + 1;
        if lines > MAX_FN_LINES {
            let mut qualified = self.scope.clone();
            qualified.push(name.to_string());
            self.found.push(Offender {
                path: self.path.to_string(),
                name: qualified.join("::"),
                lines,
            });
        }
    }

    fn within<T>(&mut self, name: String, walk: impl FnOnce(&mut Self) -> T) -> T {
        self.scope.push(name);
        let out = walk(self);
        self.scope.pop();
        out
    }
}

/// The name an impl is known by: its self type's last path segment (`_` for other types).
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or("_".to_string(), |s| s.ident.to_string()),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => "_".to_string(),
    }
}

impl<'ast> Visit<'ast> for FnSizes<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.within(m.ident.to_string(), |v| visit::visit_item_mod(v, m));
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.within(type_name(&i.self_ty), |v| visit::visit_item_impl(v, i));
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.within(t.ident.to_string(), |v| visit::visit_item_trait(v, t));
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(&f.sig.ident, &f.block);
        self.within(f.sig.ident.to_string(), |v| visit::visit_item_fn(v, f));
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.measure(&f.sig.ident, &f.block);
        self.within(f.sig.ident.to_string(), |v| visit::visit_impl_item_fn(v, f));
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.measure(&f.sig.ident, body);
        }
        self.within(f.sig.ident.to_string(), |v| {
            visit::visit_trait_item_fn(v, f)
        });
    }
}

/// The offenders in one source file: the file itself if it is too long, and each function
/// whose body is too long.
fn offenders(path: &str, source: &str) -> Result<Vec<Offender>, syn::Error> {
    let mut found = Vec::new();
    let lines = source.lines().count();
    if lines > MAX_FILE_LINES {
        found.push(Offender {
            path: path.to_string(),
            name: String::new(),
            lines,
        });
    }
    let file = syn::parse_file(source)?;
    let mut sizes = FnSizes {
        path,
        scope: Vec::new(),
        found,
    };
    sizes.visit_file(&file);
    Ok(sizes.found)
}

/// What is wrong with `found` against the known lists: each unlisted offender, and each
/// listed one that was not found (within its limit now, renamed or gone).
fn check(found: &[Offender], known_files: &[&str], known_fns: &[(&str, &str)]) -> Vec<String> {
    let mut known: BTreeMap<(&str, &str), bool> = BTreeMap::new();
    known.extend(known_files.iter().map(|p| ((*p, ""), false)));
    known.extend(known_fns.iter().map(|k| (*k, false)));
    let mut problems = Vec::new();
    for o in found {
        match known.get_mut(&(o.path.as_str(), o.name.as_str())) {
            Some(seen) => *seen = true,
            None if o.name.is_empty() => problems.push(format!(
                "{}: {} lines (file limit {MAX_FILE_LINES})",
                o.path, o.lines
            )),
            None => problems.push(format!(
                "{} {}: {} lines (fn limit {MAX_FN_LINES})",
                o.path, o.name, o.lines
            )),
        }
    }
    for ((path, name), seen) in known {
        if !seen {
            let what = if name.is_empty() { "file" } else { name };
            problems.push(format!(
                "{path} {what}: listed as an offender but within its limit (or gone): \
                 take it off the list"
            ));
        }
    }
    problems
}

/// Every `.rs` file under `dir`, recursively, in a stable order.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The offenders in the whole product (`crates/*/src`), paths from the workspace root.
fn product_offenders() -> Vec<Offender> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let mut crates: Vec<_> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    crates.sort();
    let mut files = Vec::new();
    for c in crates.iter().filter(|c| c.join("src").is_dir()) {
        rust_files(&c.join("src"), &mut files);
    }
    // A layout change that left no sources would pass vacuously.
    assert!(files.len() > 50, "only {} product files found", files.len());
    let mut found = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let source = std::fs::read_to_string(&f).unwrap();
        let mut o = offenders(&rel, &source).unwrap_or_else(|e| panic!("{rel}: {e}"));
        found.append(&mut o);
    }
    found
}

#[test]
fn no_product_file_or_function_is_over_its_limit() {
    let mut found = product_offenders();
    let problems = check(&found, KNOWN_FILES, KNOWN_FNS);
    found.sort_by_key(|o| std::cmp::Reverse(o.lines));
    let all: Vec<String> = found
        .iter()
        .map(|o| format!("{} {} {}", o.lines, o.path, o.name))
        .collect();
    assert!(
        problems.is_empty(),
        "size limits:\n  {}\n(all offenders now:\n  {})",
        problems.join("\n  "),
        all.join("\n  ")
    );
}

/// A source with `fn name` whose body spans exactly `lines` lines, nested in a module and a
/// method of an impl, beside one that is within the limit.
fn sample(lines: usize) -> String {
    let body: String = (0..lines - 2)
        .map(|i| format!("    let _x{i} = {i};\n"))
        .collect();
    format!(
        "mod m {{\n    struct S;\n    impl S {{\n        fn long() {{\n{body}        }}\n        \
         fn short() {{}}\n    }}\n}}\nfn outer() {{\n    fn inner() {{\n{body}    }}\n}}\n"
    )
}

/// The measure counts brace to brace, finds methods and nested fns by their qualified
/// names, and stops exactly at the limit (negative control: a 101-line body is caught).
#[test]
fn the_checker_finds_a_function_one_line_over_the_limit() {
    let names = |lines| -> Vec<(String, usize)> {
        offenders("x.rs", &sample(lines))
            .unwrap()
            .into_iter()
            .map(|o| (o.name, o.lines))
            .collect()
    };
    let at = |name: &str, lines: usize| (name.to_string(), lines);
    // `outer` holds `inner` and spans two lines more: at the limit, nothing is over it.
    assert_eq!(names(MAX_FN_LINES - 2), vec![]);
    assert_eq!(names(MAX_FN_LINES), vec![at("outer", MAX_FN_LINES + 2)]);
    let over = MAX_FN_LINES + 1;
    assert_eq!(
        names(over),
        vec![
            at("m::S::long", over),
            at("outer", over + 2),
            at("outer::inner", over)
        ]
    );
}

/// A file one line over the limit is caught; one at the limit is not.
#[test]
fn the_checker_finds_a_file_one_line_over_the_limit() {
    let file = |lines: usize| "// x\n".repeat(lines);
    assert_eq!(offenders("f.rs", &file(MAX_FILE_LINES)).unwrap(), vec![]);
    assert_eq!(
        offenders("f.rs", &file(MAX_FILE_LINES + 1)).unwrap(),
        vec![Offender {
            path: "f.rs".into(),
            name: String::new(),
            lines: MAX_FILE_LINES + 1
        }]
    );
}

/// The lists only shrink: an unlisted offender fails, a listed one that is found passes,
/// and a listed one that is not found (within its limit now) fails.
#[test]
fn the_known_lists_must_stay_true() {
    let found = vec![
        Offender {
            path: "a.rs".into(),
            name: String::new(),
            lines: 900,
        },
        Offender {
            path: "a.rs".into(),
            name: "f".into(),
            lines: 150,
        },
    ];
    assert_eq!(
        check(&found, &["a.rs"], &[("a.rs", "f")]),
        Vec::<String>::new()
    );
    let unlisted = check(&found, &["a.rs"], &[]);
    assert_eq!(unlisted.len(), 1);
    assert!(unlisted[0].contains("a.rs f: 150 lines"), "{unlisted:?}");
    let stale = check(&found, &["a.rs", "b.rs"], &[("a.rs", "f"), ("a.rs", "g")]);
    assert_eq!(stale.len(), 2, "{stale:?}");
    assert!(
        stale.iter().all(|p| p.contains("take it off the list")),
        "{stale:?}"
    );
}
