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
#[path = "common/serial.rs"]
mod serial;
use serial::serial;

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
    let _g = serial();
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

/// `readpath validate` of one round of 1 s on a 16M file, cold, with
/// `extra` arguments: its JSON.
fn validate_json(data: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["--data-dir", data.to_str().unwrap(), "validate"])
        .args(["--rounds", "1", "--duration", "1s", "--warmup", "200ms"])
        .args([
            "--set",
            "workload.file_size=16M",
            "--set",
            "cache.cold_start=true",
        ])
        .args(extra)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A validate report's variants, in order (`model`, `kernel`).
fn variants(j: &serde_json::Value) -> Vec<&str> {
    j["compare"]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["value"].as_str().unwrap())
        .collect()
}

/// A validate report's row of `metric`.
fn row<'a>(j: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no {metric} row"))
}

/// `readpath validate` on a small configuration: both targets ran, every
/// measured metric has a ratio and a verdict computed from the two
/// medians, the adjustments are named, and nothing is left mounted.
#[test]
fn validate_gives_a_ratio_and_a_verdict_per_metric() {
    let _g = serial();
    if let Some(why) = probe::missing() {
        skip::skip(
            "validate_gives_a_ratio_and_a_verdict_per_metric",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let j = validate_json(data.path(), &[]);
    let adjusted = j["adjustments"].to_string();
    assert!(adjusted.contains("cache.device = target"), "{adjusted}");
    // The kernel's headline figures from rounds of their own, untraced.
    assert!(adjusted.contains("kernel.trace = false"), "{adjusted}");
    assert_eq!(
        variants(&j),
        ["model", "kernel", "kernel (kernel.trace = false)"]
    );
    let rows = j["rows"].as_array().unwrap();
    let mut judged = 0;
    for r in rows {
        let (m, k) = (
            r["model"]["median"].as_f64(),
            r["kernel"]["median"].as_f64(),
        );
        match r["verdict"].as_str().unwrap() {
            "within" | "outside" if r["ratio"].is_f64() => {
                judged += 1;
                let ratio = r["ratio"].as_f64().unwrap();
                assert!((ratio - m.unwrap() / k.unwrap()).abs() < 1e-9, "{r}");
                let within = (ratio - 1.0).abs() <= 0.15 + 1e-12;
                assert_eq!(r["verdict"] == "within", within, "{r}");
            }
            "outside" => assert_eq!(k, Some(0.0), "{r}"),
            "unmeasured" => assert!(r["note"].is_string(), "{r}"),
            v => panic!("verdict {v}: {r}"),
        }
    }
    assert_eq!(
        j["within"].as_u64().unwrap() + j["outside"].as_u64().unwrap(),
        rows.iter().filter(|r| r["verdict"] != "unmeasured").count() as u64
    );
    // Throughput, IOPS and latency are measured on both sides.
    assert!(judged >= 5, "{rows:?}");
    assert_eq!(j["sides"], serde_json::json!(["model", "kernel"]));
    // The kernel against itself (an A/A run): two kernel runs, named so,
    // every figure the kernel measures judged.
    let aa = validate_json(data.path(), &["--pair", "kernel,kernel"]);
    assert_eq!(aa["sides"], serde_json::json!(["kernel 1st", "kernel 2nd"]));
    let values = variants(&aa);
    let untraced = "kernel (kernel.trace = false)";
    assert_eq!(values, ["kernel", "kernel", untraced, untraced]);
    let iops = row(&aa, "iops");
    assert!(iops["ratio"].is_f64(), "{iops}");
    assert!(
        readpath::sys::trust::mounts()
            .iter()
            .all(|m| !m.point.starts_with(data.path())),
    );
}

/// `validate --remote`: the same validation run by the target's agent (here
/// this machine's, behind a fake `ssh` that answers as a target with this
/// readpath on it), made like for like by the features the target's header
/// reports: its kernel's lack of fs-verity turns verification off on both
/// sides, and both variants ran there.
#[test]
fn validate_runs_on_the_target_made_like_for_like_by_its_features() {
    let _g = serial();
    if let Some(why) = probe::missing() {
        skip::skip(
            "validate_runs_on_the_target_made_like_for_like_by_its_features",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_readpath");
    let sum = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(exe).unwrap()))
    };
    let ssh = tmp.path().join("fake-ssh");
    std::fs::write(
        &ssh,
        format!(
            "#!/bin/sh\nfor last; do :; done\ncase \"$last\" in\n\
             \"uname -m\") echo {arch} ;;\n*--version*) echo 'readpath {v}' ;;\n\
             sha256sum*) echo '{sum}  {exe}' ;;\n\
             *agent*) exec {exe} agent --data-dir {data} ;;\n*) exit 3 ;;\nesac\n",
            arch = std::env::consts::ARCH,
            v = env!("CARGO_PKG_VERSION"),
            data = tmp.path().join("data").display(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new(exe)
        .args(["validate", "--remote", "ssh:target"])
        .args(["--rounds", "1", "--duration", "1s", "--warmup", "200ms"])
        .args([
            "--set",
            "workload.file_size=16M",
            "--set",
            "cache.cold_start=true",
        ])
        .args(["--format", "json"])
        .env("READPATH_SSH_COMMAND", &ssh)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let adjusted = j["adjustments"].to_string();
    assert!(adjusted.contains("cache.device = target"), "{adjusted}");
    let verity = readpath::sys::probe_features().kernel_verity;
    assert_eq!(
        adjusted.contains("pipeline.verity = false"),
        !verity,
        "{adjusted}"
    );
    let values = variants(&j);
    assert_eq!(values, ["model", "kernel", "kernel (kernel.trace = false)"]);
    let iops = row(&j, "iops");
    assert!(iops["ratio"].as_f64().is_some_and(|r| r > 0.0), "{iops}");
    // Its dataset is the target's, in the agent's data dir.
    assert!(tmp.path().join("data/dataset-16777216").is_dir());
}

/// The kernel target's O_DIRECT reads bypass its page cache: no hit or
/// miss is counted for them (they once counted every page a hit, as the
/// tracepoint saw no page added).
#[test]
fn a_kernel_runs_direct_reads_count_no_page_hits() {
    let _g = serial();
    if let Some(why) = probe::missing() {
        skip::skip(
            "a_kernel_runs_direct_reads_count_no_page_hits",
            &format!("needs {why}"),
            skip::root(),
        );
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["--data-dir", data.path().to_str().unwrap(), "run"])
        .args([
            "--set",
            "workload.target=kernel",
            "--set",
            "workload.direct=true",
        ])
        .args([
            "--set",
            "workload.file_size=16M",
            "--duration",
            "1s",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["reads"].as_u64().unwrap() > 0, "{j}");
    assert!(j.get("page_cache").is_none(), "{}", j["page_cache"]);
}
