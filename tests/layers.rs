//! readpath's layering, checked on every `cargo test` (and so by `.ci/run`).
//!
//! The crate is a stack of modules: each may use the ones below it and none
//! above. [`LAYERS`] is that stack, lowest first; this test reads every file
//! under `src/` and fails when
//!
//! - a file outside `src/sys/` spells `libc::` (raw system calls live in
//!   `sys`, each `unsafe` block with its `SAFETY:` argument), unless
//!   [`LIBC_ALLOWED`] names it with a reason;
//! - a `crate::X` / `super::X` path in a module reaches a module of a
//!   higher layer, unless [`ARROWS_ALLOWED`] names that arrow with a reason;
//! - a top-level module is missing from [`LAYERS`];
//! - the files of one directory module import each other in a circle
//!   (for example `engine::reader` -> `engine::cached` -> `engine::reader`),
//!   unless [`CIRCLES_ALLOWED`] lists it.
//!
//! Comments (`//`, `///`, `//!`) are not read, so doc links may point
//! anywhere. The check is textual: it resolves `crate::`, `super::` and
//! `self::` paths (and `{...}` groups after them) against the module tree
//! the files spell out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may use modules of its own layer or
/// of any layer below. Modules sharing a layer are listed together.
const LAYERS: &[(&[&str], &str)] = &[
    (
        &["sys"],
        "every raw system call, /proc and /sys, the trust rule for state files",
    ),
    (
        &["choice"],
        "closed sets of named values (named_enum!): settings' enums, cipher kinds",
    ),
    (
        &["crypto"],
        "the ciphers and key derivation (pure computation)",
    ),
    (
        &["verity"],
        "the Merkle tree and its verification (pure computation)",
    ),
    (
        &["settings"],
        "what a run is asked to do: keys, values, presets, units",
    ),
    (
        &["metrics"],
        "the hot-path recorder and the interval record schema",
    ),
    (&["dataset"], "the files read, prepared and checked on disk"),
    (
        &["files"],
        "files from and for the user: checked output paths, atomic writes, capped reads, versions",
    ),
    (
        &["kernel"],
        "the real kernel: fscrypt/fs-verity images, tracefs, system knobs",
    ),
    (
        &["engine"],
        "runs a workload: readers, queues, workers, the sampler",
    ),
    (
        &["scenario"],
        "scripted demos and experiments over the engine",
    ),
    (
        &["output"],
        "files, recordings, reports, plots, formatting for people",
    ),
    (
        &["bench"],
        "micro-benchmarks of the primitives (`readpath bench`)",
    ),
    (
        &["invocation"],
        "what commands and the remote agent share: loading settings, the bad-input error, stopping a workload",
    ),
    (
        &["lab"],
        "the kernel lab: lab kernels, the guest's initramfs and disk, QEMU",
    ),
    (
        &["remote"],
        "running the engine on another machine over ssh, adb or a lab guest",
    ),
    (&["tui"], "the explorer"),
    (
        &["commands", "cli"],
        "argument definitions and one file per command: the top",
    ),
];

/// Files outside `src/sys/` allowed to spell `libc::`, each with why.
const LIBC_ALLOWED: &[(&str, &str)] = &[];

/// Arrows from a lower layer to a higher one that are allowed for now,
/// each with why: (from, to, reason).
const ARROWS_ALLOWED: &[(&str, &str, &str)] = &[];

/// Circles between the files of one directory module that are known and
/// not untangled yet: (directory module, files in the circle, reason). A
/// circle found must lie within one listed here.
const CIRCLES_ALLOWED: &[(&str, &[&str], &str)] = &[];

