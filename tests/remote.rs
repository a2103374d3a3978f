//! readpath beyond one machine, tested without a phone: the agent driven
//! over a pipe (start, apply, mark, stop; it stops when stdin closes; a
//! newer protocol is refused by name), and the client against fake
//! transports (an "ssh" that is a shell script) that say garbage or speak
//! a newer protocol. Remote arguments are data, never shell: through a
//! fake ssh that runs its command line with `sh -c` in a temp "home" and
//! logs it, paths with `$()`, backticks and quotes arrive quoted and never
//! run, `-` paths and control characters are refused before any ssh, `~/x`
//! is the login's home for every step; a truncated copy is caught by its
//! SHA-256 and never run; a failed scp (no SFTP server) falls back to
//! `ssh 'cat > TMP'`; a target that hangs in a setup step or never says
//! hello ends at the timeout or on SIGTERM; an oversized agent line is
//! skipped and the session goes on. An agent that floods (a valid line
//! again and again, or numbers it made up), replies to no request or
//! talks after its summary is ended at that line with the rule it broke;
//! one silent after its header is ended 10 s after the run's end, or
//! within 2 s of SIGTERM. The end-to-end run over a real sshd on
//! 127.0.0.1 is in tests/remote_ssh.rs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/bin.rs"]
mod bin;

use readpath::remote::protocol::{self, Message, PROTOCOL};
use readpath::settings::Settings;

fn agent(data_dir: &std::path::Path) -> (Child, ChildStdin, BufReader<std::process::ChildStdout>) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("--data-dir")
        .arg(data_dir)
        .arg("agent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdin = c.stdin.take().unwrap();
    let stdout = BufReader::new(c.stdout.take().unwrap());
    (c, stdin, stdout)
}

fn next(out: &mut BufReader<std::process::ChildStdout>, n: &mut usize) -> Option<Message> {
    let mut line = String::new();
    if out.read_line(&mut line).unwrap() == 0 {
        return None;
    }
    *n += 1;
    Some(Message::parse(line.trim(), *n).unwrap_or_else(|e| panic!("{e}")))
}

fn send(stdin: &mut ChildStdin, cmd: protocol::Command) {
    writeln!(stdin, "{}", protocol::request_line(cmd)).unwrap();
    stdin.flush().unwrap();
}

fn start(stdin: &mut ChildStdin) {
    send(
        stdin,
        protocol::Command::Start {
            preset: None,
            settings: None,
            set: vec![
                "workload.file_size=16M".into(),
                "workers.mode=unbound".into(),
            ],
            interval_ms: 100,
            command: "run".into(),
        },
    );
}

fn wait_exit(c: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(s) = c.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn the_agent_over_a_pipe_runs_applies_marks_and_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, mut out) = agent(tmp.path());
    let mut n = 0;
    match next(&mut out, &mut n) {
        Some(Message::Hello(h)) => {
            assert_eq!(h.protocol, PROTOCOL);
            assert_eq!(h.readpath, env!("CARGO_PKG_VERSION"));
            assert_eq!(h.arch, std::env::consts::ARCH);
        }
        other => panic!("first line: {other:?}"),
    }
    start(&mut stdin);
    // A fresh data dir: the dataset is prepared first, and said, from
    // nothing to the whole, never backwards, before the header.
    let mut said = Vec::new();
    let header = loop {
        match next(&mut out, &mut n) {
            Some(Message::Progress(p)) => said.push((p.done, p.total)),
            Some(Message::Header(h)) => break h,
            other => panic!("expected progress or the header: {other:?}"),
        }
    };
    assert_eq!(said.first(), Some(&(0, 16 << 20)), "{said:?}");
    assert_eq!(said.last(), Some(&(16 << 20, 16 << 20)), "{said:?}");
    assert!(said.windows(2).all(|w| w[0].0 <= w[1].0), "{said:?}");
    assert!(said.iter().all(|&(_, total)| total == 16 << 20), "{said:?}");
    assert_eq!(header.command, "run");
    assert_eq!(header.settings.workload.file_size, 16 << 20);
    assert!(!header.machine.hostname.is_empty());
    // A few intervals, then a change: one reply naming it.
    let mut intervals = 0;
    while intervals < 3 {
        if let Some(Message::Interval(_)) = next(&mut out, &mut n) {
            intervals += 1;
        }
    }
    let mut s: Settings = header.settings.clone();
    s.set("workers.mode", "bound").unwrap();
    send(
        &mut stdin,
        protocol::Command::Apply {
            settings: Box::new(s),
        },
    );
    send(
        &mut stdin,
        protocol::Command::Mark {
            label: "baseline".into(),
        },
    );
    let (mut replied, mut marked) = (false, false);
    let t = Instant::now();
    while !(replied && marked) && t.elapsed() < Duration::from_secs(30) {
        match next(&mut out, &mut n) {
            Some(Message::Reply(r)) => {
                assert!(r.ok, "{r:?}");
                assert_eq!(r.cmd, "apply");
                assert_eq!(r.changes.len(), 1, "{r:?}");
                assert_eq!(r.changes[0].label(), "workers.mode: unbound -> bound");
                replied = true;
            }
            Some(Message::Interval(i)) => {
                marked |= i.events.iter().any(|e| e.label == "baseline");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(replied && marked, "reply {replied}, mark {marked}");
    send(&mut stdin, protocol::Command::Stop);
    let summary = loop {
        match next(&mut out, &mut n) {
            Some(Message::Summary(s)) => break s,
            Some(Message::Interval(_)) => {}
            other => panic!("{other:?}"),
        }
    };
    assert!(summary.reads > 0);
    assert_eq!(summary.verity_failures, 0);
    // Each miss's bio decrypted and verified (hits were, when they came in).
    assert!(
        summary.decrypted_units > Some(0) && summary.verified_blocks > Some(0),
        "{summary:?}"
    );
    assert!(
        next(&mut out, &mut n).is_none(),
        "nothing after the summary"
    );
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(20)).map(|s| s.code()),
        Some(Some(0))
    );
}

