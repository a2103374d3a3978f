//! readpath's design, checked on every `cargo test` (and so by `.ci/run`):
//! which module may use which, and what of a module the others may name.
//!
//! The crate is a stack of modules, each with a purpose ([`LAYERS`], lowest
//! first); a module uses only modules below it, and only those [`USES`]
//! names for it: a new arrow between two modules is a decision, written
//! there with its reason, not an accident of a `use` line. What the others
//! may name of a module is its face ([`FACES`]): its submodules and items
//! named from outside it; a new one is a decision too. This test reads
//! every file under `src/` and fails when
//!
//! - a file outside `src/sys/` spells `libc::` (raw system calls live in
//!   `sys`, each `unsafe` block with its `SAFETY:` argument), unless
//!   [`LIBC_ALLOWED`] names it with a reason;
//! - a `crate::X` / `super::X` path in a module reaches a module of a
//!   higher layer, or one [`USES`] does not name for it (and an arrow
//!   [`USES`] names but no code draws is reported too: the design says
//!   what is, not what was);
//! - a path from outside a top-level module names something of it that
//!   [`FACES`] does not list (or lists and nobody names);
//! - a top-level module is missing from [`LAYERS`] or [`USES`];
//! - the files of one directory module import each other in a circle
//!   (for example `engine::reader` -> `engine::cached` -> `engine::reader`),
//!   following what a `mod.rs` re-exports (`pub use queue::WorkQueue`
//!   makes `super::WorkQueue` an arrow to `queue`), unless
//!   [`CIRCLES_ALLOWED`] lists it.
//!
//! Comments (`//`, `///`, `//!`) and a file's unit tests (`#[cfg(test)]
//! mod tests`) are not read, so doc links and tests may point anywhere. The check is textual: it resolves `crate::`, `super::` and
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

/// Which modules each module may use, with why: the design. Every arrow
/// points down [`LAYERS`]; an arrow the code draws must be here, and one
/// here must be drawn.
const USES: &[(&str, &[&str], &str)] = &[
    (
        "sys",
        &[],
        "the bottom: the kernel's interfaces, and nothing of readpath's",
    ),
    (
        "choice",
        &[],
        "named value sets are pure: every layer above spells its enums with them",
    ),
    (
        "crypto",
        &["sys"],
        "the kernel's own cipher through AF_ALG, as the oracle and a cipher choice",
    ),
    (
        "verity",
        &["sys"],
        "the kernel's SHA-256 through AF_ALG (the oracle), digest limits",
    ),
    (
        "settings",
        &["choice", "crypto", "sys", "verity"],
        "the values a setting takes: ciphers, hash kinds, this machine's CPUs",
    ),
    (
        "metrics",
        &["settings", "sys"],
        "a record names the CPUs it saw (settings' bound on CPU numbers) and reads threads' counters",
    ),
    (
        "dataset",
        &["crypto", "settings", "sys", "verity"],
        "the files: encrypted with the file key, their Merkle tree, written where the user's data dir is trusted",
    ),
    (
        "files",
        &["sys"],
        "outputs and inputs need the kernel's file types, FIFOs and signals",
    ),
    (
        "kernel",
        &["crypto", "dataset", "metrics", "settings", "sys"],
        "the real kernel target: the dataset's files and keys in its fscrypt, its tracepoints as records",
    ),
    (
        "engine",
        &[
            "crypto", "dataset", "kernel", "metrics", "settings", "sys", "verity",
        ],
        "runs a workload: the dataset through the model (crypto, verity) or the kernel target, recorded",
    ),
    (
        "scenario",
        &["choice", "engine", "files", "metrics", "settings", "sys"],
        "presets and demos are settings, scripted over the engine, named by the metric table; a mistyped name gets choice's did-you-mean, as a setting does",
    ),
    (
        "output",
        &[
            "crypto", "dataset", "engine", "files", "kernel", "metrics", "scenario", "settings",
            "sys", "verity",
        ],
        "reports, recordings and plots of runs: whatever a run was, said for people",
    ),
    (
        "bench",
        &["crypto", "kernel", "metrics", "sys", "verity"],
        "the primitives timed against the kernel's own (crypto_driver)",
    ),
    (
        "invocation",
        &["engine", "metrics", "output", "scenario", "settings", "sys"],
        "what a command and the remote agent share: settings loaded, a workload stopped and reported",
    ),
    (
        "lab",
        &[
            "bench", "dataset", "files", "kernel", "output", "scenario", "settings", "sys",
        ],
        "lab kernels and guests: the seeds' switches, the presets that judge them, crypto benches in a guest",
    ),
    (
        "remote",
        &[
            "engine",
            "invocation",
            "lab",
            "metrics",
            "output",
            "settings",
            "sys",
        ],
        "the engine on another machine (a lab guest among them), its records and reports sent back",
    ),
    (
        "tui",
        &["engine", "metrics", "output", "scenario", "settings", "sys"],
        "the explorer drives a workload and shows its records with the outputs' verdicts and formats",
    ),
    (
        "cli",
        &["output", "remote", "settings", "tui"],
        "the arguments' value parsers are the settings', outputs', transports' and the explorer's",
    ),
    (
        "commands",
        &[
            "bench",
            "cli",
            "crypto",
            "dataset",
            "engine",
            "files",
            "invocation",
            "kernel",
            "lab",
            "metrics",
            "output",
            "remote",
            "scenario",
            "settings",
            "sys",
            "tui",
            "verity",
        ],
        "the top: one file per command, each using what it runs",
    ),
];