/// One `.rs` file: its path and the module path it defines.
struct Source {
    path: PathBuf,
    module: Vec<String>,
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text of `s` without comments (string contents are kept: a `//` in
/// a string is rare in this crate and only hides the rest of its line).
fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_block = 0usize;
    for line in s.lines() {
        let mut rest = line;
        let mut kept = String::new();
        loop {
            if in_block > 0 {
                match rest.find("*/") {
                    Some(i) => {
                        in_block -= 1;
                        rest = &rest[i + 2..];
                    }
                    None => break,
                }
            } else {
                let line_c = rest.find("//");
                let block_c = rest.find("/*");
                match (line_c, block_c) {
                    (Some(l), b) if b.is_none_or(|b| l < b) => {
                        kept.push_str(&rest[..l]);
                        break;
                    }
                    (_, Some(b)) => {
                        kept.push_str(&rest[..b]);
                        in_block += 1;
                        rest = &rest[b + 2..];
                    }
                    _ => {
                        kept.push_str(rest);
                        break;
                    }
                }
            }
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

fn sources() -> Vec<Source> {
    let src = src_dir();
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(&src).unwrap();
            let mut module: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            let last = module.pop().unwrap();
            match last.as_str() {
                // The crate root and the binary: no module of their own.
                "lib.rs" | "main.rs" if module.is_empty() => return None,
                "mod.rs" => {}
                _ => module.push(last.trim_end_matches(".rs").to_string()),
            }
            let code = strip_comments(&std::fs::read_to_string(&path).unwrap());
            Some(Source { path, module, code })
        })
        .collect()
}

fn ident_at(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// Every absolute module path (as segments) that `code`, written in module
/// `module`, names through `crate::`, `super::` or `self::`.
fn paths_named(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            // Only a path's first segment: not `foo::super::`, not `xcrate::`.
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric()
                    || bytes[at - 1] == b'_'
                    || bytes[at - 1] == b':')
            {
                continue;
            }
            let mut base: Vec<String> = match start {
                "crate::" => Vec::new(),
                "super::" => module[..module.len().saturating_sub(1)].to_vec(),
                _ => module.to_vec(),
            };
            let mut rest = &code[from..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let mut seg_path = base.clone();
            loop {
                if let Some(group) = rest.strip_prefix('{') {
                    // A group: each element's first segment.
                    let end = group.find('}').unwrap_or(group.len());
                    for item in group[..end].split(',') {
                        let item = item.trim();
                        if let Some(id) = ident_at(item)
                            && id != "self"
                        {
                            let mut p = seg_path.clone();
                            p.push(id.to_string());
                            out.push(p);
                        }
                    }
                    break;
                }
                let Some(id) = ident_at(rest) else { break };
                seg_path.push(id.to_string());
                rest = &rest[id.len()..];
                match rest.strip_prefix("::") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            if seg_path.len() > base.len() {
                out.push(seg_path);
            }
        }
    }
    out
}

/// True when `path` (segments under `src/`) is a module: a file or a
/// directory.
fn is_module(path: &[String]) -> bool {
    if path.is_empty() {
        return false;
    }
    let mut p = src_dir();
    for s in path {
        p.push(s);
    }
    p.is_dir() || p.with_extension("rs").is_file()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(ms, _)| ms.contains(&module))
}

#[test]
fn raw_system_calls_only_in_sys() {
    let src = src_dir();
    let mut bad = Vec::new();
    let mut allowed_seen = BTreeSet::new();
    for s in sources() {
        let rel = Path::new("src").join(s.path.strip_prefix(&src).unwrap());
        let rel = rel.to_string_lossy().into_owned();
        if rel.starts_with("src/sys/") || !s.code.contains("libc::") {
            continue;
        }
        if LIBC_ALLOWED.iter().any(|(f, _)| *f == rel) {
            allowed_seen.insert(rel);
            continue;
        }
        let lines: Vec<String> = s
            .code
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains("libc::"))
            .map(|(n, l)| format!("  {rel}:{}: {}", n + 1, l.trim()))
            .collect();
        bad.push(lines.join("\n"));
    }
    // Also main.rs, which `sources` leaves out as a module.
    let main = strip_comments(&std::fs::read_to_string(src.join("main.rs")).unwrap());
    if main.contains("libc::") {
        bad.push("  src/main.rs".to_string());
    }
    assert!(
        bad.is_empty(),
        "raw system calls outside src/sys/ (wrap them in sys, with a SAFETY comment, \
         or add the file to LIBC_ALLOWED with a reason):\n{}",
        bad.join("\n")
    );
    for (f, _) in LIBC_ALLOWED {
        if !allowed_seen.contains(*f) {
            eprintln!("note: {f} no longer calls libc: remove it from LIBC_ALLOWED");
        }
    }
}

#[test]
fn every_top_level_module_has_a_layer() {
    let mut missing = BTreeSet::new();
    for s in sources() {
        if layer_of(&s.module[0]).is_none() {
            missing.insert(s.module[0].clone());
        }
    }
    assert!(
        missing.is_empty(),
        "modules missing from LAYERS in tests/layers.rs: {missing:?}"
    );
}

