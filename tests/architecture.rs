//! ARCHITECTURE.md's file list held to the tree: each `src/` directory's
//! entry names every file and subdirectory in it (`mod` may go unnamed),
//! and names nothing that is not there; every top-level `src/*.rs` file
//! and directory has an entry. A file added, renamed or removed without
//! the map following it fails here, as docs/settings.md is held to the
//! settings table. README.md stays under 300 lines.

use std::collections::BTreeSet;
use std::path::Path;

/// The `## Files` block: (path, its text with continuation lines joined).
fn entries() -> Vec<(String, String)> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let files = &doc[doc.find("## Files").expect("a ## Files section")..];
    let block = &files[files.find("```text").unwrap() + 7..];
    let block = &block[..block.find("```").unwrap()];
    let mut out: Vec<(String, String)> = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with(' ') {
            let last = out.last_mut().expect("a continuation after an entry");
            last.1.push(' ');
            last.1.push_str(line.trim());
        } else {
            let (path, text) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            out.push((path.to_string(), text.trim().to_string()));
        }
    }
    out
}

/// The names an entry lists: its text without parenthesised remarks, after
/// the first `:` where one says what the list is, split at `,` and `;`,
/// the first word of each (a trailing `/` for a directory dropped).
fn names(text: &str) -> BTreeSet<String> {
    let mut t = String::new();
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => t.push(c),
            _ => {}
        }
    }
    let list = t.split_once(':').map_or(t.as_str(), |(_, l)| l);
    list.split([',', ';'])
        .filter_map(|i| i.split_whitespace().next())
        .map(|w| w.trim_end_matches('/').to_string())
        .collect()
}

#[test]
fn the_file_map_names_every_file_under_src_and_nothing_else() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let entries = entries();
    let mut problems = Vec::new();
    let mut dirs_seen = BTreeSet::new();
    for (path, text) in &entries {
        if !(path.starts_with("src/") && path.ends_with('/')) {
            continue;
        }
        dirs_seen.insert(path.clone());
        let listed = names(text);
        let mut there = BTreeSet::new();
        for e in std::fs::read_dir(root.join(path)).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                there.insert(name);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                there.insert(stem.to_string());
            }
        }
        for missing in there.iter().filter(|n| *n != "mod" && !listed.contains(*n)) {
            problems.push(format!("{path}: {missing} is not named"));
        }
        for gone in listed.iter().filter(|n| !there.contains(*n)) {
            problems.push(format!("{path}: names {gone}, which is not there"));
        }
    }
    // Every top-level file and directory has an entry of its own.
    let top: BTreeSet<String> = entries.iter().map(|(p, _)| p.clone()).collect();
    for e in std::fs::read_dir(root.join("src")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let key = if e.path().is_dir() {
            format!("src/{name}/")
        } else {
            format!("src/{name}")
        };
        if !top.contains(&key) {
            problems.push(format!("{key} has no entry"));
        }
        // A subdirectory needs its own entry too.
        if e.path().is_dir() {
            for sub in std::fs::read_dir(e.path()).unwrap().flatten() {
                if sub.path().is_dir() {
                    let k = format!("src/{name}/{}/", sub.file_name().to_string_lossy());
                    if !dirs_seen.contains(&k) {
                        problems.push(format!("{k} has no entry"));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's ## Files:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn a_list_is_read_after_what_it_is() {
    let n = names("the explorer: mod (its loop, app), render/ (draws), ab; keys");
    assert_eq!(n, ["ab", "keys", "mod", "render"].map(String::from).into());
}

#[test]
fn the_readme_stays_under_300_lines() {
    // A newcomer reads it top to bottom: the details live in docs/.
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 300,
        "README.md has {lines} lines: move detail to docs/"
    );
}