/// What other modules may name of each module: its face (submodules and
/// items right under it; `*`: all of it). A module missing here has no
/// face: nothing outside it names it.
const FACES: &[(&str, &[&str])] = &[
    ("bench", &["CryptoReport", "crypto"]),
    ("choice", &["Choice", "closest", "did_you_mean"]),
    (
        "cli",
        &[
            "BenchWhat",
            "Cli",
            "Command",
            "ExperimentArgs",
            "Format",
            "KernelAction",
            "LabAction",
            "PlotFormat",
            "PresetsAction",
            "RemoteArgs",
            "SettingsArgs",
            "TraceArgs",
            "TuiArgs",
        ],
    ),
    (
        "crypto",
        &[
            "CipherKind",
            "ContentsCipher",
            "CryptoError",
            "DATA_UNIT_SIZE",
            "KERNEL_XTS",
            "derive_file_key",
        ],
    ),
    (
        "dataset",
        &[
            "DEFAULT_SEED",
            "Dataset",
            "DatasetError",
            "OpenOutcome",
            "Progress",
            "VERITY_BLOCK_SIZE",
            "Variant",
            "check_data_dir",
            "default_data_dir",
            "tree_first_unit",
        ],
    ),
    (
        "engine",
        &[
            "DataFs",
            "Engine",
            "EngineError",
            "EngineOptions",
            "Faults",
            "ReadPath",
            "Resolution",
            "RunTotals",
            "era",
            "memory",
            "pipeline",
            "reconcile",
            "resolve",
            "stages",
            "workload",
        ],
    ),
    (
        "files",
        &[
            "Expect",
            "InputError",
            "MAX_TEXT_INPUT",
            "Mode",
            "Named",
            "OutputError",
            "OutputFile",
            "OutputPath",
            "ReadError",
            "Stopped",
            "is_stopped",
            "newer_version",
            "open_input",
            "plain",
            "read_capped",
            "read_file",
            "stdout",
        ],
    ),
    (
        "invocation",
        &[
            "BadInput",
            "bad_input",
            "error_message",
            "load_settings",
            "load_settings_for",
            "preset_error",
            "say",
            "stop_and_drain",
        ],
    ),
    (
        "kernel",
        &[
            "ScratchFs",
            "TracefsMount",
            "block_device_path",
            "cgroup",
            "check_contents",
            "crypto_driver",
            "ensure_tracefs",
            "ext4_has_verity",
            "knobs",
            "measure_verity",
            "restore_all",
            "run_tool",
            "switches",
            "target",
            "trace",
        ],
    ),
    (
        "lab",
        &[
            "KernelCheckError",
            "Slowdown",
            "VmRemote",
            "VmSpecError",
            "build",
            "data_dir",
            "kernels",
            "set_data_dir",
            "spec_for",
            "store",
            "vm",
        ],
    ),
    (
        "metrics",
        &[
            "BUCKETS_PER_OCTAVE",
            "Better",
            "Counters",
            "CpuUsage",
            "Event",
            "IntervalRecord",
            "KernelQueueRecord",
            "KernelRecord",
            "LatencyBuckets",
            "METRICS",
            "Metric",
            "Notice",
            "POST_READ_QUEUES",
            "PageCacheStats",
            "Percentiles",
            "PoolRecord",
            "ReadersIowait",
            "Recorder",
            "Registry",
            "Role",
            "SPANS_PER_INTERVAL",
            "SPANS_PER_THREAD",
            "Span",
            "SpanKind",
            "Spread",
            "Stage",
            "StagePercentiles",
            "ThreadHandle",
            "ThreadSlot",
            "Timeline",
            "TimelineThread",
            "Unit",
            "WindowStats",
            "WorkerSched",
            "check",
            "empty_hist",
            "fill_columns",
            "format",
            "hit_pct",
            "median",
            "now_ns",
            "run_delay_ms_per_s",
            "set_recording",
            "set_tracing",
            "stamp",
            "table",
            "tracing",
            "window",
        ],
    ),
    (
        "output",
        &[
            "agreement",
            "experiment",
            "format",
            "heatmap",
            "lanes",
            "perfetto",
            "plot",
            "recording",
            "report",
            "sweep",
            "validate",
            "verdict",
        ],
    ),
    ("remote", &["agent", "client", "transport"]),
    ("scenario", &["demo", "preset"]),
    (
        "settings",
        &[
            "AffinityScope",
            "CacheDevice",
            "Completion",
            "DurationError",
            "EngineKind",
            "HashKind",
            "KEYS",
            "Kernel",
            "KernelEra",
            "Key",
            "MAX_CPU_NUMBER",
            "MAX_DURATION",
            "MAX_FILE_SIZE",
            "Pattern",
            "Scope",
            "Setting",
            "SettingChange",
            "Settings",
            "SettingsError",
            "SleepMode",
            "Step",
            "StepError",
            "Target",
            "VerifyMode",
            "WorkerMode",
            "Workers",
            "format_cpu_list",
            "format_size",
            "key_info",
            "line_col",
            "parse_duration",
            "parse_duration_in",
            "parse_size",
            "units",
        ],
    ),
    // Every wrapper of a system call is for the layers above.
    ("sys", &["*"]),
    (
        "tui",
        &[
            "DEFAULT_FPS",
            "Ending",
            "MAX_FPS",
            "NewTrace",
            "Outputs",
            "TuiOptions",
            "replay",
            "run",
            "run_with",
            "sweep_view",
            "text",
            "theme",
        ],
    ),
    // The two SHA-256s beside the tree are faces for `bench crypto`,
    // which measures each on its own.
    ("verity", &["merkle", "sha256_generic", "sha256x2"]),
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
            let mut code = strip_comments(&std::fs::read_to_string(&path).unwrap());
            // A file's unit tests (its last item) are not part of the design.
            if let Some(at) = code.find("#[cfg(test)]\nmod tests") {
                code.truncate(at);
            }
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

/// What each directory module's `mod.rs` re-exports from its own files:
/// (module, item name) -> the file (child module) that defines it.
fn reexports() -> BTreeMap<(Vec<String>, String), String> {
    let mut out = BTreeMap::new();
    for s in sources() {
        if !s.path.ends_with("mod.rs") {
            continue;
        }
        // Statements, not lines: a `pub use a::{\n B,\n C\n};` is one.
        for stmt in s.code.split(';') {
            let t = stmt.trim();
            let Some(at) = t.find("use ") else { continue };
            let head = &t[..at];
            if !(head.is_empty() || head.starts_with("pub")) {
                continue;
            }
            let path = t[at + 4..].trim().trim_start_matches("self::");
            let Some(child) = ident_at(path) else {
                continue;
            };
            let mut m = s.module.clone();
            m.push(child.to_string());
            if !is_module(&m) {
                continue;
            }
            let rest = &path[child.len()..];
            let names: Vec<&str> = match (rest.find('{'), rest.rfind('}')) {
                (Some(a), Some(b)) => rest[a + 1..b].split(',').collect(),
                _ => vec![rest.rsplit("::").next().unwrap_or("")],
            };
            for n in names {
                let n = n.trim();
                // `A as B` is named B; a nested path's last segment.
                let n = n.rsplit(" as ").next().unwrap_or(n).trim();
                let n = n.rsplit("::").next().unwrap_or(n).trim();
                if let Some(id) = ident_at(n)
                    && id != "self"
                    && id != "*"
                {
                    out.insert((s.module.clone(), id.to_string()), child.to_string());
                }
            }
        }
    }
    out
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
    let reexports = reexports();
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
            // An item of the parent's `mod.rs` that one of its files
            // defines and the `mod.rs` re-exports is an arrow to that file.
            let to = if is_module(&p[..=common]) {
                p[common].clone()
            } else if let Some(f) = reexports.get(&(p[..common].to_vec(), p[common].clone())) {
                f.clone()
            } else {
                continue;
            };
            if to == s.module[common] {
                continue;
            }
            graphs
                .entry(p[..common].to_vec())
                .or_default()
                .entry(s.module[common].clone())
                .or_default()
                .insert(to);
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

/// The arrows between top-level modules the code draws: from -> to, with a
/// file that draws each.
fn arrows() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = src_dir();
    let mut out = BTreeMap::<String, BTreeMap<String, String>>::new();
    for s in sources() {
        let from = &s.module[0];
        for p in paths_named(&s.module, &s.code) {
            let to = &p[0];
            if to == from || !is_module(&p[..1]) {
                continue;
            }
            let rel = s.path.strip_prefix(&src).unwrap().display().to_string();
            out.entry(from.clone())
                .or_default()
                .entry(to.clone())
                .or_insert(rel);
        }
    }
    out
}

/// What the code names of each top-level module from outside it: module
/// -> name right under it -> a file that names it.
fn named_from_outside() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = src_dir();
    let mut out = BTreeMap::<String, BTreeMap<String, String>>::new();
    for s in sources() {
        for p in paths_named(&s.module, &s.code) {
            if p[0] == s.module[0] || p.len() < 2 || !is_module(&p[..1]) {
                continue;
            }
            let rel = s.path.strip_prefix(&src).unwrap().display().to_string();
            out.entry(p[0].clone())
                .or_default()
                .entry(p[1].clone())
                .or_insert(rel);
        }
    }
    out
}

