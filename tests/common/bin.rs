//! The binary as a test runs it: `readpath --data-dir DIR ARGS...`, its
//! output kept, its stderr as text, and what it said of a trace it wrote.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `readpath --data-dir data_dir args...` to its end.
#[allow(dead_code)]
pub fn readpath(args: &[&str], data_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .expect("run readpath")
}

/// Its stderr, as text.
#[allow(dead_code)]
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The work items a `--trace` wrote, as its stderr says them
/// (`readpath: trace FILE: N work items, ...`).
#[allow(dead_code)]
pub fn traced_items(stderr: &str) -> u64 {
    stderr
        .split("readpath: trace ")
        .nth(1)
        .and_then(|l| l.split(": ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no trace line: {stderr}"))
}
