//! The binary as a test runs it: `readpath --data-dir DIR ARGS...`, its
//! output kept, and its stderr as text.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `readpath --data-dir data_dir args...` to its end.
pub fn readpath(args: &[&str], data_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .expect("run readpath")
}

/// Its stderr, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
