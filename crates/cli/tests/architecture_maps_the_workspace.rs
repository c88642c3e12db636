//! The docs stay a true map: ARCHITECTURE.md's crate table names every workspace member
//! with its package and nothing else, every file it points to exists, and every relative
//! link in the README, ARCHITECTURE.md and docs/ leads to a file, and no crate's modules
//! import each other in a circle.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The workspace's members, each with its package name.
fn members() -> BTreeSet<(String, String)> {
    let manifest = read(&root().join("Cargo.toml"));
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("a members list in Cargo.toml");
    list.split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|dir| {
            let package = read(&root().join(dir).join("Cargo.toml"));
            let name = package
                .lines()
                .find_map(|l| l.strip_prefix("name = "))
                .map(|n| n.trim_matches('"').to_string())
                .unwrap_or_else(|| panic!("{dir}/Cargo.toml names no package"));
            (dir.to_string(), name)
        })
        .collect()
}

/// The rows of ARCHITECTURE.md's crate table: (directory, package).
fn mapped_crates(architecture: &str) -> BTreeSet<(String, String)> {
    let section = architecture
        .split_once("\n## Crates\n")
        .and_then(|(_, rest)| rest.split("\n## ").next())
        .expect("a Crates section in ARCHITECTURE.md");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let unquote = |c: &str| c.trim_matches('`').to_string();
            (unquote(cells[1]), unquote(cells[2]))
        })
        .collect()
}

#[test]
fn the_crate_table_names_every_member_and_its_package() {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    assert_eq!(mapped_crates(&architecture), members());
}

#[test]
fn every_file_the_architecture_points_to_exists() {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    let mut checked = 0;
    for quoted in architecture.split('`').skip(1).step_by(2) {
        let looks_like_a_path = ["crates/", "demo/", "ui/", "fuzz/", "docs/"]
            .iter()
            .any(|p| quoted.starts_with(p))
            && !quoted.contains(' ');
        if looks_like_a_path {
            let path = root().join(quoted.trim_end_matches('/'));
            assert!(
                path.exists(),
                "ARCHITECTURE.md points to {quoted}, which does not exist"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 40,
        "only {checked} paths found: is the table still in backquotes?"
    );
}

/// The Markdown files of the docs: the README, ARCHITECTURE.md, BENCHMARKS.md, docs/ and
/// the crates' READMEs.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![
        root().join("README.md"),
        root().join("ARCHITECTURE.md"),
        root().join("BENCHMARKS.md"),
        root().join("crates/trace/README.md"),
    ];
    walk(&root().join("docs"), &mut files);
    files
}

/// Markdown without its code: fenced blocks and inline code spans, where `](` is not a
/// link.
fn prose(markdown: &str) -> String {
    let mut unfenced = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            unfenced.push_str(line);
            unfenced.push('\n');
        }
    }
    // An inline code span may run over a line break.
    unfenced.split('`').step_by(2).collect()
}

#[test]
fn every_relative_link_in_the_docs_leads_to_a_file() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = prose(&read(&file));
        for (i, _) in text.match_indices("](") {
            let target = &text[i + 2..];
            let Some(end) = target.find(')') else {
                continue;
            };
            let target = &target[..end];
            if target.starts_with("http") || target.starts_with('#') || target.contains(' ') {
                continue;
            }
            let path = target.split('#').next().unwrap_or_default();
            let dir = file.parent().expect("a file's directory");
            if !dir.join(path).exists() {
                broken.push(format!("{}: {target}", file.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

/// The crate's top-level modules each `.rs` file under `src` belongs to, with the text
/// it imports through: its non-comment lines before its unit tests.
fn module_sources(src: &Path) -> Vec<(String, bool, String)> {
    let mut found = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).expect("under src");
            let parts: Vec<String> = relative
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let module = parts[0].clone();
            if parts.len() == 1 && (module == "lib" || module == "main") {
                continue;
            }
            // `super::` in src/x.rs or src/x/mod.rs names the crate root.
            let top = parts.len() == 1 || (parts.len() == 2 && parts[1] == "mod");
            let text = read(&path);
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            let code: String = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            found.push((module, top, code));
        }
    }
    found
}

/// The names a path prefix (`crate::`, `super::`) reaches in `code`: the first name
/// after it, or, for a group in braces, each item's first name.
fn reached(code: &str, prefix: &str) -> BTreeSet<String> {
    let first_name = |text: &str| -> Option<String> {
        let name: String = text
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        (!name.is_empty()).then_some(name)
    };
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        let Some(group) = rest.strip_prefix('{') else {
            names.extend(first_name(rest));
            continue;
        };
        // The group's items: split at its own commas, up to its closing brace.
        let (mut depth, mut item_start) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    names.extend(first_name(&group[item_start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    names.extend(first_name(&group[item_start..i]));
                    item_start = i + 1;
                }
                _ => {}
            }
        }
    }
    names
}

/// Import circles among a crate's top-level modules: each as its modules, sorted.
fn import_circles(src: &Path) -> Vec<Vec<String>> {
    let mut edges: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for (module, top, code) in module_sources(src) {
        let mut names = reached(&code, "crate::");
        if top {
            names.extend(reached(&code, "super::"));
        }
        names.remove(&module);
        edges.entry(module).or_default().extend(names);
    }
    let modules: Vec<String> = edges.keys().cloned().collect();
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached_from: Vec<BTreeSet<String>> = modules.iter().map(|m| reach(m)).collect();
    // A circle: the modules that reach a module and that it reaches.
    let mut circles: BTreeSet<Vec<String>> = BTreeSet::new();
    for (i, m) in modules.iter().enumerate() {
        let circle: Vec<String> = modules
            .iter()
            .enumerate()
            .filter(|(j, n)| reached_from[i].contains(*n) && reached_from[*j].contains(m))
            .map(|(_, n)| n.clone())
            .collect();
        if !circle.is_empty() {
            circles.insert(circle);
        }
    }
    circles.into_iter().collect()
}

#[test]
fn no_crate_has_modules_that_import_each_other() {
    // The instrumentation library's span record, its lane and the Pivot Tracing hooks
    // still call each other (docs/roadmap.md).
    let known = ["crates/trace"];
    let mut found = Vec::new();
    for (dir, _) in members() {
        let src = root().join(&dir).join("src");
        if known.contains(&dir.as_str()) || !src.is_dir() {
            continue;
        }
        for circle in import_circles(&src) {
            found.push(format!("{dir}: {}", circle.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules importing each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_circle_among_modules_is_found_through_groups_and_super() {
    let dir = std::env::temp_dir().join(format!("causeway-circles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).expect("a temp dir");
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nmod c;\nmod d;\n").expect("lib.rs");
    std::fs::write(dir.join("a.rs"), "use crate::{b::{One, Two}, c};\n").expect("a.rs");
    std::fs::write(dir.join("b/mod.rs"), "mod inner;\n// use crate::d;\n").expect("b");
    std::fs::write(dir.join("b/inner.rs"), "fn f() { crate::a::g() }\n").expect("inner");
    std::fs::write(dir.join("c.rs"), "use super::b;\n").expect("c.rs");
    std::fs::write(dir.join("d.rs"), "use crate::a;\n").expect("d.rs");
    let circles = import_circles(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        circles,
        vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]
    );
}
