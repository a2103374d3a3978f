//! The real binary in a real pseudo-terminal (tmux): the explorer opens,
//! draws a chart, `w` changes the workers mode on screen, `q` exits with
//! status 0 and prints the run summary, also right after a resize. tmux is installed by `.ci/run`; this
//! test fails (not skips) without it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

fn tmux(args: &[&str]) -> String {
    let o = Command::new("tmux")
        .args(args)
        .output()
        .expect("tmux is required for this test (.ci/run installs it)");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn pane(s: &Session) -> String {
    tmux(&["capture-pane", "-p", "-t", &s.0])
}

fn wait_for(s: &Session, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let p = pane(s);
        if pred(&p) {
            return p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}; the screen:\n{p}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn has_braille(p: &str) -> bool {
    p.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c))
}

fn settings_row<'a>(p: &'a str, name: &str) -> Option<&'a str> {
    p.lines().find(|l| l.contains(&format!(" {name} ")))
}

/// Starts the explorer on a small page-cached dataset in a new tmux session;
/// its exit status goes to the returned file, its summary stays on the pane.
fn launch(tmp: &Path, tag: &str) -> (Session, std::path::PathBuf) {
    let status = tmp.join("status");
    let bin = env!("CARGO_BIN_EXE_readpath");
    let name = format!("readpath-test-{tag}-{}", std::process::id());
    let cmd = format!(
        "{bin} --data-dir {} tui --set workload.file_size=16M --set workload.direct=false; echo \"exit=$?\" > {}; sleep 60",
        tmp.display(),
        status.display()
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "120",
        "-y",
        "40",
        &cmd,
    ]);
    (Session(name), status)
}

/// Waits for the explorer to exit after `what`, and checks it exited 0.
fn wait_exit(s: &Session, status: &Path, what: &str) {
    let start = Instant::now();
    while !status.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "did not exit on {what}:\n{}",
            pane(s)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(status).unwrap().trim(), "exit=0");
}

#[test]
fn explorer_opens_changes_workers_on_w_and_quits_on_q() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, status) = launch(tmp.path(), "w");
    let p = wait_for(&s, "a chart with data", |p| {
        p.contains("latency (log)") && has_braille(p)
    });
    let before = settings_row(&p, "mode")
        .expect("workers mode row")
        .to_string();
    assert!(before.contains("unbound"), "{before}");
    tmux(&["send-keys", "-t", &s.0, "w"]);
    let p = wait_for(&s, "workers.mode = inline on screen", |p| {
        settings_row(p, "mode").is_some_and(|r| r.contains("inline") && !r.contains("unbound"))
    });
    assert!(p.contains("decrypt: inline"), "the plan follows:\n{p}");
    // The change is marked on the charts once the next record arrives.
    wait_for(&s, "the change marker", |p| {
        p.contains("mode: unbound -> inline")
    });
    tmux(&["send-keys", "-t", &s.0, "q"]);
    wait_exit(&s, &status, "q");
    let p = pane(&s);
    assert!(
        p.contains("read: IOPS="),
        "summary printed after quit:\n{p}"
    );
    assert!(p.contains("workers.mode: unbound -> inline"), "{p}");
}

/// A key that arrives together with a resize is not lost: crossterm's
/// edge-triggered event source used to return the resize and leave the key
/// unread (resume, resize at once, then `q` was ignored).
#[test]
fn a_key_after_a_resize_is_not_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, status) = launch(tmp.path(), "resize");
    wait_for(&s, "a chart with data", |p| {
        p.contains("latency (log)") && has_braille(p)
    });
    tmux(&["send-keys", "-t", &s.0, "Space"]);
    wait_for(&s, "paused", |p| p.contains("paused"));
    tmux(&["send-keys", "-t", &s.0, "Space"]);
    tmux(&["resize-window", "-t", &s.0, "-x", "80", "-y", "24"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux(&["resize-window", "-t", &s.0, "-x", "120", "-y", "40"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux(&["send-keys", "-t", &s.0, "q"]);
    wait_exit(&s, &status, "q after a resize");
}