#[test]
fn the_agent_stops_when_its_stdin_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, mut out) = agent(tmp.path());
    let mut n = 0;
    assert!(matches!(next(&mut out, &mut n), Some(Message::Hello(_))));
    start(&mut stdin);
    // Its dataset's progress, then the header.
    let mut m = next(&mut out, &mut n);
    while matches!(m, Some(Message::Progress(_))) {
        m = next(&mut out, &mut n);
    }
    assert!(matches!(m, Some(Message::Header(_))), "{m:?}");
    assert!(matches!(next(&mut out, &mut n), Some(Message::Interval(_))));
    // The connection drops: no stop, just the end of stdin.
    drop(stdin);
    let status = wait_exit(&mut child, Duration::from_secs(20));
    if status.is_none() {
        let _ = child.kill();
    }
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the agent exits by itself"
    );
}

#[test]
fn a_newer_protocol_is_refused_by_name_on_both_sides() {
    // The agent refuses a newer client.
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, mut out) = agent(tmp.path());
    let mut n = 0;
    assert!(matches!(next(&mut out, &mut n), Some(Message::Hello(_))));
    writeln!(stdin, "{{\"protocol\":{},\"cmd\":\"stop\"}}", PROTOCOL + 1).unwrap();
    stdin.flush().unwrap();
    match next(&mut out, &mut n) {
        Some(Message::Fatal(f)) => {
            assert!(
                f.message.contains(&format!("protocol {}", PROTOCOL + 1))
                    && f.message.contains("newer")
                    && f.message.contains("update readpath on the target"),
                "{f:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(10)).and_then(|s| s.code()),
        Some(2)
    );
    // The client refuses a newer agent.
    let hello = protocol::Hello {
        protocol: PROTOCOL + 1,
        readpath: "9.0.0".into(),
        arch: "x86_64".into(),
    };
    let e = protocol::check_hello(&hello, "ssh:phone")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ssh:phone")
            && e.contains(&format!("protocol {}", PROTOCOL + 1))
            && e.contains("upgrade readpath here"),
        "{e}"
    );
}

/// What `sha256sum` prints for this readpath (hashed once per test
/// binary): the fakes answer it at once, so a setup step's short timeout
/// never times the fake's own hashing of a 100 MB debug build on a loaded
/// machine.
fn own_sha256sum() -> String {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        use sha2::Digest;
        let exe = env!("CARGO_BIN_EXE_readpath");
        let bytes = std::fs::read(exe).unwrap();
        format!("{}  {exe}", hex::encode(sha2::Sha256::digest(&bytes)))
    })
    .clone()
}

/// A fake ssh whose target is this binary's agent, its data dir under
/// `dir`.
fn agent_ssh(dir: &std::path::Path) -> String {
    let agent = format!(
        "{} agent --data-dir {}",
        env!("CARGO_BIN_EXE_readpath"),
        dir.join("data").display()
    );
    fake_ssh(dir, &agent)
}