#[test]
fn every_arrow_between_modules_is_in_the_design() {
    let drawn = arrows();
    let mut problems = Vec::new();
    for (from, tos) in &drawn {
        let allowed = USES.iter().find(|(m, _, _)| m == from);
        let Some((_, allowed, _)) = allowed else {
            problems.push(format!(
                "  {from} is not in USES (it uses {:?})",
                tos.keys().collect::<Vec<_>>()
            ));
            continue;
        };
        for (to, file) in tos {
            if !allowed.contains(&to.as_str()) {
                problems.push(format!(
                    "  {from} -> {to} (in {file}) is not in USES: a new arrow is a decision; \
                     add it with its reason, or name something of a module {from} may use"
                ));
            }
        }
    }
    for (from, tos, _) in USES {
        for to in *tos {
            if !drawn.get(*from).is_some_and(|d| d.contains_key(*to)) {
                problems.push(format!(
                    "  USES says {from} -> {to}, but no code of {from} names {to}: remove it"
                ));
            }
            let (lf, lt) = (layer_of(from), layer_of(to));
            if lt > lf {
                problems.push(format!("  USES says {from} -> {to}, up the layers"));
            }
        }
    }
    for s in sources() {
        if !USES.iter().any(|(m, _, _)| *m == s.module[0]) && !drawn.contains_key(&s.module[0]) {
            problems.push(format!("  {} is not in USES", s.module[0]));
        }
    }
    problems.dedup();
    assert!(
        problems.is_empty(),
        "tests/layers.rs USES:\n{}",
        problems.join("\n")
    );
}

