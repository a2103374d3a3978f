//! What the end-to-end test binaries share: one small real dataset per
//! binary and settings that read it.

use std::path::PathBuf;
use std::sync::OnceLock;

use readpath::settings::Settings;

/// The dataset's size.
pub const FILE_SIZE: &str = "4M";

/// One small dataset shared by the tests of a binary.
pub fn data_dir() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::Builder::new()
            .prefix("readpath-e2e")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let mut quiet = |_: u64, _: u64| {};
        readpath::dataset::Dataset::open_or_prepare(d.path(), 4 << 20, b"", &mut quiet).unwrap();
        d
    })
    .path()
    .to_path_buf()
}

/// The defaults on the shared dataset, with `section.key=value` overrides.
pub fn settings(overrides: &[&str]) -> Settings {
    let mut s = Settings::default();
    s.set("workload.file_size", FILE_SIZE).unwrap();
    for o in overrides {
        s.apply_override(o).unwrap();
    }
    s
}