/// A fake `ssh`: answers `uname -m`, `--version` and `sha256sum` like a
/// target with this readpath on it, and runs `AGENT` (a shell snippet) for
/// the agent.
fn fake_ssh(dir: &std::path::Path, agent: &str) -> String {
    let path = dir.join("fake-ssh");
    let script = format!(
        "#!/bin/sh\n\
         for last; do :; done\n\
         case \"$last\" in\n\
         \"uname -m\") echo {arch} ;;\n\
         *--version*) echo 'readpath {v}' ;;\n\
         sha256sum*) echo '{sum}' ;;\n\
         *agent*) {agent} ;;\n\
         *) exit 3 ;;\n\
         esac\n",
        arch = std::env::consts::ARCH,
        v = env!("CARGO_PKG_VERSION"),
        sum = own_sha256sum(),
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

fn run_remote(ssh: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "ssh:target", "--duration", "2s"])
        .args(extra)
        .env("READPATH_SSH_COMMAND", ssh)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn an_agent_that_writes_garbage_is_refused_by_line_number() {
    let tmp = tempfile::tempdir().unwrap();
    let hello = format!(
        "{{\"hello\":{{\"protocol\":{PROTOCOL},\"readpath\":\"{}\",\"arch\":\"x86_64\"}}}}",
        env!("CARGO_PKG_VERSION")
    );
    for (agent, want) in [
        (
            format!("echo '{hello}'; echo 'Welcome to the phone!'; cat >/dev/null"),
            "agent line 2: not JSON",
        ),
        (
            format!("echo '{hello}'; echo '{{\"interval\":{{\"seq\":\"x\"}}}}'; cat >/dev/null"),
            "agent line 2: not a protocol message",
        ),
        (
            "echo 'garbage'; cat >/dev/null".to_string(),
            "agent line 1: not JSON",
        ),
        ("exit 0".to_string(), "the agent ended before its hello"),
        (
            format!(
                "echo '{hello}'; echo '{{\"progress\":{{\"done\":5,\"total\":4}}}}'; cat >/dev/null"
            ),
            "agent line 2: progress 5 of 4 bytes: allowed 0..=total",
        ),
        (
            r#"echo '{"progress":{"done":0,"total":4096}}'; cat >/dev/null"#.to_string(),
            "agent line 1: expected its hello, got a progress line",
        ),
    ] {
        let ssh = fake_ssh(tmp.path(), &agent);
        let o = run_remote(&ssh, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{agent}: {err}");
        assert!(
            err.contains(want) && err.contains("ssh:target"),
            "{agent}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_newer_agent_is_refused_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let hello = format!(
        "{{\"hello\":{{\"protocol\":{},\"readpath\":\"9.9.9\",\"arch\":\"x86_64\"}}}}",
        PROTOCOL + 1
    );
    let ssh = fake_ssh(tmp.path(), &format!("echo '{hello}'; cat >/dev/null"));
    let o = run_remote(&ssh, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("newer than this readpath's") && err.contains("upgrade readpath here"),
        "{err}"
    );
}

#[test]
fn bad_remote_specs_and_unsupported_commands_exit_2() {
    for (args, want) in [
        (vec!["run", "--remote", "ssh:-oProxyCommand=x"], "--remote"),
        (vec!["run", "--remote", "ftp:host"], "unknown transport"),
        (
            vec!["compare", "--remote", "ssh:h", "--hosts", "local"],
            "not both",
        ),
        (
            vec!["run", "--remote", "ssh:h", "--remote-dir", "a\nb"],
            "not a usable path",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_slow_link_delays_records_but_loses_none() {
    let tmp = tempfile::tempdir().unwrap();
    // The agent's output trickles out: a line every 80 ms, while it
    // writes one every 20 ms.
    let agent = format!(
        "{} agent --data-dir {} | while IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.08; done",
        env!("CARGO_BIN_EXE_readpath"),
        tmp.path().join("data").display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    let rec = tmp.path().join("slow.jsonl");
    let o = run_remote(
        &ssh,
        &[
            "--interval",
            "20ms",
            "--set",
            "workload.file_size=16M",
            "--record",
            rec.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("s late (a slow link)") && err.contains("none is dropped"),
        "{err}"
    );
    assert!(!err.contains("never arrived"), "{err}");
    // Its fresh data dir: the agent's dataset was said prepared.
    assert!(
        err.contains("readpath: ssh:target: dataset of 16M prepared in "),
        "{err}"
    );
    // Every interval arrived, in order, none skipped.
    let r = readpath::output::recording::read(&rec).unwrap();
    assert!(r.records.len() > 20, "{} records", r.records.len());
    for (i, x) in r.records.iter().enumerate() {
        assert_eq!(x.seq, i as u64, "record {i}");
    }
}

/// `run --remote --trace`: the agent is told to trace, its records carry
/// the spans, and the trace is written here.
#[test]
fn a_remote_run_writes_the_targets_trace_here() {
    let tmp = tempfile::tempdir().unwrap();
    let ssh = agent_ssh(tmp.path());
    let trace = tmp.path().join("remote.pftrace");
    let o = run_remote(
        &ssh,
        &[
            "--set",
            "workload.file_size=4M",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let items = bin::traced_items(&err);
    assert!(items > 100, "{err}");
    assert!(std::fs::metadata(&trace).unwrap().len() > 1000);
}

/// `compare --remote HOST --record FILE --trace FILE --timeline`: one
/// target runs every round, its intervals (both variants, their switches
/// marked, their spans) recorded here under its own header, and traced
/// here, a process a variant; beside two hosts, `--record` is refused.
#[test]
fn a_remote_compare_records_and_traces_the_targets_intervals_here() {
    let tmp = tempfile::tempdir().unwrap();
    let ssh = agent_ssh(tmp.path());
    let (rec, trace) = (tmp.path().join("ab.jsonl"), tmp.path().join("ab.pftrace"));
    let compare = |hosts: &str| {
        Command::new(env!("CARGO_BIN_EXE_readpath"))
            .args(["compare", "--hosts", hosts])
            .args(["--set", "workload.file_size=4M", "--set", "load.hogs=0"])
            .args(["--vary", "workers.mode=unbound,bound"])
            .args(["--duration", "400ms", "--rounds", "1", "--warmup", "0s"])
            .args(["--record", rec.to_str().unwrap(), "--timeline"])
            .args(["--trace", trace.to_str().unwrap()])
            .env("READPATH_SSH_COMMAND", &ssh)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = compare("ssh:target");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let r = readpath::output::recording::read(&rec).unwrap();
    assert_eq!(r.header.command, "compare");
    let switched = r
        .records
        .iter()
        .flat_map(|x| &x.events)
        .any(|e| e.label == "workers.mode: unbound -> bound");
    assert!(switched, "the switch is in the recording");
    let spans: usize = r
        .records
        .iter()
        .flat_map(|x| &x.timeline)
        .map(|t| t.items())
        .sum();
    assert!(spans > 10, "{spans} items in the recording's timelines");
    assert!(bin::traced_items(&err) > 10, "{err}");
    // Two hosts: the recording is for one machine.
    let o = compare("ssh:a,ssh:b");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--record is for one machine"), "{err}");
}

#[test]
fn adb_targets_use_adb_shell_and_adb_push() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("adb.log");
    // A fake adb: logs its arguments, runs `shell` commands here and
    // `push` as a copy.
    let adb = tmp.path().join("fake-adb");
    std::fs::write(
        &adb,
        format!(
            "#!/bin/sh\n\
             echo \"$@\" >> {log}\n\
             [ \"$1\" = -s ] && shift 2\n\
             case \"$1\" in\n\
             shell) shift; exec sh -c \"$1\" ;;\n\
             push) cp \"$2\" \"$3\" ;;\n\
             *) exit 3 ;;\n\
             esac\n",
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&adb, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tmp.path().join("dev");
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "adb:emulator-5554", "--remote-dir"])
        .arg(&dir)
        .args(["--duration", "1s", "--set", "workload.file_size=16M"])
        .env("READPATH_ADB", &adb)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("adb:emulator-5554") && err.contains("copied"),
        "{err}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.lines().all(|l| l.starts_with("-s emulator-5554 ")),
        "{calls}"
    );
    assert!(calls.contains("shell uname -m"), "{calls}");
    assert!(calls.lines().any(|l| l.contains(" push ")), "{calls}");
    // The data dir is under the binary's dir on a device (no home there).
    assert!(dir.join("data/dataset-16777216").is_dir());
    assert!(String::from_utf8_lossy(&o.stdout).contains(" 0 failures"));
}

#[test]
fn compare_on_targets_only_leaves_validation_to_them() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = format!(
        "exec {} agent --data-dir {}",
        env!("CARGO_BIN_EXE_readpath"),
        tmp.path().join("data").display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    let args = |hosts: &str| {
        Command::new(env!("CARGO_BIN_EXE_readpath"))
            .args(["compare", "--hosts", hosts])
            .args(["--set", "workload.file_size=16M"])
            // CPU 5: not on this 2-CPU machine, maybe on a target.
            .args(["--set", "workload.reader_cpus=5"])
            .args(["--vary", "workers.mode=unbound,bound"])
            .args(["--duration", "500ms", "--rounds", "1", "--warmup", "0s"])
            .env("READPATH_SSH_COMMAND", &ssh)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    if readpath::sys::online_cpus().len() > 5 {
        println!("skipping: this machine has CPU 5");
        return;
    }
    // With `local` among the hosts, this machine refuses it at once.
    let o = args("local,ssh:target");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("reader_cpus") && err.contains("CPU 5"),
        "{err}"
    );
    // On targets only, the target judges (this one has no CPU 5 either):
    // refused there, by name, exit 2.
    let o = args("ssh:target");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ssh:target") && err.contains("reader_cpus") && err.contains("CPU 5"),
        "{err}"
    );
}

#[test]
fn a_sweep_runs_every_point_on_the_target_in_one_session() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let agent = format!(
        "echo started >> {}; exec {} agent --data-dir {}",
        tmp.path().join("sessions").display(),
        env!("CARGO_BIN_EXE_readpath"),
        data.display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["sweep", "--remote", "ssh:target"])
        .args(["--set", "workload.file_size=4M", "--set", "load.hogs=0"])
        .args(["--vary", "workers.mode=unbound,bound"])
        .args(["--across", "workload.queue_depth=1,2"])
        .args(["--duration", "300ms", "--rounds", "1", "--warmup", "0s"])
        .args(["--format", "json"])
        .env("READPATH_SSH_COMMAND", &ssh)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kind"], "sweep", "{j}");
    assert_eq!(j["points"].as_array().unwrap().len(), 2, "{j}");
    // The dataset was made there, not here; one agent ran the whole grid.
    assert!(data.join("dataset-4194304").is_dir());
    let sessions = std::fs::read_to_string(tmp.path().join("sessions")).unwrap();
    assert_eq!(sessions.lines().count(), 1, "{sessions}");
}

#[test]
fn a_preset_named_for_a_target_is_resolved_and_validated_there() {
    if readpath::sys::online_cpus().len() > 5 {
        println!("skipping: this machine has CPU 5");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let agent = format!(
        "exec {} agent --data-dir {}",
        env!("CARGO_BIN_EXE_readpath"),
        tmp.path().join("data").display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    // The preset by name, the override applied there before validating.
    let o = run_remote(
        &ssh,
        &["--preset", "default", "--set", "workload.reader_cpus=5"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ssh:target") && err.contains("reader_cpus"),
        "{err}"
    );
    // A preset the target does not have is refused there, by name.
    let o = run_remote(&ssh, &["--preset", "no-such-preset"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no-such-preset"), "{err}");
}

// ---------------------------------------------------------------------------
// Remote arguments are data, never shell (issue 25): fakes that log what
// they are asked to run, and a "target" that is a shell in a temp dir.

fn script(path: &std::path::Path, body: &str) -> String {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

/// A target on this machine: a fake `ssh` that logs the command line it is
/// given (its last argument, one line each) to `log` and runs it with `sh
/// -c` in `home` (the login's home), as sshd runs it with the login's
/// shell; `before` is a shell snippet run first (`$last` is the command).
fn local_ssh(
    dir: &std::path::Path,
    log: &std::path::Path,
    home: &std::path::Path,
    before: &str,
) -> String {
    std::fs::create_dir_all(home).unwrap();
    script(
        &dir.join("local-ssh"),
        &format!(
            "for last; do :; done\n\
             printf '%s\\n' \"$last\" >> '{log}'\n\
             {before}\n\
             cd '{home}' || exit 1\n\
             exec sh -c \"$last\"\n",
            log = log.display(),
            home = home.display()
        ),
    )
}

/// A fake `scp`: logs `scp ARGS` to `log`, then runs `copy` with `$src`
/// (the local file) and `$dst` (the path after `host:`) in `home`.
fn fake_scp(
    dir: &std::path::Path,
    log: &std::path::Path,
    home: &std::path::Path,
    copy: &str,
) -> String {
    script(
        &dir.join("fake-scp"),
        &format!(
            "printf 'scp %s\\n' \"$*\" >> '{log}'\n\
             src=; to=\n\
             for a; do src=$to; to=$a; done\n\
             dst=${{to#*:}}\n\
             cd '{home}' || exit 1\n\
             {copy}\n",
            log = log.display(),
            home = home.display()
        ),
    )
}

fn readpath_remote(ssh: &str, scp: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_readpath"));
    c.args(["run", "--remote", "ssh:target"])
        .args(args)
        .env("READPATH_SSH_COMMAND", ssh)
        .env("READPATH_SCP_COMMAND", scp)
        .env_remove("READPATH_REMOTE_TIMEOUT")
        .env_remove("READPATH_AGENT_BINARY")
        .stdin(Stdio::null());
    c
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// `s` quoted as readpath quotes for the target's shell.
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn log_lines(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn remote_paths_arrive_quoted_and_never_run_as_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().display().to_string();
    let (log, home) = (tmp.path().join("ssh.log"), tmp.path().join("home"));
    let canary = tmp.path().join("canary");
    let ssh = local_ssh(tmp.path(), &log, &home, "");
    let scp_log = tmp.path().join("scp.log");
    let scp = fake_scp(tmp.path(), &scp_log, &home, "cp \"$src\" \"$dst\"");
    let dir = format!("{t}/bin $(touch {c}) `touch {c}`", c = canary.display());
    let data = format!("{t}/data 'q' $(touch {c})", c = canary.display());
    let o = readpath_remote(
        &ssh,
        &scp,
        &["--duration", "1s", "--set", "workload.file_size=4M"],
    )
    .arg(format!("--remote-dir={dir}"))
    .arg(format!("--remote-data-dir={data}"))
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!canary.exists(), "a remote path was run as shell");
    // Every path was taken literally: the binary and the dataset are there.
    assert!(std::path::Path::new(&format!("{dir}/readpath")).is_file());
    assert!(std::path::Path::new(&format!("{data}/dataset-4194304")).is_dir());
    let bin = q(&format!("{dir}/readpath"));
    let lines = log_lines(&log);
    let tmp_name = lines
        .iter()
        .find_map(|l| l.strip_prefix("cat > "))
        .unwrap_or_else(|| panic!("no copy by cat: {lines:#?}"))
        .to_string();
    assert!(
        tmp_name.starts_with(&format!("'{dir}/readpath.tmp-")) && tmp_name.ends_with('\''),
        "{tmp_name}"
    );
    assert_eq!(
        lines,
        [
            "uname -m".to_string(),
            format!("if [ -x {bin} ]; then {bin} --version; fi"),
            format!("mkdir -p {}", q(&dir)),
            format!("cat > {tmp_name}"),
            format!(
                "sha256sum {tmp_name} 2>/dev/null || toybox sha256sum {tmp_name} 2>/dev/null || busybox sha256sum {tmp_name}"
            ),
            format!("chmod 755 {tmp_name} && mv -f {tmp_name} {bin}"),
            format!("exec {bin} agent {}", q(&format!("--data-dir={data}"))),
        ]
    );
    // scp, which hands its path to the target's shell in its legacy
    // protocol, never got this one.
    assert!(
        !scp_log.exists(),
        "{}",
        std::fs::read_to_string(&scp_log).unwrap()
    );
    assert!(
        err.contains("copied readpath")
            && err.contains("by ssh (cat")
            && err.contains("SHA-256 checked"),
        "{err}"
    );
}

#[test]
fn options_and_control_characters_in_remote_paths_are_refused_before_any_ssh() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, home) = (tmp.path().join("ssh.log"), tmp.path().join("home"));
    let ssh = local_ssh(tmp.path(), &log, &home, "");
    let adb_log = tmp.path().join("adb.log");
    let adb = script(
        &tmp.path().join("fake-adb"),
        &format!("echo \"$@\" >> '{}'\nexit 3\n", adb_log.display()),
    );
    for (args, flag) in [
        (
            vec!["--remote", "ssh:target", "--remote-dir=-m777"],
            "--remote-dir",
        ),
        (
            vec!["--remote", "ssh:target", "--remote-data-dir=--help"],
            "--remote-data-dir",
        ),
        (
            vec!["--remote", "ssh:target", "--remote-dir", "a\tb"],
            "--remote-dir",
        ),
        (
            vec!["--remote", "ssh:target", "--remote-dir", "x\u{202e}y"],
            "--remote-dir",
        ),
        (
            vec!["--remote", "ssh:target", "--remote-dir", "~root/x"],
            "--remote-dir",
        ),
        // adb has no home: ~ and relative paths are refused there.
        (
            vec!["--remote", "adb:", "--remote-dir", "~/x"],
            "--remote-dir",
        ),
        (
            vec!["--remote", "adb:", "--remote-data-dir", "data"],
            "--remote-data-dir",
        ),
        (vec!["--remote", "ssh:[::1]junk"], "--remote"),
        (vec!["--remote", "ssh:[::1]:22junk"], "--remote"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
            .arg("run")
            .args(&args)
            .args(["--duration", "1s"])
            .env("READPATH_SSH_COMMAND", &ssh)
            .env("READPATH_ADB", &adb)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(flag) && err.contains("allowed"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains('\t') && !err.contains('\u{202e}'),
            "{args:?}: {err}"
        );
        assert!(
            !log.exists() && !adb_log.exists(),
            "{args:?}: a command ran"
        );
    }
}

#[test]
fn tilde_is_the_login_home_for_the_directory_the_copy_and_the_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, home) = (tmp.path().join("ssh.log"), tmp.path().join("home"));
    let ssh = local_ssh(tmp.path(), &log, &home, "");
    let scp_log = tmp.path().join("scp.log");
    let scp = fake_scp(tmp.path(), &scp_log, &home, "cp \"$src\" \"$dst\"");
    let o = readpath_remote(
        &ssh,
        &scp,
        &["--duration", "1s", "--set", "workload.file_size=4M"],
    )
    .args(["--remote-dir", "~/agent", "--remote-data-dir", "~/data"])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(home.join("agent/readpath").is_file());
    assert!(home.join("data/dataset-4194304").is_dir());
    // No literal `~` anywhere: not under the home, not where readpath ran.
    assert!(!home.join("~").exists() && !std::path::Path::new("~").exists());
    let lines = log_lines(&log);
    assert!(
        lines.contains(&"mkdir -p './agent'".to_string()),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&"exec './agent/readpath' agent '--data-dir=./data'".to_string()),
        "{lines:#?}"
    );
    // The plain path went to scp, as the same relative path.
    let scp_calls = log_lines(&scp_log);
    assert_eq!(scp_calls.len(), 1, "{scp_calls:?}");
    assert!(
        scp_calls[0].contains(" target:./agent/readpath.tmp-"),
        "{scp_calls:?}"
    );
    assert!(err.contains("by scp;"), "{err}");
}

#[test]
fn a_truncated_copy_is_detected_by_its_hash_and_never_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, home) = (tmp.path().join("ssh.log"), tmp.path().join("home"));
    let ssh = local_ssh(tmp.path(), &log, &home, "");
    let scp_log = tmp.path().join("scp.log");
    // A copy cut short, as a dropped link or a full disk leaves it.
    let scp = fake_scp(
        tmp.path(),
        &scp_log,
        &home,
        "head -c 100000 \"$src\" > \"$dst\"",
    );
    let dir = tmp.path().join("bin");
    let o = readpath_remote(&ssh, &scp, &["--duration", "1s"])
        .arg("--remote-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let ours = std::fs::read(env!("CARGO_BIN_EXE_readpath")).unwrap();
    let (mine, cut) = (sha256_hex(&ours), sha256_hex(&ours[..100_000]));
    assert!(
        err.contains("ssh:target")
            && err.contains(&mine)
            && err.contains(&cut)
            && err.contains("nothing was run"),
        "{err}"
    );
    // Nothing of it ran, nothing of it is left.
    let lines = log_lines(&log);
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("agent") || l.contains("chmod")),
        "{lines:#?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains("--version")).count(),
        1,
        "{lines:#?}"
    );
    assert!(!dir.join("readpath").exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "the copy is left"
    );
}

#[test]
fn without_an_sftp_server_the_copy_streams_through_ssh_and_both_failures_are_said() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, home) = (tmp.path().join("ssh.log"), tmp.path().join("home"));
    let scp_log = tmp.path().join("scp.log");
    // OpenSSH 9's scp (SFTP) against a target without sftp-server.
    let scp = fake_scp(
        tmp.path(),
        &scp_log,
        &home,
        "echo 'subsystem request failed on channel 0' >&2\necho 'scp: Connection closed' >&2\nexit 255",
    );
    let ssh = local_ssh(tmp.path(), &log, &home, "");
    let dir = tmp.path().join("bin");
    let o = readpath_remote(
        &ssh,
        &scp,
        &["--duration", "1s", "--set", "workload.file_size=4M"],
    )
    .arg("--remote-dir")
    .arg(&dir)
    .arg("--remote-data-dir")
    .arg(tmp.path().join("data"))
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("by ssh (cat), as copy (scp) failed") && err.contains("Connection closed"),
        "{err}"
    );
    assert!(err.contains("SHA-256 checked"), "{err}");
    assert!(dir.join("readpath").is_file());
    assert_eq!(log_lines(&scp_log).len(), 1);
    assert!(log_lines(&log).iter().any(|l| l.starts_with("cat > ")));
    // When the stream fails too, both are said, and nothing is run.
    let ssh = local_ssh(
        tmp.path(),
        &log,
        &home,
        "case \"$last\" in cat*) echo 'cat: Read-only file system' >&2; exit 1 ;; esac",
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(&log).unwrap();
    let o = readpath_remote(&ssh, &scp, &["--duration", "1s"])
        .arg("--remote-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("failed both ways")
            && err.contains("Connection closed")
            && err.contains("Read-only file system"),
        "{err}"
    );
    assert!(!log_lines(&log).iter().any(|l| l.contains("agent")));
    assert!(!dir.join("readpath").exists());
}

/// A fake `ssh` for a target that has this readpath (uname and --version
/// answered) and runs `agent` for the agent; it logs each command line.
fn logging_fake_ssh(
    dir: &std::path::Path,
    log: &std::path::Path,
    uname: &str,
    agent: &str,
) -> String {
    script(
        &dir.join("logging-ssh"),
        &format!(
            "for last; do :; done\n\
             printf '%s\\n' \"$last\" >> '{log}'\n\
             case \"$last\" in\n\
             \"uname -m\") {uname} ;;\n\
             *--version*) echo 'readpath {v}' ;;\n\
             sha256sum*) echo '{sum}' ;;\n\
             *\" agent\"*) {agent} ;;\n\
             *) exit 3 ;;\n\
             esac\n",
            log = log.display(),
            v = env!("CARGO_PKG_VERSION"),
            sum = own_sha256sum(),
        ),
    )
}

/// Runs readpath against `ssh` until the log has a line containing
/// `needle`, sends SIGTERM, and returns how long it took to end after it,
/// with its output.
fn sigterm_when(
    ssh: &str,
    log: &std::path::Path,
    needle: &str,
) -> (Duration, std::process::Output) {
    let _ = std::fs::remove_file(log);
    let mut child = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "ssh:target", "--duration", "2s"])
        .env("READPATH_SSH_COMMAND", ssh)
        .env_remove("READPATH_REMOTE_TIMEOUT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !log_lines(log).iter().any(|l| l.contains(needle)) {
        assert!(t.elapsed() < Duration::from_secs(60), "{needle} never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Inside the wait (the step has begun; the fake never answers).
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let took = sent.elapsed();
    if status.is_none() {
        let _ = child.kill();
    }
    (took, child.wait_with_output().unwrap())
}

#[test]
fn a_target_that_never_says_hello_ends_at_the_timeout_or_a_stop_signal() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("ssh.log");
    let arch = format!("echo {}", std::env::consts::ARCH);
    let ssh = logging_fake_ssh(tmp.path(), &log, &arch, "exec sleep 60");
    // The hello's timeout, made short for the test.
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "ssh:target", "--duration", "2s"])
        .env("READPATH_SSH_COMMAND", &ssh)
        .env("READPATH_REMOTE_TIMEOUT", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ssh:target") && err.contains("no hello from the agent in 1.0 s"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "it waited for the fake agent"
    );
    // A stop signal during the wait ends it at once.
    let (took, o) = sigterm_when(&ssh, &log, "' agent");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        took < Duration::from_secs(2),
        "ended {took:?} after SIGTERM: {err}"
    );
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ssh:target")
            && err.contains("interrupted by SIGTERM while waiting for the agent's hello"),
        "{err}"
    );
}