#[test]
fn what_others_name_of_a_module_is_its_face() {
    let named = named_from_outside();
    let mut problems = Vec::new();
    for (m, names) in &named {
        let face = FACES.iter().find(|(f, _)| f == m).map_or(&[][..], |f| f.1);
        for (name, file) in names {
            if !face.contains(&name.as_str()) && !face.contains(&"*") {
                problems.push(format!(
                    "  {m}::{name} (named in {file}) is not in {m}'s face (FACES): \
                     widening a module's face is a decision"
                ));
            }
        }
    }
    for (m, face) in FACES {
        for name in face.iter().filter(|n| **n != "*") {
            if !named.get(*m).is_some_and(|n| n.contains_key(*name)) {
                problems.push(format!(
                    "  FACES lists {m}::{name}, but nothing outside {m} names it: remove it"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "tests/layers.rs FACES:\n{}",
        problems.join("\n")
    );
}

/// Prints the design as the code draws it today (`cargo test --test layers
/// -- --ignored --nocapture print_the_design`), to start USES and FACES
/// from; the checks above are what hold it.
#[test]
#[ignore]
fn print_the_design() {
    for (from, tos) in arrows() {
        println!(
            "    (\"{from}\", &{:?}, \"\"),",
            tos.keys().collect::<Vec<_>>()
        );
    }
    for (m, names) in named_from_outside() {
        println!("    (\"{m}\", &{:?}),", names.keys().collect::<Vec<_>>());
    }
}