#[test]
fn no_module_imports_a_higher_layer() {
    let mut bad = BTreeMap::<(String, String), Vec<String>>::new();
    let src = src_dir();
    for s in sources() {
        let from = &s.module[0];
        let Some(lf) = layer_of(from) else { continue };
        for p in paths_named(&s.module, &s.code) {
            let to = &p[0];
            if to == from || !is_module(&p[..1]) {
                continue;
            }
            let Some(lt) = layer_of(to) else { continue };
            if lt <= lf || ARROWS_ALLOWED.iter().any(|(a, b, _)| a == from && b == to) {
                continue;
            }
            let rel = s.path.strip_prefix(&src).unwrap().display().to_string();
            let places = bad.entry((from.clone(), to.clone())).or_default();
            if !places.contains(&rel) {
                places.push(rel);
            }
        }
    }
    let msg: Vec<String> = bad
        .iter()
        .map(|((a, b), files)| format!("  {a} -> {b} (in {})", files.join(", ")))
        .collect();
    assert!(
        bad.is_empty(),
        "imports from a lower layer to a higher one (see LAYERS in tests/layers.rs):\n{}",
        msg.join("\n")
    );
}

/// The circles (strongly connected sets of two or more) of `graph`.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    // Reachability by depth-first search from every node: small graphs.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(n) = stack.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let nodes: BTreeSet<String> = graph
        .iter()
        .flat_map(|(a, bs)| std::iter::once(a.clone()).chain(bs.iter().cloned()))
        .collect();
    let reaches: BTreeMap<String, BTreeSet<String>> =
        nodes.iter().map(|n| (n.clone(), reach(n))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for n in &nodes {
        if out.iter().any(|c| c.contains(n)) {
            continue;
        }
        let mut c: BTreeSet<String> = reaches[n]
            .iter()
            .filter(|m| reaches[*m].contains(n))
            .cloned()
            .collect();
        c.insert(n.clone());
        if c.len() > 1 {
            out.push(c);
        }
    }
    out
}

#[test]
fn no_circles_between_the_files_of_a_module() {
    // For every directory module: which of its children use which.
    let mut graphs = BTreeMap::<Vec<String>, BTreeMap<String, BTreeSet<String>>>::new();
    for s in sources() {
        for p in paths_named(&s.module, &s.code) {
            let common = s.module.iter().zip(&p).take_while(|(a, b)| a == b).count();
            if common >= s.module.len() || common >= p.len() || common == 0 {
                // Into the file's own children, up to an ancestor's items,
                // or between top-level modules (the layers check those).
                continue;
            }
            if !is_module(&p[..=common]) {
                continue;
            }
            graphs
                .entry(p[..common].to_vec())
                .or_default()
                .entry(s.module[common].clone())
                .or_default()
                .insert(p[common].clone());
        }
    }
    let mut bad = Vec::new();
    for (dir, g) in &graphs {
        let dir = dir.join("::");
        for c in circles(g) {
            let known = CIRCLES_ALLOWED
                .iter()
                .any(|(d, files, _)| *d == dir && c.iter().all(|f| files.contains(&f.as_str())));
            if !known {
                bad.push(format!("  {dir}: {c:?}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "files of a module importing each other in a circle:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_path_reader_resolves_what_the_crate_writes() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let code = "use super::queue::{A, B};\nuse crate::sys::{self, errno};\n\
                let x = super::super::kernel::trace::X; xcrate::no; a::super::no;\n\
                use self::inner::Y; crate::metrics::now_ns();";
    let got = paths_named(&m("engine::reader"), code);
    for want in [
        "engine::queue::A",
        "engine::queue::B",
        "sys::errno",
        "kernel::trace::X",
        "engine::reader::inner::Y",
        "metrics::now_ns",
    ] {
        assert!(got.contains(&m(want)), "{want} not in {got:?}");
    }
    assert!(
        !got.iter().any(|p| p.last().is_some_and(|s| s == "no")),
        "{got:?}"
    );
    assert_eq!(
        strip_comments("a // crate::x\n/* crate::y */ b /// c\n"),
        "a \n b \n"
    );
}
