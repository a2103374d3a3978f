//! `cache.device = "target"`: the model's bios read the blocks the kernel
//! target's file occupies on its block device (FIEMAP, O_DIRECT), the
//! kernel's own ciphertext, keyed with that file's nonce. Every block the
//! model reads is verified against the dataset's Merkle tree, so a bio
//! that read any other block (readpath's own file, another offset of the
//! device) or decrypted with any other key fails verification: a run with
//! no failure is the proof. Needs root, a loop device and mkfs.ext4;
//! skips, saying which is missing, elsewhere.

#[path = "common/skip.rs"]
mod skip;

#[path = "common/kernel.rs"]
mod probe;

use std::process::Command;

fn run(data: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "--data-dir",
        data.to_str().unwrap(),
        "run",
        "--set",
        "cache.device=target",
        "--set",
        "workload.file_size=16M",
        "--set",
        "cache.cold_start=true",
        "--duration",
        "2s",
        "--format",
        "json",
    ];
    for e in extra {
        args.extend(["--set", e]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(&args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn the_model_reads_and_verifies_the_kernel_files_own_blocks() {
    if let Some(why) = probe::missing() {
        skip::skip(
            "the_model_reads_and_verifies_the_kernel_files_own_blocks",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let data = tempfile::tempdir().unwrap();
    for extra in [
        &["workload.pattern=sequential", "workload.block_size=128K"][..],
        &["workload.pattern=random", "workload.completion=irq"][..],
        &["pipeline.decrypt=false"][..],
    ] {
        let j = run(data.path(), extra);
        assert_eq!(
            j["effective_settings"]["cache"]["device"], "target",
            "{extra:?}"
        );
        assert_eq!(j["effective_settings"]["workload"]["target"], "model");
        let notices = j["notices"].to_string();
        assert!(
            notices.contains("cache.device = target: bios read") && notices.contains("/dev/loop"),
            "{notices}"
        );
        assert!(j["reads"].as_u64().unwrap() > 0, "{extra:?}: {j}");
        assert_eq!(j["io_errors"], 0, "{extra:?}");
        assert_eq!(j["verity_failures"], 0, "{extra:?}: {notices}");
        let pc = &j["page_cache"];
        assert!(pc["bios"].as_u64().unwrap() > 0, "{pc}");
        let verified = j["verified_blocks"].as_u64().unwrap();
        assert!(verified >= pc["misses"].as_u64().unwrap(), "{j}");
        if extra[0] != "pipeline.decrypt=false" {
            assert_eq!(j["decrypted_units"], j["verified_blocks"], "{extra:?}");
        }
        // A model run: no kernel section.
        assert!(j.get("kernel").is_none(), "{j}");
    }
    assert!(
        readpath::sys::trust::mounts()
            .iter()
            .all(|m| !m.point.starts_with(data.path())),
        "the image is unmounted after the run"
    );
}