#[test]
fn a_hanging_setup_step_ends_at_the_timeout_or_a_stop_signal() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("ssh.log");
    let ssh = logging_fake_ssh(tmp.path(), &log, "exec sleep 60", "exit 3");
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "ssh:target", "--duration", "2s"])
        .env("READPATH_SSH_COMMAND", &ssh)
        .env("READPATH_REMOTE_TIMEOUT", "0.5")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ssh:target: uname -m: no answer in 0.5 s")
            && err.contains("READPATH_REMOTE_TIMEOUT"),
        "{err}"
    );
    let (took, o) = sigterm_when(&ssh, &log, "uname");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        took < Duration::from_secs(2),
        "ended {took:?} after SIGTERM: {err}"
    );
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ssh:target: uname -m: interrupted by SIGTERM"),
        "{err}"
    );
    // A bad value of the variable is the user's: exit 2, said by name.
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "ssh:target", "--duration", "2s"])
        .env("READPATH_SSH_COMMAND", &ssh)
        .env("READPATH_REMOTE_TIMEOUT", "soon")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("READPATH_REMOTE_TIMEOUT=\"soon\"") && err.contains("allowed"),
        "{err}"
    );
}

#[test]
fn an_oversized_line_from_the_agent_is_skipped_and_the_session_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    // The agent's hello and header pass (its dataset prepared before,
    // so that no progress line comes between them); then a 20 MB line
    // (past the 16 MiB a line may have); then the rest.
    let agent = format!(
        "{exe} --data-dir {data} prepare --size 4M >/dev/null 2>&1; {exe} agent --data-dir {data} | {{ IFS= read -r l; printf '%s\\n' \"$l\"; IFS= read -r l; printf '%s\\n' \"$l\"; head -c 20000000 /dev/zero | tr '\\0' x; echo; exec cat; }}",
        exe = env!("CARGO_BIN_EXE_readpath"),
        data = tmp.path().join("data").display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    let rec = tmp.path().join("run.jsonl");
    let o = run_remote(
        &ssh,
        &[
            "--interval",
            "100ms",
            "--set",
            "workload.file_size=4M",
            "--record",
            rec.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let said = "agent line 3: 20000000 bytes, longer than 16777216 bytes: skipped";
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("ssh:target (")
            && err.contains(&format!("1 line of the agent refused and skipped ({said})")),
        "{err}"
    );
    // The summary came, and every record after the long line too.
    assert!(String::from_utf8_lossy(&o.stdout).contains(" 0 failures"));
    let r = readpath::output::recording::read(&rec).unwrap();
    assert!(r.records.len() > 5, "{} records", r.records.len());
    for (i, x) in r.records.iter().enumerate() {
        assert_eq!(x.seq, i as u64, "record {i}");
    }
    let notices: Vec<&str> = r
        .records
        .iter()
        .flat_map(|x| x.notices.iter().map(|n| n.text.as_str()))
        .filter(|n| n.starts_with("agent line"))
        .collect();
    assert_eq!(notices, [said]);
}

#[test]
fn a_target_that_cannot_hash_gets_its_copy_checked_by_size_and_version() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, home) = (tmp.path().join("ssh.log"), tmp.path().join("home"));
    // No sha256sum, toybox or busybox there.
    let no_hash =
        "case \"$last\" in sha256sum*) echo 'sh: sha256sum: not found' >&2; exit 127 ;; esac";
    let ssh = local_ssh(tmp.path(), &log, &home, no_hash);
    let scp_log = tmp.path().join("scp.log");
    let scp = fake_scp(tmp.path(), &scp_log, &home, "cp \"$src\" \"$dst\"");
    let dir = tmp.path().join("bin");
    let run = |scp: &str| {
        readpath_remote(
            &ssh,
            scp,
            &["--duration", "1s", "--set", "workload.file_size=4M"],
        )
        .arg("--remote-dir")
        .arg(&dir)
        .arg("--remote-data-dir")
        .arg(tmp.path().join("data"))
        .output()
        .unwrap()
    };
    let o = run(&scp);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("its SHA-256 could not be checked there")
            && err.contains("its size and --version were"),
        "{err}"
    );
    assert!(dir.join("readpath").is_file());
    // The same version there, but unverifiable: copied (and checked) again.
    let o = run(&scp);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("which could not be hashed there"), "{err}");
    // A truncated copy is caught by its size; nothing of it runs.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(&log).unwrap();
    let cut = fake_scp(
        tmp.path(),
        &scp_log,
        &home,
        "head -c 100000 \"$src\" > \"$dst\"",
    );
    let o = run(&cut);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("\"100000\" bytes") && err.contains("arrived damaged"),
        "{err}"
    );
    let lines = log_lines(&log);
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("chmod") || l.contains(" agent")),
        "{lines:#?}"
    );
    assert!(!dir.join("readpath").exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "the copy is left"
    );
}

