//! What the lab's end-to-end tests need of this machine: QEMU, a static
//! busybox, apt-get with a Debian mirror and mkfs.ext4 (`.ci/run`
//! installs them).

/// What is missing for a lab guest here, if anything.
pub fn missing() -> Option<String> {
    let static_busybox = ["/bin/busybox", "/usr/bin/busybox"].iter().any(|p| {
        std::fs::read(p)
            .ok()
            .and_then(|b| readpath::lab::vm::elf_interp(&b))
            == Some(None)
    });
    for (ok, what) in [
        (
            readpath::sys::tool_on_path("qemu-system-x86_64"),
            "qemu-system-x86_64 (Debian's qemu-system-x86)",
        ),
        (static_busybox, "a static busybox (Debian's busybox-static)"),
        (readpath::sys::tool_on_path("apt-get"), "apt-get"),
        (readpath::sys::tool_on_path("mkfs.ext4"), "mkfs.ext4"),
    ] {
        if !ok {
            return Some(what.to_string());
        }
    }
    None
}

/// readpath with data dir `data`.
#[allow(dead_code)]
pub fn readpath(data: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_readpath"));
    c.arg("--data-dir").arg(data);
    c
}

/// readpath with data dir `data` and `args`, which must succeed: its
/// stdout (a failure shows stdout and stderr).
#[allow(dead_code)]
pub fn ok(data: &std::path::Path, args: &[&str]) -> String {
    let o = readpath(data).args(args).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "readpath {args:?}: {out}\n{err}");
    out
}
