//! Helpers for readpath's own tests (unit and `tests/*.rs`), kept out of
//! `sys`'s working surface: nothing in a command calls them.

/// For tests that need an outside tool (the `fsverity` oracle, `tmux`,
/// `openssl`, `rsvg-convert`): true when it is on `PATH`. When it is not,
/// under CI (`CI=true`, as `.ci/run` sets: it installs every tool) this
/// panics, so a missing tool fails; elsewhere it prints a visible skip
/// naming the tool and its Debian package, and the test returns early.
pub fn require_tool(test: &str, name: &str, package: &str) -> bool {
    if super::tool_on_path(name) {
        return true;
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "{test}: `{name}` is not on PATH, and .ci/run installs it (Debian package {package})"
    );
    eprintln!("SKIPPED {test}: needs `{name}` (apt-get install {package})");
    false
}

/// The machine the explorer's and the sweep report's fixtures describe:
/// io_uring with NO_IOWAIT, AES and SHA instructions, schedstat, and high
/// priority refused (the reason the explorer greys `h` with).
pub fn fixture_features() -> super::Features {
    super::Features {
        io_uring: true,
        no_iowait: true,
        uring_defer_taskrun: true,
        kernel_affinity_scopes: true,
        aes_instructions: true,
        sha_instructions: true,
        schedstat: true,
        highpri: false,
        highpri_reason: Some("needs CAP_SYS_NICE or RLIMIT_NICE >= 40".into()),
        ..super::Features::default()
    }
}
