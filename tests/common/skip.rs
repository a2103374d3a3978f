//! How an end-to-end test skips: outside CI a missing precondition is a
//! skip that says why; under CI (`CI=true`, as `.ci/run` sets) a
//! precondition `.ci/run` provides (the tools it installs, io_uring switched
//! on, root, O_DIRECT on the target directory) is a failure, so a CI run
//! never passes by skipping what it was meant to test.

/// Skips `test` for `why`, or fails it under CI when `ci_provides`.
pub fn skip(test: &str, why: &str, ci_provides: bool) {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if ci && ci_provides {
        panic!("{test}: {why}; .ci/run provides this, so under CI it is a failure, not a skip");
    }
    eprintln!("SKIP {test}: {why}");
}

/// Whether this process runs as root (what `.ci/run` runs as on its machine).
#[allow(dead_code)]
pub fn root() -> bool {
    readpath::sys::trust::euid() == 0
}
