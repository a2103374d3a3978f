//! The real binary in a real pseudo-terminal (tmux): the explorer opens,
//! draws a chart, `w` changes the workers mode on screen, `q` exits with
//! status 0 and prints the run summary, also right after a resize. tmux is installed by `.ci/run`;
//! without it these tests print a skip, and fail under CI (`CI=true`).

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

/// A new 120x40 tmux session `readpath-test-TAG-PID` running `cmd`.
fn session(tag: &str, cmd: &str) -> Session {
    let name = format!("readpath-test-{tag}-{}", std::process::id());
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "120",
        "-y",
        "40",
        cmd,
    ]);
    Session(name)
}

/// The explorer on a small page-cached dataset under `tmp`, plus `extra`.
fn explorer(tmp: &Path, extra: &str) -> String {
    format!(
        "{} --data-dir {} tui --set workload.file_size=16M --set workload.direct=false{extra}",
        env!("CARGO_BIN_EXE_readpath"),
        tmp.display()
    )
}

/// Waits until the explorer draws a chart with data.
fn wait_chart(s: &Session) -> String {
    wait_for(s, "a chart with data", |p| {
        p.contains("latency (log)") && has_braille(p)
    })
}

/// Starts the explorer in a new tmux session; its exit status goes to the
/// returned file, its summary stays on the pane.
fn launch(tmp: &Path, tag: &str) -> (Session, std::path::PathBuf) {
    let status = tmp.join("status");
    let cmd = format!(
        "{}; echo \"exit=$?\" > {}; sleep 60",
        explorer(tmp, ""),
        status.display()
    );
    (session(tag, &cmd), status)
}

/// Waits for the explorer to exit after `what`, and checks it exited 0.
fn wait_exit(s: &Session, status: &Path, what: &str) {
    let start = Instant::now();
    // The shell creates the file before `echo` writes into it: wait for
    // its content, not its existence.
    while std::fs::read_to_string(status).map_or(true, |t| t.trim().is_empty()) {
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
    if !readpath::sys::testing::require_tool(
        "explorer_opens_changes_workers_on_w_and_quits_on_q",
        "tmux",
        "tmux",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (s, status) = launch(tmp.path(), "w");
    let p = wait_chart(&s);
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
    if !readpath::sys::testing::require_tool("a_key_after_a_resize_is_not_lost", "tmux", "tmux") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (s, status) = launch(tmp.path(), "resize");
    wait_chart(&s);
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

/// True while a readpath process (argv[0] is the binary under test) whose
/// arguments contain `needle` is alive (the tmux server's own command line
/// may hold the same text, so argv[0] must match).
fn running(needle: &str) -> bool {
    let bin = env!("CARGO_BIN_EXE_readpath");
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let text = String::from_utf8_lossy(&c);
            text.split('\0').next() == Some(bin) && text.contains(needle)
        })
    })
}

/// Closing the terminal (`tmux kill-pane`) is a normal way to end: the
/// recording is finished and valid, no temporary file is left, and the
/// process exits (it used to panic on the lost terminal and abort, leaving
/// the recording cut mid-line under its temporary name).
#[test]
fn a_closed_terminal_finishes_the_recording() {
    if !readpath::sys::testing::require_tool(
        "a_closed_terminal_finishes_the_recording",
        "tmux",
        "tmux",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("talk.jsonl");
    let s = session(
        "gone",
        &explorer(tmp.path(), &format!(" --record {}", rec.display())),
    );
    wait_chart(&s);
    tmux(&["kill-pane", "-t", &s.0]);
    let start = Instant::now();
    while running(&rec.display().to_string()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "readpath still running after its terminal closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = readpath::output::recording::read(&rec).unwrap_or_else(|e| panic!("{e}"));
    assert!(!r.records.is_empty(), "intervals recorded");
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.contains(".tmp-")),
        "no temporary file left: {names:?}"
    );
}

/// Ctrl-Z gives the terminal back to the shell (cooked mode, main screen);
/// `fg` takes it back and redraws; Alt+q does not quit; q does.
#[test]
fn ctrl_z_suspends_and_fg_redraws() {
    if !readpath::sys::testing::require_tool("ctrl_z_suspends_and_fg_redraws", "tmux", "tmux") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let status = tmp.path().join("status");
    let s = session("tstp", "bash --norc --noprofile -i");
    std::thread::sleep(Duration::from_millis(500));
    // No `; echo $?` after it: bash runs the rest of a list when its job
    // stops. The status is asked for after `fg` ends.
    tmux(&["send-keys", "-t", &s.0, &explorer(tmp.path(), ""), "Enter"]);
    wait_chart(&s);
    tmux(&["send-keys", "-t", &s.0, "C-z"]);
    wait_for(&s, "the shell's job-control message", |p| {
        p.contains("Stopped") && !p.contains("latency (log)")
    });
    tmux(&[
        "send-keys",
        "-t",
        &s.0,
        "stty -a | grep -c ' icanon'",
        "Enter",
    ]);
    wait_for(&s, "the terminal in cooked mode", |p| {
        p.lines().any(|l| l.trim() == "1")
    });
    tmux(&["send-keys", "-t", &s.0, "fg", "Enter"]);
    wait_for(&s, "the explorer redrawn", |p| {
        p.contains("latency (log)") && p.contains("settings")
    });
    tmux(&["send-keys", "-t", &s.0, "M-q"]);
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        pane(&s).contains("latency (log)"),
        "Alt+q must not quit:\n{}",
        pane(&s)
    );
    tmux(&["send-keys", "-t", &s.0, "q"]);
    wait_for(&s, "the summary after q", |p| p.contains("read: IOPS="));
    let echo = format!("echo \"exit=$?\" > {}", status.display());
    tmux(&["send-keys", "-t", &s.0, &echo, "Enter"]);
    wait_exit(&s, &status, "q after fg");
}

