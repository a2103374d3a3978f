//! The kernel lab end to end: Debian's 6.1 kernel (fs-verity, fscrypt,
//! AF_ALG) fetched into a fresh data dir, booted under QEMU with readpath
//! inside, and the guest's kernel as the oracle: its fscrypt ciphertext
//! and its FS_IOC_MEASURE_VERITY digest equal readpath's (`kernel check`
//! there), and a kernel-target run there reads through its own fscrypt and
//! fs-verity (both queues traced), its page cache held by a cgroup v2
//! memory limit, reached
//! through the agent protocol like any target; and the model there pays
//! the kernel's own xts(aes) and sha256 through AF_ALG, every block
//! verified.
//!
//! Every guest is asked for TCG (`:accel=tcg`): the KVM probe a guest
//! without `accel=` gets where /dev/kvm opens takes up to 15 s on
//! machines where nested guests hang, as this project's do.
//!
//! Needs qemu-system-x86_64, a static busybox, apt-get with a Debian 12
//! mirror, and mkfs.ext4; `.ci/run` installs them, so under CI their
//! absence fails the test.

#[path = "common/lab.rs"]
mod lab;
#[path = "common/skip.rs"]
mod skip;

use lab::{ok, readpath};

/// `readpath run` of `seconds` in a TCG guest of Debian's 6.1 with
/// `sets` (`key=value`): its JSON summary and its stderr.
fn guest_run(data: &std::path::Path, seconds: &str, sets: &[&str]) -> (serde_json::Value, String) {
    let mut c = readpath(data);
    c.args([
        "run",
        "--remote",
        "vm:debian-6.1:accel=tcg",
        "--duration",
        seconds,
    ]);
    c.args(["--set", "workload.file_size=16M", "--format", "json"]);
    for kv in sets {
        c.args(["--set", kv]);
    }
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    (serde_json::from_slice(&o.stdout).unwrap(), err)
}

use lab::missing;

#[test]
fn a_lab_guest_runs_the_kernels_own_fscrypt_and_fs_verity() {
    let test = "a_lab_guest_runs_the_kernels_own_fscrypt_and_fs_verity";
    if let Some(what) = missing() {
        skip::skip(test, &format!("needs {what}"), true);
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let o = readpath(data.path())
        .args(["lab", "fetch", "debian-6.1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        // No mirror to fetch from is a machine without the package.
        skip::skip(test, &format!("lab fetch debian-6.1 failed: {err}"), true);
        return;
    }
    let o = readpath(data.path())
        .args(["lab", "kernels"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&o.stdout);
    assert!(
        listed.contains("debian-6.1") && listed.contains("Linux 6.1.0-"),
        "{listed}"
    );

    // The kernel as the oracle: its ciphertext and its fs-verity digest.
    let out = ok(
        data.path(),
        &[
            "lab",
            "run",
            "vm:debian-6.1:accel=tcg",
            "--",
            "kernel",
            "check",
            "--dir",
            "/lab/kernel",
            "--size",
            "1M",
        ],
    );
    assert!(
        out.contains("256 of 256 data units equal to readpath's") && out.contains(": MATCH"),
        "{out}"
    );
    let verity = out
        .lines()
        .find(|l| l.contains("fs-verity digest (FS_IOC_MEASURE_VERITY"))
        .unwrap_or_else(|| panic!("no fs-verity line: {out}"));
    assert!(verity.ends_with("MATCH"), "{verity}");

    // The initramfs is not trusted by its name: one replaced under it
    // (here by an /init that says the line ended with 0 without running
    // it, which `lab run` took for success) fails its SHA-256 check and
    // is made anew, so the line runs.
    let lab_dir = data.path().join("lab");
    let cpio = std::fs::read_dir(&lab_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("initramfs-debian-6.1-") && n.ends_with(".cpio")
        })
        .expect("the guest's initramfs in the lab");
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .find(|b| readpath::lab::vm::elf_interp(b) == Some(None))
        .expect("a static busybox");
    let mut forged = readpath::lab::initramfs::Cpio::new();
    forged.dir("dev");
    forged.dir("bin");
    forged.char_dev("dev/console", 0o600, 5, 1);
    forged.file("bin/busybox", 0o755, &busybox);
    forged.file(
        "init",
        0o755,
        b"#!/bin/busybox sh\n/bin/busybox echo 'readpath-lab: ended (0)'\n/bin/busybox poweroff -f\n",
    );
    let forged = forged.finish();
    std::fs::write(&cpio, &forged).unwrap();
    let out = ok(
        data.path(),
        &["lab", "run", "vm:debian-6.1:accel=tcg", "--", "--version"],
    );
    assert!(
        out.starts_with("readpath "),
        "the line did not run: {out:?}"
    );
    assert_ne!(std::fs::read(&cpio).unwrap(), forged, "made anew");

    // A kernel-target run in the guest, through the agent protocol.
    let (j, err) = guest_run(data.path(), "2s", &["workload.target=kernel"]);
    assert_eq!(
        j["read_path"],
        "the running kernel's read path (its own fscrypt and fs-verity)"
    );
    assert!(j["reads"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(j["io_errors"].as_u64(), Some(0), "{j}");
    // The guest's cgroup v2 held the file's cache to cache.size (a
    // quarter of the file, 4M, at least 4224K: the readahead window and a
    // margin), and the kernel's misses were counted by its tracepoint.
    let notices = j["notices"].to_string();
    assert!(
        notices.contains("readpath runs in memory cgroup /sys/fs/cgroup/readpath-"),
        "{notices}"
    );
    let held = j["page_cache"]["size_bytes"].as_u64().unwrap();
    assert!(
        held > 0 && held <= 5 << 20,
        "{held} bytes of the file cached: {j}"
    );
    assert!(j["page_cache"]["misses"].as_u64().unwrap() > 0, "{j}");
    // The guest kernel's own post-read queues were traced: fscrypt's
    // (unbound) and fs-verity's (bound since the 2023 change) ran items.
    let wq = &j["kernel"]["workqueues"];
    for q in ["fscrypt_read_queue", "fsverity_read_queue"] {
        assert!(wq[q]["items"].as_u64().unwrap_or(0) > 0, "{q}: {wq}");
    }
    let machine = j["machine"].to_string();
    assert!(machine.contains("6.1.0-"), "{machine}");
    assert!(
        err.contains("under QEMU (tcg)") && err.contains("vm:debian-6.1"),
        "{err}"
    );
    // The model paying the guest kernel's own crypto through AF_ALG
    // (`pipeline.cipher = kernel`, `hash = kernel`): every block it
    // decrypted that way verified against the dataset's Merkle tree, so
    // the kernel's xts(aes) gave readpath's plaintext bit for bit.
    let (j, _) = guest_run(
        data.path(),
        "1s",
        &["pipeline.cipher=kernel", "pipeline.hash=kernel"],
    );
    assert_eq!(
        j["effective_settings"]["pipeline"]["cipher"], "kernel",
        "{}",
        j["effective_settings"]
    );
    assert_eq!(j["effective_settings"]["pipeline"]["hash"], "kernel");
    assert_eq!(j["verity_failures"].as_u64(), Some(0), "{j}");
    assert!(j["reads"].as_u64().unwrap() > 0, "{j}");
    // Nothing of the guest is left: QEMU ended with the run.
    let qemu_left = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| {
            String::from_utf8_lossy(&c).contains(&data.path().display().to_string())
                && String::from_utf8_lossy(&c).contains("qemu-system")
        });
    assert!(!qemu_left, "a QEMU of this test is still running");
}
