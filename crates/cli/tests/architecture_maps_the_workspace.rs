//! The docs stay a true map: ARCHITECTURE.md's crate table names every workspace member
//! with its package and nothing else, every file it points to exists, and every relative
//! link in the README, ARCHITECTURE.md and docs/ leads to a file.

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