// An agent that breaks the protocol or stalls (issue 43): the client takes
// only what the run can make, ends the session at the first impossible
// line with the rule it broke, and bounds its wait for a silent agent.

/// The hello and the header a fake agent starts with: this readpath's
/// hello and the header of tests/hostile/good.jsonl, in `dir/head.jsonl`.
fn agent_head(dir: &std::path::Path) -> std::path::PathBuf {
    let hello = format!(
        "{{\"hello\":{{\"protocol\":{PROTOCOL},\"readpath\":\"{}\",\"arch\":\"{}\"}}}}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH
    );
    let good = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/hostile/good.jsonl"
    ))
    .unwrap();
    let header = good.lines().next().unwrap();
    let path = dir.join("head.jsonl");
    std::fs::write(&path, format!("{hello}\n{header}\n")).unwrap();
    path
}

/// An awk program in `dir/NAME.awk` that prints `count` valid interval
/// lines, the i-th (from 0) with seq `seq` and t_s `t` (awk expressions
/// of i).
fn interval_lines(dir: &std::path::Path, name: &str, count: u64, seq: &str, t: &str) -> String {
    let r = readpath::metrics::IntervalRecord {
        seq: 987_654_321,
        t_s: 1234.5,
        interval_s: 0.1,
        ..Default::default()
    };
    let line = Message::Interval(Box::new(r)).to_line();
    assert!(Message::parse(&line, 1).is_ok(), "{line}");
    assert!(!line.contains('%') && !line.contains('\\'), "{line}");
    let tpl = line
        .replace("987654321", "%d")
        .replace("1234.5", "%s")
        .replace('"', "\\\"");
    let path = dir.join(format!("{name}.awk"));
    std::fs::write(
        &path,
        format!(
            "BEGIN {{ for (i = 0; i < {count}; i++) printf(\"{tpl}\\n\", {seq}, sprintf(\"%.6f\", {t})) }}\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn an_agent_that_floods_is_ended_at_its_first_impossible_line() {
    let tmp = tempfile::tempdir().unwrap();
    let head = agent_head(tmp.path());
    // 400,000 valid interval lines after a valid hello and header, for a
    // 20 s run at 100 ms: the issue's flood (all seq 1, one t_s) and the
    // ways around each rule.
    for (name, seq, t, want) in [
        (
            "again",
            "1",
            "1.0",
            "agent line 4: interval seq 1 after seq 1: records must come in order, each seq above the last",
        ),
        (
            "one-time",
            "i",
            "1.0",
            "agent line 4: interval seq 1 ends at t_s 1 s, not after seq 0's 1 s: records must come in order",
        ),
        (
            "dense",
            "i",
            "1.0 + i / 1000000",
            "agent line 14: interval seq 11 ends at t_s 1.000 s, and a 100 ms interval makes at most 11 records (seq 0..=10) in that time: the agent is flooding",
        ),
        ("fast", "i", "(i + 1) / 10", "s ago (allowed up to "),
    ] {
        let awk = interval_lines(tmp.path(), name, 400_000, seq, t);
        let agent = format!(
            "cat '{}'; awk -f '{awk}'; exec cat >/dev/null",
            head.display()
        );
        let ssh = fake_ssh(tmp.path(), &agent);
        let rec = tmp.path().join(format!("{name}.jsonl"));
        let t0 = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
            .args(["run", "--remote", "ssh:target", "--duration", "20s"])
            .args(["--interval", "100ms", "--record", rec.to_str().unwrap()])
            .env("READPATH_SSH_COMMAND", &ssh)
            .env_remove("READPATH_REMOTE_TIMEOUT")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let took = t0.elapsed();
        let err = String::from_utf8_lossy(&o.stderr);
        // The far side failed: status 1, as on a lost connection, with
        // the line and the rule.
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains("ssh:target") || err.contains("the connection to the target was lost"),
            "{name}: {err}"
        );
        assert!(err.contains(want), "{name}: {err}");
        if name == "fast" {
            assert!(err.contains("the agent is flooding"), "{name}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
        // Ended by the line, not by the run's 20 s.
        assert!(took < Duration::from_secs(20), "{name}: took {took:?}");
        // The recording holds what the run could make by then, at most
        // what 20 s at 100 ms allows (one per interval plus the slack).
        let r = readpath::output::recording::read(&rec).unwrap();
        let most = readpath::remote::pace::Pace::new(100).most_records(20.0);
        assert!(
            (r.records.len() as u64) < most,
            "{name}: {} records",
            r.records.len()
        );
    }
}

#[test]
fn an_agent_that_replies_to_no_request_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let head = agent_head(tmp.path());
    let agent = format!(
        "cat '{}'; echo '{{\"reply\":{{\"cmd\":\"apply\",\"ok\":true}}}}'; exec cat >/dev/null",
        head.display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    let o = run_remote(&ssh, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "agent line 3: a reply to \"apply\" that no request asked for: the agent answers each request at most once"
        ),
        "{err}"
    );
}

#[test]
fn a_line_after_the_summary_ends_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let awk = interval_lines(tmp.path(), "after", 1, "1000", "100");
    let agent = format!(
        "{} agent --data-dir {} | {{ cat; awk -f '{awk}'; }}",
        env!("CARGO_BIN_EXE_readpath"),
        tmp.path().join("data").display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    let o = run_remote(
        &ssh,
        &["--interval", "100ms", "--set", "workload.file_size=4M"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("an interval after the summary: the summary is the agent's last line"),
        "{err}"
    );
}

/// A fake agent that sends its hello and header, logs each request to
/// `log` until its stdin closes, then stalls with its output open.
fn stalling_ssh(dir: &std::path::Path, log: &std::path::Path) -> String {
    let head = agent_head(dir);
    fake_ssh(
        dir,
        &format!(
            "cat '{}'; while IFS= read -r l; do printf '%s\\n' \"$l\" >> '{}'; done; exec sleep 600",
            head.display(),
            log.display()
        ),
    )
}

#[test]
fn an_agent_silent_after_its_header_is_ended_a_margin_after_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("requests.log");
    let ssh = stalling_ssh(tmp.path(), &log);
    let t0 = Instant::now();
    let o = run_remote(&ssh, &["--interval", "100ms"]);
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no summary from the agent: it said nothing for 10.0 s after the stop (its last line: line 2)"),
        "{err}"
    );
    assert!(
        log_lines(&log)
            .iter()
            .any(|l| l.contains("\"cmd\":\"stop\""))
    );
    // 2 s of run and 10 s of silence after the stop, not the minute the
    // client used to wait.
    assert!(took < Duration::from_secs(50), "took {took:?}: {err}");
}

#[test]
fn a_stop_signal_ends_the_wait_for_a_silent_agents_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("requests.log");
    let ssh = stalling_ssh(tmp.path(), &log);
    let mut child = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "ssh:target", "--duration", "1ms"])
        .env("READPATH_SSH_COMMAND", &ssh)
        .env_remove("READPATH_REMOTE_TIMEOUT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the agent has the stop, the client waits for its summary.
    let t = Instant::now();
    while !log_lines(&log)
        .iter()
        .any(|l| l.contains("\"cmd\":\"stop\""))
    {
        assert!(t.elapsed() < Duration::from_secs(60), "no stop sent");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Instant::now();
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let took = sent.elapsed();
    if status.is_none() {
        let _ = child.kill();
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        took < Duration::from_secs(2),
        "ended {took:?} after SIGTERM: {err}"
    );
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("interrupted by SIGTERM while waiting for the agent's summary"),
        "{err}"
    );
}
