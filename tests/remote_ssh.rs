//! `--remote ssh:` end to end, over a real sshd on 127.0.0.1 started by the
//! test (tests/common/sshd.rs): readpath checks the target (`uname -m`, its
//! readpath version), copies itself there by scp, runs the workload through
//! `readpath agent` and prints the target's summary (every read good, the
//! target's machine line); killing the ssh client mid-run leaves no agent
//! running on the target and ends the run with what arrived, exit 1. Over
//! the same real sshd and its login shell: remote paths with `$()`,
//! backticks, quotes and spaces are taken literally (with `scp -O`, whose
//! legacy protocol hands its path to that shell, too), and a target
//! without an SFTP server gets the copy through `ssh 'cat > TMP'`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)]
#[path = "common/sshd.rs"]
mod sshd;

fn readpath(s: &sshd::Sshd, remote_dir: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_readpath"));
    c.env("READPATH_SSH_COMMAND", &s.ssh_command)
        .env("READPATH_SCP_COMMAND", &s.scp_command)
        .args(["run", "--remote", &s.spec(), "--remote-dir"])
        .arg(remote_dir.join("bin"))
        .arg("--remote-data-dir")
        .arg(remote_dir.join("data"))
        .args(["--set", "workload.file_size=16M"]);
    c
}

/// Processes whose command line contains `needle`.
fn pids_with(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) && pid != std::process::id() {
            out.push(pid);
        }
    }
    out
}

#[test]
fn run_remote_over_ssh_copies_itself_and_reads_every_block_good() {
    let Some(s) = sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let o = readpath(&s, tmp.path())
        .args(["--duration", "3s", "--format", "json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("copied readpath"), "{err}");
    // The binary is on the target now, executable.
    assert!(tmp.path().join("bin/readpath").is_file());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["reads"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["verity_failures"].as_u64(), Some(0));
    assert!(v["decrypted_units"].as_u64().unwrap() > 0);
    assert!(v["verified_blocks"].as_u64().unwrap() > 0);
    // The target's machine (here the same host) and its dataset.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(v["machine"]["hostname"].as_str(), Some(host.trim()));
    assert!(tmp.path().join("data/dataset-16777216").is_dir());
    // A second run finds the same version there and copies nothing; the
    // text summary ends with the target's machine line.
    let o = readpath(&s, tmp.path())
        .args(["--duration", "1s"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("there") && !err.contains("copied"), "{err}");
    assert!(
        out.contains(&format!("machine: {}: Linux", host.trim())),
        "{out}"
    );
    assert!(out.contains(" 0 failures"), "{out}");
}

#[test]
fn killing_the_ssh_client_leaves_no_agent_on_the_target() {
    let Some(s) = sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let agent = format!("{}/readpath agent", tmp.path().join("bin").display());
    let rec = tmp.path().join("run.jsonl");
    // A first short run copies the binary and prepares the dataset, so the
    // second is reading when its ssh is killed.
    let o = readpath(&s, tmp.path())
        .args(["--duration", "1s"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let client = readpath(&s, tmp.path())
        .args(["--duration", "120s", "--record"])
        .arg(&rec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the agent to run on the target.
    let t = Instant::now();
    while pids_with(&agent).is_empty() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!pids_with(&agent).is_empty(), "the agent never started");
    std::thread::sleep(Duration::from_secs(2));
    // Kill the ssh client (the one carrying the agent), not readpath.
    let ssh: Vec<u32> = pids_with(&format!("-p {} ", s.port))
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("agent"))
                .unwrap_or(false)
                && std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "ssh")
        })
        .collect();
    assert_eq!(ssh.len(), 1, "the ssh client: {ssh:?}");
    // SAFETY: kill(2) takes two integers and touches no memory of ours;
    // the PID is the ssh client found above.
    unsafe { libc_kill(ssh[0] as i32, 9) };
    // The agent goes away by itself, and the client ends with what it has.
    let t = Instant::now();
    while !pids_with(&agent).is_empty() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(pids_with(&agent).is_empty(), "an agent is left running");
    let o = client.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("connection to the target was lost") && err.contains("intervals received"),
        "{err}"
    );
    // What arrived is recorded, readable.
    let r = readpath::output::recording::read(&rec).unwrap();
    assert!(!r.records.is_empty());
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn compare_hosts_runs_here_and_there_at_once_in_one_table() {
    let Some(s) = sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .env("READPATH_SSH_COMMAND", &s.ssh_command)
        .env("READPATH_SCP_COMMAND", &s.scp_command)
        .arg("--data-dir")
        .arg(tmp.path().join("local"))
        .args(["compare", "--hosts", &format!("local,{}", s.spec())])
        .arg("--remote-dir")
        .arg(tmp.path().join("bin"))
        .arg("--remote-data-dir")
        .arg(tmp.path().join("data"))
        .args([
            "--set",
            "workload.file_size=16M",
            "--vary",
            "workers.mode=unbound,bound",
            "--duration",
            "1s",
            "--rounds",
            "1",
            "--warmup",
            "0s",
            "--format",
            "json",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let hosts = v["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2, "{v}");
    assert_eq!(hosts[0]["host"], "local");
    assert_eq!(hosts[1]["host"].as_str(), Some(s.spec().as_str()));
    for h in hosts {
        let r = &h["report"];
        assert_eq!(r["variants"].as_array().unwrap().len(), 2, "{h}");
        for var in r["variants"].as_array().unwrap() {
            assert_eq!(var["failed_reads"].as_u64(), Some(0), "{var}");
        }
        assert!(!r["machine"]["hostname"].as_str().unwrap().is_empty());
    }
}

#[test]
fn shell_characters_in_remote_paths_are_literal_over_ssh_and_legacy_scp() {
    let Some(s) = sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let canary = tmp.path().join("canary");
    let c = canary.display();
    let bin = format!("{}/bin $(touch {c}) `touch {c}` 'q'", tmp.path().display());
    let data = format!("{}/data;touch {c}", tmp.path().display());
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .env("READPATH_SSH_COMMAND", &s.ssh_command)
        // The legacy protocol, which would hand its path to the login
        // shell: such a path never goes to scp (it is streamed by ssh).
        .env("READPATH_SCP_COMMAND", format!("{} -O", s.scp_command))
        .args(["run", "--remote", &s.spec(), "--duration", "1s"])
        .arg(format!("--remote-dir={bin}"))
        .arg(format!("--remote-data-dir={data}"))
        .args(["--set", "workload.file_size=4M"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!canary.exists(), "a remote path ran as shell");
    assert!(std::path::Path::new(&format!("{bin}/readpath")).is_file());
    assert!(std::path::Path::new(&format!("{data}/dataset-4194304")).is_dir());
    assert!(err.contains("SHA-256 checked"), "{err}");
}

#[test]
fn a_target_without_sftp_gets_the_copy_through_ssh_cat() {
    let Some(s) = sshd::start_without_sftp() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let o = readpath(&s, tmp.path())
        .args(["--duration", "1s"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("by ssh (cat), as copy (scp) failed") && err.contains("SHA-256 checked"),
        "{err}"
    );
    assert!(tmp.path().join("bin/readpath").is_file());
    // Nothing but the binary is left in its dir (no temporary copy).
    let names: Vec<String> = std::fs::read_dir(tmp.path().join("bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["readpath"]);
}