/// `t` opens the timeline: the lanes of the workload's CPUs and its
/// reader, drawn from the spans the workload records only while it is
/// open; → chooses an item and says its wait; `t` closes it. A recording
/// made meanwhile carries the spans, and `--trace` writes the whole run's.
#[test]
fn the_timeline_opens_on_t_chooses_an_item_and_its_spans_are_recorded_and_traced() {
    if !readpath::sys::testing::require_tool("the_timeline_opens_on_t", "tmux", "tmux") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (rec, trace) = (tmp.path().join("t.jsonl"), tmp.path().join("t.pftrace"));
    let status = tmp.path().join("status");
    let cmd = format!(
        "{}; echo \"exit=$?\" > {}; sleep 60",
        explorer(
            tmp.path(),
            &format!(" --record {} --trace {}", rec.display(), trace.display())
        ),
        status.display()
    );
    let s = session("timeline", &cmd);
    wait_chart(&s);
    tmux(&["send-keys", "-t", &s.0, "t"]);
    wait_for(&s, "the lanes", |p| {
        p.contains("timeline") && p.contains("CPU 0") && p.contains("reader-0")
    });
    tmux(&["send-keys", "-t", &s.0, "Right"]);
    let p = wait_for(&s, "the chosen item", |p| {
        p.contains("◆ ") && p.contains("waited")
    });
    assert!(p.contains("frozen"), "{p}");
    tmux(&["send-keys", "-t", &s.0, "t"]);
    wait_chart(&s);
    tmux(&["send-keys", "-t", &s.0, "q"]);
    wait_exit(&s, &status, "q");
    let p = pane(&s);
    assert!(
        p.contains("readpath: trace ") && p.contains("work items"),
        "{p}"
    );
    let r = readpath::output::recording::read(&rec).unwrap_or_else(|e| panic!("{e}"));
    let spans: usize = r
        .records
        .iter()
        .filter_map(|r| r.timeline.as_ref())
        .map(|t| t.items())
        .sum();
    assert!(spans > 0, "the recording carries the spans");
    assert!(std::fs::metadata(&trace).unwrap().len() > 1000);
}

/// The run's clock in the explorer's header (`running 00:00:07`).
fn clock(p: &str) -> String {
    p.lines()
        .next()
        .and_then(|l| l.split("running ").nth(1))
        .map(|r| r.chars().take(8).collect())
        .unwrap_or_default()
}

/// `T` starts a Perfetto trace in a new file in the current directory and
/// `T` again writes it, said on the screen; a second one left open at
/// quit is finished then, as `--trace` is.
#[test]
fn t_upper_starts_a_trace_here_and_t_again_writes_it() {
    if !readpath::sys::testing::require_tool("t_upper_starts_a_trace", "tmux", "tmux") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let here = tmp.path().join("here");
    std::fs::create_dir(&here).unwrap();
    let status = tmp.path().join("status");
    let cmd = format!(
        "cd {} && {}; echo \"exit=$?\" > {}; sleep 60",
        here.display(),
        explorer(tmp.path(), ""),
        status.display()
    );
    let s = session("trace-key", &cmd);
    wait_chart(&s);
    tmux(&["send-keys", "-t", &s.0, "T"]);
    let p = wait_for(&s, "tracing", |p| p.contains("tracing to readpath-"));
    // Intervals traced: the run's clock moves on twice (not a fixed wait).
    let at = clock(&p);
    let p = wait_for(&s, "the clock to move", |p| clock(p) != at);
    let at = clock(&p);
    wait_for(&s, "the clock to move again", |p| clock(p) != at);
    tmux(&["send-keys", "-t", &s.0, "T"]);
    wait_for(&s, "the trace written", |p| {
        p.contains(".pftrace: ") && p.contains("work items")
    });
    let traces = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&here)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pftrace"))
            .collect();
        v.sort();
        v
    };
    let first = traces();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(std::fs::metadata(&first[0]).unwrap().len() > 1000);
    // Another, left open at quit: finished then, and said.
    tmux(&["send-keys", "-t", &s.0, "T"]);
    wait_for(&s, "tracing again", |p| p.contains("tracing to readpath-"));
    tmux(&["send-keys", "-t", &s.0, "q"]);
    wait_exit(&s, &status, "q");
    assert!(
        pane(&s).contains("readpath: trace readpath-"),
        "{}",
        pane(&s)
    );
    assert_eq!(traces().len(), 2, "{:?}", traces());
    // Nothing else left here (no temporary file).
    assert_eq!(std::fs::read_dir(&here).unwrap().count(), 2);
}
